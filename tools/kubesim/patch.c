/* Patch engines. They work on a private deep copy of the document, so they edit in place. The
 * strategic merge patch knows merge keys by field name, which is what the
 * built-in kinds kubesim serves need (containers by name, env by name, volumeMounts by
 * mountPath, conditions by type, ownerReferences by uid; finalizers merged as a set). */
#include "tools/kubesim/patch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"

/* ---- RFC 7386 ---- */

static json_t *merge(json_t *target, const json_t *patch)
{
	if (!json_is_object(patch)) {
		json_decref(target);
		return json_deep_copy(patch);
	}
	if (!json_is_object(target)) {
		json_decref(target);
		target = json_object();
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)patch, k, v)
	{
		if (json_is_null(v)) {
			json_object_del(target, k);
			continue;
		}
		json_t *cur = json_incref(json_object_get(target, k));
		json_object_set_new(target, k, merge(cur, v));
	}
	return target;
}

/* ---- strategic merge patch ---- */

struct mkey {
	const char *field, *key;
};
static const struct mkey merge_keys[] = {
	{ "containers", "name" },      { "initContainers", "name" },
	{ "ephemeralContainers", "name" }, { "env", "name" },
	{ "volumes", "name" },         { "volumeMounts", "mountPath" },
	{ "volumeDevices", "devicePath" }, { "ports", "containerPort" },
	{ "imagePullSecrets", "name" }, { "conditions", "type" },
	{ "ownerReferences", "uid" },  { "hostAliases", "ip" },
	{ "topologySpreadConstraints", "topologyKey" }, { "resourceClaims", "name" },
	{ "readinessGates", "conditionType" },
};

static const char *merge_key_of(const char *field)
{
	for (size_t i = 0; i < sizeof merge_keys / sizeof merge_keys[0]; i++)
		if (!strcmp(merge_keys[i].field, field))
			return merge_keys[i].key;
	return NULL;
}

static int primitive_merge(const char *field)
{
	return !strcmp(field, "finalizers");
}

static json_t *smp(json_t *target, const json_t *patch, char *err, size_t errlen, int *bad);

static json_t *find_by_key(json_t *arr, const char *key, json_t *val, size_t *idx)
{
	size_t i;
	json_t *e;
	json_array_foreach(arr, i, e)
	{
		if (json_equal(json_object_get(e, key), val)) {
			*idx = i;
			return e;
		}
	}
	return NULL;
}

static json_t *smp_list(json_t *target, const json_t *patch, const char *field, char *err,
			size_t errlen, int *bad)
{
	const char *key = merge_key_of(field);
	if (!json_is_array(target)) {
		json_decref(target);
		target = json_array();
	}
	size_t i;
	json_t *p;
	/* A {"$patch":"replace"} element replaces the whole list with the other elements. */
	json_array_foreach((json_t *)patch, i, p)
	{
		const char *d = json_string_value(json_object_get(p, "$patch"));
		if (d && !strcmp(d, "replace")) {
			json_t *out = json_array();
			size_t j;
			json_t *q;
			json_array_foreach((json_t *)patch, j, q)
			{
				if (j != i)
					json_array_append(out, q);
			}
			json_decref(target);
			return out;
		}
	}
	if (primitive_merge(field)) {
		json_array_foreach((json_t *)patch, i, p)
		{
			int have = 0;
			size_t j;
			json_t *q;
			json_array_foreach(target, j, q) have |= json_equal(p, q);
			if (!have)
				json_array_append(target, p);
		}
		return target;
	}
	if (!key) {
		json_decref(target);
		return json_deep_copy(patch);
	}
	json_array_foreach((json_t *)patch, i, p)
	{
		json_t *kv = json_object_get(p, key);
		if (!json_is_object(p) || !kv) {
			snprintf(err, errlen, "map: %s does not contain declared merge key: %s", field,
				 key);
			*bad = 1;
			return target;
		}
		size_t idx = 0;
		json_t *cur = find_by_key(target, key, kv, &idx);
		const char *d = json_string_value(json_object_get(p, "$patch"));
		if (d && !strcmp(d, "delete")) {
			if (cur)
				json_array_remove(target, idx);
			continue;
		}
		if (cur) {
			json_t *m = smp(json_incref(cur), p, err, errlen, bad);
			json_array_set_new(target, idx, m);
		} else {
			json_t *m = smp(json_object(), p, err, errlen, bad);
			json_array_append_new(target, m);
		}
	}
	return target;
}

