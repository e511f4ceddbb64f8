/* Answers checked against the API's OpenAPI document (see h_schema.h). */
#include "tests/harness/h_schema.h"

#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/strmap.h"
#include "server/api/openapi_doc.h"
#include "tests/harness/t.h"

static json_t *doc;
static pthread_once_t doc_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct strmap *regexes; /* pattern -> regex_t, or a marker when it cannot compile */
static char bases[16][256];
static int nbases;
static int bad_regex_marker;

static void doc_load(void)
{
	json_error_t e;
	doc = json_loadb(openapi_json, openapi_json_len, 0, &e);
	if (!doc)
		t_fail_soft("openapi: the built-in document is not JSON: %s (line %d)", e.text,
			    e.line);
}

const json_t *h_schema_doc(void)
{
	pthread_once(&doc_once, doc_load);
	return doc;
}

void h_schema_watch(const char *base)
{
	pthread_mutex_lock(&mu);
	int known = 0;
	for (int i = 0; i < nbases; i++)
		known |= strcmp(bases[i], base) == 0;
	if (!known && nbases < (int)(sizeof bases / sizeof bases[0]) && base[0])
		snprintf(bases[nbases++], sizeof bases[0], "%s", base);
	pthread_mutex_unlock(&mu);
}

int h_schema_watched(const char *url, const char **path)
{
	int hit = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nbases && !hit; i++) {
		size_t n = strlen(bases[i]);
		if (strncmp(url, bases[i], n) == 0 && (url[n] == '/' || url[n] == '\0')) {
			*path = url[n] ? url + n : "/";
			hit = 1;
		}
	}
	pthread_mutex_unlock(&mu);
	return hit;
}

/* ---- JSON pointers ---- */

/* The value at pointer ("/a/b~1c") in the document, or NULL. */
static const json_t *at_pointer(const char *pointer)
{
	const json_t *v = h_schema_doc();
	const char *p = pointer;
	while (v && *p == '/') {
		p++;
		char seg[256];
		size_t n = 0;
		for (; *p && *p != '/' && n < sizeof seg - 1; p++) {
			if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
				seg[n++] = p[1] == '0' ? '~' : '/';
				p++;
			} else {
				seg[n++] = *p;
			}
		}
		seg[n] = '\0';
		v = json_is_array(v) ? json_array_get(v, (size_t)strtoul(seg, NULL, 10))
				     : json_object_get(v, seg);
	}
	return *p ? NULL : v;
}

/* Where a check stands: the pointer into the answer, and the first failure. */
struct walk {
	char ptr[512];
	char why[512];
	int depth;
};

__attribute__((format(printf, 2, 3))) static int fail(struct walk *w, const char *fmt, ...)
{
	char msg[320];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(w->why, sizeof w->why, "%s: %s", w->ptr[0] ? w->ptr : "(the body)", msg);
	return -1;
}

static size_t ptr_push(struct walk *w, const char *seg)
{
	size_t n = strlen(w->ptr);
	snprintf(w->ptr + n, sizeof w->ptr - n, "/%s", seg);
	return n;
}

/* ---- the keywords ---- */

static const char *type_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

static int is_type(const json_t *v, const char *t)
{
	const char *mine = type_of(v);
	if (strcmp(t, "number") == 0)
		return json_is_number(v);
	if (strcmp(t, "integer") == 0 && json_is_real(v)) {
		double d = json_real_value(v);
		return d == (double)(long long)d;
	}
	return strcmp(t, mine) == 0;
}

static int check_type(struct walk *w, const json_t *types, const json_t *v)
{
	if (json_is_string(types))
		return is_type(v, json_string_value(types))
			       ? 0
			       : fail(w, "expected %s, got %s", json_string_value(types),
				      type_of(v));
	size_t i;
	const json_t *t;
	json_array_foreach(types, i, t)
		if (is_type(v, json_string_value(t)))
			return 0;
	char *list = json_dumps(types, JSON_COMPACT);
	fail(w, "expected one of %s, got %s", list ? list : "?", type_of(v));
	gwb_free(list);
	return -1;
}

