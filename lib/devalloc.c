/* The device-allocated annotation codec: strict reading of the "gpu" list, and an encoder that
 * reproduces Go's json.Marshal output byte for byte for the fields this project uses. */
#include "lib/devalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/quantity.h"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt,
                                                      ...)
{
	if (err && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return GWB_EINVAL;
}

/* Reads one known resource of a card. Absent: 0 with *has = 0. */
static int parse_resource(json_t *res, const char *name, int idx, int64_t *v, unsigned *has,
                          char *err, size_t errlen)
{
	json_t *q = json_object_get(res, name);
	*has = 0;
	if (!q)
		return 0;
	if (!json_is_string(q))
		return fail(err, errlen, "gpu[%d].resources.%s must be a quantity string", idx,
		            name);
	if (quantity_parse(json_string_value(q), v) != 0)
		return fail(err, errlen, "gpu[%d].resources.%s is not a valid quantity: \"%.64s\"",
		            idx, name, json_string_value(q));
	*has = 1;
	return 0;
}

static int parse_card(json_t *c, int idx, struct devalloc_card *card, char *err, size_t errlen)
{
	if (!json_is_object(c))
		return fail(err, errlen, "gpu[%d] must be an object", idx);
	json_t *minor = json_object_get(c, "minor");
	if (!minor)
		return fail(err, errlen, "gpu[%d].minor is missing", idx);
	if (!json_is_integer(minor) || json_integer_value(minor) < 0 ||
	    json_integer_value(minor) > INT32_MAX)
		return fail(err, errlen, "gpu[%d].minor must be an integer from 0 to %d", idx,
		            INT32_MAX);
	card->minor = (int)json_integer_value(minor);
	json_t *id = json_object_get(c, "id");
	if (id) {
		if (!json_is_string(id) || json_string_length(id) >= sizeof card->id ||
		    memchr(json_string_value(id), '\0', json_string_length(id)))
			return fail(err, errlen, "gpu[%d].id must be a string of at most %zu bytes",
			            idx, sizeof card->id - 1);
		snprintf(card->id, sizeof card->id, "%s", json_string_value(id));
	}
	json_t *res = json_object_get(c, "resources");
	if (!json_is_object(res))
		return fail(err, errlen, "gpu[%d].resources must be an object", idx);
	unsigned has;
	int rc = parse_resource(res, DEVALLOC_RES_CORE, idx, &card->core, &has, err, errlen);
	card->has_core = has;
	if (rc == 0)
		rc =
		    parse_resource(res, DEVALLOC_RES_MEM, idx, &card->mem_bytes, &has, err, errlen);
	card->has_mem = has;
	if (rc == 0)
		rc = parse_resource(res, DEVALLOC_RES_RATIO, idx, &card->ratio, &has, err, errlen);
	card->has_ratio = has;
	return rc;
}

int devalloc_parse(const char *json, size_t len, struct devalloc *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (err && errlen)
		err[0] = '\0';
	struct jx_parse_err pe;
	json_t *root = jx_parse(json, len, &pe);
	if (!root)
		return fail(err, errlen, "%s", pe.message);
	int rc = 0;
	if (!json_is_object(root)) {
		rc = fail(err, errlen, "annotation must be a JSON object");
		goto out;
	}
	json_t *gpu = json_object_get(root, "gpu");
	if (!gpu || json_is_null(gpu))
		goto out;
	if (!json_is_array(gpu)) {
		rc = fail(err, errlen, "\"gpu\" must be a list");
		goto out;
	}
	if (json_array_size(gpu) > DEVALLOC_MAX_CARDS) {
		rc = fail(err, errlen, "\"gpu\" lists %zu cards, at most %d are supported",
		          json_array_size(gpu), DEVALLOC_MAX_CARDS);
		goto out;
	}
	size_t i;
	json_t *c;
	json_array_foreach (gpu, i, c) {
		rc = parse_card(c, (int)i, &out->cards[i], err, errlen);
		if (rc != 0)
			goto out;
		out->ncards++;
	}
out:
	if (rc != 0)
		memset(out, 0, sizeof *out);
	json_decref(root);
	return rc;
}

/* Go's encoder writes <, >, & and U+2028/U+2029 as \u escapes; jansson writes them raw, and
 * they can only occur inside strings, so a byte-level pass is exact. */
static int is_line_sep(const unsigned char *p)
{
	return p[0] == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9);
}

