/* REST handlers. Every write goes through api_create/api_update/api_delete/api_commit so that
 * clients and kubesim's own controllers see one set of rules. */
#include "tools/kubesim/api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "tools/kubesim/admit.h"
#include "tools/kubesim/discovery.h"
#include "tools/kubesim/faults.h"
#include "tools/kubesim/kubelet.h"
#include "tools/kubesim/logs.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/patch.h"
#include "tools/kubesim/pbmeta.h"
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

static int ns_exists(struct ks *ks, const char *ns, struct kerr *e)
{
	if (store_get(ks->store, RES_NAMESPACES, NULL, ns))
		return 1;
	kerr_not_found(e, res_get(RES_NAMESPACES), ns);
	return 0;
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

/* ---- write verbs (shared with controllers) ---- */

/* A deleted object goes once no finalizer holds it: metadata.finalizers, and for namespaces
 * spec.finalizers (the namespace controller's "kubernetes"). */
static int should_remove(const json_t *obj)
{
	return obj_deleting(obj) && !obj_has_finalizers(obj) &&
	       json_array_size(obj_path(obj, "spec.finalizers")) == 0 &&
	       obj_int(obj, "metadata.deletionGracePeriodSeconds", 0) == 0;
}

int api_commit(struct ks *ks, enum res_id res, json_t *obj)
{
	if (should_remove(obj)) {
		char ns[256], name[256];
		snprintf(ns, sizeof ns, "%s", obj_ns(obj));
		snprintf(name, sizeof name, "%s", obj_name(obj));
		return store_remove(ks->store, res, ns, name, obj, NULL);
	}
	return store_update(ks->store, res, obj, NULL);
}

/* kind/apiVersion and namespace checks of a create; returns the namespace to use ("" for
 * cluster-scoped objects) in nsbuf, or a negative error with e. */
static int create_scope(struct ks *ks, const struct res_def *r, const char *ns, json_t *obj,
			char *nsbuf, size_t nslen, struct kerr *e)
{
	const char *kind = json_string_value(json_object_get(obj, "kind"));
	const char *av = json_string_value(json_object_get(obj, "apiVersion"));
	if ((kind && strcmp(kind, r->kind)) || (av && strcmp(av, r->api_version))) {
		kerr_set(e, 400, "BadRequest",
			 "the API version in the data (%s) does not match the expected API version "
			 "(%s)",
			 av ? av : "", r->api_version);
		return GWB_EINVAL;
	}
	json_object_set_new(obj, "kind", json_string(r->kind));
	json_object_set_new(obj, "apiVersion", json_string(r->api_version));
	json_t *meta = obj_child(obj, "metadata");
	nsbuf[0] = '\0';
	if (!r->namespaced) {
		json_object_del(meta, "namespace");
		return 0;
	}
	const char *bns = json_string_value(json_object_get(meta, "namespace"));
	if (bns && bns[0] && ns && ns[0] && strcmp(bns, ns)) {
		kerr_set(e, 400, "BadRequest",
			 "the namespace of the provided object does not match the namespace sent on "
			 "the request");
		return GWB_EINVAL;
	}
	snprintf(nsbuf, nslen, "%s", ns && ns[0] ? ns : bns && bns[0] ? bns : "default");
	if (!ns_exists(ks, nsbuf, e))
		return GWB_ENOTFOUND;
	if (obj_deleting(store_get(ks->store, RES_NAMESPACES, NULL, nsbuf))) {
		kerr_set(e, 403, "Forbidden",
			 "%s is forbidden: unable to create new content in namespace %s because it "
			 "is being terminated",
			 res_qualified(r), nsbuf);
		return GWB_EFORBIDDEN;
	}
	json_object_set_new(meta, "namespace", json_string(nsbuf));
	return 0;
}

/* metadata.name, from generateName when absent; validated as a DNS subdomain. Sets
 * *generated. Returns 0 or a negative error with e. */
static int create_name(struct ks *ks, const struct res_def *r, const char *ns, json_t *obj,
		       int *generated, struct kerr *e)
{
	json_t *meta = obj_child(obj, "metadata");
	const char *name = json_string_value(json_object_get(meta, "name"));
	const char *gen = json_string_value(json_object_get(meta, "generateName"));
	*generated = 0;
	if (!name || !name[0]) {
		if (!gen || !gen[0]) {
			kerr_invalid(e, r, "", "metadata.name", "FieldValueRequired",
				     "Required value: name or generateName is required");
			return GWB_EINVAL;
		}
		char buf[300];
		/* Newer servers retry a few times on a clash. */
		for (int tries = 0; tries < 8; tries++) {
			obj_gen_name(gen, buf, sizeof buf);
			if (!store_get(ks->store, r->id, ns, buf))
				break;
		}
		json_object_set_new(meta, "name", json_string(buf));
		*generated = 1;
	}
	name = obj_name(obj);
	if (!obj_dns_subdomain(name)) {
		char text[400];
		snprintf(text, sizeof text,
			 "Invalid value: \"%.200s\": a lowercase RFC 1123 subdomain must consist of "
			 "lower case alphanumeric characters, '-' or '.', and must start and end "
			 "with an alphanumeric character",
			 name);
		kerr_invalid(e, r, name, "metadata.name", "FieldValueInvalid", text);
		return GWB_EINVAL;
	}
	return 0;
}

static int create_obj(struct ks *ks, const struct res_def *r, const char *ns, json_t *obj,
		      int dry_run, json_t **out, struct kerr *e)
{
	char nsbuf[256], name[256];
	int generated = 0, rc;
	if (out)
		*out = NULL;
	if (!json_is_object(obj)) {
		kerr_set(e, 400, "BadRequest", "the object provided is not a JSON object");
		rc = GWB_EINVAL;
		goto out;
	}
	if ((rc = create_scope(ks, r, ns, obj, nsbuf, sizeof nsbuf, e)) < 0)
		goto out;
	json_t *meta = obj_child(obj, "metadata");
	const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
	if (rv && rv[0]) {
		kerr_set(e, 400, "BadRequest",
			 "resourceVersion should not be set on objects to be created");
		rc = GWB_EINVAL;
		goto out;
	}
	if ((rc = create_name(ks, r, nsbuf, obj, &generated, e)) < 0)
		goto out;
	snprintf(name, sizeof name, "%s", obj_name(obj));
	char uid[37], now[32];
	obj_uuid(uid);
	json_object_set_new(meta, "uid", json_string(uid));
	json_object_set_new(meta, "creationTimestamp", json_string(obj_now(now, sizeof now)));
	json_object_del(meta, "deletionTimestamp");
	json_object_del(meta, "deletionGracePeriodSeconds");
	json_object_del(meta, "resourceVersion");
	json_object_del(meta, "managedFields");
	if (r->spec_generation)
		json_object_set_new(meta, "generation", json_integer(1));
	if (r->has_status && r->id != RES_NODES)
		json_object_del(obj, "status");
	if ((rc = admit_create(ks, r, obj, e)) < 0)
		goto out;
	json_t *existing = store_get(ks->store, r->id, nsbuf, name);
	if (existing) {
		kerr_exists(e, r, name, obj_deleting(existing));
		if (generated)
			snprintf(e->message + strlen(e->message),
				 sizeof e->message - strlen(e->message),
				 ", the server was not able to generate a unique name for the "
				 "object");
		rc = GWB_EEXISTS;
		goto out;
	}
	if (dry_run) {
		*out = obj;
		return 0;
	}
	store_create(ks->store, r->id, obj);
	if (out)
		*out = json_incref(store_get(ks->store, r->id, nsbuf, name));
	return 0;
out:
	json_decref(obj);
	return rc;
}

int api_create(struct ks *ks, const struct res_def *r, const char *ns, json_t *obj,
	       json_t **out, struct kerr *e)
{
	json_t *o = NULL;
	int rc = create_obj(ks, r, ns, obj, 0, &o, e);
	if (out)
		*out = o;
	else
		json_decref(o);
	return rc;
}

int api_update(struct ks *ks, const struct res_def *r, json_t *obj, int status_sub,
	       json_t **out, struct kerr *e)
{
	if (out)
		*out = NULL;
	const char *ns = r->namespaced ? obj_ns(obj) : "";
	json_t *cur = store_get(ks->store, r->id, ns, obj_name(obj));
	if (!cur) {
		kerr_not_found(e, r, obj_name(obj));
		json_decref(obj);
		return GWB_ENOTFOUND;
	}
	const char *rv = obj_str(obj, "metadata.resourceVersion");
	const char *currv = obj_str(cur, "metadata.resourceVersion");
	if (rv && rv[0] && strcmp(rv, currv)) {
		kerr_conflict(e, r, obj_name(obj));
		json_decref(obj);
		return GWB_ECONFLICT;
	}
	json_t *nw;
	if (status_sub) {
		nw = json_deep_copy(cur);
		json_t *st = json_object_get(obj, "status");
		json_object_set(nw, "status", st ? st : json_object());
		json_decref(obj);
	} else {
		nw = obj;
		json_object_set_new(nw, "kind", json_string(r->kind));
		json_object_set_new(nw, "apiVersion", json_string(r->api_version));
		if (r->has_status) {
			json_t *st = json_object_get(cur, "status");
			if (st)
				json_object_set(nw, "status", st);
			else
				json_object_del(nw, "status");
		}
		json_t *meta = obj_child(nw, "metadata");
		json_t *cm = json_object_get(cur, "metadata");
		const char *keep[] = { "uid", "creationTimestamp", "namespace", "name",
				       "deletionTimestamp", "deletionGracePeriodSeconds",
				       "generation", "resourceVersion" };
		for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
			json_t *v = json_object_get(cm, keep[i]);
			if (v)
				json_object_set(meta, keep[i], v);
			else
				json_object_del(meta, keep[i]);
		}
		if (obj_deleting(cur)) {
			size_t i;
			json_t *f;
			json_array_foreach(obj_path(nw, "metadata.finalizers"), i, f)
			{
				int had = 0;
				size_t j;
				json_t *g;
				json_array_foreach(obj_path(cur, "metadata.finalizers"), j, g)
					had |= json_equal(f, g);
				if (!had) {
					kerr_invalid(e, r, obj_name(nw), "metadata.finalizers",
						     "FieldValueForbidden",
						     "Forbidden: no new finalizers can be added if the "
						     "object is being deleted");
					json_decref(nw);
					return GWB_EINVAL;
				}
			}
		}
		if (r->spec_generation &&
		    !json_equal(json_object_get(cur, "spec"), json_object_get(nw, "spec")))
			json_object_set_new(meta, "generation",
					    json_integer(obj_int(cur, "metadata.generation", 1) + 1));
	}
	if (admit_update(ks, r, cur, nw, status_sub, e) < 0) {
		json_decref(nw);
		return GWB_EINVAL;
	}
	if (should_remove(nw)) {
		char n[256];
		snprintf(n, sizeof n, "%s", obj_name(nw));
		json_t *fin = NULL;
		store_remove(ks->store, r->id, ns, n, nw, &fin);
		if (out)
			*out = fin;
		else
			json_decref(fin);
		return 0;
	}
	json_t *stored = NULL;
	store_update(ks->store, r->id, nw, &stored);
	if (out)
		*out = json_incref(stored);
	return 0;
}

