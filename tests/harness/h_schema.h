/* The API's contract in the harness: every answer a gwb-server the harness started gives to
 * h_http is checked against the OpenAPI document built into the server (docs/openapi.yaml,
 * server/api/openapi_doc.h), so a field renamed, dropped or added fails the case that saw it.
 * The check implements the JSON Schema subset the document uses: type (one or a list, "null"
 * included), properties, required, additionalProperties, items, minItems, maxItems, enum,
 * const, minimum, maximum, minLength, maxLength, pattern (POSIX ERE), $ref, allOf, anyOf and
 * oneOf. */
#ifndef GWB_H_SCHEMA_H
#define GWB_H_SCHEMA_H

#include <jansson.h>
#include <stddef.h>

/* Answers from URLs under base (a server's http://HOST:PORT) are checked from now on. */
void h_schema_watch(const char *base);
/* 1 when url is under a watched base; *path then points at its path (and query). */
int h_schema_watched(const char *url, const char **path);

/* What an answer is checked against: the request's method and path (with or without its
 * query), the answer's status, Content-Type (NULL: none), whether it carries the server's
 * own X-Content-Type-Options (libevent's own answers do not), its raw header block, and its
 * body and the body parsed (NULL when it is not JSON). */
struct h_answer {
	const char *method, *path;
	long status;
	const char *content_type;
	int from_server;
	const char *headers;
	size_t body_len;
	const json_t *json;
};

/* 0 when the document allows the answer; else -1 with why (the operation, the status and the
 * JSON pointer of the first value that breaks its schema) in why[0..len). */
int h_schema_check(const struct h_answer *a, char *why, size_t len);

/* The same check for one value against the document's schema at pointer (for example
 * "/components/schemas/StreamTask"): 0, or -1 with why. */
int h_schema_check_value(const char *pointer, const json_t *v, char *why, size_t len);

/* One event of /v1/stream: its type must be one the document names (x-gwb-events) and data
 * (NULL: not JSON) must match that type's schema. 0, or -1 with why. */
int h_schema_check_event(const char *type, const json_t *data, char *why, size_t len);

/* The document (parsed once; never freed). */
const json_t *h_schema_doc(void);

#endif
