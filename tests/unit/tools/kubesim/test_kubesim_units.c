/* Unit tests of kubesim's pure parts: selectors, patches, the store's history, ages, and the
 * protobuf metadata reader. */
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "tests/harness/t.h"
#include "tools/kubesim/patch.h"
#include "tools/kubesim/pbmeta.h"
#include "tools/kubesim/res.h"
#include "tools/kubesim/selector.h"
#include "tools/kubesim/store.h"
#include "tools/kubesim/table.h"

static json_t *J(const char *s)
{
	json_t *v = json_loads(s, 0, NULL);
	if (!v)
		t_fail(__FILE__, __LINE__, "bad JSON in test: %s", s);
	return v;
}

static int lmatch(const char *sel, const char *obj)
{
	struct selector *s = NULL;
	char err[200];
	if (selector_parse_labels(sel, &s, err, sizeof err) < 0)
		return -1;
	json_t *o = J(obj);
	int m = selector_match(s, o);
	json_decref(o);
	selector_free(s);
	return m;
}

TEST(kubesim_label_selectors_match)
{
	const char *o = "{\"metadata\":{\"labels\":{\"app\":\"a\",\"tier\":\"x\",\"n\":\"5\"}}}";
	CHECK_INT(lmatch("", o), 1);
	CHECK_INT(lmatch("app=a", o), 1);
	CHECK_INT(lmatch("app==a,tier=x", o), 1);
	CHECK_INT(lmatch("app!=a", o), 0);
	CHECK_INT(lmatch("app in (b, a)", o), 1);
	CHECK_INT(lmatch("app notin (a)", o), 0);
	CHECK_INT(lmatch("tier", o), 1);
	CHECK_INT(lmatch("!tier", o), 0);
	CHECK_INT(lmatch("!missing", o), 1);
	CHECK_INT(lmatch("missing!=x", o), 1);
	CHECK_INT(lmatch("n>4", o), 1);
	CHECK_INT(lmatch("n<4", o), 0);
	CHECK_INT(lmatch("app in (a", o), -1);
	CHECK_INT(lmatch("=a", o), -1);
}

TEST(selector_fields_and_docs)
{
	struct selector *s = NULL;
	char err[200];
	const struct res_def *pods = res_get(RES_PODS);
	CHECK_INT(selector_parse_fields(pods, "spec.nodeName=n1,status.phase!=Failed", &s, err,
					sizeof err),
		  0);
	json_t *p = J("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"n1\"},"
		      "\"status\":{\"phase\":\"Running\"}}");
	CHECK_INT(selector_match(s, p), 1);
	selector_free(s);
	CHECK_INT(selector_parse_fields(pods, "spec.nodeName=", &s, err, sizeof err), 0);
	CHECK_INT(selector_match(s, p), 0);
	selector_free(s);
	json_decref(p);
	CHECK_INT(selector_parse_fields(pods, "spec.bogus=x", &s, err, sizeof err), GWB_EINVAL);
	CHECK_STR(err, "field label not supported: spec.bogus");
	json_t *ls = J("{\"matchLabels\":{\"a\":\"1\"},\"matchExpressions\":[{\"key\":\"b\","
		       "\"operator\":\"In\",\"values\":[\"2\",\"3\"]}]}");
	json_t *l1 = J("{\"a\":\"1\",\"b\":\"3\"}"), *l2 = J("{\"a\":\"1\"}");
	CHECK_INT(selector_match_doc(ls, l1), 1);
	CHECK_INT(selector_match_doc(ls, l2), 0);
	CHECK_INT(selector_match_doc(NULL, l2), 1);
	json_decref(ls);
	json_decref(l1);
	json_decref(l2);
}

static void check_patch(enum patch_type t, const char *doc, const char *patch, const char *want)
{
	json_t *d = J(doc), *p = J(patch), *out = NULL;
	char err[200] = "";
	int rc = patch_apply(t, d, p, &out, err, sizeof err);
	if (!want) {
		CHECKF(rc < 0, "patch %s should fail", patch);
	} else {
		CHECKF(rc == 0, "patch %s: %s", patch, err);
		json_t *w = J(want);
		char *got = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS);
		CHECKF(json_equal(out, w), "got %s", got);
		gwb_free(got);
		json_decref(w);
	}
	json_decref(out);
	json_decref(d);
	json_decref(p);
}

