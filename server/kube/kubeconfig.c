/* kubeconfig and in-cluster credentials: YAML is loaded with libyaml into a jansson tree,
 * then the current context's cluster and user are read from it. */
#include "server/kube/kubeconfig.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/kobj.h"
#include "lib/yamlx.h"

/* Reads a small text file (a token, a namespace) into a gwb_malloc'd string, or NULL. */
static char *read_small_file(const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	char buf[16384];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	return gwb_strdup(buf);
}

/* Decodes base64 into a gwb_malloc'd NUL-terminated string, or NULL when malformed. */
static char *b64_decode(const char *in)
{
	size_t n = strlen(in);
	char *clean = gwb_malloc(n + 1);
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (in[i] != '\n' && in[i] != '\r' && in[i] != ' ')
			clean[m++] = in[i];
	clean[m] = '\0';
	if (m % 4) {
		gwb_free(clean);
		return NULL;
	}
	unsigned char *out = gwb_malloc(m / 4 * 3 + 1);
	int got = EVP_DecodeBlock(out, (const unsigned char *)clean, (int)m);
	if (got < 0) {
		gwb_free(clean);
		gwb_free(out);
		return NULL;
	}
	/* EVP_DecodeBlock counts the padding as zero bytes. */
	if (m >= 1 && clean[m - 1] == '=')
		got--;
	if (m >= 2 && clean[m - 2] == '=')
		got--;
	out[got] = '\0';
	gwb_free(clean);
	return (char *)out;
}

static json_t *find_named(json_t *list, const char *name, const char *inner)
{
	size_t i;
	json_t *it;
	json_array_foreach(list, i, it) {
		const char *n = kobj_str(it, "name");
		if (n && strcmp(n, name) == 0)
			return kobj_get(it, inner);
	}
	return NULL;
}

static int load_cluster(json_t *cluster, struct kube_auth *a, char *err, size_t errlen)
{
	const char *server = kobj_str(cluster, "server");
	if (!server || (strncmp(server, "http://", 7) && strncmp(server, "https://", 8))) {
		snprintf(err, errlen, "cluster has no http(s) server URL");
		return GWB_EINVAL;
	}
	snprintf(a->server, sizeof a->server, "%s", server);
	size_t n = strlen(a->server);
	while (n > 0 && a->server[n - 1] == '/')
		a->server[--n] = '\0';
	const char *v;
	if ((v = kobj_str(cluster, "certificate-authority-data")) && !(a->ca_pem = b64_decode(v))) {
		snprintf(err, errlen, "certificate-authority-data is not base64");
		return GWB_EINVAL;
	}
	if ((v = kobj_str(cluster, "certificate-authority")))
		snprintf(a->ca_file, sizeof a->ca_file, "%s", v);
	if ((v = kobj_str(cluster, "tls-server-name")))
		snprintf(a->tls_server_name, sizeof a->tls_server_name, "%s", v);
	v = kobj_str(cluster, "insecure-skip-tls-verify");
	a->insecure = v && strcmp(v, "true") == 0;
	return 0;
}

static int load_user(json_t *user, struct kube_auth *a, char *err, size_t errlen)
{
	if (!user)
		return 0;
	if (json_object_get(user, "exec") || json_object_get(user, "auth-provider")) {
		snprintf(err, errlen, "exec and auth-provider credentials are not supported; use a "
				      "token or a client certificate");
		return GWB_EINVAL;
	}
	const char *v;
	if ((v = kobj_str(user, "token")))
		a->token = gwb_strdup(v);
	if ((v = kobj_str(user, "tokenFile"))) {
		snprintf(a->token_file, sizeof a->token_file, "%s", v);
		if (kube_auth_reload_token(a)) {
			snprintf(err, errlen, "tokenFile %s cannot be read", v);
			return GWB_EIO;
		}
	}
	if ((v = kobj_str(user, "client-certificate-data")) && !(a->cert_pem = b64_decode(v))) {
		snprintf(err, errlen, "client-certificate-data is not base64");
		return GWB_EINVAL;
	}
	if ((v = kobj_str(user, "client-key-data")) && !(a->key_pem = b64_decode(v))) {
		snprintf(err, errlen, "client-key-data is not base64");
		return GWB_EINVAL;
	}
	if ((v = kobj_str(user, "client-certificate")))
		snprintf(a->cert_file, sizeof a->cert_file, "%s", v);
	if ((v = kobj_str(user, "client-key")))
		snprintf(a->key_file, sizeof a->key_file, "%s", v);
	return 0;
}

