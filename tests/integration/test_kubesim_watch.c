/* Watch semantics (kube-api.md §2): resume from a resourceVersion yields exactly the missed
 * events, too-old versions get ERROR 410, bookmarks only when asked, timeoutSeconds ends the
 * stream, label selectors turn MODIFIED into ADDED/DELETED, Tables for kubectl. PriorityClasses
 * are used because no controller writes them. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define PCS "/apis/scheduling.k8s.io/v1/priorityclasses"

static const char *ev_type(const json_t *ev)
{
	const char *s = json_string_value(json_object_get(ev, "type"));
	return s ? s : "";
}

static const char *ev_name(const json_t *ev)
{
	const char *s = json_string_value(
		json_object_get(json_object_get(json_object_get(ev, "object"), "metadata"), "name"));
	return s ? s : "";
}

static const char *ev_rv(const json_t *ev)
{
	const char *s = json_string_value(json_object_get(
		json_object_get(json_object_get(ev, "object"), "metadata"), "resourceVersion"));
	return s ? s : "";
}

static void create_pc(struct h_kubesim *k, const char *name, const char *team)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"team\":\"%s\"}},\"value\":10}", name,
		 team);
	json_decref(h_kube_create(k, PCS, body));
}

static void relabel(struct h_kubesim *k, const char *name, const char *team)
{
	char path[256], body[128];
	snprintf(path, sizeof path, PCS "/%s", name);
	snprintf(body, sizeof body, "{\"metadata\":{\"labels\":{\"team\":\"%s\"}}}", team);
	CHECK_INT(h_kube(k, "PATCH", path, body, "application/merge-patch+json", NULL), 200);
}

static void expect(struct h_watch *w, const char *type, const char *name)
{
	json_t *ev = h_watch_next(w, 2000);
	CHECKF(ev, "no %s %s event (stream ended: %d)", type, name, w->ended);
	CHECKF(!strcmp(ev_type(ev), type) && !strcmp(ev_name(ev), name), "got %s %s, want %s %s",
	       ev_type(ev), ev_name(ev), type, name);
	json_decref(ev);
}

TEST_T(watch_resume_exact, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	create_pc(&k, "pa", "a");
	json_t *list = h_kube_get(&k, PCS);
	char rv[64];
	snprintf(rv, sizeof rv, "%s",
		 json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion")));
	json_decref(list);
	/* Changes the watcher "missed". */
	create_pc(&k, "pb", "a");
	relabel(&k, "pa", "b");
	CHECK_INT(h_kube(&k, "DELETE", PCS "/pb", NULL, NULL, NULL), 200);

	struct h_watch w;
	char path[256];
	snprintf(path, sizeof path, PCS "?watch=1&resourceVersion=%s", rv);
	CHECK_INT(h_watch_open(&w, &k, path, NULL), 0);
	CHECK_INT(w.status, 200);
	CHECKF(strstr(w.headers, "application/json"), "%s", w.headers);
	expect(&w, "ADDED", "pb");
	expect(&w, "MODIFIED", "pa");
	json_t *del = h_watch_next(&w, 2000);
	CHECK(del && !strcmp(ev_type(del), "DELETED") && !strcmp(ev_name(del), "pb"));
	/* DELETED carries the deletion's resourceVersion, newer than the list's. */
	CHECK(strcmp(ev_rv(del), rv) > 0 || strlen(ev_rv(del)) > strlen(rv));
	json_decref(del);
	json_t *none = h_watch_next(&w, 300);
	CHECKF(!none, "unexpected event %s %s", ev_type(none), ev_name(none));
	create_pc(&k, "pc", "a");
	expect(&w, "ADDED", "pc");
	h_watch_close(&w);

	/* Without a resourceVersion: the current state as ADDED events, then changes. */
	CHECK_INT(h_watch_open(&w, &k, PCS "?watch=true&labelSelector=team%3Da", NULL), 0);
	expect(&w, "ADDED", "pc");
	none = h_watch_next(&w, 200);
	CHECK(!none);
	relabel(&k, "pc", "b");
	expect(&w, "DELETED", "pc"); /* left the selector */
	relabel(&k, "pa", "a");
	expect(&w, "ADDED", "pa"); /* entered it */
	h_watch_close(&w);
}

