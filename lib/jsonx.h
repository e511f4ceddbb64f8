/* JSON helpers around jansson: a strict body parser that tells where input broke, typed
 * field readers that name the field and the rule it broke, so API errors can say both, and
 * the few small values the API builds everywhere. */
#ifndef GWB_JSONX_H
#define GWB_JSONX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* What was wrong with one field: its name and the rule it broke. */
struct jx_err {
	char field[160]; /* room for "workload.env." and a 128-byte name */
	char rule[192];
};

/* Why a document could not be parsed. code is "invalid_utf8" or "invalid_json". */
struct jx_parse_err {
	const char *code;
	char message[192];
	long line;
	long column;
	long position; /* byte offset into the input */
};

/* Parses buf[0..len) as one JSON value. Rejects invalid UTF-8 (with the byte offset), NUL bytes,
 * duplicate keys, and trailing data. Returns a new reference (caller owns it), or NULL with *e
 * filled. */
json_t *jx_parse(const char *buf, size_t len, struct jx_parse_err *e);

/* 1 for the bytes a JSON string may hold as they are, unescaped and in any encoding:
 * printable ASCII but '"' and '\\' (the flat reader's strings, jsonw's plain ones). */
extern const unsigned char jx_plain_byte[256];

/* Returns 1 when every byte sequence of buf[0..len) is valid UTF-8 (no overlongs, no
 * surrogates, nothing above U+10FFFF); otherwise 0 and *bad_offset (if not NULL). */
int jx_utf8_valid(const char *buf, size_t len, size_t *bad_offset);

/* One member's value as the field readers see it: from a parsed object (jx_member) or read
 * straight from the text (jx_flat_read). */
enum jx_kind { JX_ABSENT, JX_STRING, JX_INTEGER, JX_TRUE, JX_FALSE, JX_NULL, JX_OTHER };
struct jx_val {
	enum jx_kind kind; /* JX_OTHER: a real, an object or an array */
	const char *s;     /* JX_STRING: n bytes, NUL-terminated */
	size_t n;
	int64_t i; /* JX_INTEGER */
};

/* obj's member key (borrowed from obj). */
struct jx_val jx_member(const json_t *obj, const char *key);

/* The common body read without building it: when buf[0..len) is a flat object (no nesting)
 * whose values are strings of printable ASCII without escapes, integers of at most 18
 * digits, true, false or null, and whose keys are all in fields (NULL-terminated), each at
 * most once, fills vals[i] for fields[i] (JX_ABSENT when missing), ends each string value
 * with a NUL in buf, where its closing quote was, and returns 0. Anything else: -1, buf
 * unchanged; jx_parse and jx_member then give the same values, or the error to answer. */
int jx_flat_read(char *buf, size_t len, const char *const *fields, struct jx_val *vals);

/* The field readers below, on a value: the same rules and errors. */
int jx_int_val(const struct jx_val *v, const char *key, int required, int64_t def, int64_t min,
	       int64_t max, int64_t *out, struct jx_err *e);
int jx_str_val(const struct jx_val *v, const char *key, int required, const char *def,
	       size_t minlen, size_t maxlen, const char **out, struct jx_err *e);
int jx_enum_val(const struct jx_val *v, const char *key, int required,
		const char *const *values, const char *def, const char **out, struct jx_err *e);

/* Rejects any key of obj that is not in allowed (NULL-terminated). 0, or GWB_EINVAL with *e. */
int jx_only_keys(const json_t *obj, const char *const *allowed, struct jx_err *e);

/* Reads an integer field. A JSON integer is required (no reals, strings or booleans). When the
 * key is absent: GWB_EINVAL if required, else *out = def. Out of [min, max]: GWB_EINVAL. */
int jx_int(const json_t *obj, const char *key, int required, int64_t def, int64_t min, int64_t max,
	   int64_t *out, struct jx_err *e);

/* Reads a string field of minlen..maxlen bytes. *out points into obj (borrowed), or def when the
 * key is absent and not required. */
int jx_str(const json_t *obj, const char *key, int required, const char *def, size_t minlen,
	   size_t maxlen, const char **out, struct jx_err *e);

/* Reads a string field that must equal one of values (NULL-terminated). *out points to the
 * matching entry of values (static), or def when absent and not required. */
int jx_enum(const json_t *obj, const char *key, int required, const char *const *values,
	    const char *def, const char **out, struct jx_err *e);

/* Compact serialisation with sorted keys. Caller frees with gwb_free. Never NULL. */
char *jx_dump(const json_t *v);

/* Sets key to a string, or to null when s is NULL. */
void jx_set_str_or_null(json_t *obj, const char *key, const char *s);

/* An amount of GPU as the API shows it, {"gpu_memory_mib": mem, "gpu_core_percent": core}
 * (quotas, reservations, requests, a card's capacity). A new reference. */
json_t *jx_gpu_pair(int64_t mem_mib, int64_t core_percent);

#endif
