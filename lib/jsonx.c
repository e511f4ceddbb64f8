/* Strict JSON parsing and typed field readers. */
#include "lib/jsonx.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"

int jx_utf8_valid(const char *buf, size_t len, size_t *bad_offset)
{
	const unsigned char *s = (const unsigned char *)buf;
	size_t i = 0;
	while (i < len) {
		unsigned c = s[i];
		size_t n;
		unsigned cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			goto bad;
		}
		if (len - i <= n)
			goto bad;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				goto bad;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			goto bad;
		i += n + 1;
	}
	return 1;
bad:
	if (bad_offset)
		*bad_offset = i;
	return 0;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* 1 for the bytes a string may hold as they are: printable ASCII (0x20-0x7e) but '"' (0x22)
 * and '\\' (0x5c). A row per 16 bytes. */
const unsigned char jx_plain_byte[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
	1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

/* A string of printable ASCII with neither '"' nor '\\' from p (at its opening quote): its
 * length, and *after past its closing quote; -1 for anything else. */
static long plain_string(const char *p, const char *end, const char **after)
{
	const char *q = ++p;
	while (q < end && jx_plain_byte[(unsigned char)*q])
		q++;
	if (q >= end || *q != '"')
		return -1;
	*after = q + 1;
	return (long)(q - p);
}

/* Calls fn for each member of buf as a flat object: keys of at most 63 bytes and values that
 * are plain strings (plain_string), integers of at most 18 digits (no sign, no leading zero),
 * true, false or null. 0 when the whole text is such an object and every call returned 0;
 * -1 for anything else (a nested value, an escape, a syntax error...), which the caller
 * hands to json_loadb: it gives the same values, or the error it always gave. */
typedef int (*flat_member_fn)(void *arg, const char *key, size_t keylen, const struct jx_val *v);

static int flat_scan(const char *buf, size_t len, flat_member_fn fn, void *arg)
{
	const char *p = buf, *end = buf + len;
	p = skip_ws(p, end);
	if (p >= end || *p != '{')
		return -1;
	p = skip_ws(p + 1, end);
	if (p < end && *p == '}')
		goto close;
	for (;;) {
		if (p >= end || *p != '"')
			return -1;
		const char *after;
		long kn = plain_string(p, end, &after);
		if (kn < 0 || kn > 63)
			return -1;
		const char *key = p + 1;
		p = skip_ws(after, end);
		if (p >= end || *p != ':')
			return -1;
		p = skip_ws(p + 1, end);
		struct jx_val v = { .kind = JX_ABSENT };
		if (p < end && *p == '"') {
			long vn = plain_string(p, end, &after);
			if (vn < 0)
				return -1;
			v.kind = JX_STRING;
			v.s = p + 1;
			v.n = (size_t)vn;
			p = after;
		} else if (p < end && *p >= '0' && *p <= '9') {
			const char *q = p;
			int64_t n = 0;
			while (q < end && *q >= '0' && *q <= '9' && q - p < 18)
				n = n * 10 + (*q++ - '0');
			/* A 19th digit, a fraction or an exponent: json_loadb's to read. */
			if ((*p == '0' && q - p > 1) ||
			    (q < end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E')))
				return -1;
			v.kind = JX_INTEGER;
			v.i = n;
			p = q;
		} else if (end - p >= 4 && memcmp(p, "true", 4) == 0) {
			v.kind = JX_TRUE;
			p += 4;
		} else if (end - p >= 5 && memcmp(p, "false", 5) == 0) {
			v.kind = JX_FALSE;
			p += 5;
		} else if (end - p >= 4 && memcmp(p, "null", 4) == 0) {
			v.kind = JX_NULL;
			p += 4;
		} else {
			return -1;
		}
		if (fn(arg, key, (size_t)kn, &v) != 0)
			return -1;
		p = skip_ws(p, end);
		if (p < end && *p == ',') {
			p = skip_ws(p + 1, end);
			continue;
		}
		if (p < end && *p == '}')
			break;
		return -1;
	}
close:
	p = skip_ws(p + 1, end);
	return p == end ? 0 : -1;
}

/* flat_scan's member into the object arg: -1 for a duplicate key (json_loadb's error). */
static int object_member(void *arg, const char *k, size_t kn, const struct jx_val *v)
{
	json_t *o = arg;
	char key[64];
	memcpy(key, k, kn);
	key[kn] = '\0';
	if (json_object_get(o, key))
		return -1;
	json_t *jv = v->kind == JX_STRING    ? json_stringn_nocheck(v->s, v->n)
		     : v->kind == JX_INTEGER ? json_integer(v->i)
		     : v->kind == JX_TRUE    ? json_true()
		     : v->kind == JX_FALSE   ? json_false()
					     : json_null();
	return jv && json_object_set_new_nocheck(o, key, jv) == 0 ? 0 : -1;
}

/* The common body, a flat object (flat_scan), into the value json_loadb would return; NULL
 * for anything else. */
static json_t *flat_object(const char *buf, size_t len)
{
	json_t *o = json_object();
	if (o && flat_scan(buf, len, object_member, o) == 0)
		return o;
	json_decref(o);
	return NULL;
}

struct flat_fields {
	const char *const *fields;
	struct jx_val *vals;
};

/* flat_scan's member into its field's value: -1 for a key not in the list, or one seen
 * before. */
static int field_member(void *arg, const char *key, size_t kn, const struct jx_val *v)
{
	struct flat_fields *ff = arg;
	for (int i = 0; ff->fields[i]; i++) {
		if (strncmp(ff->fields[i], key, kn) != 0 || ff->fields[i][kn] != '\0')
			continue;
		if (ff->vals[i].kind != JX_ABSENT)
			return -1;
		ff->vals[i] = *v;
		return 0;
	}
	return -1;
}

int jx_flat_read(char *buf, size_t len, const char *const *fields, struct jx_val *vals)
{
	int n = 0;
	while (fields[n])
		n++;
	for (int i = 0; i < n; i++)
		vals[i].kind = JX_ABSENT;
	struct flat_fields ff = { fields, vals };
	if (flat_scan(buf, len, field_member, &ff) != 0)
		return -1;
	/* Each string ends where its closing quote was: a C string inside buf. */
	for (int i = 0; i < n; i++)
		if (vals[i].kind == JX_STRING)
			buf[vals[i].s - buf + (ptrdiff_t)vals[i].n] = '\0';
	return 0;
}

json_t *jx_parse(const char *buf, size_t len, struct jx_parse_err *e)
{
	memset(e, 0, sizeof *e);
	/* Most bodies are flat objects of plain values: read without jansson's parser. */
	json_t *flat = flat_object(buf, len);
	if (flat)
		return flat;
	size_t bad;
	if (!jx_utf8_valid(buf, len, &bad)) {
		e->code = "invalid_utf8";
		e->position = (long)bad;
		snprintf(e->message, sizeof e->message, "body is not valid UTF-8 at byte %zu", bad);
		return NULL;
	}
	json_error_t je;
	json_t *v = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!v) {
		e->code = "invalid_json";
		e->line = je.line;
		e->column = je.column;
		e->position = je.position;
		snprintf(e->message, sizeof e->message, "malformed JSON at line %d, column %d: %s",
			 je.line, je.column, je.text);
		return NULL;
	}
	return v;
}

static int fail(struct jx_err *e, const char *field, const char *rule)
{
	snprintf(e->field, sizeof e->field, "%s", field);
	snprintf(e->rule, sizeof e->rule, "%s", rule);
	return GWB_EINVAL;
}

int jx_only_keys(const json_t *obj, const char *const *allowed, struct jx_err *e)
{
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)obj, key, val) {
		(void)val;
		int ok = 0;
		for (const char *const *a = allowed; *a; a++)
			if (strcmp(*a, key) == 0)
				ok = 1;
		if (!ok)
			return fail(e, key, "unknown field");
	}
	return 0;
}

