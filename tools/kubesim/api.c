/* REST handlers: a request is parsed and checked against its URL, the write goes to the
 * registry (the same commit path kubesim's controllers take) and its result is shaped into
 * the answer: objects, lists, Tables, Status errors, watch streams and pod logs. */
#include "tools/kubesim/api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "tools/kubesim/discovery.h"
#include "tools/kubesim/faults.h"
#include "tools/kubesim/simmon.h"
#include "tools/kubesim/kubelet.h"
#include "tools/kubesim/logs.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/patch.h"
#include "tools/kubesim/pbmeta.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/selector.h"
#include "tools/kubesim/store.h"
#include "tools/kubesim/table.h"
#include "tools/kubesim/watch.h"

/* A pod log answer is cut to its last bytes beyond this (the file itself may be larger). */
#define API_LOG_MAX (16L << 20)

int api_parse_bool(const char *s, int *out)
{
	static const char *const t[] = { "1", "t", "T", "true", "TRUE", "True" };
	static const char *const f[] = { "0", "f", "F", "false", "FALSE", "False" };
	for (int i = 0; i < 6; i++) {
		if (!strcmp(s, t[i])) {
			*out = 1;
			return 0;
		}
		if (!strcmp(s, f[i])) {
			*out = 0;
			return 0;
		}
	}
	return -1;
}

/* ---- routing ---- */

struct route {
	const struct res_def *r;
	char ns[256];
	char name[256];
	char sub[32];
	int has_ns;
	int watch_prefix;
};

#define MAX_SEGS 12

static int split_path(char *path, char **segs)
{
	int n = 0;
	char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		if (n == MAX_SEGS)
			return -1;
		segs[n++] = p;
		while (*p && *p != '/')
			p++;
		if (*p)
			*p++ = '\0';
	}
	return n;
}

static int copy_seg(char *dst, size_t len, const char *src)
{
	if (strlen(src) >= len)
		return -1;
	snprintf(dst, len, "%s", src);
	return 0;
}

