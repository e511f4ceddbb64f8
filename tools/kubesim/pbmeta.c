/* Protobuf wire format: varint keys (field << 3 | wire type); only types 0 (varint), 1 (64-bit),
 * 2 (length-delimited) and 5 (32-bit) occur. Every length is checked against the input. */
#include "tools/kubesim/pbmeta.h"

#include <stdint.h>
#include <string.h>

#include "lib/alloc.h"

struct pb {
	const unsigned char *p, *end;
};

static int varint(struct pb *b, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (b->p >= b->end)
			return -1;
		unsigned char c = *b->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

/* Next field: its number and, for length-delimited ones, the bytes. Returns 1, 0 at the end,
 * -1 when malformed. */
static int next(struct pb *b, unsigned *field, struct pb *sub)
{
	if (b->p >= b->end)
		return 0;
	uint64_t key, v;
	if (varint(b, &key) < 0)
		return -1;
	*field = (unsigned)(key >> 3);
	sub->p = sub->end = NULL;
	switch (key & 7) {
	case 0:
		return varint(b, &v) < 0 ? -1 : 1;
	case 1:
		if (b->end - b->p < 8)
			return -1;
		b->p += 8;
		return 1;
	case 5:
		if (b->end - b->p < 4)
			return -1;
		b->p += 4;
		return 1;
	case 2:
		if (varint(b, &v) < 0 || v > (uint64_t)(b->end - b->p))
			return -1;
		sub->p = b->p;
		sub->end = b->p + v;
		b->p += v;
		return 1;
	default:
		return -1;
	}
}

static json_t *str(const struct pb *s)
{
	return json_stringn((const char *)s->p, (size_t)(s->end - s->p));
}

/* map<string,string> entry: key = 1, value = 2. */
static int map_entry(struct pb s, json_t *map)
{
	unsigned f;
	struct pb sub;
	json_t *k = NULL, *v = NULL;
	int rc;
	while ((rc = next(&s, &f, &sub)) == 1) {
		if (f == 1 && sub.p) {
			json_decref(k);
			k = str(&sub);
		} else if (f == 2 && sub.p) {
			json_decref(v);
			v = str(&sub);
		}
	}
	if (rc == 0 && json_is_string(k))
		json_object_set(map, json_string_value(k), v ? v : json_string(""));
	json_decref(k);
	json_decref(v);
	return rc;
}

static json_t *object_meta(struct pb s)
{
	json_t *m = json_object();
	unsigned f;
	struct pb sub;
	int rc;
	while ((rc = next(&s, &f, &sub)) == 1) {
		if (!sub.p)
			continue;
		if (f == 1)
			json_object_set_new(m, "name", str(&sub));
		else if (f == 2)
			json_object_set_new(m, "generateName", str(&sub));
		else if (f == 3)
			json_object_set_new(m, "namespace", str(&sub));
		else if (f == 11 || f == 12) {
			const char *key = f == 11 ? "labels" : "annotations";
			json_t *map = json_object_get(m, key);
			if (!map) {
				map = json_object();
				json_object_set_new(m, key, map);
			}
			if (map_entry(sub, map) < 0)
				rc = -1;
		}
		if (rc < 0)
			break;
	}
	if (rc < 0) {
		json_decref(m);
		return NULL;
	}
	return m;
}

int pbmeta_is_protobuf(const char *buf, size_t len)
{
	return len >= 4 && !memcmp(buf, "k8s\0", 4);
}

json_t *pbmeta_decode(const char *buf, size_t len)
{
	if (!pbmeta_is_protobuf(buf, len))
		return NULL;
	struct pb b = { (const unsigned char *)buf + 4, (const unsigned char *)buf + len };
	json_t *out = json_object();
	unsigned f;
	struct pb sub;
	int rc;
	while ((rc = next(&b, &f, &sub)) == 1) {
		if (f == 1 && sub.p) { /* TypeMeta: apiVersion = 1, kind = 2 */
			unsigned g;
			struct pb t;
			while (next(&sub, &g, &t) == 1)
				if (t.p)
					json_object_set_new(out, g == 1 ? "apiVersion" : "kind", str(&t));
		} else if (f == 2 && sub.p) { /* raw: the object; metadata is its field 1 */
			unsigned g;
			struct pb t;
			int r2;
			while ((r2 = next(&sub, &g, &t)) == 1) {
				if (g == 1 && t.p) {
					json_t *m = object_meta(t);
					if (!m) {
						json_decref(out);
						return NULL;
					}
					json_object_set_new(out, "metadata", m);
				}
			}
			if (r2 < 0) {
				json_decref(out);
				return NULL;
			}
		}
	}
	if (rc < 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}