struct jx_val jx_member(const json_t *obj, const char *key)
{
	const json_t *v = json_object_get(obj, key);
	struct jx_val out = { .kind = JX_ABSENT };
	switch (v ? json_typeof(v) : JSON_NULL) {
	case JSON_STRING:
		out.kind = JX_STRING;
		out.s = json_string_value(v);
		out.n = json_string_length(v);
		break;
	case JSON_INTEGER:
		out.kind = JX_INTEGER;
		out.i = json_integer_value(v);
		break;
	case JSON_TRUE:
		out.kind = JX_TRUE;
		break;
	case JSON_FALSE:
		out.kind = JX_FALSE;
		break;
	case JSON_NULL:
		out.kind = v ? JX_NULL : JX_ABSENT;
		break;
	default:
		out.kind = JX_OTHER;
	}
	return out;
}

int jx_int_val(const struct jx_val *v, const char *key, int required, int64_t def, int64_t min,
	       int64_t max, int64_t *out, struct jx_err *e)
{
	char rule[160];
	if (v->kind == JX_ABSENT) {
		if (required)
			return fail(e, key, "required");
		*out = def;
		return 0;
	}
	if (v->kind != JX_INTEGER) {
		snprintf(rule, sizeof rule, "must be an integer from %lld to %lld", (long long)min,
			 (long long)max);
		return fail(e, key, rule);
	}
	if (v->i < min || v->i > max) {
		snprintf(rule, sizeof rule, "must be from %lld to %lld", (long long)min,
			 (long long)max);
		return fail(e, key, rule);
	}
	*out = v->i;
	return 0;
}

