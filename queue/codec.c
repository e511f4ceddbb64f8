/* The Job intent codec: msgpack encoding into a caller's fixed buffer, a structural pre-check
 * that bounds what msgpack-c may allocate, and a strict decoder. Also stream id helpers. */
#include "queue/codec.h"

#include <errno.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"

void q_keys_init(struct q_keys *k, const char *prefix)
{
	snprintf(k->stream, sizeof k->stream, "%.80s:intents", prefix);
	snprintf(k->dead, sizeof k->dead, "%.80s:intents:dead", prefix);
}

/* ---- encoding ---- */

struct fixbuf {
	char *buf;
	size_t cap, len;
	int overflow;
};

static int fixbuf_write(void *data, const char *buf, size_t len)
{
	struct fixbuf *b = data;
	if (b->overflow || len > b->cap - b->len) {
		b->overflow = 1;
		return -1;
	}
	memcpy(b->buf + b->len, buf, len);
	b->len += len;
	return 0;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
	size_t n = strlen(s);
	msgpack_pack_str(pk, n);
	msgpack_pack_str_body(pk, s, n);
}

static void pack_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
	pack_str(pk, k);
	pack_str(pk, v);
}

static void pack_kv_int(msgpack_packer *pk, const char *k, int64_t v)
{
	pack_str(pk, k);
	msgpack_pack_int64(pk, v);
}