/* UTF-8 characters of s (JSON Schema counts characters, not bytes). */
static size_t utf8_chars(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		n += (*p & 0xc0) != 0x80;
	return n;
}

/* 1 when pattern means the same as an ECMA-262 pattern (JSON Schema's) and a POSIX ERE: no
 * escape but "\\." (a backslash is literal inside a POSIX bracket expression). */
static int posix_safe(const char *pattern)
{
	for (const char *p = strchr(pattern, '\\'); p; p = strchr(p + 2, '\\'))
		if (p[1] != '.')
			return 0;
	return 1;
}

static int pattern_ok(struct walk *w, const char *pattern, const char *s)
{
	if (!posix_safe(pattern))
		return fail(w, "the document's pattern %s has an escape POSIX reads otherwise",
			    pattern);
	pthread_mutex_lock(&mu);
	if (!regexes)
		regexes = strmap_new();
	regex_t *re = strmap_get(regexes, pattern);
	if (!re) {
		re = gwb_malloc(sizeof *re);
		if (regcomp(re, pattern, REG_EXTENDED | REG_NOSUB) != 0) {
			gwb_free(re);
			re = (regex_t *)&bad_regex_marker;
		}
		strmap_put(regexes, pattern, re);
	}
	int rc = re == (regex_t *)&bad_regex_marker ? -2 : regexec(re, s, 0, NULL, 0);
	pthread_mutex_unlock(&mu);
	if (rc == -2)
		return fail(w, "the document's pattern %s does not compile as a POSIX ERE",
			    pattern);
	return rc == 0 ? 0 : fail(w, "\"%s\" does not match %s", s, pattern);
}

static int check_string(struct walk *w, const json_t *schema, const json_t *v)
{
	const char *s = json_string_value(v);
	json_t *k;
	char n[32];
	size_t chars = utf8_chars(s);
	if ((k = json_object_get(schema, "minLength")) && chars < (size_t)json_integer_value(k)) {
		snprintf(n, sizeof n, "%lld", (long long)json_integer_value(k));
		return fail(w, "\"%s\" is shorter than %s characters", s, n);
	}
	if ((k = json_object_get(schema, "maxLength")) && chars > (size_t)json_integer_value(k)) {
		snprintf(n, sizeof n, "%lld", (long long)json_integer_value(k));
		return fail(w, "\"%s\" is longer than %s characters", s, n);
	}
	if ((k = json_object_get(schema, "pattern")))
		return pattern_ok(w, json_string_value(k), s);
	return 0;
}

static int check_number(struct walk *w, const json_t *schema, const json_t *v)
{
	double x = json_number_value(v);
	json_t *k;
	char a[40], b[40];
	snprintf(a, sizeof a, "%.17g", x);
	if ((k = json_object_get(schema, "minimum")) && x < json_number_value(k)) {
		snprintf(b, sizeof b, "%.17g", json_number_value(k));
		return fail(w, "%s is below the minimum %s", a, b);
	}
	if ((k = json_object_get(schema, "maximum")) && x > json_number_value(k)) {
		snprintf(b, sizeof b, "%.17g", json_number_value(k));
		return fail(w, "%s is above the maximum %s", a, b);
	}
	return 0;
}

static int validate(struct walk *w, const json_t *schema, const json_t *v);

static int check_object(struct walk *w, const json_t *schema, const json_t *v)
{
	const json_t *props = json_object_get(schema, "properties");
	const json_t *extra = json_object_get(schema, "additionalProperties");
	size_t i;
	const json_t *req;
	json_array_foreach(json_object_get(schema, "required"), i, req)
		if (!json_object_get(v, json_string_value(req)))
			return fail(w, "the required member \"%s\" is missing",
				    json_string_value(req));
	const char *key;
	json_t *member;
	json_object_foreach((json_t *)v, key, member) {
		const json_t *sub = json_object_get(props, key);
		if (!sub && json_is_false(extra))
			return fail(w, "the member \"%s\" is not in the schema", key);
		if (!sub && json_is_object(extra))
			sub = extra;
		if (!sub)
			continue;
		size_t n = ptr_push(w, key);
		int rc = validate(w, sub, member);
		if (rc)
			return rc;
		w->ptr[n] = '\0';
	}
	return 0;
}