static json_t *status_success(const struct res_def *r, const json_t *obj)
{
	json_t *d = json_object();
	json_object_set_new(d, "name", json_string(obj_name(obj)));
	if (r->group[0])
		json_object_set_new(d, "group", json_string(r->group));
	json_object_set_new(d, "kind", json_string(r->plural));
	json_object_set_new(d, "uid", json_string(obj_uid(obj)));
	return json_pack("{s:s, s:s, s:{}, s:s, s:o}", "kind", "Status", "apiVersion", "v1",
			 "metadata", "status", "Success", "details", d);
}

static void mark_deleting(json_t *obj, long grace)
{
	char ts[32];
	clock_fmt_rfc3339(clock_now_ms() + grace * 1000, ts, sizeof ts);
	obj_set_str(obj, "metadata.deletionTimestamp", ts);
	obj_set(obj, "metadata.deletionGracePeriodSeconds", json_integer(grace));
}

static void add_finalizer(json_t *obj, const char *f)
{
	json_t *meta = obj_child(obj, "metadata");
	json_t *arr = json_object_get(meta, "finalizers");
	if (!json_is_array(arr)) {
		arr = json_array();
		json_object_set_new(meta, "finalizers", arr);
	}
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), f))
		return;
	json_array_append_new(arr, json_string(f));
}