/* A short identifier-like string: 1..max-1 visible ASCII bytes. */
static int visible(const char *s, size_t max)
{
	size_t n = strnlen(s, max);
	if (n == 0 || n >= max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return 0;
	return 1;
}

static int kind_ok(const char *k)
{
	return strcmp(k, "create") == 0 || strcmp(k, "cancel") == 0;
}

int q_intent_encode(const struct q_intent *in, char *buf, size_t cap, size_t *len)
{
	if (!kind_ok(in->kind) || !visible(in->task, sizeof in->task) ||
	    !visible(in->job, sizeof in->job) || !visible(in->team, sizeof in->team) ||
	    in->id <= 0 || in->attempt <= 0 || strnlen(in->name, sizeof in->name) >= sizeof in->name ||
	    strnlen(in->qos, sizeof in->qos) >= sizeof in->qos ||
	    strnlen(in->experiment, sizeof in->experiment) >= sizeof in->experiment)
		return GWB_EINVAL;
	struct fixbuf b = { buf, cap, 0, 0 };
	msgpack_packer pk;
	msgpack_packer_init(&pk, &b, fixbuf_write);
	msgpack_pack_map(&pk, 15);
	pack_kv_int(&pk, "v", Q_INTENT_VERSION);
	pack_kv_int(&pk, "id", in->id);
	pack_kv_str(&pk, "kind", in->kind);
	pack_kv_str(&pk, "task", in->task);
	pack_kv_str(&pk, "job", in->job);
	pack_kv_str(&pk, "team", in->team);
	pack_kv_int(&pk, "attempt", in->attempt);
	pack_kv_int(&pk, "created_at", in->created_at);
	pack_kv_str(&pk, "name", in->name);
	pack_kv_int(&pk, "gpu_memory_mib", in->gpu_memory_mib);
	pack_kv_int(&pk, "gpu_core_percent", in->gpu_core_percent);
	pack_kv_int(&pk, "gpu_count", in->gpu_count);
	pack_kv_int(&pk, "duration_seconds", in->duration_seconds);
	pack_kv_str(&pk, "qos", in->qos);
	pack_kv_str(&pk, "experiment", in->experiment);
	if (b.overflow)
		return GWB_ETOOBIG;
	*len = b.len;
	return 0;
}

/* ---- structural pre-check ---- */

static int need(size_t len, size_t off, size_t n)
{
	return n <= len - off;
}

static uint64_t be(const unsigned char *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

/* Skips one value at *off. Returns 0, or -1 when it is malformed, truncated, too deep, or a
 * container declares more items than bytes remain (each item takes at least one byte). */
static int mp_skip(const unsigned char *p, size_t len, size_t *off, int depth)
{
	if (depth < 0 || !need(len, *off, 1))
		return -1;
	unsigned c = p[(*off)++];
	uint64_t n = 0;      /* items of a container */
	uint64_t bytes = 0;  /* payload bytes to skip */
	int w;
	if (c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3)
		return 0;
	if (c >= 0x80 && c <= 0x8f) {
		n = 2 * (uint64_t)(c & 0x0f);
		goto items;
	}
	if (c >= 0x90 && c <= 0x9f) {
		n = c & 0x0f;
		goto items;
	}
	if (c >= 0xa0 && c <= 0xbf) {
		bytes = c & 0x1f;
		goto skip;
	}
	switch (c) {
	case 0xc4: case 0xd9: w = 1; goto sized;       /* bin8, str8 */
	case 0xc5: case 0xda: w = 2; goto sized;       /* bin16, str16 */
	case 0xc6: case 0xdb: w = 4; goto sized;       /* bin32, str32 */
	case 0xc7: w = 1; bytes = 1; goto ext;         /* ext8: length then type */
	case 0xc8: w = 2; bytes = 1; goto ext;
	case 0xc9: w = 4; bytes = 1; goto ext;
	case 0xca: bytes = 4; goto skip;
	case 0xcb: bytes = 8; goto skip;
	case 0xcc: case 0xd0: bytes = 1; goto skip;
	case 0xcd: case 0xd1: bytes = 2; goto skip;
	case 0xce: case 0xd2: bytes = 4; goto skip;
	case 0xcf: case 0xd3: bytes = 8; goto skip;
	case 0xd4: bytes = 2; goto skip;               /* fixext1: type + 1 */
	case 0xd5: bytes = 3; goto skip;
	case 0xd6: bytes = 5; goto skip;
	case 0xd7: bytes = 9; goto skip;
	case 0xd8: bytes = 17; goto skip;
	case 0xdc: w = 2; goto array;
	case 0xdd: w = 4; goto array;
	case 0xde: w = 2; goto map;
	case 0xdf: w = 4; goto map;
	default: return -1; /* 0xc1 is never used */
	}
sized:
	if (!need(len, *off, (size_t)w))
		return -1;
	bytes = be(p + *off, w);
	*off += (size_t)w;
	goto skip;
ext:
	if (!need(len, *off, (size_t)w))
		return -1;
	bytes += be(p + *off, w);
	*off += (size_t)w;
	goto skip;
array:
	if (!need(len, *off, (size_t)w))
		return -1;
	n = be(p + *off, w);
	*off += (size_t)w;
	goto items;
map:
	if (!need(len, *off, (size_t)w))
		return -1;
	n = 2 * be(p + *off, w);
	*off += (size_t)w;
	goto items;
skip:
	if (bytes > len - *off)
		return -1;
	*off += (size_t)bytes;
	return 0;
items:
	if (n > len - *off)
		return -1;
	for (uint64_t i = 0; i < n; i++)
		if (mp_skip(p, len, off, depth - 1) < 0)
			return -1;
	return 0;
}

int q_msgpack_check(const char *buf, size_t len, int max_depth)
{
	size_t off = 0;
	if (mp_skip((const unsigned char *)buf, len, &off, max_depth) < 0 || off != len)
		return GWB_EPROTO;
	return 0;
}

/* ---- decoding ---- */

enum ftype { F_INT, F_STR };

struct field {
	const char *name;
	enum ftype type;
	int required;
	size_t off;   /* into struct q_intent */
	size_t size;  /* for strings: the buffer size */
	int64_t min, max;
};

#define FI(n, f, req, lo, hi) { n, F_INT, req, offsetof(struct q_intent, f), 0, lo, hi }
#define FS(n, f, req) { n, F_STR, req, offsetof(struct q_intent, f), \
			sizeof(((struct q_intent *)0)->f), 0, 0 }

/* Ranges are wide on purpose: the codec checks shape, the API already checked the rules.
 * Every field is required: this version's encoder always writes all of them. */
static const struct field fields[] = {
	FI("v", version, 1, 1, 1000000),
	FI("id", id, 1, 1, INT64_MAX),
	FS("kind", kind, 1),
	FS("task", task, 1),
	FS("job", job, 1),
	FS("team", team, 1),
	FI("attempt", attempt, 1, 1, 1000000),
	FI("created_at", created_at, 1, 0, INT64_MAX),
	FS("name", name, 1),
	FI("gpu_memory_mib", gpu_memory_mib, 1, 0, INT64_C(1) << 40),
	FI("gpu_core_percent", gpu_core_percent, 1, 0, 1000000),
	FI("gpu_count", gpu_count, 1, 0, 1000000),
	FI("duration_seconds", duration_seconds, 1, 0, INT64_C(1) << 40),
	FS("qos", qos, 1),
	FS("experiment", experiment, 1),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

static int bad(char *err, size_t errlen, const char *fmt, const char *what)
{
	snprintf(err, errlen, fmt, what);
	return GWB_EPROTO;
}

static int read_field(const struct field *f, const msgpack_object *v, struct q_intent *out,
		      char *err, size_t errlen)
{
	char *dst = (char *)out + f->off;
	if (f->type == F_STR) {
		if (v->type != MSGPACK_OBJECT_STR)
			return bad(err, errlen, "field %s: not a string", f->name);
		uint32_t n = v->via.str.size;
		if (n >= f->size)
			return bad(err, errlen, "field %s: too long", f->name);
		if (memchr(v->via.str.ptr, '\0', n))
			return bad(err, errlen, "field %s: contains a NUL byte", f->name);
		memcpy(dst, v->via.str.ptr, n);
		dst[n] = '\0';
		return 0;
	}
	int64_t x;
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (v->via.u64 > (uint64_t)INT64_MAX)
			return bad(err, errlen, "field %s: out of range", f->name);
		x = (int64_t)v->via.u64;
	} else if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		x = v->via.i64;
	} else {
		return bad(err, errlen, "field %s: not an integer", f->name);
	}
	if (x < f->min || x > f->max)
		return bad(err, errlen, "field %s: out of range", f->name);
	memcpy(dst, &x, sizeof x);
	return 0;
}