static json_t *smp(json_t *target, const json_t *patch, char *err, size_t errlen, int *bad)
{
	if (!json_is_object(patch)) {
		json_decref(target);
		return json_deep_copy(patch);
	}
	const char *d = json_string_value(json_object_get(patch, "$patch"));
	if (d && !strcmp(d, "replace")) {
		json_t *out = json_deep_copy(patch);
		json_object_del(out, "$patch");
		json_decref(target);
		return out;
	}
	if (d && !strcmp(d, "delete")) {
		json_decref(target);
		return json_object();
	}
	if (!json_is_object(target)) {
		json_decref(target);
		target = json_object();
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)patch, k, v)
	{
		if (!strcmp(k, "$patch") || !strncmp(k, "$setElementOrder/", 17) ||
		    !strcmp(k, "$retainKeys"))
			continue;
		if (!strncmp(k, "$deleteFromPrimitiveList/", 25)) {
			json_t *arr = json_object_get(target, k + 25);
			if (!json_is_array(arr))
				continue;
			json_t *copy = json_array();
			size_t i;
			json_t *e;
			json_array_foreach(arr, i, e)
			{
				int drop = 0;
				size_t j;
				json_t *x;
				json_array_foreach(v, j, x) drop |= json_equal(e, x);
				if (!drop)
					json_array_append(copy, e);
			}
			json_object_set_new(target, k + 25, copy);
			continue;
		}
		if (json_is_null(v)) {
			json_object_del(target, k);
			continue;
		}
		json_t *cur = json_incref(json_object_get(target, k));
		json_t *m;
		if (json_is_array(v)) {
			m = smp_list(cur, v, k, err, errlen, bad);
		} else {
			m = smp(cur, v, err, errlen, bad);
		}
		json_object_set_new(target, k, m);
		if (*bad)
			return target;
	}
	json_t *retain = json_object_get(patch, "$retainKeys");
	if (json_is_array(retain)) {
		const char *key;
		json_t *val;
		void *tmp;
		json_object_foreach_safe(target, tmp, key, val)
		{
			int keep = 0;
			size_t i;
			json_t *r;
			json_array_foreach(retain, i, r)
			{
				if (json_is_string(r) && !strcmp(json_string_value(r), key))
					keep = 1;
			}
			(void)val;
			if (!keep)
				json_object_del(target, key);
		}
	}
	return target;
}

/* ---- RFC 6902 ---- */

/* Splits a JSON pointer into its parent and last token. Returns the parent (borrowed) or NULL;
 * tok receives the unescaped last token. */
static json_t *pointer_parent(json_t *root, const char *ptr, char *tok, size_t toklen)
{
	if (ptr[0] != '/')
		return NULL;
	json_t *cur = root;
	const char *p = ptr + 1;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		size_t o = 0;
		for (size_t i = 0; i < n && o + 1 < toklen; i++) {
			if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
				tok[o++] = p[i + 1] == '0' ? '~' : '/';
				i++;
			} else {
				tok[o++] = p[i];
			}
		}
		tok[o] = '\0';
		if (!slash)
			return cur;
		if (json_is_object(cur)) {
			cur = json_object_get(cur, tok);
		} else if (json_is_array(cur)) {
			char *e;
			long idx = strtol(tok, &e, 10);
			if (*e || idx < 0)
				return NULL;
			cur = json_array_get(cur, (size_t)idx);
		} else {
			return NULL;
		}
		if (!cur)
			return NULL;
		p = slash + 1;
	}
}

static json_t *pointer_get(json_t *root, const char *ptr)
{
	if (!ptr[0])
		return root;
	char tok[256];
	json_t *parent = pointer_parent(root, ptr, tok, sizeof tok);
	if (json_is_object(parent))
		return json_object_get(parent, tok);
	if (json_is_array(parent)) {
		char *e;
		long idx = strtol(tok, &e, 10);
		return *e || idx < 0 ? NULL : json_array_get(parent, (size_t)idx);
	}
	return NULL;
}

