/* The Job of a task (server/recon/jobspec.c): what Koordinator's scheduler and the kubelet
 * expect of it, and the Pod deadline it carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/recon/jobspec.h"
#include "tests/harness/t.h"

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
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600, NULL };
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
				 "gpu-workbench", "img", "", 1, 0, NULL };
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

/* The Pod Security Standard "restricted" (v1.30) on a Pod spec, rule by rule: the number of
 * rules broken, the last one's name in *broken. */
static int restricted_violations(json_t *pod, const char **broken)
{
	int bad = 0;
	*broken = "";
#define RULE(cond, what)                                                                 \
	do {                                                                             \
		if (!(cond)) {                                                           \
			bad++;                                                           \
			*broken = what;                                                  \
		}                                                                        \
	} while (0)
	static const char *const host[] = { "hostNetwork", "hostPID", "hostIPC", NULL };
	for (const char *const *h = host; *h; h++)
		RULE(!json_is_true(json_object_get(pod, *h)), *h);
	RULE(json_is_false(json_object_get(pod, "automountServiceAccountToken")),
	     "automountServiceAccountToken false");
	json_t *psc = json_object_get(pod, "securityContext");
	RULE(json_is_true(json_object_get(psc, "runAsNonRoot")), "pod runAsNonRoot");
	RULE(json_integer_value(json_object_get(psc, "runAsUser")) > 0, "pod runAsUser non-zero");
	RULE(s_at(psc, "seccompProfile|type") &&
		     strcmp(s_at(psc, "seccompProfile|type"), "RuntimeDefault") == 0,
	     "seccompProfile RuntimeDefault");
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(pod, "volumes"), i, v) {
		const char *key;
		json_t *x;
		json_object_foreach(v, key, x)
			RULE(strcmp(key, "name") == 0 || strcmp(key, "downwardAPI") == 0 ||
				     strcmp(key, "emptyDir") == 0 || strcmp(key, "configMap") == 0 ||
				     strcmp(key, "secret") == 0 || strcmp(key, "projected") == 0,
			     "only restricted volume types (no hostPath)");
	}
	json_t *c;
	json_array_foreach(json_object_get(pod, "containers"), i, c) {
		json_t *sc = json_object_get(c, "securityContext");
		RULE(json_is_false(json_object_get(sc, "allowPrivilegeEscalation")),
		     "allowPrivilegeEscalation false");
		RULE(!json_is_true(json_object_get(sc, "privileged")), "not privileged");
		RULE(!json_is_false(json_object_get(sc, "runAsNonRoot")), "container non-root");
		json_t *drop = json_object_get(json_object_get(sc, "capabilities"), "drop");
		RULE(json_array_size(drop) == 1 &&
			     strcmp(json_string_value(json_array_get(drop, 0)), "ALL") == 0,
		     "capabilities.drop [ALL]");
		RULE(json_object_get(json_object_get(sc, "capabilities"), "add") == NULL,
		     "no capabilities added");
		json_t *uid = json_object_get(sc, "runAsUser");
		RULE(!uid || json_integer_value(uid) > 0, "container runAsUser not 0");
		RULE(json_object_get(c, "ports") == NULL ||
			     !s_at(c, "ports|0|hostPort"),
		     "no hostPort");
		RULE(s_at(c, "terminationMessagePolicy") &&
			     strcmp(s_at(c, "terminationMessagePolicy"), "FallbackToLogsOnError") == 0,
		     "terminationMessagePolicy FallbackToLogsOnError");
	}
#undef RULE
	return bad;
}

static json_t *pod_of(json_t *job)
{
	return json_object_get(json_object_get(json_object_get(job, "spec"), "template"), "spec");
}

