/* The intent codec: round trip, refusal of every kind of malformed or oversized body (with a
 * mutation loop as a poor man's fuzzer), stream ids and the Redis URL parser. */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "queue/codec.h"
#include "queue/conn.h"
#include "tests/harness/t.h"

static struct q_intent sample(void)
{
	struct q_intent in;
	memset(&in, 0, sizeof in);
	in.id = 42;
	snprintf(in.kind, sizeof in.kind, "create");
	snprintf(in.task, sizeof in.task, "t-abcdefghijkl");
	snprintf(in.job, sizeof in.job, "gwb-t-abcdefghijkl");
	snprintf(in.team, sizeof in.team, "alpha");
	in.attempt = 1;
	in.created_at = 1796000000000;
	snprintf(in.name, sizeof in.name, "demo \xc3\xa9t\xc3\xa9");
	in.gpu_memory_mib = 1024;
	in.gpu_core_percent = 25;
	in.gpu_count = 2;
	in.duration_seconds = 60;
	snprintf(in.qos, sizeof in.qos, "LS");
	snprintf(in.experiment, sizeof in.experiment, "normal");
	return in;
}

TEST(queue_codec_round_trip)
{
	struct q_intent in = sample(), out;
	char buf[Q_BODY_MAX], err[160];
	size_t len;
	CHECK_INT(q_intent_encode(&in, buf, sizeof buf, &len), 0);
	CHECK(len > 50 && len < 400);
	CHECKF(q_intent_decode(buf, len, &out, err, sizeof err) == 0, "decode: %s", err);
	CHECK_INT(out.version, Q_INTENT_VERSION);
	CHECK_INT(out.id, 42);
	CHECK_STR(out.kind, "create");
	CHECK_STR(out.task, in.task);
	CHECK_STR(out.job, in.job);
	CHECK_STR(out.team, "alpha");
	CHECK_STR(out.name, in.name);
	CHECK_INT(out.created_at, in.created_at);
	CHECK_INT(out.gpu_memory_mib, 1024);
	CHECK_INT(out.gpu_core_percent, 25);
	CHECK_INT(out.gpu_count, 2);
	CHECK_INT(out.duration_seconds, 60);
	CHECK_STR(out.qos, "LS");
	CHECK_STR(out.experiment, "normal");
	json_t *j = q_intent_json(&out);
	CHECK_STR(json_string_value(json_object_get(j, "task")), in.task);
	json_decref(j);
}

TEST(queue_codec_encode_refuses_bad_intents)
{
	char buf[Q_BODY_MAX];
	size_t len;
	struct q_intent in = sample();
	snprintf(in.kind, sizeof in.kind, "delete");
	CHECK_INT(q_intent_encode(&in, buf, sizeof buf, &len), GWB_EINVAL);
	in = sample();
	in.task[0] = '\0';
	CHECK_INT(q_intent_encode(&in, buf, sizeof buf, &len), GWB_EINVAL);
	in = sample();
	CHECK_INT(q_intent_encode(&in, buf, 40, &len), GWB_ETOOBIG);
}

/* Packs a map from alternating key/value specs: "s:text" strings, "i:123" integers. */
static size_t pack_map(char *out, size_t cap, const char *const *kv)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	int n = 0;
	while (kv[2 * n])
		n++;
	msgpack_pack_map(&pk, (size_t)n);
	for (int i = 0; i < n; i++) {
		msgpack_pack_str(&pk, strlen(kv[2 * i]));
		msgpack_pack_str_body(&pk, kv[2 * i], strlen(kv[2 * i]));
		const char *v = kv[2 * i + 1];
		if (v[0] == 'i')
			msgpack_pack_int64(&pk, strtoll(v + 2, NULL, 10));
		else {
			msgpack_pack_str(&pk, strlen(v + 2));
			msgpack_pack_str_body(&pk, v + 2, strlen(v + 2));
		}
	}
	size_t len = sb.size < cap ? sb.size : cap;
	memcpy(out, sb.data, len);
	msgpack_sbuffer_destroy(&sb);
	return len;
}

