/* JSON text writer: see jsonw.h. */
#include "lib/jsonw.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/jsonx.h"

void jw_init(struct jw *w)
{
	memset(w, 0, sizeof *w);
}

void jw_free(struct jw *w)
{
	gwb_free(w->buf);
	w->buf = NULL;
	w->len = w->cap = 0;
}

void jw_reset(struct jw *w)
{
	char *buf = w->buf;
	size_t cap = w->cap;
	memset(w, 0, sizeof *w);
	w->buf = buf;
	w->cap = cap;
}

int jw_ok(const struct jw *w)
{
	return !w->failed && w->depth == 0;
}

char *jw_grow_(struct jw *w, size_t n)
{
	size_t cap = w->cap ? w->cap : 1024;
	while (cap < w->len + n)
		cap *= 2;
	w->buf = gwb_realloc(w->buf, cap);
	w->cap = cap;
	return w->buf + w->len;
}

static void put(struct jw *w, const char *s, size_t n)
{
	memcpy(jw_room_(w, n), s, n);
	w->len += n;
}

static void put_c(struct jw *w, char c)
{
	put(w, &c, 1);
}

static void open_container(struct jw *w, char c, int array)
{
	jw_value_start_(w);
	put_c(w, c);
	if (w->depth >= JW_DEPTH_MAX) {
		w->failed = 1;
		return;
	}
	w->is_array[w->depth] = (unsigned char)array;
	w->has_member[w->depth] = 0;
	w->depth++;
}

static void close_container(struct jw *w, char c)
{
	put_c(w, c);
	if (w->depth > 0)
		w->depth--;
	else
		w->failed = 1;
}

void jw_obj_begin(struct jw *w)
{
	open_container(w, '{', 0);
}

void jw_obj_end(struct jw *w)
{
	close_container(w, '}');
}

void jw_arr_begin(struct jw *w)
{
	open_container(w, '[', 1);
}

void jw_arr_end(struct jw *w)
{
	close_container(w, ']');
}

void jw_str(struct jw *w, const char *s)
{
	jw_value_start_(w);
	/* Printable ASCII with neither '"' nor '\\' (ids, names, states, times) is valid UTF-8
	 * and needs no escape: copied as it is, quoted. */
	const unsigned char *end = (const unsigned char *)s;
	while (jx_plain_byte[*end])
		end++;
	size_t n = (size_t)(end - (const unsigned char *)s);
	if (!*end) {
		char *p = jw_room_(w, n + 2);
		p[0] = '"';
		memcpy(p + 1, s, n);
		p[n + 1] = '"';
		w->len += n + 2;
		return;
	}
	n += strlen((const char *)end);
	if (!jx_utf8_valid(s, n, NULL)) {
		w->failed = 1;
		put(w, "null", 4);
		return;
	}
	put_c(w, '"');
	size_t run = 0; /* start of the bytes not yet copied */
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(w, s + run, i - run);
		run = i + 1;
		char esc[8];
		switch (c) {
		case '"':
			put(w, "\\\"", 2);
			break;
		case '\\':
			put(w, "\\\\", 2);
			break;
		case '\b':
			put(w, "\\b", 2);
			break;
		case '\f':
			put(w, "\\f", 2);
			break;
		case '\n':
			put(w, "\\n", 2);
			break;
		case '\r':
			put(w, "\\r", 2);
			break;
		case '\t':
			put(w, "\\t", 2);
			break;
		default:
			snprintf(esc, sizeof esc, "\\u%04X", (unsigned)c);
			put(w, esc, 6);
		}
	}
	put(w, s + run, n - run);
	put_c(w, '"');
}

void jw_text(struct jw *w, const char *s)
{
	if (s[0])
		jw_str(w, s);
	else
		jw_null(w);
}

void jw_int(struct jw *w, int64_t v)
{
	jw_value_start_(w);
	/* "%lld" without a format to parse: digits from the end of the buffer. */
	char num[24];
	char *p = num + sizeof num;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	put(w, p, (size_t)(num + sizeof num - p));
}

void jw_raw(struct jw *w, const char *text, size_t len)
{
	jw_value_start_(w);
	put(w, text, len);
}

struct jw_mark jw_mark(const struct jw *w)
{
	struct jw_mark m = {w->len, w->depth, w->depth > 0 ? w->has_member[w->depth - 1] : 0};
	return m;
}

void jw_rewind(struct jw *w, struct jw_mark m)
{
	w->len = m.len;
	w->depth = m.depth;
	if (m.depth > 0)
		w->has_member[m.depth - 1] = m.has_member;
	w->failed = 0;
}
