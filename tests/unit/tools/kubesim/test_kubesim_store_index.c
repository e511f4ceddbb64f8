/* Unit tests of the store's secondary indexes and key order, and of the selector's equality
 * term that lets a list start from the label index. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "tests/harness/t.h"
#include "tools/kubesim/selector.h"
#include "tools/kubesim/store.h"

static json_t *pod(const char *ns, const char *name, const char *task, const char *owner,
		   const char *node)
{
	json_t *p = json_pack("{s:{s:s, s:s, s:{s:s}}, s:{}}", "metadata", "namespace", ns, "name",
			      name, "labels", "gwb.io/task", task, "spec");
	if (owner)
		json_object_set_new(json_object_get(p, "metadata"), "ownerReferences",
				    json_pack("[{s:s, s:s, s:s, s:b}]", "kind", "Job", "name", "j",
					      "uid", owner, "controller", 1));
	if (node)
		json_object_set_new(json_object_get(p, "spec"), "nodeName", json_string(node));
	return p;
}

/* Names found under value of index idx (in ns, or all), joined with ','. */
static const char *names(struct store *s, enum store_index idx, const char *value,
			 const char *ns)
{
	static char buf[512];
	json_t **objs = NULL;
	size_t n = store_list_index(s, RES_PODS, idx, value, ns, &objs);
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && o < sizeof buf; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? "," : "",
				      json_string_value(json_object_get(
					      json_object_get(objs[i], "metadata"), "name")));
	gwb_free(objs);
	return buf;
}

static const char *listed(struct store *s, const char *ns)
{
	static char buf[512];
	json_t **objs = NULL;
	size_t n = store_list(s, RES_PODS, ns, &objs);
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && o < sizeof buf; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? "," : "",
				      json_string_value(json_object_get(
					      json_object_get(objs[i], "metadata"), "name")));
	gwb_free(objs);
	return buf;
}

TEST(store_index_create_update_remove)
{
	struct store *s = store_new(16, 0);
	CHECK_INT(store_create(s, RES_PODS, pod("a", "p2", "t1", "u1", NULL)), 0);
	CHECK_INT(store_create(s, RES_PODS, pod("a", "p1", "t1", "u1", "n1")), 0);
	CHECK_INT(store_create(s, RES_PODS, pod("b", "p3", "t2", "u2", NULL)), 0);
	CHECK_INT(store_create(s, RES_PODS, pod("ab", "p4", "t1", NULL, NULL)), 0);
	CHECK_STR(names(s, STORE_IDX_LABEL, "gwb.io/task=t1", NULL), "p1,p2,p4");
	CHECK_STR(names(s, STORE_IDX_LABEL, "gwb.io/task=t1", "a"), "p1,p2");
	CHECK_STR(names(s, STORE_IDX_OWNER, "u1", NULL), "p1,p2");
	CHECK_STR(names(s, STORE_IDX_NODE, "", NULL), "p2,p4,p3"); /* a/, ab/, b/ */
	CHECK_STR(names(s, STORE_IDX_NODE, "n1", NULL), "p1");
	CHECK_STR(names(s, STORE_IDX_NS, "b", NULL), "p3");
	CHECK_STR(names(s, STORE_IDX_LABEL, "gwb.io/task=none", NULL), "");
	/* The key order: namespaces are contiguous ("a/" before "ab/"). */
	CHECK_STR(listed(s, NULL), "p1,p2,p4,p3");
	CHECK_STR(listed(s, "a"), "p1,p2");
	CHECK_STR(listed(s, "ab"), "p4");
	CHECK_STR(listed(s, "zz"), "");

	/* Relabel, owner change and binding in one update. */
	CHECK_INT(store_update(s, RES_PODS, pod("a", "p2", "t2", "u2", "n1"), NULL), 0);
	CHECK_STR(names(s, STORE_IDX_LABEL, "gwb.io/task=t1", NULL), "p1,p4");
	CHECK_STR(names(s, STORE_IDX_LABEL, "gwb.io/task=t2", NULL), "p2,p3");
	CHECK_STR(names(s, STORE_IDX_OWNER, "u1", NULL), "p1");
	CHECK_STR(names(s, STORE_IDX_OWNER, "u2", NULL), "p2,p3");
	CHECK_STR(names(s, STORE_IDX_NODE, "n1", NULL), "p1,p2");
	CHECK_STR(names(s, STORE_IDX_NODE, "", NULL), "p4,p3");
	/* The owner removed. */
	CHECK_INT(store_update(s, RES_PODS, pod("a", "p2", "t2", NULL, "n1"), NULL), 0);
	CHECK_STR(names(s, STORE_IDX_OWNER, "u2", NULL), "p3");

	/* Removal drops every entry, and an emptied value disappears. */
	CHECK_INT(store_remove(s, RES_PODS, "a", "p1", NULL, NULL), 0);
	CHECK_INT(store_index_count(s, RES_PODS, STORE_IDX_OWNER, "u1"), 0);
	CHECK_STR(names(s, STORE_IDX_NODE, "n1", NULL), "p2");
	CHECK_STR(listed(s, NULL), "p2,p4,p3");
	CHECK_INT(store_remove(s, RES_PODS, "a", "p1", NULL, NULL), GWB_ENOTFOUND);
	/* A create after a removal is in the key order again. */
	CHECK_INT(store_create(s, RES_PODS, pod("a", "p0", "t1", NULL, NULL)), 0);
	CHECK_STR(listed(s, "a"), "p0,p2");
	CHECK_INT(store_create(s, RES_PODS, pod("a", "p0", "t9", NULL, NULL)), GWB_EEXISTS);
	CHECK_STR(names(s, STORE_IDX_LABEL, "gwb.io/task=t9", NULL), "");
	store_free(s);
}

