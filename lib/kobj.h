/* Kubernetes object accessors over jansson: metadata (name, namespace, uid, resourceVersion,
 * creationTimestamp, deletionTimestamp, labels, annotations, owner references), status
 * conditions and phase, and a typed field read that answers NULL instead of failing. Every
 * function accepts NULL and objects of the wrong shape; returned pointers are borrowed from
 * the object and live as long as it does. */
#ifndef GWB_KOBJ_H
#define GWB_KOBJ_H

#include <jansson.h>

/* o[key] when o is an object, else NULL. */
json_t *kobj_get(const json_t *o, const char *key);
/* o[a][b] (b may be NULL: o[a]). */
json_t *kobj_path(const json_t *o, const char *a, const char *b);
/* The string at o[key], or NULL when absent or not a string. */
const char *kobj_str(const json_t *o, const char *key);
/* The string at o[a][b] (b may be NULL), or NULL. */
const char *kobj_pstr(const json_t *o, const char *a, const char *b);

/* metadata.name, .namespace, .uid, .resourceVersion, .creationTimestamp, or NULL. */
const char *kobj_name(const json_t *o);
const char *kobj_namespace(const json_t *o);
const char *kobj_uid(const json_t *o);
const char *kobj_rv(const json_t *o);
const char *kobj_created(const json_t *o);
/* 1 when metadata.deletionTimestamp is set: the object is terminating. */
int kobj_deleting(const json_t *o);
/* metadata.labels[key] / metadata.annotations[key], or NULL. */
const char *kobj_label(const json_t *o, const char *key);
const char *kobj_annotation(const json_t *o, const char *key);
/* The first metadata.ownerReferences entry of kind (e.g. "Job"), or NULL. */
const json_t *kobj_owner(const json_t *o, const char *kind);

/* status.phase, or NULL. */
const char *kobj_phase(const json_t *o);
/* 1 when status.phase is Succeeded or Failed (a Pod that will never run again). */
int kobj_pod_terminal(const json_t *pod);
/* The status.conditions entry of type, or NULL. */
const json_t *kobj_condition(const json_t *o, const char *type);
/* 1 when a condition of type has status "True". */
int kobj_condition_true(const json_t *o, const char *type);
/* 1 when spec.suspend is true (a Job). */
int kobj_suspended(const json_t *job);

#endif
