/* The Kubernetes REST surface (kube-api.md §1, §2, §6): routing of /api and /apis paths,
 * get/list/watch/create/update/patch/delete with Status errors, selectors, Tables, pod logs and
 * binding, and the write verbs controllers share with clients so both get the same semantics
 * (admission, graceful deletion, propagation policies, finalizers). */
#ifndef KUBESIM_API_H
#define KUBESIM_API_H

#include <jansson.h>

#include "tools/kubesim/http.h"
#include "tools/kubesim/kerr.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/res.h"

/* The http handler for every non-control request. arg is the struct ks. */
void api_handle(struct hreq *h, void *arg);

/* Creates obj (stolen) in namespace ns ("" or NULL for cluster-scoped) through admission.
 * Returns 0 with *out (if not NULL) a new reference to the stored object, or a negative error
 * with e. */
int api_create(struct ks *ks, const struct res_def *r, const char *ns, json_t *obj,
	       json_t **out, struct kerr *e);
/* Replaces an object with obj (stolen) as PUT does; status_sub for /status. A set
 * metadata.resourceVersion that is not the current one gives 409 Conflict. An object that is
 * being deleted and has no finalizers left is removed. Returns 0 with *out (if not NULL) a new
 * reference to the stored (or final, when removed) object, or a negative error with e. */
int api_update(struct ks *ks, const struct res_def *r, json_t *obj, int status_sub,
	       json_t **out, struct kerr *e);

struct api_delete_opts {
	long grace;              /* -1: the object's default */
	const char *propagation; /* NULL: the resource's default */
	const char *uid;         /* preconditions, NULL when none */
	const char *rv;
	int dry_run;
};
#define API_DELETE_OPTS_INIT { -1, NULL, NULL, NULL, 0 }

/* Deletes as DELETE does. Returns 0 with *out a new reference to what a client receives (the
 * object, or a Status for resources that return one) and *gone 1 when the object was removed
 * at once; or a negative error with e. */
int api_delete(struct ks *ks, const struct res_def *r, const char *ns, const char *name,
	       const struct api_delete_opts *o, json_t **out, int *gone, struct kerr *e);

/* Writes a controller's edited copy (stolen) of a stored object: store_update, or removal when
 * it is being deleted with grace 0 and no finalizers remain. Returns 0 or GWB_ENOTFOUND. */
int api_commit(struct ks *ks, enum res_id res, json_t *obj);

/* Parses a boolean the way Go's strconv.ParseBool does. Returns 0 with *out, or -1. */
int api_parse_bool(const char *s, int *out);

#endif
