/* Helpers over Kubernetes objects held as jansson documents: dotted-path access, metadata,
 * labels, conditions, uids, generated names and timestamps. The read accessors of metadata,
 * labels, phases and conditions are lib/kobj's, which the server uses too; what only an API
 * server does (writes, finalizers, names, times) is here. Owns nothing: every function works
 * on the caller's documents and says which references it returns. */
#ifndef KUBESIM_OBJ_H
#define KUBESIM_OBJ_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Borrowed child at a dotted path ("metadata.name"), or NULL. */
json_t *obj_path(const json_t *o, const char *path);
/* String at a dotted path, or NULL when absent or not a string. Borrowed. */
const char *obj_str(const json_t *o, const char *path);
/* Integer at a dotted path, or def. */
int64_t obj_int(const json_t *o, const char *path, int64_t def);
/* Returns 1 when the boolean at path is true. */
int obj_true(const json_t *o, const char *path);
/* Child object o[key], created empty when missing or not an object. Borrowed. */
json_t *obj_child(json_t *o, const char *key);
/* Sets the string at a dotted path, creating intermediate objects. */
void obj_set_str(json_t *o, const char *path, const char *v);
/* Sets any value (stolen) at a dotted path, creating intermediate objects. */
void obj_set(json_t *o, const char *path, json_t *v);

const char *obj_name(const json_t *o);
const char *obj_ns(const json_t *o); /* "" for cluster-scoped objects */
const char *obj_uid(const json_t *o);
const char *obj_label(const json_t *o, const char *key);
const char *obj_annotation(const json_t *o, const char *key);
/* Returns 1 when metadata.deletionTimestamp is set. */
int obj_deleting(const json_t *o);
/* Returns 1 when metadata.finalizers holds at least one entry. */
int obj_has_finalizers(const json_t *o);
/* Removes one finalizer; returns 1 when it was present. */
int obj_remove_finalizer(json_t *o, const char *name);
/* Returns the uid of the controller ownerReference with that kind, or NULL. Borrowed. */
const char *obj_controller_uid(const json_t *o, const char *kind);

/* A pod in phase Succeeded or Failed. */
int obj_pod_terminal(const json_t *pod);

/* status.conditions entry of that type, or NULL. Borrowed. */
json_t *obj_condition(const json_t *o, const char *type);
/* Returns 1 when condition type has status "True". */
int obj_condition_true(const json_t *o, const char *type);
/* Sets a condition (type, status, reason, message). lastTransitionTime changes only when the
 * status does; with probe, lastProbeTime is written too (null otherwise, for pods). Returns 1
 * when anything changed. */
int obj_set_condition(json_t *o, const char *type, const char *status, const char *reason,
		      const char *message, int probe);

/* Writes the current time as RFC 3339 seconds ("2026-11-30T04:42:43Z"). Returns buf. */
char *obj_now(char *buf, size_t len);
/* Writes the current time as MicroTime ("2026-11-30T04:42:43.123456Z"). Returns buf. */
char *obj_now_micro(char *buf, size_t len);
/* Parses an RFC 3339 timestamp at path into ms; returns 0, or -1 when absent or malformed. */
int obj_time_ms(const json_t *o, const char *path, int64_t *ms);
/* A random version-4 UUID in lower-case hex with dashes (37 bytes with the NUL). */
void obj_uuid(char out[37]);
/* base + 5 random characters from Kubernetes' name alphabet, base cut to 58 bytes. */
void obj_gen_name(const char *base, char *out, size_t len);
/* Random bytes from the kernel (falls back to a clock-seeded generator). */
void obj_random(void *buf, size_t len);

/* Returns 1 when s is a DNS-1123 subdomain (<= 253, lower-case alphanumerics, '-', '.'). */
int obj_dns_subdomain(const char *s);
/* Returns 1 when s is a DNS-1123 label (<= 63, lower-case alphanumerics and '-'). */
int obj_dns_label(const char *s);

#endif