static int pointer_remove(json_t *root, const char *ptr, json_t **removed)
{
	char tok[256];
	json_t *parent = pointer_parent(root, ptr, tok, sizeof tok);
	if (json_is_object(parent)) {
		json_t *v = json_object_get(parent, tok);
		if (!v)
			return -1;
		if (removed)
			*removed = json_incref(v);
		return json_object_del(parent, tok);
	}
	if (json_is_array(parent)) {
		char *e;
		long idx = strtol(tok, &e, 10);
		if (*e || idx < 0 || (size_t)idx >= json_array_size(parent))
			return -1;
		if (removed)
			*removed = json_incref(json_array_get(parent, (size_t)idx));
		return json_array_remove(parent, (size_t)idx);
	}
	return -1;
}

/* add (replace_only=0) or replace (1): v is stolen. */
static int pointer_put(json_t *root, const char *ptr, json_t *v, int replace_only)
{
	char tok[256];
	json_t *parent = pointer_parent(root, ptr, tok, sizeof tok);
	if (json_is_object(parent)) {
		if (replace_only && !json_object_get(parent, tok)) {
			json_decref(v);
			return -1;
		}
		return json_object_set_new(parent, tok, v);
	}
	if (json_is_array(parent)) {
		size_t n = json_array_size(parent);
		if (!strcmp(tok, "-") && !replace_only)
			return json_array_append_new(parent, v);
		char *e;
		long idx = strtol(tok, &e, 10);
		if (*e || idx < 0 || (size_t)idx > n || (replace_only && (size_t)idx == n)) {
			json_decref(v);
			return -1;
		}
		if (replace_only)
			return json_array_set_new(parent, (size_t)idx, v);
		return json_array_insert_new(parent, (size_t)idx, v);
	}
	json_decref(v);
	return -1;
}

static int json_patch(json_t *doc, const json_t *ops, char *err, size_t errlen)
{
	if (!json_is_array(ops)) {
		snprintf(err, errlen, "json patch must be an array of operations");
		return -1;
	}
	size_t i;
	json_t *op;
	json_array_foreach((json_t *)ops, i, op)
	{
		const char *o = json_string_value(json_object_get(op, "op"));
		const char *path = json_string_value(json_object_get(op, "path"));
		const char *from = json_string_value(json_object_get(op, "from"));
		json_t *value = json_object_get(op, "value");
		if (!o || !path) {
			snprintf(err, errlen, "operation %zu lacks op or path", i);
			return -1;
		}
		int rc = -1;
		if (!strcmp(o, "add") && value) {
			rc = pointer_put(doc, path, json_deep_copy(value), 0);
		} else if (!strcmp(o, "replace") && value) {
			rc = pointer_put(doc, path, json_deep_copy(value), 1);
		} else if (!strcmp(o, "remove")) {
			rc = pointer_remove(doc, path, NULL);
		} else if (!strcmp(o, "test") && value) {
			json_t *cur = pointer_get(doc, path);
			if (!cur || !json_equal(cur, value)) {
				snprintf(err, errlen, "the server rejected our request due to an error "
						      "in our request: testing value %s failed", path);
				return -2;
			}
			rc = 0;
		} else if ((!strcmp(o, "move") || !strcmp(o, "copy")) && from) {
			json_t *v = NULL;
			if (!strcmp(o, "move")) {
				rc = pointer_remove(doc, from, &v);
			} else {
				json_t *src = pointer_get(doc, from);
				v = src ? json_deep_copy(src) : NULL;
				rc = v ? 0 : -1;
			}
			if (rc == 0)
				rc = pointer_put(doc, path, v, 0);
		}
		if (rc != 0) {
			snprintf(err, errlen, "jsonpatch %s operation does not apply: doc is missing "
					      "path: \"%s\"", o, path);
			return -1;
		}
	}
	return 0;
}

int patch_apply(enum patch_type type, const json_t *doc, const json_t *patch, json_t **out,
		char *err, size_t errlen)
{
	*out = NULL;
	json_t *copy = json_deep_copy(doc);
	if (type == PATCH_MERGE) {
		*out = merge(copy, patch);
		return 0;
	}
	if (type == PATCH_STRATEGIC) {
		if (!json_is_object(patch)) {
			json_decref(copy);
			snprintf(err, errlen, "strategic merge patch must be a JSON object");
			return GWB_EINVAL;
		}
		int bad = 0;
		json_t *r = smp(copy, patch, err, errlen, &bad);
		if (bad) {
			json_decref(r);
			return GWB_EINVAL;
		}
		*out = r;
		return 0;
	}
	if (json_patch(copy, patch, err, errlen) != 0) {
		json_decref(copy);
		return GWB_EINVAL;
	}
	*out = copy;
	return 0;
}
