/* A JSON text writer for replies shaped often enough that building a jansson tree only to
 * dump it costs more than the rest of the request: values are written straight into a
 * growing buffer, compact, in the order the caller gives them. Strings are escaped exactly
 * as jansson's dump escapes them (", \ and control characters; "/" and non-ASCII as they
 * are), so a writer that emits keys in sorted order produces the same bytes as
 * json_dumps(..., JSON_COMPACT | JSON_SORT_KEYS). A string that is not valid UTF-8 (which
 * jansson would refuse) marks the writer failed: jw_ok says so, and the caller falls back. */
#ifndef GWB_JSONW_H
#define GWB_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define JW_DEPTH_MAX 16

struct jw {
	char *buf;
	size_t len, cap;
	int failed;
	int depth;
	/* Per open container: 1 for an array; whether a member was written yet. */
	unsigned char is_array[JW_DEPTH_MAX], has_member[JW_DEPTH_MAX];
};

void jw_init(struct jw *w);
/* Frees the buffer. */
void jw_free(struct jw *w);
/* Empties w for a new text, keeping its buffer: a writer used for one text after another
 * allocates once. */
void jw_reset(struct jw *w);
/* 1 while every value could be written. */
int jw_ok(const struct jw *w);

void jw_obj_begin(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_str(struct jw *w, const char *s);
/* The string, or null when it is "" (the store's empty text). */
void jw_text(struct jw *w, const char *s);
void jw_int(struct jw *w, int64_t v);
/* A place in the text to come back to: jw_rewind drops what was written since the mark
 * (inside the same container) and forgets a failure since, so a caller can write a value
 * another way. */
struct jw_mark {
	size_t len;
	int depth;
	unsigned char has_member;
};
struct jw_mark jw_mark(const struct jw *w);
void jw_rewind(struct jw *w, struct jw_mark m);
/* A value already written as JSON text (text[0..len)), as it is. */
void jw_raw(struct jw *w, const char *text, size_t len);
/* The writes a view makes some forty times, inline below: with a literal key, its length
 * and copy are known where it is written. */

/* Room for n more bytes at the end of the text: where they go (w->len is not moved). */
char *jw_grow_(struct jw *w, size_t n);
static inline char *jw_room_(struct jw *w, size_t n)
{
	return w->cap - w->len >= n ? w->buf + w->len : jw_grow_(w, n);
}

/* Before a value: the comma between an array's elements (an object's come with the key). */
static inline void jw_value_start_(struct jw *w)
{
	if (w->depth > 0 && w->is_array[w->depth - 1]) {
		if (w->has_member[w->depth - 1]) {
			*jw_room_(w, 1) = ',';
			w->len++;
		}
		w->has_member[w->depth - 1] = 1;
	}
}

/* A member's key (a literal of plain ASCII that needs no escape); its value follows. */
static inline void jw_key(struct jw *w, const char *key)
{
	size_t n = strlen(key);
	char *p = jw_room_(w, n + 4), *start = p;
	if (w->depth > 0) {
		if (w->has_member[w->depth - 1])
			*p++ = ',';
		w->has_member[w->depth - 1] = 1;
	}
	*p++ = '"';
	memcpy(p, key, n);
	p += n;
	*p++ = '"';
	*p++ = ':';
	w->len += (size_t)(p - start);
}

static inline void jw_null(struct jw *w)
{
	jw_value_start_(w);
	memcpy(jw_room_(w, 4), "null", 4);
	w->len += 4;
}

static inline void jw_bool(struct jw *w, int b)
{
	jw_value_start_(w);
	if (b)
		memcpy(jw_room_(w, 4), "true", 4);
	else
		memcpy(jw_room_(w, 5), "false", 5);
	w->len += b ? 4 : 5;
}

/* An object's member in one call: jw_key, then the value. */
static inline void jw_member_str(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}

static inline void jw_member_text(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_text(w, s);
}

static inline void jw_member_int(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	jw_int(w, v);
}

static inline void jw_member_bool(struct jw *w, const char *key, int b)
{
	jw_key(w, key);
	jw_bool(w, b);
}

static inline void jw_member_null(struct jw *w, const char *key)
{
	jw_key(w, key);
	jw_null(w);
}

#endif