int jx_str_val(const struct jx_val *v, const char *key, int required, const char *def,
	       size_t minlen, size_t maxlen, const char **out, struct jx_err *e)
{
	char rule[160];
	if (v->kind == JX_ABSENT) {
		if (required)
			return fail(e, key, "required");
		*out = def;
		return 0;
	}
	if (v->kind != JX_STRING)
		return fail(e, key, "must be a string");
	if (v->n < minlen || v->n > maxlen) {
		snprintf(rule, sizeof rule, "length must be from %zu to %zu bytes", minlen, maxlen);
		return fail(e, key, rule);
	}
	if (memchr(v->s, '\0', v->n))
		return fail(e, key, "must not contain NUL");
	*out = v->s;
	return 0;
}

int jx_enum_val(const struct jx_val *v, const char *key, int required,
		const char *const *values, const char *def, const char **out, struct jx_err *e)
{
	if (v->kind == JX_ABSENT) {
		if (required)
			return fail(e, key, "required");
		*out = def;
		return 0;
	}
	if (v->kind == JX_STRING) {
		for (const char *const *a = values; *a; a++) {
			if (strlen(*a) == v->n && memcmp(*a, v->s, v->n) == 0) {
				*out = *a;
				return 0;
			}
		}
	}
	char rule[192] = "must be one of:";
	size_t used = strlen(rule);
	for (const char *const *a = values; *a; a++) {
		int n = snprintf(rule + used, sizeof rule - used, " %s", *a);
		if (n > 0 && (size_t)n < sizeof rule - used)
			used += (size_t)n;
	}
	return fail(e, key, rule);
}

int jx_int(const json_t *obj, const char *key, int required, int64_t def, int64_t min, int64_t max,
	   int64_t *out, struct jx_err *e)
{
	struct jx_val v = jx_member(obj, key);
	return jx_int_val(&v, key, required, def, min, max, out, e);
}

int jx_str(const json_t *obj, const char *key, int required, const char *def, size_t minlen,
	   size_t maxlen, const char **out, struct jx_err *e)
{
	struct jx_val v = jx_member(obj, key);
	return jx_str_val(&v, key, required, def, minlen, maxlen, out, e);
}

int jx_enum(const json_t *obj, const char *key, int required, const char *const *values,
	    const char *def, const char **out, struct jx_err *e)
{
	struct jx_val v = jx_member(obj, key);
	return jx_enum_val(&v, key, required, values, def, out, e);
}

char *jx_dump(const json_t *v)
{
	/* Sized by a first pass so the buffer is ours whatever allocator jansson was given. */
	size_t flags = JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY;
	size_t n = json_dumpb(v, NULL, 0, flags);
	char *s = gwb_malloc(n + 1);
	if (json_dumpb(v, s, n, flags) != n)
		n = 0;
	s[n] = '\0';
	return s;
}

void jx_set_str_or_null(json_t *obj, const char *key, const char *s)
{
	json_object_set_new(obj, key, s ? json_string(s) : json_null());
}

json_t *jx_gpu_pair(int64_t mem_mib, int64_t core_percent)
{
	return json_pack("{s:I, s:I}", "gpu_memory_mib", (json_int_t)mem_mib, "gpu_core_percent",
			 (json_int_t)core_percent);
}
