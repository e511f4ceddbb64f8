/* Unit tests of kubesim's registry: writes as commits over the store, and the commit hooks
 * that run after a commit that wrote (never after a refused, dry-run or no-op write). */
#include <string.h>

#include "lib/err.h"
#include "tests/harness/t.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

struct calls {
	int n;
	enum res_id res[16];
	int order[16]; /* which hook ran: 1 or 2 */
};

static void hook1(enum res_id res, void *arg)
{
	struct calls *c = arg;
	if (c->n < 16) {
		c->res[c->n] = res;
		c->order[c->n] = 1;
	}
	c->n++;
}

static void hook2(enum res_id res, void *arg)
{
	struct calls *c = arg;
	if (c->n < 16) {
		c->res[c->n] = res;
		c->order[c->n] = 2;
	}
	c->n++;
}

static json_t *ns_doc(const char *name)
{
	return json_pack("{s:{s:s}}", "metadata", "name", name);
}

TEST(registry_hooks_run_after_commits_only)
{
	static struct ks ks;
	ks.store = store_new(64, 1000);
	ks.registry = registry_new(&ks);
	struct calls c = { 0 };
	registry_hook_add(ks.registry, hook1, &c);
	const struct res_def *nsr = res_get(RES_NAMESPACES);
	struct kerr e = { 0 };

	CHECK_INT(registry_create(ks.registry, nsr, NULL, ns_doc("a"), 0, NULL, &e), 0);
	CHECK_INT(c.n, 1);
	CHECK_INT(c.res[0], RES_NAMESPACES);
	/* Refused: the name is taken. */
	CHECK_INT(registry_create(ks.registry, nsr, NULL, ns_doc("a"), 0, NULL, &e), GWB_EEXISTS);
	CHECK_INT(e.code, 409);
	kerr_clear(&e);
	CHECK_INT(c.n, 1);
	/* A dry run answers the admitted object and stores nothing. */
	json_t *out = NULL;
	CHECK_INT(registry_create(ks.registry, nsr, NULL, ns_doc("b"), 1, &out, &e), 0);
	CHECK_STR(obj_str(out, "status.phase"), "Active");
	json_decref(out);
	CHECK(store_get(ks.store, RES_NAMESPACES, NULL, "b") == NULL);
	CHECK_INT(c.n, 1);
	/* A controller's copy that changes nothing writes nothing. */
	uint64_t rv = store_rv(ks.store);
	json_t *same = json_deep_copy(store_get(ks.store, RES_NAMESPACES, NULL, "a"));
	CHECK_INT(registry_commit(ks.registry, RES_NAMESPACES, same), 0);
	CHECK(store_rv(ks.store) == rv);
	CHECK_INT(c.n, 1);
	/* A PUT with a stale resourceVersion is a conflict, not a commit. */
	json_t *stale = json_deep_copy(store_get(ks.store, RES_NAMESPACES, NULL, "a"));
	obj_set_str(stale, "metadata.resourceVersion", "1");
	CHECK_INT(registry_update(ks.registry, nsr, stale, 0, NULL, &e), GWB_ECONFLICT);
	kerr_clear(&e);
	CHECK_INT(c.n, 1);
	json_t *lab = json_deep_copy(store_get(ks.store, RES_NAMESPACES, NULL, "a"));
	obj_set_str(lab, "metadata.labels.x", "1");
	CHECK_INT(registry_update(ks.registry, nsr, lab, 0, NULL, &e), 0);
	CHECK_INT(c.n, 2);
	registry_free(ks.registry);
	store_free(ks.store);
}

TEST(registry_delete_finalize_and_remove)
{
	static struct ks ks;
	ks.store = store_new(64, 1000);
	ks.registry = registry_new(&ks);
	struct calls c = { 0 };
	registry_hook_add(ks.registry, hook1, &c);
	registry_hook_add(ks.registry, hook2, &c);
	const struct res_def *nsr = res_get(RES_NAMESPACES);
	struct kerr e = { 0 };
	CHECK_INT(registry_create(ks.registry, nsr, NULL, ns_doc("a"), 0, NULL, &e), 0);
	/* Both hooks, in the order they were added. */
	CHECK_INT(c.n, 2);
	CHECK_INT(c.order[0], 1);
	CHECK_INT(c.order[1], 2);
	/* The namespace finalizer keeps a deleted namespace: Terminating, still stored. */
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	json_t *out = NULL;
	int gone = 0;
	CHECK_INT(registry_delete(ks.registry, nsr, NULL, "a", &o, &out, &gone, &e), 0);
	json_decref(out);
	CHECK_INT(gone, 0);
	CHECK_INT(c.n, 4);
	json_t *cur = store_get(ks.store, RES_NAMESPACES, NULL, "a");
	CHECK(cur && obj_deleting(cur));
	CHECK_STR(obj_str(cur, "status.phase"), "Terminating");
	/* The controller's copy without the finalizer is the removal. */
	json_t *fin = json_deep_copy(cur);
	json_object_set_new(obj_child(fin, "spec"), "finalizers", json_array());
	CHECK_INT(registry_commit(ks.registry, RES_NAMESPACES, fin), 0);
	CHECK(store_get(ks.store, RES_NAMESPACES, NULL, "a") == NULL);
	CHECK_INT(c.n, 6);
	/* Refused writes run no hook. */
	out = NULL;
	CHECK_INT(registry_delete(ks.registry, nsr, NULL, "a", &o, &out, &gone, &e),
		  GWB_ENOTFOUND);
	CHECK_INT(e.code, 404);
	kerr_clear(&e);
	json_t *b = json_pack("{s:{s:s}}", "target", "name", "n1");
	CHECK_INT(registry_bind(ks.registry, "default", "p", b, &e), GWB_ENOTFOUND);
	kerr_clear(&e);
	json_decref(b);
	CHECK_INT(registry_remove(ks.registry, RES_NAMESPACES, NULL, "a"), GWB_ENOTFOUND);
	CHECK_INT(c.n, 6);
	registry_free(ks.registry);
	store_free(ks.store);
}