static int decode_map(const msgpack_object *o, struct q_intent *out, char *err, size_t errlen)
{
	if (o->type != MSGPACK_OBJECT_MAP)
		return bad(err, errlen, "%s", "body is not a map");
	unsigned seen = 0;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		if (k->type != MSGPACK_OBJECT_STR)
			return bad(err, errlen, "%s", "a key is not a string");
		for (size_t j = 0; j < NFIELDS; j++) {
			if (strlen(fields[j].name) != k->via.str.size ||
			    memcmp(fields[j].name, k->via.str.ptr, k->via.str.size) != 0)
				continue;
			if (seen & (1u << j))
				return bad(err, errlen, "field %s: repeated", fields[j].name);
			seen |= 1u << j;
			int rc = read_field(&fields[j], &o->via.map.ptr[i].val, out, err, errlen);
			if (rc)
				return rc;
		}
		/* Unknown keys are ignored: a later minor addition must not poison old readers;
		 * an incompatible change bumps "v". */
	}
	for (size_t j = 0; j < NFIELDS; j++)
		if (fields[j].required && !(seen & (1u << j)))
			return bad(err, errlen, "field %s: missing", fields[j].name);
	if (out->version != Q_INTENT_VERSION) {
		snprintf(err, errlen, "version %" PRId64 " is not supported (this build reads %d)",
			 out->version, Q_INTENT_VERSION);
		return GWB_EPROTO;
	}
	if (!kind_ok(out->kind))
		return bad(err, errlen, "kind %s: not create or cancel", out->kind);
	if (!visible(out->task, sizeof out->task) || !visible(out->job, sizeof out->job) ||
	    !visible(out->team, sizeof out->team))
		return bad(err, errlen, "%s", "task, job and team must be visible ASCII");
	return 0;
}

int q_intent_decode(const char *buf, size_t len, struct q_intent *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof *out);
	if (len > Q_BODY_MAX) {
		snprintf(err, errlen, "body of %zu bytes is over the %d-byte limit", len, Q_BODY_MAX);
		return GWB_ETOOBIG;
	}
	if (len == 0)
		return bad(err, errlen, "%s", "body is empty");
	/* msgpack-c sizes its allocations from the declared container sizes; the pre-check
	 * guarantees those fit in the payload, so a 5-byte body cannot ask for gigabytes. */
	if (q_msgpack_check(buf, len, Q_BODY_MAX_DEPTH))
		return bad(err, errlen, "%s", "body is not one well-formed msgpack value");
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	int rc;
	if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS || off != len)
		rc = bad(err, errlen, "%s", "body is not one msgpack value");
	else
		rc = decode_map(&u.data, out, err, errlen);
	msgpack_unpacked_destroy(&u); /* every msgpack_unpacked is destroyed, on every path */
	if (rc)
		memset(out, 0, sizeof *out);
	return rc;
}

json_t *q_intent_json(const struct q_intent *in)
{
	return json_pack("{s:I, s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:I, s:s, "
			 "s:s}",
			 "v", (json_int_t)in->version, "id", (json_int_t)in->id, "kind", in->kind,
			 "task", in->task, "job", in->job, "team", in->team, "attempt",
			 (json_int_t)in->attempt, "created_at", (json_int_t)in->created_at, "name",
			 in->name, "gpu_memory_mib", (json_int_t)in->gpu_memory_mib,
			 "gpu_core_percent", (json_int_t)in->gpu_core_percent, "gpu_count",
			 (json_int_t)in->gpu_count, "duration_seconds",
			 (json_int_t)in->duration_seconds, "qos", in->qos, "experiment",
			 in->experiment);
}

/* ---- stream ids ---- */

static int parse_u64(const char *s, const char **end, uint64_t *v)
{
	if (*s < '0' || *s > '9')
		return -1;
	char *e;
	errno = 0;
	unsigned long long x = strtoull(s, &e, 10);
	if (errno)
		return -1;
	*v = x;
	*end = e;
	return 0;
}

int q_id_parse(const char *s, struct q_id *id)
{
	const char *e;
	if (!s || parse_u64(s, &e, &id->ms) < 0)
		return GWB_EINVAL;
	id->seq = 0;
	if (*e == '\0')
		return 0;
	if (*e != '-' || parse_u64(e + 1, &e, &id->seq) < 0 || *e)
		return GWB_EINVAL;
	return 0;
}

int q_id_cmp(struct q_id a, struct q_id b)
{
	if (a.ms != b.ms)
		return a.ms < b.ms ? -1 : 1;
	if (a.seq != b.seq)
		return a.seq < b.seq ? -1 : 1;
	return 0;
}

struct q_id q_id_next(struct q_id a)
{
	if (a.seq == UINT64_MAX) {
		a.ms++;
		a.seq = 0;
	} else {
		a.seq++;
	}
	return a;
}

char *q_id_fmt(struct q_id a, char *buf, size_t len)
{
	snprintf(buf, len, "%" PRIu64 "-%" PRIu64, a.ms, a.seq);
	return buf;
}