/* Returns 0 with rt filled, or -1 for a path that names no resource (404). */
static int route_parse(const char *path, struct route *rt)
{
	memset(rt, 0, sizeof *rt);
	char buf[1024];
	if (strlen(path) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", path);
	char *s[MAX_SEGS];
	int n = split_path(buf, s);
	if (n < 3)
		return -1;
	const char *group, *version;
	int i;
	if (!strcmp(s[0], "api")) {
		group = "";
		version = s[1];
		i = 2;
	} else if (!strcmp(s[0], "apis") && n >= 4) {
		group = s[1];
		version = s[2];
		i = 3;
	} else {
		return -1;
	}
	if (i < n && !strcmp(s[i], "watch")) {
		rt->watch_prefix = 1;
		i++;
	}
	if (i >= n)
		return -1;
	int rest = n - i;
	if (!strcmp(s[i], "namespaces") && rest >= 3 && res_find(group, version, s[i + 2]) &&
	    res_find(group, version, s[i + 2])->namespaced) {
		if (copy_seg(rt->ns, sizeof rt->ns, s[i + 1]) < 0)
			return -1;
		rt->has_ns = 1;
		i += 2;
		rest -= 2;
	}
	rt->r = res_find(group, version, s[i]);
	if (!rt->r || rest > 3)
		return -1;
	if (rest >= 2 && copy_seg(rt->name, sizeof rt->name, s[i + 1]) < 0)
		return -1;
	if (rest == 3 && copy_seg(rt->sub, sizeof rt->sub, s[i + 2]) < 0)
		return -1;
	if (rt->r->namespaced && !rt->has_ns && rt->name[0])
		return -1;
	if (rt->sub[0]) {
		int ok = (!strcmp(rt->sub, "status") && rt->r->has_status) ||
			 (!strcmp(rt->sub, "log") && rt->r->has_log) ||
			 (!strcmp(rt->sub, "binding") && rt->r->has_binding) ||
			 (!strcmp(rt->sub, "eviction") && rt->r->id == RES_PODS);
		if (!ok)
			return -1;
	}
	return 0;
}

static void reply_err(struct hreq *h, int code, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void reply_err(struct hreq *h, int code, const char *reason, const char *fmt, ...)
{
	struct kerr e = { 0 };
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	kerr_set(&e, code, reason, "%s", msg);
	http_reply_kerr(h, &e);
	kerr_clear(&e);
}

static void reply_kerr(struct hreq *h, struct kerr *e)
{
	http_reply_kerr(h, e);
	kerr_clear(e);
}

static void reply_not_found_path(struct hreq *h)
{
	struct kerr e = { 0 };
	kerr_set(&e, 404, "NotFound", "the server could not find the requested resource");
	e.details = json_object();
	reply_kerr(h, &e);
}

/* Reads an optional Go boolean query parameter; answers 400 and returns -1 when malformed. */
static int query_bool(struct hreq *h, const char *name, int *out)
{
	const char *v = http_query(h, name);
	*out = 0;
	if (!v)
		return 0;
	if (api_parse_bool(v, out) < 0) {
		reply_err(h, 400, "BadRequest", "strconv.ParseBool: parsing \"%s\": invalid syntax",
			  v);
		return -1;
	}
	return 0;
}

static int query_long(struct hreq *h, const char *name, long def, long *out)
{
	const char *v = http_query(h, name);
	*out = def;
	if (!v || !v[0])
		return 0;
	char *end;
	errno = 0;
	long x = strtol(v, &end, 10);
	if (*end || errno) {
		reply_err(h, 400, "BadRequest", "strconv.ParseInt: parsing \"%s\": invalid syntax",
			  v);
		return -1;
	}
	*out = x;
	return 0;
}

static json_t *body_json(struct hreq *h)
{
	json_error_t je;
	json_t *doc = json_loadb(h->body, h->body_len, JSON_REJECT_DUPLICATES, &je);
	if (!doc)
		reply_err(h, 400, "BadRequest",
			  "the body of the request was in an unknown format - accepted media types "
			  "include: application/json, application/yaml, "
			  "application/vnd.kubernetes.protobuf (%s)",
			  je.text);
	return doc;
}

/* A copy for list answers: built-in kinds drop kind/apiVersion from items. */
static json_t *list_item(const struct res_def *r, json_t *obj)
{
	if (r->crd)
		return json_incref(obj);
	json_t *c = json_copy(obj);
	json_object_del(c, "kind");
	json_object_del(c, "apiVersion");
	return c;
}

/* ---- GET ---- */

static void do_get(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	json_t *obj = store_get(ks->store, rt->r->id, rt->ns, rt->name);
	if (!obj) {
		struct kerr e = { 0 };
		kerr_not_found(&e, rt->r, rt->name);
		reply_kerr(h, &e);
		return;
	}
	const char *tv = table_accept(http_req_header(h, "Accept"));
	if (tv && strcmp(rt->sub, "status") != 0) {
		json_t *objs[1] = { obj };
		http_reply_json(h, 200,
				table_build(rt->r, objs, 1, tv,
					    obj_str(obj, "metadata.resourceVersion"),
					    table_include_parse(http_query(h, "includeObject")),
					    1));
		return;
	}
	http_reply_json(h, 200, json_incref(obj));
}

static int parse_selectors(struct hreq *h, const struct res_def *r, struct selector **ls,
			   struct selector **fs)
{
	char err[300];
	*ls = *fs = NULL;
	if (selector_parse_labels(http_query(h, "labelSelector"), ls, err, sizeof err) < 0) {
		reply_err(h, 400, "BadRequest", "%s", err);
		return -1;
	}
	if (selector_parse_fields(r, http_query(h, "fieldSelector"), fs, err, sizeof err) < 0) {
		selector_free(*ls);
		*ls = NULL;
		reply_err(h, 400, "BadRequest", "%s", err);
		return -1;
	}
	return 0;
}

static void do_watch(struct hreq *h, struct route *rt, struct selector *ls,
		     struct selector *fs)
{
	int bookmarks = 0, initial = 0;
	long timeout = 0;
	if (query_bool(h, "allowWatchBookmarks", &bookmarks) < 0 ||
	    query_bool(h, "sendInitialEvents", &initial) < 0 ||
	    query_long(h, "timeoutSeconds", 0, &timeout) < 0) {
		selector_free(ls);
		selector_free(fs);
		return;
	}
	const char *rvm = http_query(h, "resourceVersionMatch");
	if ((rvm && rvm[0]) && !(initial && !strcmp(rvm, "NotOlderThan"))) {
		selector_free(ls);
		selector_free(fs);
		struct kerr e = { 0 };
		kerr_set(&e, 422, "Invalid",
			 "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
			 "resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
			 "provided");
		e.details = json_pack("{s:s, s:s}", "group", "meta.k8s.io", "kind", "ListOptions");
		reply_kerr(h, &e);
		return;
	}
	if (initial && (!rvm || strcmp(rvm, "NotOlderThan"))) {
		selector_free(ls);
		selector_free(fs);
		struct kerr e = { 0 };
		kerr_set(&e, 422, "Invalid",
			 "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: "
			 "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
		e.details = json_pack("{s:s, s:s}", "group", "meta.k8s.io", "kind", "ListOptions");
		reply_kerr(h, &e);
		return;
	}
	struct watch_params p = {
		.r = rt->r,
		.ns = rt->has_ns ? rt->ns : NULL,
		.labels = ls,
		.fields = fs,
		.rv = http_query(h, "resourceVersion"),
		.bookmarks = bookmarks,
		.timeout_s = timeout,
		.send_initial_events = initial,
		.table_version = table_accept(http_req_header(h, "Accept")),
		.include = table_include_parse(http_query(h, "includeObject")),
	};
	watch_start(h->ks->watch, h, &p);
}

static void hex_encode(const char *s, char *out, size_t len)
{
	size_t o = 0;
	for (; *s && o + 3 < len; s++)
		o += (size_t)snprintf(out + o, len - o, "%02x", (unsigned char)*s);
	out[o] = '\0';
}

static int hex_decode(const char *s, char *out, size_t len)
{
	size_t n = strlen(s), o = 0;
	if (n % 2 || n / 2 >= len)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		unsigned v;
		if (sscanf(s + i, "%2x", &v) != 1)
			return -1;
		out[o++] = (char)v;
	}
	out[o] = '\0';
	return 0;
}

/* The objects a list or deletecollection must look at, sorted by namespace and name: from the
 * label index when the label selector has an equality term (every match carries that label),
 * else the whole resource (or namespace). The selectors are still applied by the caller. */
static size_t list_candidates(struct ks *ks, const struct route *rt, const struct selector *ls,
			      json_t ***out)
{
	const char *ns = rt->has_ns ? rt->ns : NULL;
	const char *key, *value;
	if (!selector_eq_term(ls, &key, &value))
		return store_list(ks->store, rt->r->id, ns, out);
	size_t n = strlen(key) + strlen(value) + 2;
	char *kv = gwb_malloc(n);
	snprintf(kv, n, "%s=%s", key, value);
	size_t k = store_list_index(ks->store, rt->r->id, STORE_IDX_LABEL, kv, ns, out);
	gwb_free(kv);
	return k;
}

/* The answer to a list: the k objects of sel as a List (or a Table when the client asked
 * for one), with the continue token and remainingItemCount when remaining are left. */
static json_t *list_doc(struct hreq *h, const struct route *rt, json_t **sel, size_t k,
			size_t remaining)
{
	char rv[32];
	snprintf(rv, sizeof rv, "%" PRIu64, store_rv(h->ks->store));
	const char *tv = table_accept(http_req_header(h, "Accept"));
	json_t *doc;
	if (tv) {
		doc = table_build(rt->r, sel, k, tv, rv,
				  table_include_parse(http_query(h, "includeObject")), 1);
	} else {
		json_t *items = json_array();
		for (size_t i = 0; i < k; i++)
			json_array_append_new(items, list_item(rt->r, sel[i]));
		doc = json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", rt->r->list_kind, "apiVersion",
				rt->r->api_version, "metadata", "resourceVersion", rv, "items",
				items);
	}
	if (remaining) {
		char last_key[600] = "", tok[1300];
		if (k)
			snprintf(last_key, sizeof last_key, "%s/%s", obj_ns(sel[k - 1]),
				 obj_name(sel[k - 1]));
		hex_encode(last_key, tok, sizeof tok);
		json_t *meta = json_object_get(doc, "metadata");
		json_object_set_new(meta, "continue", json_string(tok));
		json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)remaining));
	}
	return doc;
}