static int delete_pod(struct ks *ks, const struct res_def *r, json_t *cur,
		      const struct api_delete_opts *o, json_t **out, int *gone)
{
	long grace = o->grace >= 0 ? o->grace
				   : (long)obj_int(cur, "spec.terminationGracePeriodSeconds", 30);
	const char *node = obj_str(cur, "spec.nodeName");
	if (!node || !node[0] || obj_pod_terminal(cur))
		grace = 0;
	if (obj_deleting(cur)) {
		long now_grace = (long)obj_int(cur, "metadata.deletionGracePeriodSeconds", 0);
		if (grace >= now_grace) {
			*out = json_incref(cur);
			return 0;
		}
	}
	json_t *nw = json_deep_copy(cur);
	mark_deleting(nw, grace);
	if (o->dry_run) {
		*out = nw;
		return 0;
	}
	if (grace == 0 && !obj_has_finalizers(nw)) {
		*gone = 1;
		return store_remove(ks->store, r->id, obj_ns(cur), obj_name(cur), nw, out);
	}
	json_t *stored = NULL;
	store_update(ks->store, r->id, nw, &stored);
	*out = json_incref(stored);
	return 0;
}

static int delete_generic(struct ks *ks, const struct res_def *r, json_t *cur,
			  const struct api_delete_opts *o, json_t **out, int *gone,
			  struct kerr *e)
{
	const char *prop = o->propagation;
	if (!prop)
		prop = r->id == RES_JOBS ? "Orphan" : "Background";
	if (strcmp(prop, "Background") && strcmp(prop, "Foreground") && strcmp(prop, "Orphan")) {
		kerr_set(e, 422, "Invalid",
			 "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported "
			 "value: \"%s\": supported values: \"Foreground\", \"Background\", "
			 "\"Orphan\", \"nil\"",
			 prop);
		return GWB_EINVAL;
	}
	int needs_gc = r->id == RES_JOBS || r->id == RES_NAMESPACES;
	json_t *nw = json_deep_copy(cur);
	if (needs_gc && strcmp(prop, "Background") != 0)
		add_finalizer(nw, !strcmp(prop, "Foreground") ? "foregroundDeletion" : "orphan");
	if (r->id == RES_NAMESPACES)
		obj_set_str(nw, "status.phase", "Terminating");
	if (o->dry_run) {
		if (obj_has_finalizers(nw) || json_array_size(obj_path(nw, "spec.finalizers"))) {
			*out = nw;
		} else {
			json_decref(nw);
			*out = status_success(r, cur);
		}
		return 0;
	}
	if (obj_deleting(cur)) {
		json_decref(nw);
		*out = json_incref(cur);
		return 0;
	}
	if (!obj_has_finalizers(nw) && json_array_size(obj_path(nw, "spec.finalizers")) == 0) {
		*gone = 1;
		json_t *fin = NULL;
		mark_deleting(nw, 0);
		int rc = store_remove(ks->store, r->id, obj_ns(cur), obj_name(cur), nw, &fin);
		*out = status_success(r, fin);
		json_decref(fin);
		return rc;
	}
	mark_deleting(nw, 0);
	json_t *stored = NULL;
	store_update(ks->store, r->id, nw, &stored);
	*out = json_incref(stored);
	ks_kick(ks);
	return 0;
}