static char *go_escape(const char *s)
{
	size_t n = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '<' || *p == '>' || *p == '&') {
			n += 6;
		} else if (is_line_sep(p)) {
			n += 6;
			p += 2;
		} else {
			n++;
		}
	}
	char *o = gwb_malloc(n + 1), *w = o;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '<' || *p == '>' || *p == '&') {
			w += snprintf(w, 7, "\\u%04x", *p);
		} else if (is_line_sep(p)) {
			w += snprintf(w, 7, "\\u%04x", p[2] == 0xa8 ? 0x2028 : 0x2029);
			p += 2;
		} else {
			*w++ = (char)*p;
		}
	}
	*w = '\0';
	return o;
}

char *devalloc_format(const struct devalloc *a)
{
	char q[QUANTITY_BUF];
	json_t *root = json_object(), *list = json_array();
	for (int i = 0; i < a->ncards && i < DEVALLOC_MAX_CARDS; i++) {
		const struct devalloc_card *c = &a->cards[i];
		json_t *card = json_object(), *res = json_object();
		/* Struct fields keep Go's declaration order; map keys are in sorted order. */
		json_object_set_new(card, "minor", json_integer(c->minor));
		if (c->has_core)
			json_object_set_new(
			    res, DEVALLOC_RES_CORE,
			    json_string(quantity_format_decimal(c->core, q, sizeof q)));
		if (c->has_mem)
			json_object_set_new(
			    res, DEVALLOC_RES_MEM,
			    json_string(quantity_format_binary(c->mem_bytes, q, sizeof q)));
		if (c->has_ratio)
			json_object_set_new(
			    res, DEVALLOC_RES_RATIO,
			    json_string(quantity_format_decimal(c->ratio, q, sizeof q)));
		json_object_set_new(card, "resources", res);
		if (c->id[0])
			json_object_set_new(card, "id", json_string(c->id));
		json_array_append_new(list, card);
	}
	json_object_set_new(root, "gpu", list);
	/* No JSON_SORT_KEYS: jansson keeps insertion order, which is the order built above. */
	size_t flags = JSON_COMPACT;
	size_t n = json_dumpb(root, NULL, 0, flags);
	char *raw = gwb_malloc(n + 1);
	if (json_dumpb(root, raw, n, flags) != n)
		n = 0;
	raw[n] = '\0';
	json_decref(root);
	char *s = go_escape(raw);
	gwb_free(raw);
	return s;
}

json_t *devalloc_to_json(const struct devalloc *a)
{
	json_t *cards = json_array();
	for (int i = 0; i < a->ncards && i < DEVALLOC_MAX_CARDS; i++) {
		const struct devalloc_card *c = &a->cards[i];
		json_t *o = json_object();
		json_object_set_new(o, "minor", json_integer(c->minor));
		json_object_set_new(o, "gpu_memory_mib",
		                    c->has_mem ? json_integer(c->mem_bytes / (1024 * 1024))
		                               : json_null());
		json_object_set_new(o, "gpu_memory_bytes",
		                    c->has_mem ? json_integer(c->mem_bytes) : json_null());
		json_object_set_new(o, "gpu_core_percent",
		                    c->has_core ? json_integer(c->core) : json_null());
		json_object_set_new(o, "gpu_memory_ratio",
		                    c->has_ratio ? json_integer(c->ratio) : json_null());
		jx_set_str_or_null(o, "id", c->id[0] ? c->id : NULL);
		json_array_append_new(cards, o);
	}
	json_t *root = json_object();
	json_object_set_new(root, "cards", cards);
	return root;
}