TEST(kubesim_merge_json_and_strategic_patches)
{
	check_patch(PATCH_MERGE, "{\"a\":1,\"b\":{\"c\":2,\"d\":3},\"l\":[1,2]}",
		    "{\"b\":{\"c\":null,\"e\":4},\"l\":[3]}", "{\"a\":1,\"b\":{\"d\":3,\"e\":4},\"l\":[3]}");
	/* strategic: containers merge by name, env by name, finalizers as a set */
	check_patch(PATCH_STRATEGIC,
		    "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":"
		    "\"E\",\"value\":\"1\"}]},{\"name\":\"b\",\"image\":\"y\"}]},\"metadata\":"
		    "{\"finalizers\":[\"f1\"]}}",
		    "{\"spec\":{\"containers\":[{\"name\":\"a\",\"env\":[{\"name\":\"F\",\"value\":"
		    "\"2\"}]}]},\"metadata\":{\"finalizers\":[\"f2\",\"f1\"]},"
		    "\"$setElementOrder/x\":[]}",
		    "{\"spec\":{\"containers\":[{\"name\":\"a\",\"image\":\"x\",\"env\":[{\"name\":"
		    "\"E\",\"value\":\"1\"},{\"name\":\"F\",\"value\":\"2\"}]},{\"name\":\"b\","
		    "\"image\":\"y\"}]},\"metadata\":{\"finalizers\":[\"f1\",\"f2\"]}}");
	check_patch(PATCH_STRATEGIC,
		    "{\"spec\":{\"containers\":[{\"name\":\"a\"},{\"name\":\"b\"}]}}",
		    "{\"spec\":{\"containers\":[{\"name\":\"a\",\"$patch\":\"delete\"}]}}",
		    "{\"spec\":{\"containers\":[{\"name\":\"b\"}]}}");
	check_patch(PATCH_STRATEGIC, "{\"metadata\":{\"finalizers\":[\"a\",\"b\"]}}",
		    "{\"metadata\":{\"$deleteFromPrimitiveList/finalizers\":[\"a\"]}}",
		    "{\"metadata\":{\"finalizers\":[\"b\"]}}");
	check_patch(PATCH_STRATEGIC, "{\"spec\":{\"containers\":[{\"name\":\"a\"}]}}",
		    "{\"spec\":{\"containers\":[{\"image\":\"no-name\"}]}}", NULL);
	check_patch(PATCH_JSON, "{\"a\":{\"b\":[1,2]}}",
		    "[{\"op\":\"add\",\"path\":\"/a/b/-\",\"value\":3},{\"op\":\"replace\",\"path\":"
		    "\"/a/b/0\",\"value\":0},{\"op\":\"add\",\"path\":\"/a/c~1d\",\"value\":true},"
		    "{\"op\":\"remove\",\"path\":\"/a/b/1\"}]",
		    "{\"a\":{\"b\":[0,3],\"c/d\":true}}");
	check_patch(PATCH_JSON, "{\"a\":1}", "[{\"op\":\"test\",\"path\":\"/a\",\"value\":2}]", NULL);
	check_patch(PATCH_JSON, "{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/b\",\"value\":2}]",
		    NULL);
	check_patch(PATCH_JSON, "{\"a\":1}",
		    "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/b\"}]", "{\"b\":1}");
}

struct seen {
	int n;
	uint64_t rv[16];
	int type[16];
};

static void on_ev(const struct store_event *ev, void *arg)
{
	struct seen *s = arg;
	if (s->n < 16) {
		s->rv[s->n] = ev->rv;
		s->type[s->n++] = ev->type;
	}
}