int api_delete(struct ks *ks, const struct res_def *r, const char *ns, const char *name,
	       const struct api_delete_opts *o, json_t **out, int *gone, struct kerr *e)
{
	*out = NULL;
	*gone = 0;
	json_t *cur = store_get(ks->store, r->id, r->namespaced ? ns : NULL, name);
	if (!cur) {
		kerr_not_found(e, r, name);
		return GWB_ENOTFOUND;
	}
	if ((o->uid && strcmp(o->uid, obj_uid(cur))) ||
	    (o->rv && strcmp(o->rv, obj_str(cur, "metadata.resourceVersion")))) {
		kerr_conflict(e, r, name);
		snprintf(e->message, sizeof e->message,
			 "Operation cannot be fulfilled on %s \"%s\": Precondition failed: %s in "
			 "precondition: %s, %s in object meta: %s",
			 res_qualified(r), name, o->uid ? "UID" : "ResourceVersion",
			 o->uid ? o->uid : o->rv,
			 o->uid ? "UID" : "ResourceVersion",
			 o->uid ? obj_uid(cur) : obj_str(cur, "metadata.resourceVersion"));
		return GWB_ECONFLICT;
	}
	if (r->id == RES_PODS)
		return delete_pod(ks, r, cur, o, out, gone);
	return delete_generic(ks, r, cur, o, out, gone, e);
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
	char last_key[600] = "";
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
	if (k)
		snprintf(last_key, sizeof last_key, "%s/%s", obj_ns(sel[k - 1]),
			 obj_name(sel[k - 1]));
	char rv[32];
	snprintf(rv, sizeof rv, "%" PRIu64, store_rv(ks->store));
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
		char tok[1300];
		hex_encode(last_key, tok, sizeof tok);
		json_t *meta = json_object_get(doc, "metadata");
		json_object_set_new(meta, "continue", json_string(tok));
		json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)remaining));
	}
	gwb_free(sel);
	gwb_free(objs);
	selector_free(ls);
	selector_free(fs);
	http_reply_json(h, 200, doc);
}

