/* Selector parsing and matching. Requirements are ANDed; values of `in`/`notin` ORed. */
#include "tools/kubesim/selector.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "tools/kubesim/obj.h"

enum op { OP_EQ, OP_NE, OP_IN, OP_NOTIN, OP_EXISTS, OP_NOTEXISTS, OP_GT, OP_LT };

#define SEL_MAX_REQ 32
#define SEL_MAX_VALS 256 /* values of one in/notin set: controllers list many objects by name */

struct req {
	char *key;
	enum op op;
	char *vals[SEL_MAX_VALS];
	int nvals;
};

struct selector {
	int fields; /* field selector: values come from object paths */
	int nreq;
	struct req req[SEL_MAX_REQ];
};

void selector_free(struct selector *sel)
{
	if (!sel)
		return;
	for (int i = 0; i < sel->nreq; i++) {
		gwb_free(sel->req[i].key);
		for (int j = 0; j < sel->req[i].nvals; j++)
			gwb_free(sel->req[i].vals[j]);
	}
	gwb_free(sel);
}

int selector_eq_term(const struct selector *sel, const char **key, const char **value)
{
	if (!sel || sel->fields)
		return 0;
	for (int i = 0; i < sel->nreq; i++) {
		const struct req *r = &sel->req[i];
		if ((r->op == OP_EQ || r->op == OP_IN) && r->nvals == 1) {
			*key = r->key;
			*value = r->vals[0];
			return 1;
		}
	}
	return 0;
}

static const char *skip_ws(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int key_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '/';
}

static char *take(const char **pp, int (*ok)(char))
{
	const char *p = *pp, *s = p;
	while (*p && ok(*p))
		p++;
	*pp = p;
	return gwb_strndup(s, (size_t)(p - s));
}

static int value_char(char c)
{
	return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.';
}

static int add_val(struct req *r, char *v)
{
	if (r->nvals >= SEL_MAX_VALS) {
		gwb_free(v);
		return -1;
	}
	r->vals[r->nvals++] = v;
	return 0;
}

static int parse_label_req(const char **pp, struct req *r, char *err, size_t errlen)
{
	const char *p = skip_ws(*pp);
	if (*p == '!') {
		p = skip_ws(p + 1);
		r->op = OP_NOTEXISTS;
		r->key = take(&p, key_char);
		if (!r->key[0])
			goto bad;
		*pp = skip_ws(p);
		return 0;
	}
	r->key = take(&p, key_char);
	if (!r->key[0])
		goto bad;
	p = skip_ws(p);
	if (*p == ',' || *p == '\0') {
		r->op = OP_EXISTS;
		*pp = p;
		return 0;
	}
	if (p[0] == '=' && p[1] == '=') {
		r->op = OP_EQ;
		p += 2;
	} else if (p[0] == '!' && p[1] == '=') {
		r->op = OP_NE;
		p += 2;
	} else if (p[0] == '=') {
		r->op = OP_EQ;
		p++;
	} else if (p[0] == '>' || p[0] == '<') {
		r->op = p[0] == '>' ? OP_GT : OP_LT;
		p++;
	} else if (!strncmp(p, "in", 2) && (p[2] == ' ' || p[2] == '(')) {
		r->op = OP_IN;
		p += 2;
	} else if (!strncmp(p, "notin", 5) && (p[5] == ' ' || p[5] == '(')) {
		r->op = OP_NOTIN;
		p += 5;
	} else {
		goto bad;
	}
	p = skip_ws(p);
	if (r->op == OP_IN || r->op == OP_NOTIN) {
		if (*p != '(')
			goto bad;
		p++;
		for (;;) {
			p = skip_ws(p);
			char *v = take(&p, value_char);
			if (add_val(r, v) < 0)
				goto bad;
			p = skip_ws(p);
			if (*p == ',') {
				p++;
				continue;
			}
			if (*p == ')') {
				p++;
				break;
			}
			goto bad;
		}
	} else {
		char *v = take(&p, value_char);
		add_val(r, v);
		if ((r->op == OP_GT || r->op == OP_LT) && !v[0])
			goto bad;
	}
	*pp = skip_ws(p);
	return 0;
bad:
	snprintf(err, errlen, "unable to parse requirement: found '%.40s', expected: key, '!', "
			      "'=', '==', '!=', 'in', 'notin' or a value", p);
	return GWB_EINVAL;
}

int selector_parse_labels(const char *s, struct selector **out, char *err, size_t errlen)
{
	*out = NULL;
	const char *p = skip_ws(s ? s : "");
	if (!*p)
		return 0;
	struct selector *sel = gwb_calloc(1, sizeof *sel);
	for (;;) {
		if (sel->nreq >= SEL_MAX_REQ) {
			snprintf(err, errlen, "too many requirements in the label selector");
			goto fail;
		}
		if (parse_label_req(&p, &sel->req[sel->nreq++], err, errlen) < 0)
			goto fail;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p == '\0')
			break;
		snprintf(err, errlen, "unable to parse requirement: unexpected '%.40s'", p);
		goto fail;
	}
	*out = sel;
	return 0;
fail:
	selector_free(sel);
	return GWB_EINVAL;
}

/* One field term up to an unescaped ','; handles `\,` `\=` `\\` escapes. */
static char *unescape_until(const char **pp, const char *stops)
{
	const char *p = *pp;
	size_t cap = strlen(p) + 1, n = 0;
	char *out = gwb_malloc(cap);
	while (*p && !strchr(stops, *p)) {
		if (*p == '\\' && p[1]) {
			out[n++] = p[1];
			p += 2;
			continue;
		}
		out[n++] = *p++;
	}
	out[n] = '\0';
	*pp = p;
	return out;
}