#define BASE_FIELDS                                                                         \
	"id", "i:7", "kind", "s:cancel", "task", "s:t-x", "job", "s:gwb-t-x", "team", "s:a",  \
		"attempt", "i:1", "created_at", "i:5", "name", "s:n", "gpu_memory_mib", "i:1", \
		"gpu_core_percent", "i:1", "gpu_count", "i:1", "duration_seconds", "i:1",     \
		"qos", "s:LS", "experiment", "s:normal"

static int decode_kv(const char *const *kv, char *err, size_t errlen)
{
	char buf[Q_BODY_MAX];
	size_t len = pack_map(buf, sizeof buf, kv);
	struct q_intent out;
	return q_intent_decode(buf, len, &out, err, errlen);
}

TEST(queue_codec_decode_refuses_malformed_with_reason)
{
	char err[160];
	CHECK_INT(decode_kv((const char *[]){ "v", "i:1", BASE_FIELDS, NULL }, err, sizeof err), 0);
	CHECK_INT(decode_kv((const char *[]){ "v", "i:2", BASE_FIELDS, NULL }, err, sizeof err),
		  GWB_EPROTO);
	CHECKF(strstr(err, "version 2"), "%s", err);
	CHECK_INT(decode_kv((const char *[]){ BASE_FIELDS, NULL }, err, sizeof err), GWB_EPROTO);
	CHECKF(strstr(err, "field v: missing"), "%s", err);
	CHECK_INT(decode_kv((const char *[]){ "v", "s:1", BASE_FIELDS, NULL }, err, sizeof err),
		  GWB_EPROTO);
	CHECKF(strstr(err, "not an integer"), "%s", err);
	CHECK_INT(decode_kv((const char *[]){ "v", "i:1", "v", "i:1", BASE_FIELDS, NULL }, err,
			    sizeof err),
		  GWB_EPROTO);
	CHECKF(strstr(err, "repeated"), "%s", err);
	/* An unknown extra key is tolerated (a later minor addition). */
	CHECK_INT(decode_kv((const char *[]){ "v", "i:1", "extra", "s:x", BASE_FIELDS, NULL }, err,
			    sizeof err),
		  0);
	/* A task name longer than its buffer. */
	char longname[200];
	memset(longname, 'x', sizeof longname);
	memcpy(longname, "s:", 2);
	longname[sizeof longname - 1] = '\0';
	const char *kv[] = { "v", "i:1", BASE_FIELDS, NULL };
	kv[7] = longname; /* the value of "task" */
	CHECK_INT(decode_kv(kv, err, sizeof err), GWB_EPROTO);
	CHECKF(strstr(err, "task: too long"), "%s", err);

	struct q_intent out;
	CHECK_INT(q_intent_decode("", 0, &out, err, sizeof err), GWB_EPROTO);
	CHECK_INT(q_intent_decode("\x93\x01\x02\x03", 4, &out, err, sizeof err), GWB_EPROTO);
	CHECKF(strstr(err, "not a map"), "%s", err);
	static char big[Q_BODY_MAX + 1];
	CHECK_INT(q_intent_decode(big, sizeof big, &out, err, sizeof err), GWB_ETOOBIG);
}

TEST(queue_codec_precheck_bounds_declared_sizes)
{
	/* Containers and strings declaring more than the bytes that follow. */
	CHECK_INT(q_msgpack_check("\xdd\xff\xff\xff\xff", 5, 8), GWB_EPROTO);
	CHECK_INT(q_msgpack_check("\xdf\x7f\xff\xff\xff\x01", 6, 8), GWB_EPROTO);
	CHECK_INT(q_msgpack_check("\xdb\xff\xff\xff\xff", 5, 8), GWB_EPROTO);
	CHECK_INT(q_msgpack_check("\xc9\xff\xff\xff\xff\x01", 6, 8), GWB_EPROTO);
	CHECK_INT(q_msgpack_check("\xc1", 1, 8), GWB_EPROTO);
	CHECK_INT(q_msgpack_check("\x01\x02", 2, 8), GWB_EPROTO); /* trailing bytes */
	CHECK_INT(q_msgpack_check("\x91\x91\x91\x01", 4, 2), GWB_EPROTO); /* too deep */
	CHECK_INT(q_msgpack_check("\x91\x91\x91\x01", 4, 3), 0);
	CHECK_INT(q_msgpack_check("\x82\xa1k\xc0\xa1j\xcb\x00\x00\x00\x00\x00\x00\x00\x00", 15,
				  8),
		  0);
}