static void do_list(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	struct selector *ls, *fs;
	int watch = 0;
	if (query_bool(h, "watch", &watch) < 0)
		return;
	if (parse_selectors(h, rt->r, &ls, &fs) < 0)
		return;
	if (watch || rt->watch_prefix) {
		do_watch(h, rt, ls, fs);
		return;
	}
	long limit = 0;
	if (query_long(h, "limit", 0, &limit) < 0) {
		selector_free(ls);
		selector_free(fs);
		return;
	}
	const char *cont = http_query(h, "continue");
	char after[600] = "";
	if (cont && cont[0] && hex_decode(cont, after, sizeof after) < 0) {
		selector_free(ls);
		selector_free(fs);
		reply_err(h, 400, "BadRequest", "continue key is not valid: illegal base64 data");
		return;
	}
	json_t **objs = NULL;
	size_t n, k = 0, remaining = 0;
	int paged = !ls && !fs && limit > 0;
	if (paged) {
		/* A page of an unfiltered list: only the page is read, from the key order. */
		n = store_list_after(ks->store, rt->r->id, rt->has_ns ? rt->ns : NULL, after,
				     (size_t)limit, &objs, &remaining);
	} else {
		n = list_candidates(ks, rt, ls, &objs);
	}
	json_t **sel = gwb_malloc((n ? n : 1) * sizeof *sel);
	/* objs are sorted by namespace/name: the continue point is found by bisection. */
	size_t lo = 0, hi = n;
	while (!paged && after[0] && lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		char key[600];
		snprintf(key, sizeof key, "%s/%s", obj_ns(objs[mid]), obj_name(objs[mid]));
		if (strcmp(key, after) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	int filtered = ls || fs;
	for (size_t i = lo; i < n; i++) {
		if (filtered && (!selector_match(ls, objs[i]) || !selector_match(fs, objs[i])))
			continue;
		if (limit > 0 && (long)k >= limit) {
			if (!filtered) {
				remaining += n - i; /* every later object matches */
				break;
			}
			remaining++;
			continue;
		}
		sel[k++] = objs[i];
	}
	json_t *doc = list_doc(h, rt, sel, k, remaining);
	gwb_free(sel);
	gwb_free(objs);
	selector_free(ls);
	selector_free(fs);
	http_reply_json(h, 200, doc);
}

/* ---- pod logs ---- */

/* The waiting reason of a pod's container from its status (ContainerCreating without one). */
static const char *waiting_reason(const json_t *pod, const char *cname)
{
	size_t i;
	json_t *cs;
	json_array_foreach(obj_path(pod, "status.containerStatuses"), i, cs)
	{
		const char *name = obj_str(cs, "name"), *r = obj_str(cs, "state.waiting.reason");
		if (name && r && !strcmp(name, cname))
			return r;
	}
	return "ContainerCreating";
}

static void do_log(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	json_t *pod = store_get(ks->store, RES_PODS, rt->ns, rt->name);
	if (!pod) {
		struct kerr e = { 0 };
		kerr_not_found(&e, rt->r, rt->name);
		reply_kerr(h, &e);
		return;
	}
	json_t *ctrs = obj_path(pod, "spec.containers");
	const char *cname = http_query(h, "container");
	if (!cname || !cname[0]) {
		if (json_array_size(ctrs) != 1) {
			reply_err(h, 400, "BadRequest",
				  "a container name must be specified for pod %s", rt->name);
			return;
		}
		cname = obj_str(json_array_get(ctrs, 0), "name");
	}
	int found = 0;
	size_t i;
	json_t *c;
	json_array_foreach(ctrs, i, c) found |= obj_str(c, "name") && !strcmp(obj_str(c, "name"), cname);
	if (!found) {
		reply_err(h, 400, "BadRequest", "container %s is not valid for pod %s", cname,
			  rt->name);
		return;
	}
	char path[PATH_MAX];
	if (kubelet_log_path(ks->kubelet, pod, cname, path, sizeof path) < 0) {
		reply_err(h, 400, "BadRequest",
			  "container \"%s\" in pod \"%s\" is waiting to start: %s", cname,
			  rt->name, waiting_reason(pod, cname));
		return;
	}
	long tail = -1, limit = 0;
	if (query_long(h, "tailLines", -1, &tail) < 0 || query_long(h, "limitBytes", 0, &limit) < 0)
		return;
	FILE *f = fopen(path, "rb");
	if (!f) {
		http_reply(h, 200, "text/plain", "", 0);
		return;
	}
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	long start = size > API_LOG_MAX ? size - API_LOG_MAX : 0;
	fseek(f, start, SEEK_SET);
	size_t n = (size_t)(size - start);
	char *buf = gwb_malloc(n + 1);
	n = fread(buf, 1, n, f);
	buf[n] = '\0';
	fclose(f);
	const char *from = buf;
	if (tail >= 0) {
		long lines = 0;
		size_t end = n;
		if (end && buf[end - 1] == '\n')
			end--;
		size_t p = end;
		while (p > 0) {
			if (buf[p - 1] == '\n' && ++lines == tail)
				break;
			p--;
		}
		from = tail == 0 ? buf + n : buf + p;
	}
	size_t len = n - (size_t)(from - buf);
	if (limit > 0 && (size_t)limit < len)
		len = (size_t)limit;
	int follow = 0;
	if (query_bool(h, "follow", &follow) < 0) {
		gwb_free(buf);
		return;
	}
	if (follow)
		logs_follow(ks->logs, h, path, size, from, len, limit, rt->ns, rt->name,
			    obj_uid(pod));
	else
		http_reply(h, 200, "text/plain", from, len);
	gwb_free(buf);
}

/* ---- POST ---- */

static void do_create(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	json_t *obj;
	if (pbmeta_is_protobuf(h->body, h->body_len)) {
		/* Protobuf is understood only where the metadata is the whole object. */
		obj = rt->r->id == RES_NAMESPACES ? pbmeta_decode(h->body, h->body_len) : NULL;
		if (!obj) {
			reply_err(h, 415, "UnsupportedMediaType",
				  "the body of the request was in an unknown format - accepted media "
				  "types include: application/json");
			return;
		}
	} else if (!(obj = body_json(h))) {
		return;
	}
	const char *dry = http_query(h, "dryRun");
	int dry_run = dry && !strcmp(dry, "All");
	struct kerr e = { 0 };
	json_t *out = NULL;
	if (registry_create(ks->registry, rt->r, rt->has_ns ? rt->ns : NULL, obj, dry_run, &out,
			    &e) < 0) {
		reply_kerr(h, &e);
		return;
	}
	if (dry_run) {
		http_reply_json(h, 201, out);
		return;
	}
	if (faults_withhold_answer(ks->faults, "create", rt->r)) {
		log_info("api", "answer_withheld", "resource=%s name=%s", rt->r->plural,
			 log_q(obj_name(out)));
		json_decref(out);
		http_withhold(h);
		return;
	}
	http_reply_json(h, 201, out);
}

static void do_binding(struct hreq *h, struct route *rt)
{
	json_t *b = body_json(h);
	if (!b)
		return;
	struct kerr e = { 0 };
	int rc = registry_bind(h->ks->registry, rt->ns, rt->name, b, &e);
	json_decref(b);
	if (rc < 0) {
		reply_kerr(h, &e);
		return;
	}
	http_reply_json(h, 201,
			json_pack("{s:s, s:s, s:{}, s:s, s:i}", "kind", "Status", "apiVersion",
				  "v1", "metadata", "status", "Success", "code", 201));
}

/* ---- PUT / PATCH ---- */

static void finish_update(struct hreq *h, struct route *rt, json_t *obj)
{
	struct ks *ks = h->ks;
	struct kerr e = { 0 };
	const char *bn = obj_str(obj, "metadata.name");
	if (!json_is_object(obj)) {
		json_decref(obj);
		reply_err(h, 400, "BadRequest", "the object provided is not a JSON object");
		return;
	}
	if (bn && strcmp(bn, rt->name)) {
		reply_err(h, 400, "BadRequest",
			  "the name of the object (%s) does not match the name on the URL (%s)", bn,
			  rt->name);
		json_decref(obj);
		return;
	}
	const char *bns = obj_str(obj, "metadata.namespace");
	if (rt->r->namespaced && bns && bns[0] && strcmp(bns, rt->ns)) {
		reply_err(h, 400, "BadRequest",
			  "the namespace of the provided object does not match the namespace sent "
			  "on the request");
		json_decref(obj);
		return;
	}
	obj_set_str(obj, "metadata.name", rt->name);
	if (rt->r->namespaced)
		obj_set_str(obj, "metadata.namespace", rt->ns);
	json_t *out = NULL;
	if (registry_update(ks->registry, rt->r, obj, !strcmp(rt->sub, "status"), &out, &e) < 0) {
		reply_kerr(h, &e);
		return;
	}
	http_reply_json(h, 200, out);
}

static void do_put(struct hreq *h, struct route *rt)
{
	json_t *obj = body_json(h);
	if (obj)
		finish_update(h, rt, obj);
}

static void do_patch(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	const char *ct = http_req_header(h, "Content-Type");
	char ctype[128] = "";
	if (ct) {
		snprintf(ctype, sizeof ctype, "%s", ct);
		ctype[strcspn(ctype, "; ")] = '\0';
	}
	enum patch_type type;
	if (!strcmp(ctype, "application/merge-patch+json"))
		type = PATCH_MERGE;
	else if (!strcmp(ctype, "application/strategic-merge-patch+json") && !rt->r->crd)
		type = PATCH_STRATEGIC;
	else if (!strcmp(ctype, "application/json-patch+json"))
		type = PATCH_JSON;
	else {
		reply_err(h, 415, "UnsupportedMediaType",
			  "the body of the request was in an unknown format - accepted media types "
			  "include: application/json-patch+json, application/merge-patch+json%s",
			  rt->r->crd ? "" : ", application/strategic-merge-patch+json");
		return;
	}
	json_t *patch = body_json(h);
	if (!patch)
		return;
	json_t *cur = store_get(ks->store, rt->r->id, rt->ns, rt->name);
	if (!cur) {
		json_decref(patch);
		struct kerr e = { 0 };
		kerr_not_found(&e, rt->r, rt->name);
		reply_kerr(h, &e);
		return;
	}
	json_t *out = NULL;
	char err[300] = "";
	int rc = patch_apply(type, cur, patch, &out, err, sizeof err);
	json_decref(patch);
	if (rc < 0) {
		reply_err(h, type == PATCH_JSON ? 422 : 400, type == PATCH_JSON ? "Invalid" : "BadRequest",
			  "%s", err);
		return;
	}
	finish_update(h, rt, out);
}

/* ---- DELETE ---- */

static int delete_opts(struct hreq *h, struct registry_delete_opts *o, json_t **body)
{
	*body = NULL;
	if (h->body_len) {
		*body = body_json(h);
		if (!*body)
			return -1;
		json_t *g = json_object_get(*body, "gracePeriodSeconds");
		if (json_is_integer(g))
			o->grace = (long)json_integer_value(g);
		o->propagation = json_string_value(json_object_get(*body, "propagationPolicy"));
		o->uid = obj_str(*body, "preconditions.uid");
		o->rv = obj_str(*body, "preconditions.resourceVersion");
		json_t *dr = json_object_get(*body, "dryRun");
		if (json_array_size(dr))
			o->dry_run = 1;
		json_t *orphan = json_object_get(*body, "orphanDependents");
		if (json_is_boolean(orphan) && !o->propagation)
			o->propagation = json_is_true(orphan) ? "Orphan" : "Background";
	}
	long g;
	if (query_long(h, "gracePeriodSeconds", -1, &g) < 0) {
		json_decref(*body);
		*body = NULL;
		return -1;
	}
	if (g >= 0)
		o->grace = g;
	const char *p = http_query(h, "propagationPolicy");
	if (p)
		o->propagation = p;
	const char *dry = http_query(h, "dryRun");
	if (dry && !strcmp(dry, "All"))
		o->dry_run = 1;
	return 0;
}

static void do_delete(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	json_t *body;
	if (delete_opts(h, &o, &body) < 0)
		return;
	if (rt->r->id == RES_JOBS && !o.propagation)
		http_header_add(h, "Warning",
				"299 - \"child pods are preserved by default when jobs are deleted; "
				"set propagationPolicy=Background to remove them or set "
				"propagationPolicy=Orphan to suppress this warning\"");
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	int rc = registry_delete(ks->registry, rt->r, rt->ns, rt->name, &o, &out, &gone, &e);
	json_decref(body);
	if (rc < 0) {
		reply_kerr(h, &e);
		return;
	}
	http_reply_json(h, 200, out);
}

static void do_delete_collection(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	struct selector *ls, *fs;
	if (parse_selectors(h, rt->r, &ls, &fs) < 0)
		return;
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	json_t *body;
	if (delete_opts(h, &o, &body) < 0) {
		selector_free(ls);
		selector_free(fs);
		return;
	}
	json_t **objs = NULL;
	size_t n = list_candidates(ks, rt, ls, &objs);
	json_t *items = json_array();
	/* Names first: deleting changes the store under the borrowed pointers. */
	char (*names)[2][256] = gwb_calloc(n ? n : 1, sizeof *names);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (selector_match(ls, objs[i]) && selector_match(fs, objs[i])) {
			snprintf(names[k][0], 256, "%s", obj_ns(objs[i]));
			snprintf(names[k][1], 256, "%s", obj_name(objs[i]));
			k++;
		}
	gwb_free(objs);
	for (size_t i = 0; i < k; i++) {
		struct kerr e = { 0 };
		json_t *out = NULL;
		int gone = 0;
		if (registry_delete(ks->registry, rt->r, names[i][0], names[i][1], &o, &out, &gone,
				    &e) == 0) {
			if (json_is_object(out) && strcmp(obj_str(out, "kind") ? obj_str(out, "kind") : "", "Status"))
				json_array_append_new(items, list_item(rt->r, out));
			json_decref(out);
		}
		kerr_clear(&e);
	}
	gwb_free(names);
	json_decref(body);
	selector_free(ls);
	selector_free(fs);
	char rv[32];
	snprintf(rv, sizeof rv, "%" PRIu64, store_rv(ks->store));
	http_reply_json(h, 200,
			json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", rt->r->list_kind, "apiVersion",
				  rt->r->api_version, "metadata", "resourceVersion", rv, "items",
				  items));
}

static void do_eviction(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	json_t *b = body_json(h);
	if (!b)
		return;
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	json_t *g = obj_path(b, "deleteOptions.gracePeriodSeconds");
	if (json_is_integer(g))
		o.grace = (long)json_integer_value(g);
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	int rc = registry_delete(ks->registry, rt->r, rt->ns, rt->name, &o, &out, &gone, &e);
	json_decref(b);
	json_decref(out);
	if (rc < 0) {
		reply_kerr(h, &e);
		return;
	}
	http_reply_json(h, 201,
			json_pack("{s:s, s:s, s:{}, s:s, s:i}", "kind", "Status", "apiVersion",
				  "v1", "metadata", "status", "Success", "code", 201));
}

static void method_not_allowed(struct hreq *h)
{
	reply_err(h, 405, "MethodNotAllowed",
		  "the server does not allow this method on the requested resource");
}

void api_handle(struct hreq *h, void *arg)
{
	(void)arg;
	if (faults_throttle(h->ks->faults, h))
		return;
	if (discovery_handle(h))
		return;
	if (simmon_handle(h))
		return;
	struct route rt;
	if (route_parse(h->path, &rt) < 0) {
		reply_not_found_path(h);
		return;
	}
	int named = rt.name[0] != 0;
	switch (h->cmd) {
	case EVHTTP_REQ_GET:
	case EVHTTP_REQ_HEAD:
		if (!strcmp(rt.sub, "log"))
			do_log(h, &rt);
		else if (named && !rt.watch_prefix)
			do_get(h, &rt);
		else if (named) {
			/* /watch/.../name: a watch of one object. */
			char sel[300];
			snprintf(sel, sizeof sel, "metadata.name=%s", rt.name);
			evhttp_add_header(&h->query, "fieldSelector", sel);
			rt.name[0] = '\0';
			do_list(h, &rt);
		} else
			do_list(h, &rt);
		return;
	case EVHTTP_REQ_POST:
		if (!named && !rt.watch_prefix)
			do_create(h, &rt);
		else if (!strcmp(rt.sub, "binding"))
			do_binding(h, &rt);
		else if (!strcmp(rt.sub, "eviction"))
			do_eviction(h, &rt);
		else
			method_not_allowed(h);
		return;
	case EVHTTP_REQ_PUT:
		if (named && (!rt.sub[0] || !strcmp(rt.sub, "status")))
			do_put(h, &rt);
		else
			method_not_allowed(h);
		return;
	case EVHTTP_REQ_PATCH:
		if (named && (!rt.sub[0] || !strcmp(rt.sub, "status")))
			do_patch(h, &rt);
		else
			method_not_allowed(h);
		return;
	case EVHTTP_REQ_DELETE:
		if (named && !rt.sub[0])
			do_delete(h, &rt);
		else if (!named)
			do_delete_collection(h, &rt);
		else
			method_not_allowed(h);
		return;
	default:
		method_not_allowed(h);
	}
}