/* ---- pod logs ---- */

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
			  "container \"%s\" in pod \"%s\" is waiting to start: ContainerCreating",
			  cname, rt->name);
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
		logs_follow(ks->logs, h, path, size, from, len, rt->ns, rt->name, obj_uid(pod));
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
	if (create_obj(ks, rt->r, rt->has_ns ? rt->ns : NULL, obj, dry_run, &out, &e) < 0) {
		reply_kerr(h, &e);
		return;
	}
	if (dry_run) {
		http_reply_json(h, 201, out);
		return;
	}
	ks_kick(ks);
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
	struct ks *ks = h->ks;
	json_t *b = body_json(h);
	if (!b)
		return;
	const char *node = obj_str(b, "target.name");
	json_t *pod = store_get(ks->store, RES_PODS, rt->ns, rt->name);
	struct kerr e = { 0 };
	if (!pod) {
		json_decref(b);
		kerr_not_found(&e, rt->r, rt->name);
		reply_kerr(h, &e);
		return;
	}
	if (!node || !node[0]) {
		json_decref(b);
		kerr_invalid(&e, res_get(RES_PODS), rt->name, "target.name", "FieldValueRequired",
			     "Required value");
		reply_kerr(h, &e);
		return;
	}
	const char *bound = obj_str(pod, "spec.nodeName");
	if (bound && bound[0]) {
		kerr_conflict(&e, rt->r, rt->name);
		snprintf(e.message, sizeof e.message,
			 "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is already "
			 "assigned to node \"%s\"",
			 rt->name, rt->name, bound);
		json_decref(b);
		reply_kerr(h, &e);
		return;
	}
	json_t *nw = json_deep_copy(pod);
	obj_set_str(nw, "spec.nodeName", node);
	obj_set_condition(nw, "PodScheduled", "True", NULL, NULL, 0);
	const char *k;
	json_t *v;
	json_object_foreach(obj_path(b, "metadata.annotations"), k, v)
		json_object_set(obj_child(obj_child(nw, "metadata"), "annotations"), k, v);
	json_decref(b);
	api_commit(ks, RES_PODS, nw);
	ks_kick(ks);
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
	if (api_update(ks, rt->r, obj, !strcmp(rt->sub, "status"), &out, &e) < 0) {
		reply_kerr(h, &e);
		return;
	}
	ks_kick(ks);
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

static int delete_opts(struct hreq *h, struct api_delete_opts *o, json_t **body)
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
	struct api_delete_opts o = API_DELETE_OPTS_INIT;
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
	int rc = api_delete(ks, rt->r, rt->ns, rt->name, &o, &out, &gone, &e);
	json_decref(body);
	if (rc < 0) {
		reply_kerr(h, &e);
		return;
	}
	ks_kick(ks);
	http_reply_json(h, 200, out);
}

static void do_delete_collection(struct hreq *h, struct route *rt)
{
	struct ks *ks = h->ks;
	struct selector *ls, *fs;
	if (parse_selectors(h, rt->r, &ls, &fs) < 0)
		return;
	struct api_delete_opts o = API_DELETE_OPTS_INIT;
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
		if (api_delete(ks, rt->r, names[i][0], names[i][1], &o, &out, &gone, &e) == 0) {
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
	ks_kick(ks);
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
	struct api_delete_opts o = API_DELETE_OPTS_INIT;
	json_t *g = obj_path(b, "deleteOptions.gracePeriodSeconds");
	if (json_is_integer(g))
		o.grace = (long)json_integer_value(g);
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	int rc = api_delete(ks, rt->r, rt->ns, rt->name, &o, &out, &gone, &e);
	json_decref(b);
	json_decref(out);
	if (rc < 0) {
		reply_kerr(h, &e);
		return;
	}
	ks_kick(ks);
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