TEST_T(queue_codec_mutations_never_crash, 60)
{
	struct q_intent in = sample(), out;
	char good[Q_BODY_MAX], buf[Q_BODY_MAX], err[160];
	size_t len;
	CHECK_INT(q_intent_encode(&in, good, sizeof good, &len), 0);
	unsigned seed = 12345;
	int accepted = 0;
	for (int iter = 0; iter < 200000; iter++) {
		memcpy(buf, good, len);
		size_t n = len;
		int flips = 1 + (int)(rand_r(&seed) % 4);
		for (int f = 0; f < flips; f++)
			buf[rand_r(&seed) % n] = (char)rand_r(&seed);
		if (rand_r(&seed) % 4 == 0)
			n = rand_r(&seed) % (len + 1); /* truncation */
		int rc = q_intent_decode(buf, n, &out, err, sizeof err);
		CHECK(rc == 0 || rc == GWB_EPROTO);
		if (rc == 0) {
			accepted++;
			CHECK(strlen(out.task) < sizeof out.task);
		}
	}
	/* Random bytes, whole. */
	for (int iter = 0; iter < 50000; iter++) {
		size_t n = rand_r(&seed) % 64;
		for (size_t i = 0; i < n; i++)
			buf[i] = (char)rand_r(&seed);
		int rc = q_intent_decode(buf, n, &out, err, sizeof err);
		CHECK(rc == GWB_EPROTO);
	}
	t_log("%d mutated bodies still decoded (changed values only)", accepted);
}

TEST(queue_ids_parse_compare_next)
{
	struct q_id a, b;
	CHECK_INT(q_id_parse("1796-5", &a), 0);
	CHECK_INT(q_id_parse("1796", &b), 0);
	CHECK(q_id_cmp(b, a) < 0);
	CHECK(q_id_cmp(a, a) == 0);
	CHECK_INT(q_id_parse("12-3", &b), 0);
	CHECK(q_id_cmp(b, a) < 0); /* numeric, not string order */
	char buf[48];
	CHECK_STR(q_id_fmt(q_id_next(a), buf, sizeof buf), "1796-6");
	CHECK_INT(q_id_parse("x-1", &a), GWB_EINVAL);
	CHECK_INT(q_id_parse("1-", &a), GWB_EINVAL);
	CHECK_INT(q_id_parse("-1", &a), GWB_EINVAL);
	CHECK_INT(q_id_parse("1-2-3", &a), GWB_EINVAL);
	struct q_keys k;
	q_keys_init(&k, "gwb");
	CHECK_STR(k.stream, "gwb:intents");
	CHECK_STR(k.dead, "gwb:intents:dead");
}

TEST(queue_redis_urls)
{
	struct q_addr a;
	char err[160];
	CHECK_INT(q_addr_parse("unix:///tmp/r.sock", &a, err, sizeof err), 0);
	CHECK(a.is_unix);
	CHECK_STR(a.path, "/tmp/r.sock");
	CHECK_INT(q_addr_parse("redis://127.0.0.1:6380/3", &a, err, sizeof err), 0);
	CHECK(!a.is_unix);
	CHECK_STR(a.host, "127.0.0.1");
	CHECK_INT(a.port, 6380);
	CHECK_INT(a.db, 3);
	CHECK_INT(q_addr_parse("redis://cache", &a, err, sizeof err), 0);
	CHECK_INT(a.port, 6379);
	CHECK_INT(a.db, 0);
	CHECK_INT(q_addr_parse("redis://[::1]:7000/1", &a, err, sizeof err), 0);
	CHECK_STR(a.host, "::1");
	CHECK_INT(a.port, 7000);
	CHECK_INT(q_addr_parse("redis://h:0/1", &a, err, sizeof err), GWB_EINVAL);
	CHECK_INT(q_addr_parse("redis://h:1/16", &a, err, sizeof err), GWB_EINVAL);
	CHECK_INT(q_addr_parse("unix://relative", &a, err, sizeof err), GWB_EINVAL);
	CHECK_INT(q_addr_parse("http://h", &a, err, sizeof err), GWB_EINVAL);
	CHECK_INT(q_addr_parse("redis://:6379", &a, err, sizeof err), GWB_EINVAL);
}