static int load_one(const char *path, struct kube_auth *a, char *err, size_t errlen)
{
	char why[400] = "";
	json_t *docs = yamlx_load_file(path, why, sizeof why);
	if (!docs) {
		snprintf(err, errlen, "%s", why);
		return GWB_EINVAL;
	}
	json_t *cfg = json_incref(json_array_get(docs, 0));
	json_decref(docs);
	int rc = GWB_EINVAL;
	const char *cur = kobj_str(cfg, "current-context");
	json_t *ctx = cur ? find_named(json_object_get(cfg, "contexts"), cur, "context") : NULL;
	const char *cname = kobj_str(ctx, "cluster"), *uname = kobj_str(ctx, "user");
	json_t *cluster = cname ? find_named(json_object_get(cfg, "clusters"), cname, "cluster")
				: NULL;
	json_t *user = uname ? find_named(json_object_get(cfg, "users"), uname, "user") : NULL;
	if (!cur)
		snprintf(why, sizeof why, "no current-context");
	else if (!ctx)
		snprintf(why, sizeof why, "context '%s' not found", cur);
	else if (!cluster)
		snprintf(why, sizeof why, "cluster '%s' not found", cname ? cname : "");
	else if ((rc = load_cluster(cluster, a, why, sizeof why)) == 0 &&
		 (rc = load_user(user, a, why, sizeof why)) == 0) {
		const char *ns = kobj_str(ctx, "namespace");
		if (ns)
			snprintf(a->namespace_, sizeof a->namespace_, "%s", ns);
		snprintf(a->source, sizeof a->source, "kubeconfig %s (context %s)", path, cur);
	}
	if (rc || !cur || !ctx || !cluster) {
		snprintf(err, errlen, "%s: %s", path, why);
		rc = rc ? rc : GWB_EINVAL;
	}
	json_decref(cfg);
	return rc;
}

int kubeconfig_load(const char *path, struct kube_auth *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	char list[2048];
	snprintf(list, sizeof list, "%s", path);
	for (char *p = list, *next; p; p = next) {
		next = strchr(p, ':');
		if (next)
			*next++ = '\0';
		if (!*p)
			continue;
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		fclose(f);
		int rc = load_one(p, out, err, errlen);
		if (rc)
			kube_auth_free(out);
		return rc;
	}
	snprintf(err, errlen, "%s: no such kubeconfig file", path);
	return GWB_EIO;
}

int kubeconfig_in_cluster(const char *root, struct kube_auth *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	if (!host || !port || !host[0] || !port[0]) {
		snprintf(err, errlen, "not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset)");
		return GWB_ENOTFOUND;
	}
	snprintf(out->server, sizeof out->server, strchr(host, ':') ? "https://[%s]:%s"
								    : "https://%s:%s",
		 host, port);
	snprintf(out->token_file, sizeof out->token_file, "%s/token", root);
	snprintf(out->ca_file, sizeof out->ca_file, "%s/ca.crt", root);
	if (kube_auth_reload_token(out)) {
		snprintf(err, errlen, "%s cannot be read", out->token_file);
		kube_auth_free(out);
		return GWB_EIO;
	}
	char nsfile[600], why[300];
	snprintf(nsfile, sizeof nsfile, "%s/namespace", root);
	char *ns = read_small_file(nsfile, why, sizeof why);
	if (ns) {
		ns[strcspn(ns, "\r\n")] = '\0';
		snprintf(out->namespace_, sizeof out->namespace_, "%s", ns);
		gwb_free(ns);
	}
	snprintf(out->source, sizeof out->source, "in-cluster service account (%s)", root);
	return 0;
}

int kube_auth_reload_token(struct kube_auth *a)
{
	if (!a->token_file[0])
		return 0;
	char why[300];
	char *t = read_small_file(a->token_file, why, sizeof why);
	if (!t)
		return GWB_EIO;
	t[strcspn(t, "\r\n")] = '\0';
	gwb_free(a->token);
	a->token = t;
	return 0;
}

void kube_auth_free(struct kube_auth *a)
{
	gwb_free(a->ca_pem);
	gwb_free(a->token);
	gwb_free(a->cert_pem);
	gwb_free(a->key_pem);
	a->ca_pem = a->token = a->cert_pem = a->key_pem = NULL;
}