int selector_parse_fields(const struct res_def *r, const char *s, struct selector **out,
			  char *err, size_t errlen)
{
	*out = NULL;
	const char *p = s ? s : "";
	if (!*skip_ws(p))
		return 0;
	struct selector *sel = gwb_calloc(1, sizeof *sel);
	sel->fields = 1;
	for (;;) {
		if (sel->nreq >= SEL_MAX_REQ) {
			snprintf(err, errlen, "too many requirements in the field selector");
			goto fail;
		}
		struct req *q = &sel->req[sel->nreq++];
		q->key = unescape_until(&p, "=!,");
		char *k = q->key;
		while (*k == ' ')
			memmove(k, k + 1, strlen(k));
		for (size_t l = strlen(k); l && k[l - 1] == ' '; l--)
			k[l - 1] = '\0';
		if (p[0] == '!' && p[1] == '=') {
			q->op = OP_NE;
			p += 2;
		} else if (p[0] == '=' && p[1] == '=') {
			q->op = OP_EQ;
			p += 2;
		} else if (p[0] == '=') {
			q->op = OP_EQ;
			p++;
		} else {
			snprintf(err, errlen, "invalid selector: '%s'; can't understand '%.40s'", s,
				 q->key);
			goto fail;
		}
		add_val(q, unescape_until(&p, ","));
		if (!res_field_supported(r, q->key)) {
			snprintf(err, errlen, "field label not supported: %s", q->key);
			goto fail;
		}
		if (*p == ',') {
			p++;
			continue;
		}
		break;
	}
	*out = sel;
	return 0;
fail:
	selector_free(sel);
	return GWB_EINVAL;
}

/* The string form of a field value, as the API server's field-label conversion gives it. */
static void field_value(const json_t *obj, const char *key, char *buf, size_t len)
{
	const char *path = key;
	if (!strcmp(key, "source"))
		path = "source.component";
	json_t *v = obj_path(obj, path);
	if (json_is_string(v))
		snprintf(buf, len, "%s", json_string_value(v));
	else if (json_is_boolean(v))
		snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
	else if (json_is_integer(v))
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (!strcmp(key, "status.successful") || !strcmp(key, "spec.unschedulable") ||
		 !strcmp(key, "spec.hostNetwork"))
		snprintf(buf, len, "%s", !strcmp(key, "status.successful") ? "0" : "false");
	else
		buf[0] = '\0';
}

static int req_match(const struct req *q, const char *val, int present)
{
	switch (q->op) {
	case OP_EXISTS:
		return present;
	case OP_NOTEXISTS:
		return !present;
	case OP_EQ:
		return present && !strcmp(val, q->vals[0]);
	case OP_NE:
		return !present || strcmp(val, q->vals[0]) != 0;
	case OP_IN:
		if (!present)
			return 0;
		for (int i = 0; i < q->nvals; i++)
			if (!strcmp(val, q->vals[i]))
				return 1;
		return 0;
	case OP_NOTIN:
		if (!present)
			return 1;
		for (int i = 0; i < q->nvals; i++)
			if (!strcmp(val, q->vals[i]))
				return 0;
		return 1;
	case OP_GT:
	case OP_LT: {
		if (!present)
			return 0;
		char *e1, *e2;
		long long a = strtoll(val, &e1, 10), b = strtoll(q->vals[0], &e2, 10);
		if (*e1 || *e2 || !val[0])
			return 0;
		return q->op == OP_GT ? a > b : a < b;
	}
	}
	return 0;
}

int selector_match(const struct selector *sel, const json_t *obj)
{
	if (!sel)
		return 1;
	const json_t *labels = obj_path(obj, "metadata.labels");
	for (int i = 0; i < sel->nreq; i++) {
		const struct req *q = &sel->req[i];
		char buf[512];
		const char *val;
		int present;
		if (sel->fields) {
			field_value(obj, q->key, buf, sizeof buf);
			val = buf;
			present = 1;
		} else {
			val = json_string_value(json_object_get(labels, q->key));
			present = val != NULL;
		}
		if (!req_match(q, val ? val : "", present))
			return 0;
	}
	return 1;
}

int selector_match_doc(const json_t *ls, const json_t *labels)
{
	if (!json_is_object(ls))
		return 1;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(ls, "matchLabels"), k, v)
	{
		const char *have = json_string_value(json_object_get(labels, k));
		if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)) != 0)
			return 0;
	}
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(ls, "matchExpressions"), i, e)
	{
		const char *key = obj_str(e, "key"), *op = obj_str(e, "operator");
		if (!key || !op)
			return 0;
		const char *have = json_string_value(json_object_get(labels, key));
		json_t *vals = json_object_get(e, "values");
		int in = 0;
		size_t j;
		json_t *x;
		json_array_foreach(vals, j, x)
		{
			if (have && json_is_string(x) && !strcmp(have, json_string_value(x)))
				in = 1;
		}
		if (!strcmp(op, "In") && !in)
			return 0;
		if (!strcmp(op, "NotIn") && have && in)
			return 0;
		if (!strcmp(op, "Exists") && !have)
			return 0;
		if (!strcmp(op, "DoesNotExist") && have)
			return 0;
	}
	return 1;
}