static int check_array(struct walk *w, const json_t *schema, const json_t *v)
{
	json_t *k;
	char n[32], m[32];
	snprintf(n, sizeof n, "%zu", json_array_size(v));
	if ((k = json_object_get(schema, "minItems")) &&
	    json_array_size(v) < (size_t)json_integer_value(k)) {
		snprintf(m, sizeof m, "%lld", (long long)json_integer_value(k));
		return fail(w, "%s items, fewer than %s", n, m);
	}
	if ((k = json_object_get(schema, "maxItems")) &&
	    json_array_size(v) > (size_t)json_integer_value(k)) {
		snprintf(m, sizeof m, "%lld", (long long)json_integer_value(k));
		return fail(w, "%s items, more than %s", n, m);
	}
	const json_t *items = json_object_get(schema, "items");
	if (!items)
		return 0;
	size_t i;
	const json_t *item;
	json_array_foreach(v, i, item) {
		snprintf(m, sizeof m, "%zu", i);
		size_t at = ptr_push(w, m);
		if (validate(w, items, item))
			return -1;
		w->ptr[at] = '\0';
	}
	return 0;
}

/* allOf: every one; anyOf: at least one; oneOf: exactly one. */
static int check_combined(struct walk *w, const json_t *schema, const json_t *v)
{
	size_t i;
	const json_t *sub;
	json_array_foreach(json_object_get(schema, "allOf"), i, sub)
		if (validate(w, sub, v))
			return -1;
	static const char *const kinds[] = { "anyOf", "oneOf" };
	for (int k = 0; k < 2; k++) {
		const json_t *list = json_object_get(schema, kinds[k]);
		if (!list)
			continue;
		int matched = 0;
		char first[512] = "";
		json_array_foreach(list, i, sub) {
			struct walk tmp = *w;
			if (validate(&tmp, sub, v) == 0)
				matched++;
			else if (!first[0])
				snprintf(first, sizeof first, "%s", tmp.why);
		}
		if (matched == 0)
			return fail(w, "matches none of its %s (the first says: %s)", kinds[k],
				    first);
		if (k == 1 && matched > 1)
			return fail(w, "matches more than one of its %s", kinds[k]);
	}
	return 0;
}

static int validate(struct walk *w, const json_t *schema, const json_t *v)
{
	if (json_is_true(schema) || !json_is_object(schema))
		return 0;
	if (++w->depth > 64) {
		w->depth--;
		return fail(w, "the schema nests too deep (a $ref loop?)");
	}
	int rc = 0;
	const json_t *k;
	if ((k = json_object_get(schema, "$ref"))) {
		const char *ref = json_string_value(k);
		const json_t *target = ref && ref[0] == '#' ? at_pointer(ref + 1) : NULL;
		rc = target ? validate(w, target, v) : fail(w, "$ref %s does not resolve", ref);
	}
	if (!rc && (k = json_object_get(schema, "type")))
		rc = check_type(w, k, v);
	if (!rc && (k = json_object_get(schema, "const")) && !json_equal(k, v)) {
		char *want = json_dumps(k, JSON_ENCODE_ANY | JSON_COMPACT);
		char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
		rc = fail(w, "expected %s, got %s", want ? want : "?", got ? got : "?");
		gwb_free(want);
		gwb_free(got);
	}
	if (!rc && (k = json_object_get(schema, "enum"))) {
		size_t i;
		const json_t *e;
		int found = 0;
		json_array_foreach(k, i, e)
			found |= json_equal(e, v);
		if (!found) {
			char *got = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			rc = fail(w, "%s is not one of the enum's values", got ? got : "?");
			gwb_free(got);
		}
	}
	if (!rc && json_is_string(v))
		rc = check_string(w, schema, v);
	if (!rc && json_is_number(v))
		rc = check_number(w, schema, v);
	if (!rc && json_is_object(v))
		rc = check_object(w, schema, v);
	if (!rc && json_is_array(v))
		rc = check_array(w, schema, v);
	if (!rc)
		rc = check_combined(w, schema, v);
	w->depth--;
	return rc;
}

