/* Kubernetes object accessors: borrowed reads of well-known fields, NULL when absent. */
#include "lib/kobj.h"

#include <string.h>

json_t *kobj_get(const json_t *o, const char *key)
{
	return json_is_object(o) ? json_object_get(o, key) : NULL;
}

json_t *kobj_path(const json_t *o, const char *a, const char *b)
{
	json_t *x = kobj_get(o, a);
	return b ? kobj_get(x, b) : x;
}

const char *kobj_str(const json_t *o, const char *key)
{
	json_t *v = kobj_get(o, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

const char *kobj_pstr(const json_t *o, const char *a, const char *b)
{
	json_t *v = kobj_path(o, a, b);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

const char *kobj_name(const json_t *o)
{
	return kobj_pstr(o, "metadata", "name");
}

const char *kobj_namespace(const json_t *o)
{
	return kobj_pstr(o, "metadata", "namespace");
}

const char *kobj_uid(const json_t *o)
{
	return kobj_pstr(o, "metadata", "uid");
}

const char *kobj_rv(const json_t *o)
{
	return kobj_pstr(o, "metadata", "resourceVersion");
}

const char *kobj_created(const json_t *o)
{
	return kobj_pstr(o, "metadata", "creationTimestamp");
}

int kobj_deleting(const json_t *o)
{
	json_t *d = kobj_path(o, "metadata", "deletionTimestamp");
	return d != NULL && !json_is_null(d);
}

const char *kobj_label(const json_t *o, const char *key)
{
	return kobj_str(kobj_path(o, "metadata", "labels"), key);
}

const char *kobj_annotation(const json_t *o, const char *key)
{
	return kobj_str(kobj_path(o, "metadata", "annotations"), key);
}

const json_t *kobj_owner(const json_t *o, const char *kind)
{
	size_t i;
	json_t *ref;
	json_t *refs = kobj_path(o, "metadata", "ownerReferences");
	if (!json_is_array(refs))
		return NULL;
	json_array_foreach(refs, i, ref) {
		const char *k = kobj_str(ref, "kind");
		if (k && strcmp(k, kind) == 0)
			return ref;
	}
	return NULL;
}

const char *kobj_phase(const json_t *o)
{
	return kobj_pstr(o, "status", "phase");
}

int kobj_pod_terminal(const json_t *pod)
{
	const char *p = kobj_phase(pod);
	return p && (strcmp(p, "Succeeded") == 0 || strcmp(p, "Failed") == 0);
}

const json_t *kobj_condition(const json_t *o, const char *type)
{
	size_t i;
	json_t *c;
	json_t *conds = kobj_path(o, "status", "conditions");
	if (!json_is_array(conds))
		return NULL;
	json_array_foreach(conds, i, c) {
		const char *t = kobj_str(c, "type");
		if (t && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

int kobj_condition_true(const json_t *o, const char *type)
{
	const char *st = kobj_str(kobj_condition(o, type), "status");
	return st && strcmp(st, "True") == 0;
}

int kobj_suspended(const json_t *job)
{
	return json_is_true(kobj_path(job, "spec", "suspend"));
}