TEST(jobspec_every_pod_meets_the_restricted_profile)
{
	struct jobspec_in worker = { "t-abc", "alpha", 1024, 25, 1, 60, "LS", "normal",
				     "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600,
				     NULL };
	struct jobspec_in wl = worker;
	wl.workload = "{\"image\":\"busybox:1\",\"command\":[\"/bin/sh\"],\"cpu\":\"1\","
		      "\"memory\":\"1Gi\"}";
	struct jobspec_in marker = worker;
	marker.suspend = 1;
	const struct jobspec_in *all[] = { &worker, &wl, &marker };
	for (size_t i = 0; i < 3; i++) {
		json_t *job = jobspec_build(all[i]);
		CHECK(job != NULL);
		const char *broken;
		CHECKF(restricted_violations(pod_of(job), &broken) == 0, "Job %zu: %s", i, broken);
		json_decref(job);
	}
	/* The check itself refuses what breaks the profile. */
	json_t *job = jobspec_build(&worker);
	json_object_set_new(pod_of(job), "hostNetwork", json_true());
	json_t *sc = json_object_get(json_array_get(json_object_get(pod_of(job), "containers"), 0),
				     "securityContext");
	json_object_set_new(sc, "allowPrivilegeEscalation", json_true());
	const char *broken;
	CHECK_INT(restricted_violations(pod_of(job), &broken), 2);
	CHECK_STR(broken, "allowPrivilegeEscalation false");
	json_decref(job);
}

TEST(jobspec_workload_takes_the_users_container)
{
	struct jobspec_in in = { "t-wl", "alpha", 2048, 30, 1, 120, "BE", "normal",
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600,
				 "{\"args\":[\"-c\",\"exit 3\"],\"command\":[\"/bin/sh\"],\"cpu\":"
				 "\"500m\",\"env\":{\"A\":\"1\",\"B\":\"x y\"},\"image\":"
				 "\"reg.io/alpha/train:v1\",\"memory\":\"2Gi\",\"working_dir\":"
				 "\"/work\"}" };
	json_t *job = jobspec_build(&in);
	json_t *spec = json_object_get(job, "spec");
	CHECK_STR(s_at(job, "metadata|name"), "gwb-t-wl");
	CHECK_STR(s_at(spec, "template|spec|schedulerName"), "koord-scheduler");
	CHECK_STR(s_at(spec, "template|spec|priorityClassName"), "koord-batch");
	CHECK_STR(s_at(spec, "template|metadata|labels|koordinator.sh/qosClass"), "BE");
	CHECK_STR(s_at(spec, "template|metadata|labels|koordinator.sh/gpu-isolation-provider"),
		  "HAMi-core");
	CHECK_INT(json_integer_value(json_object_get(pod_of(job), "activeDeadlineSeconds")),
		  120 + JOBSPEC_DEADLINE_MARGIN_DEFAULT_S);
	CHECK(json_object_get(spec, "podFailurePolicy") == NULL);
	json_t *c = json_array_get(json_object_get(pod_of(job), "containers"), 0);
	CHECK_STR(s_at(c, "image"), "reg.io/alpha/train:v1");
	CHECK_STR(s_at(c, "command|0"), "/bin/sh");
	CHECK_STR(s_at(c, "args|1"), "exit 3");
	CHECK_STR(s_at(c, "workingDir"), "/work");
	CHECK_STR(s_at(c, "resources|requests|cpu"), "500m");
	CHECK_STR(s_at(c, "resources|limits|memory"), "2Gi");
	CHECK_STR(s_at(c, "resources|limits|koordinator.sh/gpu-memory"), "2Gi");
	CHECK_STR(s_at(c, "resources|limits|koordinator.sh/gpu-core"), "30");
	/* The user's env, then gwb's; never the worker's experiment. */
	CHECK_STR(s_at(c, "env|0|name"), "A");
	CHECK_STR(s_at(c, "env|1|value"), "x y");
	CHECK_STR(s_at(c, "env|4|name"), "GWB_TASK_ID");
	CHECK_INT(json_array_size(json_object_get(c, "env")), 5);
	CHECK_STR(s_at(c, "volumeMounts|0|mountPath"), "/etc/podinfo");
	json_decref(job);
	/* A stored workload that is not JSON builds no Job. */
	in.workload = "{broken";
	CHECK(jobspec_build(&in) == NULL);
}

TEST(jobspec_pod_deadline_is_duration_plus_margin)
{
	struct jobspec_in in = { "t-abc", "alpha", 1024, 25, 1, 60, "LS", "normal",
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600, NULL };
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