int h_schema_check_value(const char *pointer, const json_t *v, char *why, size_t len)
{
	struct walk w = { "", "", 0 };
	const json_t *schema = at_pointer(pointer);
	if (!schema) {
		snprintf(why, len, "the document has no schema at %s", pointer);
		return -1;
	}
	if (validate(&w, schema, v) == 0)
		return 0;
	snprintf(why, len, "%s", w.why);
	return -1;
}

int h_schema_check_event(const char *type, const json_t *data, char *why, size_t len)
{
	const json_t *events = at_pointer("/paths/~1v1~1stream/get/x-gwb-events");
	const json_t *schema = json_object_get(events, type);
	if (!schema || !data) {
		snprintf(why, len, "stream event %s: %s", type,
			 !schema ? "a type the document does not name" : "its data is not JSON");
		return -1;
	}
	struct walk w = { "", "", 0 };
	if (validate(&w, schema, data) == 0)
		return 0;
	snprintf(why, len, "stream event %s: %s", type, w.why);
	return -1;
}

/* ---- operations ---- */

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* The request's path percent-decoded into out, as the router splits it: its segments, a
 * trailing '/' dropped. Returns the number of segments, or -1 for a path the router answers
 * 404 before routing (an empty, "." or ".." segment, more than 8 segments) or 400. */
static int split(const char *path, char segs[8][128])
{
	char dec[512];
	size_t n = 0;
	for (const char *p = path; *p && *p != '?' && n < sizeof dec - 1; p++) {
		if (p[0] == '%' && hexval(p[1]) >= 0 && hexval(p[2]) >= 0) {
			dec[n++] = (char)(hexval(p[1]) * 16 + hexval(p[2]));
			p += 2;
		} else {
			dec[n++] = *p;
		}
	}
	dec[n] = '\0';
	if (dec[0] != '/' || strlen(dec) != n)
		return -1;
	int nsegs = 0;
	const char *p = dec + 1;
	while (*p) {
		size_t len = strcspn(p, "/");
		int dots = (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.');
		if (len == 0 || dots)
			return -1;
		if (nsegs == 8 || len >= 128)
			return -1;
		memcpy(segs[nsegs], p, len);
		segs[nsegs++][len] = '\0';
		p += len;
		if (*p == '/')
			p++;
	}
	return nsegs;
}

/* The document's path template that path names (its path item), or NULL. */
static const json_t *path_item(const char *path, const char **templ)
{
	char segs[8][128];
	int n = split(path, segs);
	if (n < 0)
		return NULL;
	const char *key;
	json_t *item;
	json_object_foreach(json_object_get(h_schema_doc(), "paths"), key, item) {
		char tsegs[8][128];
		int tn = split(key, tsegs);
		if (tn != n)
			continue;
		int ok = 1;
		for (int i = 0; i < n && ok; i++)
			ok = tsegs[i][0] == '{' || strcmp(tsegs[i], segs[i]) == 0;
		if (ok) {
			*templ = key;
			return item;
		}
	}
	return NULL;
}

static const json_t *deref(const json_t *v)
{
	for (int i = 0; i < 8 && json_object_get(v, "$ref"); i++) {
		const char *ref = json_string_value(json_object_get(v, "$ref"));
		v = ref && ref[0] == '#' ? at_pointer(ref + 1) : NULL;
	}
	return v;
}

/* 1 when the raw header block has header name. */
static int has_header(const char *headers, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = headers; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncasecmp(p, name, n) == 0 && p[n] == ':')
			return 1;
	return 0;
}

/* An answer with no operation of its own (an unknown path, another method, 405, 501): a
 * refusal, whose JSON body is an Error. */
