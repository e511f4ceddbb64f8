/* kubeconfig loading and the Job of a task. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "server/recon/jobspec.h"
#include "server/kube/kubeconfig.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

TEST(kubeconfig_current_context_token_and_ca)
{
	/* "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==" is "-----BEGIN CERTIFICATE-----\n". */
	const char *p = h_write_file(
		"kc", "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
		      "contexts:\n- name: other\n  context: {cluster: c2, user: u2}\n"
		      "- name: lab\n  context: {cluster: c1, user: u1, namespace: gpu-workbench}\n"
		      "clusters:\n- name: c1\n  cluster:\n    server: https://127.0.0.1:6443/\n"
		      "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==\n"
		      "- name: c2\n  cluster: {server: http://wrong:1}\n"
		      "users:\n- name: u1\n  user: {token: sekret}\n- name: u2\n  user: {token: no}\n");
	struct kube_auth a;
	char err[256];
	CHECKF(kubeconfig_load(p, &a, err, sizeof err) == 0, "%s", err);
	CHECK_STR(a.server, "https://127.0.0.1:6443");
	CHECK_STR(a.token, "sekret");
	CHECK_STR(a.ca_pem, "-----BEGIN CERTIFICATE-----\n");
	CHECK_STR(a.namespace_, "gpu-workbench");
	kube_auth_free(&a);
}

TEST(kubeconfig_errors_name_the_problem)
{
	struct kube_auth a;
	char err[256];
	const char *p = h_write_file("kc1", "current-context: x\ncontexts: []\n");
	CHECK(kubeconfig_load(p, &a, err, sizeof err) < 0);
	CHECKF(strstr(err, "context 'x' not found") != NULL, "%s", err);
	p = h_write_file("kc2", "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, "
			      "user: u}\nclusters:\n- name: c\n  cluster: {server: "
			      "https://h:1}\nusers:\n- name: u\n  user:\n    exec: {command: "
			      "gke-gcloud-auth-plugin}\n");
	CHECK(kubeconfig_load(p, &a, err, sizeof err) < 0);
	CHECKF(strstr(err, "exec") != NULL, "%s", err);
	p = h_write_file("kc3", "current-context: [unclosed\n");
	CHECK(kubeconfig_load(p, &a, err, sizeof err) < 0);
	CHECK(kubeconfig_load(h_path("absent"), &a, err, sizeof err) == GWB_EIO);
}

TEST(kubeconfig_token_file_and_in_cluster)
{
	h_write_file("token", "tok-1\n");
	h_write_file("namespace", "ml");
	setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	struct kube_auth a;
	char err[256];
	CHECKF(kubeconfig_in_cluster(h_tmpdir(), &a, err, sizeof err) == 0, "%s", err);
	CHECK_STR(a.server, "https://10.0.0.1:443");
	CHECK_STR(a.token, "tok-1");
	CHECK_STR(a.namespace_, "ml");
	h_write_file("token", "tok-2\n");
	CHECK_INT(kube_auth_reload_token(&a), 0);
	CHECK_STR(a.token, "tok-2");
	kube_auth_free(&a);
	unsetenv("KUBERNETES_SERVICE_HOST");
	CHECK_INT(kubeconfig_in_cluster(h_tmpdir(), &a, err, sizeof err), GWB_ENOTFOUND);
}

static const char *s_at(json_t *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok; tok = dot) {
		dot = strchr(tok, '|');
		if (dot)
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtol(tok, NULL, 10))
				     : json_object_get(o, tok);
	}
	return json_is_string(o) ? json_string_value(o) : NULL;
}

