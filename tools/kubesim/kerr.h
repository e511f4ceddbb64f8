/* Kubernetes `Status` errors (kube-api.md §1.9): one struct that API handlers, admission and
 * controllers fill, and one function that turns it into the wire body. */
#ifndef KUBESIM_KERR_H
#define KUBESIM_KERR_H

#include <jansson.h>

#include "tools/kubesim/res.h"

struct kerr {
	int code;         /* HTTP status; 0 = no error */
	char reason[40];  /* Status reason (NotFound, AlreadyExists, Invalid, ...) */
	char message[1024];
	json_t *details;  /* owned; NULL or the Status details object */
};

/* Sets a plain error with no details. */
void kerr_set(struct kerr *e, int code, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* 404 `<res> "<name>" not found` with details {name, group, kind: plural}. */
void kerr_not_found(struct kerr *e, const struct res_def *r, const char *name);
/* 409 `<res> "<name>" already exists`; deleting adds the "object is being deleted: " prefix. */
void kerr_exists(struct kerr *e, const struct res_def *r, const char *name, int deleting);
/* 409 Conflict: the object has been modified. */
void kerr_conflict(struct kerr *e, const struct res_def *r, const char *name);
/* 422 Invalid with one cause; more causes can be added with kerr_invalid_add. cause_reason is
 * FieldValueRequired, FieldValueInvalid, FieldValueNotSupported, FieldValueForbidden ... and
 * text the human part ("Required value", "Invalid value: ...: field is immutable"). */
void kerr_invalid(struct kerr *e, const struct res_def *r, const char *name, const char *field,
		  const char *cause_reason, const char *text);
/* Adds a cause to an Invalid error and rebuilds its message. */
void kerr_invalid_add(struct kerr *e, const struct res_def *r, const char *name,
		      const char *field, const char *cause_reason, const char *text);
/* A new Status document for e (caller owns it). */
json_t *kerr_status(const struct kerr *e);
/* Releases details and zeroes e. Accepts an unset e. */
void kerr_clear(struct kerr *e);

#endif
