/* Status bodies, with the message formats of apimachinery's errors package. */
#include "tools/kubesim/kerr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void kerr_set(struct kerr *e, int code, const char *reason, const char *fmt, ...)
{
	json_decref(e->details);
	e->details = NULL;
	e->code = code;
	snprintf(e->reason, sizeof e->reason, "%s", reason);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof e->message, fmt, ap);
	va_end(ap);
}

static json_t *details(const struct res_def *r, const char *name, const char *kind)
{
	json_t *d = json_object();
	if (name && name[0])
		json_object_set_new(d, "name", json_string(name));
	if (r && r->group[0])
		json_object_set_new(d, "group", json_string(r->group));
	if (kind)
		json_object_set_new(d, "kind", json_string(kind));
	return d;
}

void kerr_not_found(struct kerr *e, const struct res_def *r, const char *name)
{
	kerr_set(e, 404, "NotFound", "%s \"%s\" not found", res_qualified(r), name);
	e->details = details(r, name, r->plural);
}

void kerr_exists(struct kerr *e, const struct res_def *r, const char *name, int deleting)
{
	kerr_set(e, 409, "AlreadyExists", "%s%s \"%s\" already exists",
		 deleting ? "object is being deleted: " : "", res_qualified(r), name);
	e->details = details(r, name, r->plural);
}

void kerr_conflict(struct kerr *e, const struct res_def *r, const char *name)
{
	kerr_set(e, 409, "Conflict",
		 "Operation cannot be fulfilled on %s \"%s\": the object has been modified; please "
		 "apply your changes to the latest version and try again",
		 res_qualified(r), name);
	e->details = details(r, name, r->plural);
}

static void invalid_message(struct kerr *e, const struct res_def *r, const char *name)
{
	json_t *causes = json_object_get(e->details, "causes");
	char kind[96];
	if (r->group[0])
		snprintf(kind, sizeof kind, "%s.%s", r->kind, r->group);
	else
		snprintf(kind, sizeof kind, "%s", r->kind);
	size_t n = json_array_size(causes);
	int off = snprintf(e->message, sizeof e->message, "%s \"%s\" is invalid: %s", kind, name,
			   n > 1 ? "[" : "");
	size_t i;
	json_t *c;
	json_array_foreach(causes, i, c)
	{
		if (off < 0 || (size_t)off >= sizeof e->message)
			break;
		off += snprintf(e->message + off, sizeof e->message - (size_t)off, "%s%s: %s",
				i ? ", " : "", json_string_value(json_object_get(c, "field")),
				json_string_value(json_object_get(c, "message")));
	}
	if (n > 1 && off > 0 && (size_t)off < sizeof e->message)
		snprintf(e->message + off, sizeof e->message - (size_t)off, "]");
}

void kerr_invalid_add(struct kerr *e, const struct res_def *r, const char *name,
		      const char *field, const char *cause_reason, const char *text)
{
	json_t *c = json_object();
	json_object_set_new(c, "reason", json_string(cause_reason));
	json_object_set_new(c, "message", json_string(text));
	json_object_set_new(c, "field", json_string(field));
	json_array_append_new(json_object_get(e->details, "causes"), c);
	invalid_message(e, r, name);
}

void kerr_invalid(struct kerr *e, const struct res_def *r, const char *name, const char *field,
		  const char *cause_reason, const char *text)
{
	kerr_set(e, 422, "Invalid", "invalid");
	e->details = details(r, name, r->kind);
	json_object_set_new(e->details, "causes", json_array());
	kerr_invalid_add(e, r, name, field, cause_reason, text);
}

json_t *kerr_status(const struct kerr *e)
{
	json_t *s = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
			      "apiVersion", "v1", "metadata", "status", "Failure", "message",
			      e->message, "reason", e->reason, "code", e->code);
	if (e->details)
		json_object_set(s, "details", e->details);
	return s;
}

void kerr_clear(struct kerr *e)
{
	json_decref(e->details);
	memset(e, 0, sizeof *e);
}
