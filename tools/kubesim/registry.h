/* The registry: the one commit path over the object store that the REST handlers and
 * kubesim's own controllers write through, so both get the same semantics (admission, names
 * and uids at create, resourceVersion preconditions, graceful deletion, propagation policies,
 * finalizers, the binding subresource). After every commit that wrote to the store it runs
 * the commit hooks, in the order they were added. */
#ifndef KUBESIM_REGISTRY_H
#define KUBESIM_REGISTRY_H

#include <jansson.h>

#include "tools/kubesim/kerr.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/res.h"

struct registry;

/* Called after a commit that wrote to the store (its resourceVersion moved), outside the
 * store's fan-out: it may read the store. res is the resource written. */
typedef void (*registry_hook_fn)(enum res_id res, void *arg);

/* A registry writing to ks->store. Never NULL. */
struct registry *registry_new(struct ks *ks);
/* Frees the registry and its hook list. Accepts NULL. */
void registry_free(struct registry *reg);
/* Adds a commit hook. */
void registry_hook_add(struct registry *reg, registry_hook_fn fn, void *arg);

/* Creates obj (stolen) through admission, in namespace ns (NULL or "": the object's own, else
 * "default"; ignored for cluster-scoped resources). Returns 0 with *out (if not NULL) a new
 * reference to the stored object (with dry_run: to the admitted object, which is not
 * stored), or a negative error with e. */
int registry_create(struct registry *reg, const struct res_def *r, const char *ns, json_t *obj,
		    int dry_run, json_t **out, struct kerr *e);
/* Replaces an object with obj (stolen) as PUT does; status_sub for /status. A set
 * metadata.resourceVersion that is not the current one gives 409 Conflict. An object that is
 * being deleted and has no finalizers left is removed. Returns 0 with *out (if not NULL) a new
 * reference to the stored (or final, when removed) object, or a negative error with e. */
int registry_update(struct registry *reg, const struct res_def *r, json_t *obj, int status_sub,
		    json_t **out, struct kerr *e);

struct registry_delete_opts {
	long grace;              /* -1: the object's default */
	const char *propagation; /* NULL: the resource's default */
	const char *uid;         /* preconditions, NULL when none */
	const char *rv;
	int dry_run;
};
#define REGISTRY_DELETE_OPTS_INIT { -1, NULL, NULL, NULL, 0 }

/* Deletes as DELETE does. Returns 0 with *out a new reference to what a client receives (the
 * object, or a Status for resources that return one) and *gone 1 when the object was removed
 * at once; or a negative error with e. */
int registry_delete(struct registry *reg, const struct res_def *r, const char *ns,
		    const char *name, const struct registry_delete_opts *o, json_t **out,
		    int *gone, struct kerr *e);

/* Binds a pending pod to binding's target.name (a Binding document, borrowed; its
 * metadata.annotations are copied onto the pod). Returns 0, or a negative error with e (404
 * for a missing pod, 422 without a target, 409 when the pod is already bound). */
int registry_bind(struct registry *reg, const char *ns, const char *name, const json_t *binding,
		  struct kerr *e);

/* Writes a controller's edited copy (stolen) of a stored object: an update, or the removal
 * when it is being deleted with grace 0 and no finalizers remain. Returns 0 or
 * GWB_ENOTFOUND. */
int registry_commit(struct registry *reg, enum res_id res, json_t *obj);
/* Removes an object at once, as stored (no deletion semantics: for objects nobody finalizes,
 * such as Events being trimmed). Returns 0 or GWB_ENOTFOUND. */
int registry_remove(struct registry *reg, enum res_id res, const char *ns, const char *name);

#endif
