/* The registry: create, update, delete and bind as commits over the store, with the rules
 * clients and controllers share, and the commit hooks run after each commit that wrote. */
#include "tools/kubesim/registry.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "tools/kubesim/admit.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/store.h"

struct hook {
	registry_hook_fn fn;
	void *arg;
};

struct registry {
	struct ks *ks;
	struct hook *hooks;
	size_t nhooks, cap;
};

struct registry *registry_new(struct ks *ks)
{
	struct registry *reg = gwb_calloc(1, sizeof *reg);
	reg->ks = ks;
	return reg;
}

void registry_free(struct registry *reg)
{
	if (!reg)
		return;
	gwb_free(reg->hooks);
	gwb_free(reg);
}

void registry_hook_add(struct registry *reg, registry_hook_fn fn, void *arg)
{
	if (reg->nhooks == reg->cap) {
		reg->cap = reg->cap ? reg->cap * 2 : 4;
		reg->hooks = gwb_realloc(reg->hooks, reg->cap * sizeof *reg->hooks);
	}
	reg->hooks[reg->nhooks++] = (struct hook){ fn, arg };
}

/* Runs the hooks when the store's resourceVersion moved past rv0 (something was written). */
static void committed(struct registry *reg, enum res_id res, uint64_t rv0)
{
	if (store_rv(reg->ks->store) == rv0)
		return;
	for (size_t i = 0; i < reg->nhooks; i++)
		reg->hooks[i].fn(res, reg->hooks[i].arg);
}

static int ns_exists(struct ks *ks, const char *ns, struct kerr *e)
{
	if (store_get(ks->store, RES_NAMESPACES, NULL, ns))
		return 1;
	kerr_not_found(e, res_get(RES_NAMESPACES), ns);
	return 0;
}

/* A deleted object goes once no finalizer holds it: metadata.finalizers, and for namespaces
 * spec.finalizers (the namespace controller's "kubernetes"). */
static int should_remove(const json_t *obj)
{
	return obj_deleting(obj) && !obj_has_finalizers(obj) &&
	       json_array_size(obj_path(obj, "spec.finalizers")) == 0 &&
	       obj_int(obj, "metadata.deletionGracePeriodSeconds", 0) == 0;
}

static int commit_obj(struct ks *ks, enum res_id res, json_t *obj)
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

/* A PUT's body nw over the stored cur: kind, apiVersion, status (of resources with the
 * subresource) and the server-owned metadata come from cur, no finalizer may be added while
 * it is being deleted, and a changed spec bumps metadata.generation. Returns 0, or GWB_EINVAL
 * with e. */
static int put_merge(const struct res_def *r, json_t *cur, json_t *nw, struct kerr *e)
{
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
				return GWB_EINVAL;
			}
		}
	}
	if (r->spec_generation &&
	    !json_equal(json_object_get(cur, "spec"), json_object_get(nw, "spec")))
		json_object_set_new(meta, "generation",
				    json_integer(obj_int(cur, "metadata.generation", 1) + 1));
	return 0;
}

static int update_obj(struct ks *ks, const struct res_def *r, json_t *obj, int status_sub,
		      json_t **out, struct kerr *e)
{
	if (out)
		*out = NULL;
	char ns[256];
	snprintf(ns, sizeof ns, "%s", r->namespaced ? obj_ns(obj) : "");
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
		json_object_set_new(nw, "status", st ? json_incref(st) : json_object());
		json_decref(obj);
	} else {
		nw = obj;
		if (put_merge(r, cur, nw, e) < 0) {
			json_decref(nw);
			return GWB_EINVAL;
		}
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
		      const struct registry_delete_opts *o, json_t **out, int *gone)
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
			  const struct registry_delete_opts *o, json_t **out, int *gone,
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
	return 0;
}

static int delete_obj(struct ks *ks, const struct res_def *r, const char *ns, const char *name,
		      const struct registry_delete_opts *o, json_t **out, int *gone,
		      struct kerr *e)
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

int registry_create(struct registry *reg, const struct res_def *r, const char *ns, json_t *obj,
		    int dry_run, json_t **out, struct kerr *e)
{
	uint64_t rv0 = store_rv(reg->ks->store);
	json_t *o = NULL;
	int rc = create_obj(reg->ks, r, ns, obj, dry_run, &o, e);
	if (out)
		*out = o;
	else
		json_decref(o);
	committed(reg, r->id, rv0);
	return rc;
}

int registry_update(struct registry *reg, const struct res_def *r, json_t *obj, int status_sub,
		    json_t **out, struct kerr *e)
{
	uint64_t rv0 = store_rv(reg->ks->store);
	int rc = update_obj(reg->ks, r, obj, status_sub, out, e);
	committed(reg, r->id, rv0);
	return rc;
}

int registry_delete(struct registry *reg, const struct res_def *r, const char *ns,
		    const char *name, const struct registry_delete_opts *o, json_t **out,
		    int *gone, struct kerr *e)
{
	uint64_t rv0 = store_rv(reg->ks->store);
	int rc = delete_obj(reg->ks, r, ns, name, o, out, gone, e);
	committed(reg, r->id, rv0);
	return rc;
}

int registry_bind(struct registry *reg, const char *ns, const char *name, const json_t *binding,
		  struct kerr *e)
{
	struct ks *ks = reg->ks;
	const struct res_def *r = res_get(RES_PODS);
	const char *node = obj_str(binding, "target.name");
	json_t *pod = store_get(ks->store, RES_PODS, ns, name);
	if (!pod) {
		kerr_not_found(e, r, name);
		return GWB_ENOTFOUND;
	}
	if (!node || !node[0]) {
		kerr_invalid(e, r, name, "target.name", "FieldValueRequired", "Required value");
		return GWB_EINVAL;
	}
	const char *bound = obj_str(pod, "spec.nodeName");
	if (bound && bound[0]) {
		kerr_conflict(e, r, name);
		snprintf(e->message, sizeof e->message,
			 "Operation cannot be fulfilled on pods/binding \"%s\": pod %s is already "
			 "assigned to node \"%s\"",
			 name, name, bound);
		return GWB_ECONFLICT;
	}
	json_t *nw = json_deep_copy(pod);
	obj_set_str(nw, "spec.nodeName", node);
	obj_set_condition(nw, "PodScheduled", "True", NULL, NULL, 0);
	const char *k;
	json_t *v;
	json_object_foreach(obj_path(binding, "metadata.annotations"), k, v)
		json_object_set(obj_child(obj_child(nw, "metadata"), "annotations"), k, v);
	registry_commit(reg, RES_PODS, nw);
	return 0;
}

int registry_commit(struct registry *reg, enum res_id res, json_t *obj)
{
	uint64_t rv0 = store_rv(reg->ks->store);
	int rc = commit_obj(reg->ks, res, obj);
	committed(reg, res, rv0);
	return rc;
}

int registry_remove(struct registry *reg, enum res_id res, const char *ns, const char *name)
{
	uint64_t rv0 = store_rv(reg->ks->store);
	int rc = store_remove(reg->ks->store, res, ns, name, NULL, NULL);
	committed(reg, res, rv0);
	return rc;
}
