/* kubeconfig loading (server/kube/kubeconfig.c): the current context, tokens and CAs, in-cluster
 * settings, and errors that name the problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
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
