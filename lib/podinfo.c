/* Downward-API file codec: Go-compatible quoting and unquoting of `key="value"` lines. */
#include "lib/podinfo.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"

/* A growing output buffer; every append checks its room first. */
struct obuf {
	char *p;
	size_t len, cap;
};

static void ob_put(struct obuf *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 64;
		while (b->len + n + 1 > cap)
			cap *= 2;
		b->p = gwb_realloc(b->p, cap);
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void ob_putc(struct obuf *b, char c)
{
	ob_put(b, &c, 1);
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Encodes code point r (valid, not a surrogate) as UTF-8 into out; returns the byte count. */
static size_t utf8_put(uint32_t r, unsigned char *out)
{
	if (r < 0x80) {
		out[0] = (unsigned char)r;
		return 1;
	}
	if (r < 0x800) {
		out[0] = (unsigned char)(0xc0 | (r >> 6));
		out[1] = (unsigned char)(0x80 | (r & 0x3f));
		return 2;
	}
	if (r < 0x10000) {
		out[0] = (unsigned char)(0xe0 | (r >> 12));
		out[1] = (unsigned char)(0x80 | ((r >> 6) & 0x3f));
		out[2] = (unsigned char)(0x80 | (r & 0x3f));
		return 3;
	}
	out[0] = (unsigned char)(0xf0 | (r >> 18));
	out[1] = (unsigned char)(0x80 | ((r >> 12) & 0x3f));
	out[2] = (unsigned char)(0x80 | ((r >> 6) & 0x3f));
	out[3] = (unsigned char)(0x80 | (r & 0x3f));
	return 4;
}

/* Decodes one escape after the backslash at s[0..n). Appends its bytes to b and returns how
 * many input bytes it used, or 0 when it is not valid Go syntax inside double quotes. */
static size_t unescape_one(const char *s, size_t n, struct obuf *b)
{
	static const char simple_in[] = "abfnrtv\\\"";
	static const char simple_out[] = "\a\b\f\n\r\t\v\\\"";
	if (n == 0)
		return 0;
	const char *hit = strchr(simple_in, s[0]);
	if (hit && s[0]) {
		ob_putc(b, simple_out[hit - simple_in]);
		return 1;
	}
	if (s[0] >= '0' && s[0] <= '7') { /* exactly three octal digits, at most \377 */
		if (n < 3 || s[1] < '0' || s[1] > '7' || s[2] < '0' || s[2] > '7' || s[0] > '3')
			return 0;
		ob_putc(b, (char)((s[0] - '0') * 64 + (s[1] - '0') * 8 + (s[2] - '0')));
		return 3;
	}
	size_t digits = s[0] == 'x' ? 2 : s[0] == 'u' ? 4 : s[0] == 'U' ? 8 : 0;
	if (!digits || n < digits + 1)
		return 0;
	uint32_t v = 0;
	for (size_t i = 1; i <= digits; i++) {
		int h = hexval((unsigned char)s[i]);
		if (h < 0)
			return 0;
		v = v * 16 + (uint32_t)h;
	}
	if (s[0] == 'x') {
		ob_putc(b, (char)v);
	} else {
		unsigned char enc[4];
		if (v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
			return 0;
		ob_put(b, enc, utf8_put(v, enc));
	}
	return digits + 1;
}

/* Unquotes s[0..n) (the text between the quotes) into a new string. Returns NULL when the
 * quoting is invalid or the value contains a NUL byte. */
static char *unquote(const char *s, size_t n)
{
	struct obuf b = {0};
	ob_put(&b, "", 0);
	for (size_t i = 0; i < n;) {
		if (s[i] == '"' || s[i] == '\n')
			goto bad;
		if (s[i] != '\\') {
			ob_putc(&b, s[i++]);
			continue;
		}
		size_t used = unescape_one(s + i + 1, n - i - 1, &b);
		if (!used)
			goto bad;
		i += 1 + used;
	}
	if (memchr(b.p, '\0', b.len))
		goto bad;
	return b.p;
bad:
	gwb_free(b.p);
	return NULL;
}

/* Splits one line into key and quoted value. Returns 0, or GWB_EINVAL. */
static int split_line(const char *line, size_t n, size_t *keylen, const char **val, size_t *vallen)
{
	const char *eq = memchr(line, '=', n);
	if (!eq || eq == line)
		return GWB_EINVAL;
	size_t k = (size_t)(eq - line), rest = n - k - 1;
	if (rest < 2 || eq[1] != '"' || line[n - 1] != '"')
		return GWB_EINVAL;
	*keylen = k;
	*val = eq + 2;
	*vallen = rest - 2;
	return 0;
}

int podinfo_get(const char *text, size_t len, const char *key, char **value_out)
{
	*value_out = NULL;
	size_t klen = strlen(key);
	char *found = NULL;
	int rc = GWB_ENOTFOUND;
	for (size_t pos = 0; pos < len;) {
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos;
		pos += n + 1;
		if (n == 0)
			continue;
		size_t kl, vl;
		const char *v;
		if (split_line(line, n, &kl, &v, &vl) != 0)
			goto bad;
		char *val = unquote(v, vl);
		if (!val)
			goto bad;
		if (kl != klen || memcmp(line, key, klen) != 0) {
			gwb_free(val);
			continue;
		}
		if (found) { /* the same key twice: which one the kubelet meant is unknowable */
			gwb_free(val);
			goto bad;
		}
		found = val;
		rc = 0;
	}
	*value_out = found;
	return rc;
bad:
	gwb_free(found);
	return GWB_EINVAL;
}

/* Decodes one UTF-8 sequence at s[0..n). Returns its length (1..4) and *r, or 0 when the bytes
 * are not valid UTF-8 (overlong, surrogate, above U+10FFFF, truncated). */
static size_t utf8_get(const unsigned char *s, size_t n, uint32_t *r)
{
	static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
	size_t len = s[0] >= 0xf0 && s[0] < 0xf8 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
	if (!len || len > n)
		return 0;
	uint32_t v = s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*r = v;
	return len;
}

/* Go's unicode.IsPrint for runes above ASCII, approximated: it escapes the control, format,
 * separator, private-use and non-character ranges below, which covers what real annotations
 * can hold; unassigned code points are not tabulated and stay raw. */
static int rune_printable(uint32_t r)
{
	static const uint32_t ranges[][2] = {
	    {0x80, 0xa0},       {0xad, 0xad},        {0x600, 0x605},     {0x61c, 0x61c},
	    {0x6dd, 0x6dd},     {0x70f, 0x70f},      {0x890, 0x891},     {0x8e2, 0x8e2},
	    {0x1680, 0x1680},   {0x180e, 0x180e},    {0x2000, 0x200f},   {0x2028, 0x202f},
	    {0x205f, 0x206f},   {0x3000, 0x3000},    {0xe000, 0xf8ff},   {0xfeff, 0xfeff},
	    {0xfff0, 0xfffb},   {0xfffe, 0xffff},    {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
	    {0x13430, 0x1343f}, {0x1bca0, 0x1bca3},  {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
	    {0xe0020, 0xe007f}, {0xf0000, 0x10ffff},
	};
	for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++)
		if (r >= ranges[i][0] && r <= ranges[i][1])
			return 0;
	return 1;
}

static void quote_ascii(struct obuf *b, unsigned char c)
{
	static const char short_in[] = "\a\b\f\n\r\t\v";
	static const char short_out[] = "abfnrtv";
	char esc[12];
	const char *hit = c ? strchr(short_in, c) : NULL;
	if (c == '"' || c == '\\') {
		esc[0] = '\\';
		esc[1] = (char)c;
		ob_put(b, esc, 2);
	} else if (c >= 0x20 && c < 0x7f) {
		ob_putc(b, (char)c);
	} else if (hit) {
		esc[0] = '\\';
		esc[1] = short_out[hit - short_in];
		ob_put(b, esc, 2);
	} else {
		snprintf(esc, sizeof esc, "\\x%02x", c);
		ob_put(b, esc, 4);
	}
}

/* Appends s quoted as strconv.Quote does. */
static void quote(struct obuf *b, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	char esc[16];
	ob_putc(b, '"');
	for (size_t i = 0; i < n;) {
		uint32_t r;
		size_t w;
		if (p[i] < 0x80) {
			quote_ascii(b, p[i++]);
		} else if (!(w = utf8_get(p + i, n - i, &r))) {
			snprintf(esc, sizeof esc, "\\x%02x", p[i++]);
			ob_put(b, esc, 4);
		} else {
			if (rune_printable(r))
				ob_put(b, p + i, w);
			else if (r < 0x10000)
				ob_put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\u%04x", r));
			else
				ob_put(b, esc, (size_t)snprintf(esc, sizeof esc, "\\U%08x", r));
			i += w;
		}
	}
	ob_putc(b, '"');
}

static int cmp_idx(const void *a, const void *b, void *arg)
{
	const char *const *keys = arg;
	return strcmp(keys[*(const size_t *)a], keys[*(const size_t *)b]);
}

char *podinfo_format(const char *const *keys, const char *const *values, size_t n)
{
	size_t *order = gwb_calloc(n ? n : 1, sizeof *order);
	for (size_t i = 0; i < n; i++)
		order[i] = i;
	/* strcmp orders bytes as unsigned, like Go's string comparison. */
	qsort_r(order, n, sizeof *order, cmp_idx, (void *)keys);
	struct obuf b = {0};
	ob_put(&b, "", 0);
	for (size_t i = 0; i < n; i++) {
		if (i)
			ob_putc(&b, '\n');
		ob_put(&b, keys[order[i]], strlen(keys[order[i]]));
		ob_putc(&b, '=');
		quote(&b, values[order[i]]);
	}
	gwb_free(order);
	return b.p;
}
