/* The Prometheus text parser (promparse.h). */
#include "lib/promparse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The bytes still to read of one line. */
struct cur {
	const char *p, *end;
};

static int is_name_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
}

static int is_name_char(char c)
{
	return is_name_start(c) || (c >= '0' && c <= '9');
}

static void skip_blank(struct cur *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

/* A name into out (colons allowed when metric is set): 0, or -1. */
static int read_name(struct cur *c, char *out, int metric)
{
	size_t n = 0;
	if (c->p == c->end || !is_name_start(*c->p) || (!metric && *c->p == ':'))
		return -1;
	while (c->p < c->end && is_name_char(*c->p) && (metric || *c->p != ':')) {
		if (n + 1 >= PROMP_NAME_MAX)
			return -1;
		out[n++] = *c->p++;
	}
	out[n] = '\0';
	return 0;
}

/* A quoted label value, unescaped into out: 0, or -1. */
static int read_value(struct cur *c, char *out)
{
	size_t n = 0;
	if (c->p == c->end || *c->p != '"')
		return -1;
	c->p++;
	while (c->p < c->end && *c->p != '"') {
		char ch = *c->p++;
		if (ch == '\\') {
			if (c->p == c->end)
				return -1;
			char e = *c->p++;
			ch = e == 'n' ? '\n' : e == '\\' ? '\\' : e == '"' ? '"' : 0;
			if (!ch) /* not an escape the format knows: kept as written */
				c->p--, ch = '\\';
		} else if (ch == '\0') {
			return -1;
		}
		if (n + 1 >= PROMP_VALUE_MAX)
			return -1;
		out[n++] = ch;
	}
	if (c->p == c->end)
		return -1;
	c->p++;
	out[n] = '\0';
	return 0;
}

static int read_labels(struct cur *c, struct promp_sample *s)
{
	c->p++; /* '{' */
	for (;;) {
		skip_blank(c);
		if (c->p < c->end && *c->p == '}') {
			c->p++;
			return 0;
		}
		if (s->nlabels == PROMP_LABELS_MAX)
			return -1;
		struct promp_label *l = &s->labels[s->nlabels];
		if (read_name(c, l->name, 0))
			return -1;
		skip_blank(c);
		if (c->p == c->end || *c->p++ != '=')
			return -1;
		skip_blank(c);
		if (read_value(c, l->value))
			return -1;
		s->nlabels++;
		skip_blank(c);
		if (c->p < c->end && *c->p == ',')
			c->p++;
		else if (c->p == c->end || *c->p != '}')
			return -1;
	}
}

/* The next blank-separated token: its length (0 at the end), bounded by max. */
static size_t token(struct cur *c, char *out, size_t max)
{
	skip_blank(c);
	size_t n = 0;
	while (c->p < c->end && *c->p != ' ' && *c->p != '\t') {
		if (n + 1 >= max)
			return 0;
		out[n++] = *c->p++;
	}
	out[n] = '\0';
	return n;
}

/* A value as Go's ParseFloat reads the format's: decimal with an exponent, NaN, ±Inf. */
static int parse_value(const char *t, double *v)
{
	const char *u = t + (*t == '+' || *t == '-');
	if (!strcmp(u, "Inf") || !strcmp(u, "inf") || !strcmp(u, "+Inf")) {
		*v = *t == '-' ? -INFINITY : INFINITY;
		return 0;
	}
	if (!strcmp(t, "NaN") || !strcmp(t, "nan")) {
		*v = NAN;
		return 0;
	}
	/* strtod would take hexadecimal, "infinity" and "nan(...)": the format has none. */
	for (const char *p = u; *p; p++)
		if (!((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
		      *p == '-'))
			return -1;
	char *end;
	errno = 0;
	*v = strtod(t, &end);
	return *t && !*end && errno != EINVAL ? 0 : -1;
}

static int parse_ts(const char *t, int64_t *ts)
{
	char *end;
	errno = 0;
	long long v = strtoll(t, &end, 10);
	if (!*t || *end || errno)
		return -1;
	*ts = (int64_t)v;
	return 0;
}

int promp_parse_line(const char *line, size_t len, struct promp_sample *s)
{
	struct cur c = { line, line + len };
	char tok[400]; /* a value written with %f can be 300 digits long */
	s->nlabels = 0;
	s->has_ts = 0;
	skip_blank(&c);
	if (read_name(&c, s->name, 1))
		return -1;
	skip_blank(&c);
	if (c.p < c.end && *c.p == '{' && read_labels(&c, s))
		return -1;
	if (!token(&c, tok, sizeof tok) || parse_value(tok, &s->value))
		return -1;
	if (token(&c, tok, sizeof tok)) {
		if (parse_ts(tok, &s->ts_ms))
			return -1;
		s->has_ts = 1;
	}
	skip_blank(&c);
	return c.p == c.end ? 0 : -1;
}

int promp_parse(const char *buf, size_t len, size_t max_samples, promp_fn *fn, void *arg,
		struct promp_stats *st)
{
	struct promp_stats local;
	if (!st)
		st = &local;
	memset(st, 0, sizeof *st);
	struct promp_sample s;
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		size_t n = (size_t)(eol - p);
		if (n && p[n - 1] == '\r')
			n--;
		st->lines++;
		const char *q = p;
		while (q < p + n && (*q == ' ' || *q == '\t'))
			q++;
		if (q < p + n && *q != '#') {
			if (st->samples == max_samples) {
				st->truncated = 1;
				return 0;
			}
			if (memchr(p, '\0', n) || promp_parse_line(p, n, &s)) {
				st->bad_lines++;
			} else {
				st->samples++;
				int rc = fn(&s, arg);
				if (rc)
					return rc;
			}
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

const char *promp_label(const struct promp_sample *s, const char *name)
{
	for (int i = 0; i < s->nlabels; i++)
		if (!strcmp(s->labels[i].name, name))
			return s->labels[i].value;
	return NULL;
}
