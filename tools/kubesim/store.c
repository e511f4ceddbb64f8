/* Object store: per-resource jansson maps, the resourceVersion counter, the event ring, the
 * subscriber list and the secondary indexes (each a map from value to the set of object keys,
 * both jansson objects: a set is an object whose members are null). */
#include "tools/kubesim/store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "tools/kubesim/obj.h"

struct sub {
	int id;
	store_watch_fn fn;
	void *arg;
};

struct store {
	json_t *objs[RES_COUNT]; /* key "ns/name" or "name" -> object */
	json_t *idx[RES_COUNT][STORE_IDX_COUNT]; /* value -> {key: null, ...} */
	/* Every key of a resource in order, rebuilt at the first list after a create or remove
	 * (updates keep keys: jansson keeps a member's key when its value is replaced). The
	 * pointers are jansson's own keys. */
	struct {
		const char **keys;
		size_t n, cap;
		int valid;
	} sorted[RES_COUNT];
	uint64_t rv;
	uint64_t compacted; /* events with rv <= compacted are gone */
	struct store_event *ring;
	size_t cap, head, len; /* head: index of the oldest */
	struct sub *subs;
	size_t nsubs, subcap;
	int next_id;
	int fanning; /* inside a fan-out: unsubscribes only mark */
};

static void key_of(char *buf, size_t len, const char *ns, const char *name)
{
	if (ns && ns[0])
		snprintf(buf, len, "%s/%s", ns, name);
	else
		snprintf(buf, len, "%s", name);
}

struct store *store_new(size_t history_cap, uint64_t first_rv)
{
	struct store *s = gwb_calloc(1, sizeof *s);
	for (int i = 0; i < RES_COUNT; i++) {
		s->objs[i] = json_object();
		for (int x = 0; x < STORE_IDX_COUNT; x++)
			s->idx[i][x] = json_object();
	}
	s->cap = history_cap ? history_cap : 1;
	s->ring = gwb_calloc(s->cap, sizeof *s->ring);
	s->rv = first_rv;
	s->compacted = first_rv;
	s->next_id = 1;
	return s;
}

static void ev_release(struct store_event *e)
{
	json_decref(e->obj);
	json_decref(e->prev);
	memset(e, 0, sizeof *e);
}

void store_free(struct store *s)
{
	if (!s)
		return;
	for (int i = 0; i < RES_COUNT; i++) {
		json_decref(s->objs[i]);
		for (int x = 0; x < STORE_IDX_COUNT; x++)
			json_decref(s->idx[i][x]);
		gwb_free(s->sorted[i].keys);
	}
	for (size_t i = 0; i < s->len; i++)
		ev_release(&s->ring[(s->head + i) % s->cap]);
	gwb_free(s->ring);
	gwb_free(s->subs);
	gwb_free(s);
}

uint64_t store_rv(const struct store *s)
{
	return s->rv;
}

int store_can_resume(const struct store *s, uint64_t rv)
{
	return rv >= s->compacted;
}

uint64_t store_oldest_rv(const struct store *s)
{
	return s->compacted + 1;
}