TEST(store_history_and_resume)
{
	struct store *st = store_new(3, 100);
	CHECK_INT(store_rv(st), 100);
	CHECK(store_can_resume(st, 100));
	CHECK_INT(store_create(st, RES_NAMESPACES, J("{\"metadata\":{\"name\":\"a\"}}")), 0);
	CHECK_INT(store_create(st, RES_NAMESPACES, J("{\"metadata\":{\"name\":\"a\"}}")),
		  GWB_EEXISTS);
	/* an identical update writes nothing */
	json_t *same = json_deep_copy(store_get(st, RES_NAMESPACES, NULL, "a"));
	CHECK_INT(store_update(st, RES_NAMESPACES, same, NULL), 0);
	CHECK_INT(store_rv(st), 101);
	CHECK_INT(store_update(st, RES_NAMESPACES, J("{\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"1\"}}}"), NULL), 0);
	CHECK_INT(store_remove(st, RES_NAMESPACES, NULL, "a", NULL, NULL), 0);
	CHECK_INT(store_rv(st), 103);
	struct seen s = { 0 };
	CHECK_INT(store_replay(st, 101, on_ev, &s), 0);
	CHECK_INT(s.n, 2);
	CHECK_INT(s.type[0], STORE_MODIFIED);
	CHECK_INT(s.type[1], STORE_DELETED);
	CHECK_INT(store_create(st, RES_NAMESPACES, J("{\"metadata\":{\"name\":\"b\"}}")), 0);
	/* The ring holds 3 events: 102..104; 100 is now too old, 101 still fine. */
	CHECK(!store_can_resume(st, 100));
	CHECK(store_can_resume(st, 101));
	CHECK_INT(store_oldest_rv(st), 102);
	s.n = 0;
	CHECK_INT(store_replay(st, 100, on_ev, &s), GWB_ESTATE);
	CHECK_INT(s.n, 0);
	json_t **all = NULL;
	CHECK_INT(store_list(st, RES_NAMESPACES, NULL, &all), 1);
	gwb_free(all);
	store_free(st);
}

TEST(kubesim_table_ages_read_as_kubectl_prints_them)
{
	char b[32];
	CHECK_STR(table_human_duration(45, b, sizeof b), "45s");
	CHECK_STR(table_human_duration(119, b, sizeof b), "119s");
	CHECK_STR(table_human_duration(190, b, sizeof b), "3m10s");
	CHECK_STR(table_human_duration(600, b, sizeof b), "10m");
	CHECK_STR(table_human_duration(5 * 3600 + 180, b, sizeof b), "5h3m");
	CHECK_STR(table_human_duration(30 * 3600, b, sizeof b), "30h");
	CHECK_STR(table_human_duration(3 * 86400 + 7200, b, sizeof b), "3d2h");
	CHECK_STR(table_human_duration(12 * 86400, b, sizeof b), "12d");
	CHECK_STR(table_human_duration((365 * 2 + 30) * 86400LL, b, sizeof b), "2y30d");
	CHECK_STR(table_human_duration(-5, b, sizeof b), "<invalid>");
	CHECK(table_accept("application/json;as=Table;v=v1;g=meta.k8s.io,application/json") != NULL);
	CHECK(table_accept("application/json") == NULL);
	CHECK(table_accept("application/vnd.kubernetes.protobuf,application/json") == NULL);
}

TEST(protobuf_namespace_metadata)
{
	/* k8s\0 + Unknown{typeMeta{"v1","Namespace"}, raw: Namespace{metadata{name "ns1",
	 * labels {a: b}}}} */
	static const unsigned char buf[] = {
		'k', '8', 's', 0,
		0x0a, 0x0f, 0x0a, 0x02, 'v', '1', 0x12, 0x09, 'N', 'a', 'm', 'e', 's', 'p', 'a', 'c', 'e',
		0x12, 0x11, 0x0a, 0x0f,
		0x0a, 0x03, 'n', 's', '1',
		0x5a, 0x08, 0x0a, 0x01, 'a', 0x12, 0x01, 'b', 0x10, 0x01,
	};
	CHECK(pbmeta_is_protobuf((const char *)buf, sizeof buf));
	json_t *o = pbmeta_decode((const char *)buf, sizeof buf);
	CHECK(o != NULL);
	CHECK_STR(json_string_value(json_object_get(o, "kind")), "Namespace");
	json_t *m = json_object_get(o, "metadata");
	CHECK_STR(json_string_value(json_object_get(m, "name")), "ns1");
	CHECK_STR(json_string_value(json_object_get(json_object_get(m, "labels"), "a")), "b");
	json_decref(o);
	/* Truncated input is refused, not over-read. */
	CHECK(pbmeta_decode((const char *)buf, sizeof buf - 6) == NULL);
	CHECK(pbmeta_decode("{}", 2) == NULL);
}