static json_t *pod_in_phase(const char *name, const char *node, const char *phase)
{
	json_t *p = pod("a", name, "t1", NULL, node);
	json_object_set_new(p, "status", json_pack("{s:s}", "phase", phase));
	return p;
}

/* The live node index holds the Pods that have not ended: a Pod that ends leaves it (and
 * stays in the node index), one created ended never enters it, a removal drops it. */
TEST(store_index_node_live_drops_ended_pods)
{
	struct store *s = store_new(16, 0);
	CHECK_INT(store_create(s, RES_PODS, pod_in_phase("p1", "n1", "Running")), 0);
	CHECK_INT(store_create(s, RES_PODS, pod_in_phase("p2", "n1", "Pending")), 0);
	CHECK_INT(store_create(s, RES_PODS, pod_in_phase("p3", "n1", "Succeeded")), 0);
	CHECK_INT(store_create(s, RES_PODS, pod_in_phase("p4", NULL, "Pending")), 0);
	CHECK_STR(names(s, STORE_IDX_NODE, "n1", NULL), "p1,p2,p3");
	CHECK_STR(names(s, STORE_IDX_NODE_LIVE, "n1", NULL), "p1,p2");
	CHECK_STR(names(s, STORE_IDX_NODE_LIVE, "", NULL), "p4");
	/* p1 ends, p4 is bound. */
	CHECK_INT(store_update(s, RES_PODS, pod_in_phase("p1", "n1", "Failed"), NULL), 0);
	CHECK_INT(store_update(s, RES_PODS, pod_in_phase("p4", "n1", "Pending"), NULL), 0);
	CHECK_STR(names(s, STORE_IDX_NODE_LIVE, "n1", NULL), "p2,p4");
	CHECK_STR(names(s, STORE_IDX_NODE_LIVE, "", NULL), "");
	CHECK_STR(names(s, STORE_IDX_NODE, "n1", NULL), "p1,p2,p3,p4");
	CHECK_INT(store_remove(s, RES_PODS, "a", "p2", NULL, NULL), 0);
	CHECK_STR(names(s, STORE_IDX_NODE_LIVE, "n1", NULL), "p4");
	store_free(s);
}

static const char *page(struct store *s, enum res_id res, const char *ns, const char *after,
			size_t max, size_t *rest)
{
	static char buf[512];
	json_t **objs = NULL;
	size_t n = store_list_after(s, res, ns, after, max, &objs, rest);
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && o < sizeof buf; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? "," : "",
				      json_string_value(json_object_get(
					      json_object_get(objs[i], "metadata"), "name")));
	gwb_free(objs);
	return buf;
}