static int check_refusal(const struct h_answer *a, const char *what, char *why, size_t len)
{
	if (a->status < 400) {
		snprintf(why, len, "%s %s: %ld to a request the document has no operation for (%s)",
			 a->method, a->path, a->status, what);
		return -1;
	}
	if (!a->json)
		return 0;
	char sub[512];
	if (h_schema_check_value("/components/schemas/Error", a->json, sub, sizeof sub) == 0)
		return 0;
	snprintf(why, len, "%s %s %ld: not an Error: %s", a->method, a->path, a->status, sub);
	return -1;
}

/* 1 when the answer is one of the front door's refusals (x-gwb-front-door): they can answer
 * any request, before it is routed, and are documented once for every operation. */
static int front_door_refusal(const struct h_answer *a)
{
	char code[8];
	snprintf(code, sizeof code, "%ld", a->status);
	const json_t *resp =
		deref(json_object_get(json_object_get(h_schema_doc(), "x-gwb-front-door"), code));
	const json_t *media = json_object_get(json_object_get(resp, "content"), "application/json");
	struct walk w = { "", "", 0 };
	if (!media || !a->json || validate(&w, json_object_get(media, "schema"), a->json))
		return 0;
	const char *hname;
	json_t *h;
	json_object_foreach(json_object_get(resp, "headers"), hname, h)
		if (json_is_true(json_object_get(deref(h), "required")) &&
		    !has_header(a->headers, hname))
			return 0;
	return 1;
}

int h_schema_check(const struct h_answer *a, char *why, size_t len)
{
	if (!h_schema_doc()) {
		snprintf(why, len, "the built-in OpenAPI document cannot be read");
		return -1;
	}
	if (!a->from_server) /* libevent's own answer (its HTML 400 or 413) */
		return 0;
	if (front_door_refusal(a))
		return 0;
	const char *templ = NULL;
	const json_t *item = path_item(a->path, &templ);
	char method[16];
	snprintf(method, sizeof method, "%s",
		 strcasecmp(a->method, "HEAD") == 0 ? "get" : a->method);
	for (char *p = method; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	const json_t *op = item ? json_object_get(item, method) : NULL;
	if (!op)
		return check_refusal(a, item ? "no such method" : "no such path", why, len);
	char code[8];
	snprintf(code, sizeof code, "%ld", a->status);
	const json_t *resp = deref(json_object_get(json_object_get(op, "responses"), code));
	if (!resp) {
		if (a->status == 405 || a->status == 501) /* the document's description: any path */
			return check_refusal(a, "method refused", why, len);
		snprintf(why, len, "%s %s (%s) answered %ld, a status the document does not list",
			 a->method, a->path, templ, a->status);
		return -1;
	}
	const char *hname;
	json_t *h;
	json_object_foreach(json_object_get(resp, "headers"), hname, h) {
		if (json_is_true(json_object_get(deref(h), "required")) &&
		    !has_header(a->headers, hname)) {
			snprintf(why, len, "%s %s (%s) %ld: the header %s is missing", a->method,
				 a->path, templ, a->status, hname);
			return -1;
		}
	}
	const json_t *content = json_object_get(resp, "content");
	const json_t *media = json_object_get(content, "application/json");
	if (!media || a->body_len == 0)
		return 0; /* text (the page, /metrics, the stream), no body, or HEAD */
	size_t ctn = a->content_type ? strcspn(a->content_type, ";") : 0;
	if (!a->content_type || ctn != 16 || strncasecmp(a->content_type, "application/json", 16)) {
		snprintf(why, len, "%s %s (%s) %ld: Content-Type %s, not application/json",
			 a->method, a->path, templ, a->status,
			 a->content_type ? a->content_type : "(none)");
		return -1;
	}
	if (!a->json) {
		snprintf(why, len, "%s %s (%s) %ld: the body is not JSON", a->method, a->path,
			 templ, a->status);
		return -1;
	}
	struct walk w = { "", "", 0 };
	if (validate(&w, json_object_get(media, "schema"), a->json) == 0)
		return 0;
	snprintf(why, len, "%s %s (%s) %ld: %s", a->method, a->path, templ, a->status, w.why);
	return -1;
}