json_t *store_get(const struct store *s, enum res_id res, const char *ns, const char *name)
{
	char key[512];
	key_of(key, sizeof key, ns, name);
	return json_object_get(s->objs[res], key);
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The objects of res under the keys of set (a jansson object; NULL: every object), in
 * namespace ns when not NULL, sorted by key. */
static size_t list_keys(const struct store *s, enum res_id res, json_t *set, const char *ns,
			json_t ***out)
{
	if (!set)
		set = s->objs[res];
	size_t n = json_object_size(set);
	*out = NULL;
	if (!n)
		return 0;
	const char **keys = gwb_malloc(n * sizeof *keys);
	size_t k = 0, nslen = ns ? strlen(ns) : 0;
	const char *key;
	json_t *v;
	json_object_foreach(set, key, v)
	{
		if (ns && (strncmp(key, ns, nslen) != 0 || key[nslen] != '/'))
			continue;
		keys[k++] = key;
	}
	qsort(keys, k, sizeof *keys, cmp_key);
	json_t **arr = NULL;
	if (k) {
		arr = gwb_malloc(k * sizeof *arr);
		size_t w = 0;
		for (size_t i = 0; i < k; i++) {
			json_t *o = json_object_get(s->objs[res], keys[i]);
			if (o)
				arr[w++] = o;
		}
		k = w;
	}
	gwb_free(keys);
	*out = arr;
	return k;
}

static void sorted_ensure(struct store *s, enum res_id res)
{
	if (s->sorted[res].valid)
		return;
	size_t n = json_object_size(s->objs[res]);
	if (n > s->sorted[res].cap) {
		s->sorted[res].cap = n * 2;
		s->sorted[res].keys =
			gwb_realloc(s->sorted[res].keys, s->sorted[res].cap * sizeof(char *));
	}
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach(s->objs[res], key, v)
		s->sorted[res].keys[k++] = key;
	if (k > 1) /* no qsort on a NULL list (nothing stored yet) */
		qsort(s->sorted[res].keys, k, sizeof(char *), cmp_key);
	s->sorted[res].n = k;
	s->sorted[res].valid = 1;
}

/* First index in the sorted keys of res whose key is not below `key` (ge = 1) or above it. */
static size_t sorted_bound(struct store *s, enum res_id res, const char *key, int ge)
{
	const char **keys = s->sorted[res].keys;
	size_t lo = 0, hi = s->sorted[res].n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(keys[mid], key);
		if (ge ? c < 0 : c <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t store_list_after(const struct store *cs, enum res_id res, const char *ns,
			const char *after, size_t max, json_t ***out, size_t *rest)
{
	struct store *s = (struct store *)cs; /* the order cache only */
	sorted_ensure(s, res);
	const char **keys = s->sorted[res].keys;
	size_t n = s->sorted[res].n, lo = 0, end = n;
	char prefix[300] = "";
	size_t plen = 0;
	if (ns && ns[0]) {
		plen = (size_t)snprintf(prefix, sizeof prefix, "%s/", ns);
		lo = sorted_bound(s, res, prefix, 1);
		/* The namespace ends where keys stop starting with "ns/" ('/' + 1 is '0'). */
		prefix[plen - 1] = '0';
		end = sorted_bound(s, res, prefix, 1);
		prefix[plen - 1] = '/';
	}
	if (after && after[0]) {
		/* Cluster-scoped keys have no namespace part: "/name" continues after "name". */
		const char *a = after[0] == '/' ? after + 1 : after;
		size_t from = sorted_bound(s, res, a, 0);
		if (from > lo)
			lo = from;
	}
	*out = NULL;
	if (rest)
		*rest = 0;
	if (lo >= end)
		return 0;
	size_t k = end - lo;
	if (max && k > max) {
		if (rest)
			*rest = k - max;
		k = max;
	}
	json_t **arr = gwb_malloc(k * sizeof *arr);
	for (size_t i = 0; i < k; i++)
		arr[i] = json_object_get(s->objs[res], keys[lo + i]);
	*out = arr;
	return k;
}

size_t store_list(const struct store *cs, enum res_id res, const char *ns, json_t ***out)
{
	/* The order cache is not part of the store's observable state. */
	struct store *s = (struct store *)cs;
	sorted_ensure(s, res);
	const char **keys = s->sorted[res].keys;
	size_t n = s->sorted[res].n, lo = 0, hi = n;
	char prefix[300] = "";
	size_t plen = 0;
	if (ns && ns[0]) {
		/* A namespace's keys "ns/..." are contiguous: bisect to the first. */
		plen = (size_t)snprintf(prefix, sizeof prefix, "%s/", ns);
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (strcmp(keys[mid], prefix) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	*out = NULL;
	if (ns && !ns[0])
		return 0; /* no key has an empty namespace part */
	if (lo >= n)
		return 0;
	json_t **arr = gwb_malloc((n - lo) * sizeof *arr);
	size_t k = 0;
	for (size_t i = lo; i < n; i++) {
		if (plen && strncmp(keys[i], prefix, plen) != 0)
			break;
		arr[k++] = json_object_get(s->objs[res], keys[i]);
	}
	if (!k) {
		gwb_free(arr);
		arr = NULL;
	}
	*out = arr;
	return k;
}

size_t store_list_index(const struct store *s, enum res_id res, enum store_index idx,
			const char *value, const char *ns, json_t ***out)
{
	json_t *set = json_object_get(s->idx[res][idx], value ? value : "");
	*out = NULL;
	return set ? list_keys(s, res, set, ns, out) : 0;
}

size_t store_index_count(const struct store *s, enum res_id res, enum store_index idx,
			 const char *value)
{
	return json_object_size(json_object_get(s->idx[res][idx], value ? value : ""));
}

/* ---- index maintenance ---- */

static void idx_one(struct store *s, enum res_id res, enum store_index idx, const char *value,
		    const char *key, int add)
{
	json_t *map = s->idx[res][idx];
	json_t *set = json_object_get(map, value);
	if (add) {
		if (!set) {
			set = json_object();
			json_object_set_new(map, value, set);
		}
		json_object_set_new(set, key, json_null());
	} else if (set) {
		json_object_del(set, key);
		if (!json_object_size(set))
			json_object_del(map, value);
	}
}

enum idx_part { PART_NS = 1, PART_LABELS = 2, PART_OWNERS = 4, PART_OTHER = 8, PART_ALL = 15 };

/* Adds (add = 1) or removes the index entries of obj stored under key, for the parts given. */
static void idx_apply_parts(struct store *s, enum res_id res, const json_t *obj, const char *key,
			    int add, int parts)
{
	const char *ns = obj_ns(obj);
	if ((parts & PART_NS) && ns && ns[0])
		idx_one(s, res, STORE_IDX_NS, ns, key, add);
	const char *lk;
	json_t *lv;
	json_object_foreach(parts & PART_LABELS ? obj_path(obj, "metadata.labels") : NULL, lk, lv)
	{
		if (!json_is_string(lv))
			continue;
		size_t n = strlen(lk) + json_string_length(lv) + 2;
		char small[256], *buf = n <= sizeof small ? small : gwb_malloc(n);
		snprintf(buf, n, "%s=%s", lk, json_string_value(lv));
		idx_one(s, res, STORE_IDX_LABEL, buf, key, add);
		if (buf != small)
			gwb_free(buf);
	}
	size_t i;
	json_t *ref;
	if (parts & PART_OWNERS)
		json_array_foreach(obj_path(obj, "metadata.ownerReferences"), i, ref)
		{
			const char *uid = obj_str(ref, "uid");
			if (uid)
				idx_one(s, res, STORE_IDX_OWNER, uid, key, add);
		}
	if (!(parts & PART_OTHER))
		return;
	if (res == RES_PODS) {
		const char *node = obj_str(obj, "spec.nodeName");
		idx_one(s, res, STORE_IDX_NODE, node ? node : "", key, add);
		if (!obj_pod_terminal(obj))
			idx_one(s, res, STORE_IDX_NODE_LIVE, node ? node : "", key, add);
	}
	if (res == RES_EVENTS) {
		const char *uid = obj_str(obj, "involvedObject.uid");
		if (uid)
			idx_one(s, res, STORE_IDX_INVOLVED, uid, key, add);
	}
}

static void idx_apply(struct store *s, enum res_id res, const json_t *obj, const char *key,
		      int add)
{
	idx_apply_parts(s, res, obj, key, add, PART_ALL);
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Moves the index entries of an update from prev to obj, only for the parts that changed
 * (most updates are status writes that change none). */
static void idx_update(struct store *s, enum res_id res, const json_t *prev, const json_t *obj,
		       const char *key)
{
	int parts = 0;
	if (!json_equal(obj_path(prev, "metadata.labels"), obj_path(obj, "metadata.labels")))
		parts |= PART_LABELS;
	if (!json_equal(obj_path(prev, "metadata.ownerReferences"),
			obj_path(obj, "metadata.ownerReferences")))
		parts |= PART_OWNERS;
	if ((res == RES_PODS && (!same_str(obj_str(prev, "spec.nodeName"),
					   obj_str(obj, "spec.nodeName")) ||
				 obj_pod_terminal(prev) != obj_pod_terminal(obj))) ||
	    (res == RES_EVENTS && !same_str(obj_str(prev, "involvedObject.uid"),
					    obj_str(obj, "involvedObject.uid"))))
		parts |= PART_OTHER;
	if (!parts)
		return;
	idx_apply_parts(s, res, prev, key, 0, parts);
	idx_apply_parts(s, res, obj, key, 1, parts);
}

size_t store_count(const struct store *s, enum res_id res)
{
	return json_object_size(s->objs[res]);
}

static void set_rv(json_t *obj, uint64_t rv)
{
	char buf[32];
	snprintf(buf, sizeof buf, "%" PRIu64, rv);
	obj_set_str(obj, "metadata.resourceVersion", buf);
}

static void fan_out(struct store *s, enum store_ev_type type, enum res_id res, json_t *obj,
		    json_t *prev)
{
	/* Retain in the ring (dropping the oldest when full). */
	if (s->len == s->cap) {
		struct store_event *old = &s->ring[s->head];
		s->compacted = old->rv;
		ev_release(old);
		s->head = (s->head + 1) % s->cap;
		s->len--;
	}
	struct store_event *e = &s->ring[(s->head + s->len) % s->cap];
	e->rv = s->rv;
	e->type = type;
	e->res = res;
	e->obj = json_incref(obj);
	e->prev = prev ? json_incref(prev) : NULL;
	s->len++;

	struct store_event ev = *e;
	s->fanning++;
	for (size_t i = 0; i < s->nsubs; i++)
		if (s->subs[i].fn)
			s->subs[i].fn(&ev, s->subs[i].arg);
	s->fanning--;
	if (!s->fanning) {
		size_t w = 0;
		for (size_t i = 0; i < s->nsubs; i++)
			if (s->subs[i].fn)
				s->subs[w++] = s->subs[i];
		s->nsubs = w;
	}
}

int store_create(struct store *s, enum res_id res, json_t *obj)
{
	char key[512];
	key_of(key, sizeof key, obj_ns(obj), obj_name(obj));
	if (json_object_get(s->objs[res], key)) {
		json_decref(obj);
		return GWB_EEXISTS;
	}
	set_rv(obj, ++s->rv);
	json_object_set_new(s->objs[res], key, obj);
	s->sorted[res].valid = 0;
	idx_apply(s, res, obj, key, 1);
	fan_out(s, STORE_ADDED, res, obj, NULL);
	return 0;
}

/* Equal apart from metadata.resourceVersion. */
static int same_content(json_t *a, json_t *b)
{
	json_t *ma = json_object_get(a, "metadata"), *mb = json_object_get(b, "metadata");
	json_t *ra = json_incref(json_object_get(ma, "resourceVersion"));
	json_t *rb = json_incref(json_object_get(mb, "resourceVersion"));
	json_object_del(ma, "resourceVersion");
	json_object_del(mb, "resourceVersion");
	int eq = json_equal(a, b);
	if (ra)
		json_object_set_new(ma, "resourceVersion", ra);
	if (rb)
		json_object_set_new(mb, "resourceVersion", rb);
	return eq;
}

int store_update(struct store *s, enum res_id res, json_t *obj, json_t **out)
{
	char key[512];
	key_of(key, sizeof key, obj_ns(obj), obj_name(obj));
	json_t *prev = json_object_get(s->objs[res], key);
	if (!prev) {
		json_decref(obj);
		return GWB_ENOTFOUND;
	}
	if (same_content(prev, obj)) {
		json_decref(obj);
		if (out)
			*out = prev;
		return 0;
	}
	json_incref(prev);
	set_rv(obj, ++s->rv);
	json_object_set_new(s->objs[res], key, obj);
	idx_update(s, res, prev, obj, key);
	fan_out(s, STORE_MODIFIED, res, obj, prev);
	json_decref(prev);
	if (out)
		*out = obj;
	return 0;
}

int store_remove(struct store *s, enum res_id res, const char *ns, const char *name,
		 json_t *final, json_t **out)
{
	char key[512];
	key_of(key, sizeof key, ns, name);
	json_t *prev = json_object_get(s->objs[res], key);
	if (!prev) {
		json_decref(final);
		return GWB_ENOTFOUND;
	}
	json_incref(prev);
	if (!final)
		final = json_deep_copy(prev);
	set_rv(final, ++s->rv);
	idx_apply(s, res, prev, key, 0);
	json_object_del(s->objs[res], key);
	s->sorted[res].valid = 0;
	fan_out(s, STORE_DELETED, res, final, prev);
	json_decref(prev);
	if (out)
		*out = final;
	else
		json_decref(final);
	return 0;
}

int store_subscribe(struct store *s, store_watch_fn fn, void *arg)
{
	if (s->nsubs == s->subcap) {
		s->subcap = s->subcap ? s->subcap * 2 : 16;
		s->subs = gwb_realloc(s->subs, s->subcap * sizeof *s->subs);
	}
	int id = s->next_id++;
	s->subs[s->nsubs++] = (struct sub){ id, fn, arg };
	return id;
}

void store_unsubscribe(struct store *s, int id)
{
	for (size_t i = 0; i < s->nsubs; i++) {
		if (s->subs[i].id != id)
			continue;
		if (s->fanning) {
			s->subs[i].fn = NULL;
		} else {
			memmove(&s->subs[i], &s->subs[i + 1], (s->nsubs - i - 1) * sizeof *s->subs);
			s->nsubs--;
		}
		return;
	}
}

int store_replay(const struct store *s, uint64_t after, store_watch_fn fn, void *arg)
{
	if (!store_can_resume(s, after))
		return GWB_ESTATE;
	for (size_t i = 0; i < s->len; i++) {
		const struct store_event *e = &s->ring[(s->head + i) % s->cap];
		if (e->rv > after)
			fn(e, arg);
	}
	return 0;
}