TEST(store_list_pages)
{
	struct store *s = store_new(16, 0);
	const char *const keys[][2] = { { "a", "x1" }, { "a", "x2" }, { "a-b", "y" },
					{ "ab", "z1" }, { "ab", "z2" }, { "b", "w" } };
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
		CHECK_INT(store_create(s, RES_PODS, pod(keys[i][0], keys[i][1], "t", NULL, NULL)), 0);
	size_t rest = 99;
	CHECK_STR(page(s, RES_PODS, NULL, "", 2, &rest), "y,x1");
	CHECK_INT(rest, 4);
	CHECK_STR(page(s, RES_PODS, NULL, "a/x1", 2, &rest), "x2,z1");
	CHECK_INT(rest, 2);
	CHECK_STR(page(s, RES_PODS, NULL, "ab/z2", 0, &rest), "w");
	CHECK_INT(rest, 0);
	CHECK_STR(page(s, RES_PODS, NULL, "b/w", 5, &rest), "");
	/* A namespace's page stops at its end ("a-b" and "ab" are other namespaces). */
	CHECK_STR(page(s, RES_PODS, "a", "", 5, &rest), "x1,x2");
	CHECK_INT(rest, 0);
	CHECK_STR(page(s, RES_PODS, "ab", "ab/z1", 5, &rest), "z2");
	CHECK_STR(page(s, RES_PODS, "zz", "", 5, &rest), "");
	/* A token from before a namespace starts the namespace. */
	CHECK_STR(page(s, RES_PODS, "b", "a/x1", 5, &rest), "w");
	/* Cluster-scoped keys have no namespace part; tokens have an empty one. */
	CHECK_INT(store_create(s, RES_NODES, json_pack("{s:{s:s}}", "metadata", "name", "n1")), 0);
	CHECK_INT(store_create(s, RES_NODES, json_pack("{s:{s:s}}", "metadata", "name", "n2")), 0);
	CHECK_STR(page(s, RES_NODES, NULL, "/n1", 5, &rest), "n2");
	CHECK_STR(page(s, RES_NODES, NULL, "", 1, &rest), "n1");
	CHECK_INT(rest, 1);
	store_free(s);
}

TEST(store_index_events_involved)
{
	struct store *s = store_new(16, 0);
	json_t *ev = json_pack("{s:{s:s, s:s}, s:{s:s}}", "metadata", "namespace", "a", "name",
			       "e1", "involvedObject", "uid", "u7");
	CHECK_INT(store_create(s, RES_EVENTS, ev), 0);
	CHECK_INT(store_index_count(s, RES_EVENTS, STORE_IDX_INVOLVED, "u7"), 1);
	CHECK_INT(store_remove(s, RES_EVENTS, "a", "e1", NULL, NULL), 0);
	CHECK_INT(store_index_count(s, RES_EVENTS, STORE_IDX_INVOLVED, "u7"), 0);
	store_free(s);
}

static int eq(const char *sel, char *out, size_t len)
{
	struct selector *s = NULL;
	char err[200];
	if (selector_parse_labels(sel, &s, err, sizeof err) < 0)
		return -1;
	const char *k, *v;
	int r = selector_eq_term(s, &k, &v);
	if (r)
		snprintf(out, len, "%s=%s", k, v);
	selector_free(s);
	return r;
}

TEST(selector_equality_term)
{
	char kv[200];
	CHECK_INT(eq("gwb.io/task=x", kv, sizeof kv), 1);
	CHECK_STR(kv, "gwb.io/task=x");
	CHECK_INT(eq("a!=b,c==d", kv, sizeof kv), 1);
	CHECK_STR(kv, "c=d");
	CHECK_INT(eq("a in (z)", kv, sizeof kv), 1);
	CHECK_STR(kv, "a=z");
	CHECK_INT(eq("a in (y,z)", kv, sizeof kv), 0);
	CHECK_INT(eq("a,!b,c notin (d)", kv, sizeof kv), 0);
	CHECK_INT(eq("", kv, sizeof kv), 0);
}