TEST_T(watch_too_old_410, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--history";
	k.args[1] = "5";
	h_kubesim_start(&k);
	create_pc(&k, "p0", "a");
	json_t *p0 = h_kube_get(&k, PCS "/p0");
	char rv[64];
	snprintf(rv, sizeof rv, "%s",
		 json_string_value(json_object_get(json_object_get(p0, "metadata"), "resourceVersion")));
	json_decref(p0);
	for (int i = 1; i <= 8; i++) {
		char name[16];
		snprintf(name, sizeof name, "p%d", i);
		create_pc(&k, name, "a");
	}
	struct h_watch w;
	char path[256];
	/* Python-style capital booleans must be understood as well. */
	snprintf(path, sizeof path, PCS "?watch=True&allowWatchBookmarks=True&resourceVersion=%s", rv);
	CHECK_INT(h_watch_open(&w, &k, path, NULL), 0);
	CHECK_INT(w.status, 200);
	json_t *ev = h_watch_next(&w, 2000);
	CHECK(ev);
	CHECK_STR(ev_type(ev), "ERROR");
	json_t *st = json_object_get(ev, "object");
	CHECK_STR(json_string_value(json_object_get(st, "kind")), "Status");
	CHECK_INT(json_integer_value(json_object_get(st, "code")), 410);
	CHECK_STR(json_string_value(json_object_get(st, "reason")), "Expired");
	const char *msg = json_string_value(json_object_get(st, "message"));
	char want[96];
	snprintf(want, sizeof want, "too old resource version: %s (", rv);
	CHECKF(msg && !strncmp(msg, want, strlen(want)), "message %s", msg ? msg : "(null)");
	json_decref(ev);
	CHECK(h_watch_next(&w, 2000) == NULL && w.ended);
	h_watch_close(&w);
}

TEST_T(watch_bookmarks_and_timeout, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--bookmark-ms";
	k.args[1] = "200";
	h_kubesim_start(&k);
	json_t *list = h_kube_get(&k, PCS);
	char rv[64];
	snprintf(rv, sizeof rv, "%s",
		 json_string_value(json_object_get(json_object_get(list, "metadata"), "resourceVersion")));
	json_decref(list);
	struct h_watch w;
	char path[256];
	snprintf(path, sizeof path,
		 PCS "?watch=1&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion=%s", rv);
	int64_t t0 = clock_mono_ms();
	CHECK_INT(h_watch_open(&w, &k, path, NULL), 0);
	json_t *ev = h_watch_next(&w, 1500);
	CHECKF(ev, "no bookmark within 1.5 s");
	CHECK_STR(ev_type(ev), "BOOKMARK");
	CHECK_STR(json_string_value(json_object_get(json_object_get(ev, "object"), "kind")),
		  "PriorityClass");
	CHECK(ev_rv(ev)[0]);
	json_decref(ev);
	/* timeoutSeconds=2 ends the stream cleanly. */
	while ((ev = h_watch_next(&w, 3000)) != NULL) {
		CHECK_STR(ev_type(ev), "BOOKMARK");
		json_decref(ev);
	}
	int64_t took = clock_mono_ms() - t0;
	CHECKF(w.ended && took >= 1900 && took < 3500, "ended=%d after %lld ms", w.ended,
	       (long long)took);
	h_watch_close(&w);

	/* Not asked: no bookmark. */
	snprintf(path, sizeof path, PCS "?watch=t&resourceVersion=%s", rv);
	CHECK_INT(h_watch_open(&w, &k, path, NULL), 0);
	ev = h_watch_next(&w, 700);
	CHECKF(!ev, "unexpected %s", ev_type(ev));
	h_watch_close(&w);
}

TEST_T(watch_tables_for_kubectl, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;"
			     "as=Table;v=v1beta1;g=meta.k8s.io,application/json";
	struct h_watch w;
	CHECK_INT(h_watch_open(&w, &k, PCS "?watch=true", accept), 0);
	json_t *ev = h_watch_next(&w, 2000);
	CHECK(ev);
	json_t *t = json_object_get(ev, "object");
	CHECK_STR(json_string_value(json_object_get(t, "kind")), "Table");
	CHECK(json_array_size(json_object_get(t, "columnDefinitions")) == 2);
	CHECK_INT(json_array_size(json_object_get(t, "rows")), 1);
	json_decref(ev);
	ev = h_watch_next(&w, 2000);
	CHECK(ev);
	t = json_object_get(ev, "object");
	CHECK_STR(json_string_value(json_object_get(t, "kind")), "Table");
	CHECK(json_object_get(t, "columnDefinitions") == NULL);
	json_decref(ev);
	h_watch_close(&w);
	/* A Table list of jobs has the kubectl columns. */
	char url[512];
	snprintf(url, sizeof url, "%s/apis/batch/v1/namespaces/gpu-workbench/jobs", k.url);
	char hdr[400];
	snprintf(hdr, sizeof hdr, "Accept: %s", accept);
	const char *headers[] = { hdr, NULL };
	struct h_resp r;
	h_http(&r, "GET", url, NULL, NULL, headers);
	CHECK_INT(r.status, 200);
	json_t *cols = json_object_get(r.json, "columnDefinitions");
	const char *want[] = { "Name", "Status", "Completions", "Duration", "Age" };
	for (int i = 0; i < 5; i++)
		CHECK_STR(json_string_value(json_object_get(json_array_get(cols, (size_t)i), "name")),
			  want[i]);
	h_resp_free(&r);
}
