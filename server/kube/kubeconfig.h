/* Where the Kubernetes API is and how to authenticate to it: an explicit server URL, a
 * kubeconfig file (its current context), or the in-cluster service account. */
#ifndef GWB_KUBECONFIG_H
#define GWB_KUBECONFIG_H

#include <stddef.h>

struct kube_auth {
	char server[512];        /* scheme://host:port[/prefix], no trailing slash */
	char *ca_pem;            /* CA bundle (PEM) to verify the server, or NULL */
	char ca_file[512];       /* CA file path, or "" */
	int insecure;            /* insecure-skip-tls-verify */
	char *token;             /* bearer token, or NULL */
	char token_file[512];    /* re-read periodically when set (in-cluster, tokenFile) */
	char *cert_pem, *key_pem; /* client certificate and key (PEM), or NULL */
	char cert_file[512], key_file[512];
	char tls_server_name[256];
	char namespace_[64];     /* the context's namespace, or "" */
	char source[600];        /* where this came from, for logs and /v1/info */
};

/* Loads the current context of the kubeconfig at path (the first of a ':'-separated list
 * that exists). Returns 0, or GWB_EINVAL / GWB_EIO with "path: reason" in err. The caller
 * frees with kube_auth_free. exec plugins and auth-providers are refused with a reason. */
int kubeconfig_load(const char *path, struct kube_auth *out, char *err, size_t errlen);

/* Fills out from the in-cluster service account (KUBERNETES_SERVICE_HOST/PORT, the token,
 * CA and namespace files under root, normally /var/run/secrets/kubernetes.io/serviceaccount).
 * Returns 0, or GWB_ENOTFOUND when not in a cluster. */
int kubeconfig_in_cluster(const char *root, struct kube_auth *out, char *err, size_t errlen);

/* Re-reads token_file into token when set. Returns 0, or GWB_EIO (the old token is kept). */
int kube_auth_reload_token(struct kube_auth *a);

/* Frees the heap parts. Accepts a zeroed struct. */
void kube_auth_free(struct kube_auth *a);

#endif