TEST(jobspec_lab_task_as_koordinator_expects)
{
	struct jobspec_in in = { "t-abc", "alpha", 1024, 25, 1, 60, "LS", "normal",
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600 };
	json_t *job = jobspec_build(&in);
	CHECK_STR(s_at(job, "metadata|name"), "gwb-t-abc");
	CHECK_STR(s_at(job, "metadata|labels|gwb.io/task"), "t-abc");
	CHECK_STR(s_at(job, "metadata|labels|gwb.io/managed"), "true");
	json_t *spec = json_object_get(job, "spec");
	CHECK_INT(json_integer_value(json_object_get(spec, "backoffLimit")), 0);
	CHECK(json_is_false(json_object_get(spec, "suspend")));
	json_t *codes = json_object_get(json_object_get(json_array_get(json_object_get(
		json_object_get(spec, "podFailurePolicy"), "rules"), 0), "onExitCodes"), "values");
	CHECK_INT(json_integer_value(json_array_get(codes, 0)), 42);
	CHECK_STR(s_at(spec, "podFailurePolicy|rules|0|action"), "FailJob");
	CHECK_INT(json_integer_value(json_object_get(spec, "ttlSecondsAfterFinished")), 3600);
	CHECK_STR(s_at(spec, "template|spec|schedulerName"), "koord-scheduler");
	CHECK_STR(s_at(spec, "template|metadata|labels|koordinator.sh/qosClass"), "LS");
	CHECK_STR(s_at(spec, "template|metadata|labels|koordinator.sh/gpu-isolation-provider"),
		  "HAMi-core");
	const char *res = "template|spec|containers|0|resources|limits|";
	char k[200];
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-memory", res);
	CHECK_STR(s_at(spec, k), "1Gi");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-core", res);
	CHECK_STR(s_at(spec, k), "25");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu.shared", res);
	CHECK_STR(s_at(spec, k), "1");
	CHECK_STR(s_at(spec, "template|spec|volumes|0|downwardAPI|items|0|fieldRef|fieldPath"),
		  "metadata.annotations");
	CHECK(json_object_get(json_object_get(json_object_get(spec, "template"), "spec"),
			      "priorityClassName") == NULL);
	CHECK(jobspec_is_ours(job, "t-abc"));
	CHECK(!jobspec_is_ours(job, "t-abd"));
	json_decref(job);
	/* BE, two cards, the cancel marker. */
	struct jobspec_in be = { "t-be", "alpha", 4096, 50, 2, 60, "BE", "overlimit",
				 "gpu-workbench", "img", "", 1, 0 };
	job = jobspec_build(&be);
	spec = json_object_get(job, "spec");
	CHECK(json_is_true(json_object_get(spec, "suspend")));
	CHECK(json_object_get(spec, "ttlSecondsAfterFinished") == NULL);
	CHECK_STR(s_at(spec, "template|spec|priorityClassName"), "koord-batch");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-memory", res);
	CHECK_STR(s_at(spec, k), "8Gi");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-core", res);
	CHECK_STR(s_at(spec, k), "100");
	CHECK(s_at(spec, "template|metadata|labels|koordinator.sh/gpu-isolation-provider") == NULL);
	CHECK_STR(s_at(spec, "template|spec|containers|0|env|0|value"), "overlimit");
	json_decref(job);
}

TEST(jobspec_pod_deadline_is_duration_plus_margin)
{
	struct jobspec_in in = { "t-abc", "alpha", 1024, 25, 1, 60, "LS", "normal",
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600 };
	json_t *job = jobspec_build(&in);
	json_t *pod = json_object_get(json_object_get(json_object_get(job, "spec"), "template"),
				      "spec");
	CHECK_INT(json_integer_value(json_object_get(pod, "activeDeadlineSeconds")),
		  60 + JOBSPEC_DEADLINE_MARGIN_DEFAULT_S);
	/* On the Pod, not the Job: the kubelet enforces it without the control plane. */
	CHECK(json_object_get(json_object_get(job, "spec"), "activeDeadlineSeconds") == NULL);
	json_decref(job);
	jobspec_set_deadline_margin(15);
	CHECK_INT(jobspec_pod_deadline_s(60), 75);
	CHECK_INT(jobspec_pod_deadline_s(0), 15);
	jobspec_set_deadline_margin(JOBSPEC_DEADLINE_MARGIN_DEFAULT_S);
}
