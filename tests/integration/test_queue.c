/* Job intents through a real redis-server and a real gwb-server: readable stream entries and
 * the consumer group, Redis stopped during submissions, kill -9 with intents delivered but not
 * acknowledged, a dead consumer's entries claimed, poison entries dead-lettered while
 * over-delivered valid ones (restarts, claims, kill -9 during a 500-intent backlog) never are,
 * the cancel endpoint, and Redis in /readyz. Redis and SQLite are inspected
 * directly (hiredis, sqlite3, msgpack-c), never through the code under test. */
#include <hiredis/hiredis.h>
#include <msgpack.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
/* The new tasks whose create intent is not published yet: those above the intent cursor. */
#define CREATES_UNPUBLISHED                                                                   \
	"SELECT count(*) FROM tasks WHERE seq > (SELECT create_seq FROM intent_cursor)"

/* ---- Redis, read directly ---- */

static void rc_close(void *arg)
{
	redisFree(arg);
}

static redisContext *rc_open(const struct h_redis *r)
{
	redisContext *c = redisConnectUnix(r->sock);
	CHECKF(c && !c->err, "connect %s: %s", r->sock, c ? c->errstr : "?");
	t_defer(rc_close, c);
	return c;
}

/* One command; the reply is the caller's (freeReplyObject). Fails the case on no answer. */
static redisReply *rq(redisContext *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	redisReply *r = redisvCommand(c, fmt, ap);
	va_end(ap);
	CHECKF(r != NULL, "redis: %s", c->errstr);
	return r;
}

static long long rq_int(redisContext *c, const char *fmt, const char *a, const char *b)
{
	redisReply *r = rq(c, fmt, a, b);
	long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
	freeReplyObject(r);
	return v;
}

/* Pending entries of group reconcilers (XPENDING summary count), -1 without the group. */
static long long pending(redisContext *c, const char *stream)
{
	redisReply *r = rq(c, "XPENDING %s reconcilers", stream);
	long long v = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 ? r->element[0]->integer
								       : -1;
	freeReplyObject(r);
	return v;
}

static const redisReply *fv_get(const redisReply *fv, const char *name)
{
	for (size_t i = 0; fv && i + 1 < fv->elements; i += 2)
		if (strcmp(fv->element[i]->str, name) == 0)
			return fv->element[i + 1];
	return NULL;
}

static const char *fv_str(const redisReply *fv, const char *name)
{
	const redisReply *v = fv_get(fv, name);
	return v ? v->str : NULL;
}


static void sql_exec(const char *db, const char *sql)
{
	sqlite3 *h;
	CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	CHECKF(sqlite3_exec(h, sql, NULL, NULL, NULL) == SQLITE_OK, "%s: %s", sql,
	       sqlite3_errmsg(h));
	sqlite3_close(h);
}

/* ---- the server ---- */

static void put_team(const char *url)
{
	struct h_resp r;
	h_req(&r, "PUT", url, "/v1/teams/alpha", ADMIN,
	      "{\"gpu_memory_mib\": 1048576, \"gpu_core_percent\": 100000, \"token\": \"" ALPHA
	      "\"}",
	      NULL);
	CHECKF(r.status == 201 || r.status == 200, "PUT team: %ld %s", r.status, r.body);
	h_resp_free(&r);
}

static char redis_env[PATH_MAX + 32];

/* Starts gwb-server on r with extra settings (NULL-terminated), fast housekeeping. */
static void start_server(struct h_server *s, const struct h_redis *r, const char *const *extra,
			 int init)
{
	if (init)
		h_server_init(s);
	snprintf(redis_env, sizeof redis_env, "GWB_REDIS=%s", r->url);
	int n = 0;
	s->env[n++] = redis_env;
	s->env[n++] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	s->env[n++] = "GWB_HTTP_RATE_LIMIT_PER_S=0"; /* backlogs of one token, faster than the limit */
	for (const char *const *e = extra; e && *e; e++)
		s->env[n++] = *e;
	s->env[n] = NULL;
	h_server_start(s);
}

/* Submits one task; returns its id in id (33 bytes). */
static void submit(const char *url, const char *name, int mem, char *id)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"name\": \"%s\", \"gpu_memory_mib\": %d, "
		 "\"gpu_core_percent\": 25, \"gpu_count\": 2, \"duration_seconds\": 90, "
		 "\"qos\": \"BE\", \"experiment\": \"overlimit\"}",
		 name, mem);
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/tasks", ALPHA, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	snprintf(id, 33, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
}

static char *task_state(const char *url, const char *id, char *out, size_t len)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", url, path, ALPHA, NULL, NULL);
	CHECKF(r.status == 200, "GET %s: %ld", path, r.status);
	snprintf(out, len, "%s", json_string_value(json_object_get(r.json, "state")));
	h_resp_free(&r);
	return out;
}

#define WAIT_FOR(cond, ms, ...)                                              \
	do {                                                                 \
		int64_t wf_deadline_ = clock_mono_ms() + (ms);               \
		while (!(cond)) {                                            \
			if (clock_mono_ms() > wf_deadline_)                  \
				t_fail(__FILE__, __LINE__, __VA_ARGS__);     \
			h_sleep_ms(20);                                      \
		}                                                            \
	} while (0)

/* Every intent_received event count per task is exactly one, for n tasks. */
static void check_received_once(const char *db, long long n)
{
	CHECK_INT(h_sql_int(db, "SELECT count(DISTINCT task_id) FROM task_events WHERE type = "
			      "'intent_received'"),
		  n);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM (SELECT task_id FROM task_events WHERE type = "
			      "'intent_received' GROUP BY task_id HAVING count(*) <> 1)"),
		  0);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM intent_outcomes"), n);
}

/* ---- msgpack, decoded here with msgpack-c itself ---- */

static const msgpack_object *mp_get(const msgpack_object *map, const char *key)
{
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(key) &&
		    memcmp(k->via.str.ptr, key, k->via.str.size) == 0)
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

static long long mp_int(const msgpack_object *map, const char *key)
{
	const msgpack_object *v = mp_get(map, key);
	CHECKF(v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER, "body field %s", key);
	return (long long)v->via.u64;
}

static int mp_str_is(const msgpack_object *map, const char *key, const char *want)
{
	const msgpack_object *v = mp_get(map, key);
	return v && v->type == MSGPACK_OBJECT_STR && v->via.str.size == strlen(want) &&
	       memcmp(v->via.str.ptr, want, v->via.str.size) == 0;
}

/* ---- the cases ---- */

TEST_T(queue_submit_entry_readable_group_and_body, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	start_server(&s, &r, NULL, 1);
	put_team(s.proc.url);
	char id[33];
	submit(s.proc.url, "readable", 1536, id);
	redisContext *c = rc_open(&r);
	WAIT_FOR(rq_int(c, "XLEN %s", "gwb:intents", NULL) == 1, 10000, "no stream entry");

	/* What an operator sees with redis-cli XRANGE gwb:intents - +. */
	char *out = h_redis_cli(&r, (const char *[]){ "XRANGE", "gwb:intents", "-", "+", NULL });
	CHECKF(strstr(out, "kind\ncreate\n") && strstr(out, id) && strstr(out, "team\nalpha\n") &&
		       strstr(out, "attempt\n1\n") && strstr(out, "job\ngwb-"),
	       "XRANGE output: %s", out);
	gwb_free(out);
	out = h_redis_cli(&r, (const char *[]){ "XINFO", "GROUPS", "gwb:intents", NULL });
	CHECKF(strstr(out, "name\nreconcilers\n"), "XINFO GROUPS: %s", out);
	gwb_free(out);

	redisReply *x = rq(c, "XRANGE gwb:intents - +");
	CHECK(x->type == REDIS_REPLY_ARRAY && x->elements == 1);
	const redisReply *fv = x->element[0]->element[1];
	CHECK_STR(fv_str(fv, "task"), id);
	char job[48];
	snprintf(job, sizeof job, "gwb-%s", id);
	CHECK_STR(fv_str(fv, "job"), job);
	const redisReply *body = fv_get(fv, "body");
	CHECK(body != NULL);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	CHECK(msgpack_unpack_next(&u, body->str, body->len, &off) == MSGPACK_UNPACK_SUCCESS);
	CHECK(u.data.type == MSGPACK_OBJECT_MAP);
	CHECK_INT(mp_int(&u.data, "v"), 1);
	CHECK(mp_str_is(&u.data, "task", id));
	CHECK(mp_str_is(&u.data, "kind", "create"));
	CHECK(mp_str_is(&u.data, "name", "readable"));
	CHECK_INT(mp_int(&u.data, "gpu_memory_mib"), 1536);
	CHECK_INT(mp_int(&u.data, "gpu_core_percent"), 25);
	CHECK_INT(mp_int(&u.data, "gpu_count"), 2);
	CHECK_INT(mp_int(&u.data, "duration_seconds"), 90);
	CHECK(mp_str_is(&u.data, "qos", "BE"));
	CHECK(mp_str_is(&u.data, "experiment", "overlimit"));
	long long body_id = mp_int(&u.data, "id");
	msgpack_unpacked_destroy(&u);

	/* The task is its own create intent (no outbox row), its seq the intent's id; the
	 * intent cursor moved past it, and the intent is consumed, its outcome recording the
	 * stream id. */
	char sql[256];
	snprintf(sql, sizeof sql, "SELECT seq FROM tasks WHERE id = '%s'", id);
	long long seq = h_sql_int(s.db, sql);
	CHECK(seq > 0);
	CHECK_INT(body_id, seq);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM outbox"), 0);
	WAIT_FOR(h_sql_int(s.db, CREATES_UNPUBLISHED) == 0, 5000, "the cursor did not move");
	snprintf(sql, sizeof sql, "SELECT count(*) FROM intent_outcomes WHERE task_id = '%s' AND "
				  "stream_id = '%s' AND intent_id = %lld",
		 id, x->element[0]->element[0]->str, seq);
	freeReplyObject(x);
	char st[32];
	WAIT_FOR(strcmp(task_state(s.proc.url, id, st, sizeof st), "creating") == 0, 10000,
		 "task stayed %s", st);
	CHECK_INT(h_sql_int(s.db, sql), 1);
	/* Its event names the intent by its id as text (past 2^53: the page reads it exactly). */
	snprintf(sql, sizeof sql, "SELECT count(*) FROM task_events WHERE task_id = '%s' AND type = "
				  "'intent_received' AND json_extract(detail, '$.intent') = '%lld'",
		 id, seq);
	CHECK_INT(h_sql_int(s.db, sql), 1);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 5000, "entry never acknowledged");
	check_received_once(s.db, 1);
	h_server_stop(&s);
}

TEST_T(queue_redis_down_during_200_submissions, 90)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	start_server(&s, &r, NULL, 1);
	put_team(s.proc.url);
	redisContext *c = rc_open(&r);
	char id[33];
	for (int i = 0; i < 50; i++)
		submit(s.proc.url, "before", 64, id);
	WAIT_FOR(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes") == 50, 20000,
		 "first 50 not consumed");
	(void)c; /* its connection dies with this Redis; freed when the case ends */
	/* Stopped: its data goes with it (no persistence), like a lost cache node. */
	CHECK(h_proc_stop(&r.proc, SIGTERM, 5000) == 0);
	for (int i = 0; i < 100; i++)
		submit(s.proc.url, "during", 64, id);
	struct h_resp rz;
	h_req(&rz, "GET", s.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *redis = json_object_get(json_object_get(rz.json, "dependencies"), "redis");
	CHECKF(strcmp(json_string_value(json_object_get(redis, "state")), "connected") != 0,
	       "readyz says %s", rz.body);
	CHECKF(json_integer_value(json_object_get(redis, "outbox_unpublished")) == 100,
	       "readyz: %s", rz.body);
	CHECK(json_is_true(json_object_get(rz.json, "ready")));
	h_resp_free(&rz);
	CHECK_INT(h_sql_int(s.db, CREATES_UNPUBLISHED), 100);
	h_redis_restart(&r);
	for (int i = 0; i < 50; i++)
		submit(s.proc.url, "after", 64, id);
	WAIT_FOR(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes") == 200, 30000,
		 "only %lld of 200 consumed",
		 h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes"));
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks"), 200);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks WHERE state = 'creating'"), 200);
	CHECK_INT(h_sql_int(s.db, CREATES_UNPUBLISHED), 0);
	check_received_once(s.db, 200);
	c = rc_open(&r);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 5000, "entries left pending");
	/* The 50 published before the restart went with the old Redis; the other 150 are here. */
	CHECK_INT(rq_int(c, "XLEN %s", "gwb:intents", NULL), 150);
	h_server_stop(&s);
}

TEST_T(queue_kill9_with_unacked_deliveries_handled_once, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	const char *held[] = { "GWB_QUEUE_CONSUMER=steady", "GWB_QUEUE_HANDLER_DELAY_MS=60000",
			       NULL };
	start_server(&s, &r, held, 1);
	put_team(s.proc.url);
	redisContext *c = rc_open(&r);
	char ids[10][33];
	for (int i = 0; i < 10; i++)
		submit(s.proc.url, "held", 64, ids[i]);
	/* Delivered to "steady", not acknowledged: the handler holds them. */
	WAIT_FOR(pending(c, "gwb:intents") == 10, 10000, "not all delivered");
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes"), 0);
	/* Their publication recorded (the cursor past them), so the restart re-publishes
	 * nothing (re-publishing is covered below, deliberately). */
	WAIT_FOR(h_sql_int(s.db, CREATES_UNPUBLISHED) == 0, 10000, "publications not recorded");
	h_server_kill9(&s);

	const char *quick[] = { "GWB_QUEUE_CONSUMER=steady", NULL };
	start_server(&s, &r, quick, 0);
	char st[32];
	for (int i = 0; i < 10; i++)
		WAIT_FOR(strcmp(task_state(s.proc.url, ids[i], st, sizeof st), "creating") == 0,
			 10000, "task %s stayed %s", ids[i], st);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 5000, "entries left pending");
	check_received_once(s.db, 10);
	/* Re-read from its own pending list: the second delivery of each. */
	CHECK_INT(h_sql_int(s.db, "SELECT min(deliveries) FROM intent_outcomes"), 2);

	/* The same intent published again (a relay crash between XADD and recording the id):
	 * acknowledged, and its outcome is not recorded a second time. */
	redisReply *x = rq(c, "XRANGE gwb:intents - + COUNT 1");
	const redisReply *fv = x->element[0]->element[1];
	redisReply *dup = rq(c, "XADD gwb:intents * kind %s task %s job %s team %s attempt %s body %b",
			     fv_str(fv, "kind"), fv_str(fv, "task"), fv_str(fv, "job"),
			     fv_str(fv, "team"), fv_str(fv, "attempt"), fv_get(fv, "body")->str,
			     fv_get(fv, "body")->len);
	CHECK(dup->type == REDIS_REPLY_STRING);
	char dup_id[64];
	snprintf(dup_id, sizeof dup_id, "%s", dup->str);
	freeReplyObject(dup);
	freeReplyObject(x);
	int64_t deadline = clock_mono_ms() + 10000;
	for (;;) {
		redisReply *g = rq(c, "XINFO GROUPS gwb:intents");
		const redisReply *info = g->element[0];
		int done = strcmp(fv_str(info, "last-delivered-id"), dup_id) == 0 &&
			   fv_get(info, "pending")->integer == 0;
		freeReplyObject(g);
		if (done)
			break;
		CHECKF(clock_mono_ms() < deadline, "the duplicate was not acknowledged");
		h_sleep_ms(20);
	}
	check_received_once(s.db, 10);
	h_server_stop(&s);
}

TEST_T(queue_dead_consumer_entries_claimed_by_live_one, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	const char *doomed[] = { "GWB_QUEUE_CONSUMER=doomed", "GWB_QUEUE_HANDLER_DELAY_MS=60000",
				 NULL };
	start_server(&s, &r, doomed, 1);
	put_team(s.proc.url);
	redisContext *c = rc_open(&r);
	char ids[5][33];
	for (int i = 0; i < 5; i++)
		submit(s.proc.url, "orphan", 64, ids[i]);
	WAIT_FOR(pending(c, "gwb:intents") == 5, 10000, "not delivered to doomed");
	WAIT_FOR(h_sql_int(s.db, CREATES_UNPUBLISHED) == 0, 10000, "publications not recorded");
	h_server_kill9(&s);

	const char *rescuer[] = { "GWB_QUEUE_CONSUMER=rescuer", "GWB_QUEUE_CLAIM_IDLE_MS=500",
				  NULL };
	start_server(&s, &r, rescuer, 0);
	char st[32];
	for (int i = 0; i < 5; i++)
		WAIT_FOR(strcmp(task_state(s.proc.url, ids[i], st, sizeof st), "creating") == 0,
			 10000, "task %s stayed %s", ids[i], st);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 5000, "entries left pending");
	check_received_once(s.db, 5);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes WHERE consumer = 'rescuer'"),
		  5);
	redisReply *x = rq(c, "XINFO CONSUMERS gwb:intents reconcilers");
	int found = 0;
	for (size_t i = 0; i < x->elements; i++) {
		const redisReply *e = x->element[i];
		if (strcmp(fv_str(e, "name"), "doomed") == 0) {
			found = 1;
			CHECK_INT(fv_get(e, "pending")->integer, 0);
		}
	}
	freeReplyObject(x);
	CHECK(found);
	h_server_stop(&s);
}

/* Finds the dead-letter entry for source id src. Returns the reply (caller frees) and the
 * fields in *fv, or NULL. */
static redisReply *dead_entry(redisContext *c, const char *src, const redisReply **fv)
{
	redisReply *x = rq(c, "XRANGE gwb:intents:dead - +");
	for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
		const redisReply *f = x->element[i]->element[1];
		const char *s = fv_str(f, "source_id");
		if (s && strcmp(s, src) == 0) {
			*fv = f;
			return x;
		}
	}
	freeReplyObject(x);
	return NULL;
}

TEST_T(queue_poison_entries_dead_lettered_loop_goes_on, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	start_server(&s, &r, NULL, 1);
	put_team(s.proc.url);
	redisContext *c = rc_open(&r);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 10000, "no group");
	/* Garbage, then a 5-byte body that declares a 4-billion-element array. */
	redisReply *a = rq(c, "XADD gwb:intents * kind create task t-poison job gwb-t-poison "
			      "team alpha attempt 1 body %s",
			   "this is not msgpack");
	redisReply *b = rq(c, "XADD gwb:intents * kind create task t-bomb job gwb-t-bomb team "
			      "alpha attempt 1 body %b",
			   "\xdd\xff\xff\xff\xff", (size_t)5);
	CHECK(a->type == REDIS_REPLY_STRING && b->type == REDIS_REPLY_STRING);
	WAIT_FOR(rq_int(c, "XLEN %s", "gwb:intents:dead", NULL) == 2, 10000,
		 "not dead-lettered");
	const redisReply *fv;
	redisReply *d = dead_entry(c, a->str, &fv);
	CHECKF(d != NULL, "no dead letter for %s", a->str);
	CHECKF(strstr(fv_str(fv, "reason"), "malformed body"), "reason: %s", fv_str(fv, "reason"));
	CHECK_STR(fv_str(fv, "task"), "t-poison");
	CHECK_STR(fv_str(fv, "body"), "this is not msgpack");
	freeReplyObject(d);
	d = dead_entry(c, b->str, &fv);
	CHECK(d != NULL);
	CHECKF(strstr(fv_str(fv, "reason"), "malformed body"), "reason: %s", fv_str(fv, "reason"));
	freeReplyObject(d);
	freeReplyObject(a);
	freeReplyObject(b);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 5000, "poison left pending");
	/* The loop goes on. */
	char id[33], st[32];
	submit(s.proc.url, "after-poison", 64, id);
	WAIT_FOR(strcmp(task_state(s.proc.url, id, st, sizeof st), "creating") == 0, 10000,
		 "task stayed %s", st);
	struct h_resp rz;
	h_req(&rz, "GET", s.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *redis = json_object_get(json_object_get(rz.json, "dependencies"), "redis");
	CHECKF(json_integer_value(json_object_get(redis, "dead_lettered")) == 2, "%s", rz.body);
	h_resp_free(&rz);
	h_server_stop(&s);
}

TEST_T(queue_entry_delivered_often_is_handled_not_dead, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	const char *fast[] = { "GWB_QUEUE_CLAIM_IDLE_MS=300", "GWB_QUEUE_MAX_FAILURES=3", NULL };
	const char *flaky[] = { "GWB_QUEUE_CONSUMER=flaky", "GWB_QUEUE_HANDLER_DELAY_MS=60000",
				NULL };
	/* An intent another consumer took and kept failing on: delivered 3 times already. */
	start_server(&s, &r, flaky, 1);
	put_team(s.proc.url);
	char id[33];
	redisContext *c = rc_open(&r);
	submit(s.proc.url, "flaky", 64, id);
	WAIT_FOR(pending(c, "gwb:intents") == 1, 10000, "not delivered");
	/* Killed only once the publication is recorded: otherwise the next server publishes
	 * the intent again (a harmless duplicate, but not the entry this case is about). */
	WAIT_FOR(h_sql_int(s.db, CREATES_UNPUBLISHED) == 0, 10000, "publication not recorded");
	h_server_kill9(&s);
	redisReply *p = rq(c, "XPENDING gwb:intents reconcilers - + 1");
	char eid[64];
	snprintf(eid, sizeof eid, "%s", p->element[0]->element[0]->str);
	freeReplyObject(p);
	for (int i = 0; i < 2; i++)
		freeReplyObject(rq(c, "XCLAIM gwb:intents reconcilers flaky 0 %s", eid));

	/* Delivered 3 times and claimed once more, past queue.max_failures: a valid intent that
	 * never failed is handled, not dead-lettered. */
	start_server(&s, &r, fast, 0);
	WAIT_FOR(pending(c, "gwb:intents") == 0, 10000, "left pending");
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes"), 1);
	CHECK_INT(h_sql_int(s.db, "SELECT max(deliveries) FROM intent_outcomes"), 4);
	CHECK_INT(rq_int(c, "XLEN %s", "gwb:intents:dead", NULL), 0);
	char st[32];
	CHECK_STR(task_state(s.proc.url, id, st, sizeof st), "creating");
	h_server_stop(&s);
}

static long long readyz_redis_int(const char *url, const char *field)
{
	struct h_resp rz;
	h_req(&rz, "GET", url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *redis = json_object_get(json_object_get(rz.json, "dependencies"), "redis");
	long long v = json_integer_value(json_object_get(redis, field));
	h_resp_free(&rz);
	return v;
}

/* The issue-10 case: restarts during a backlog used to push delivery counts past the limit
 * and dead-letter valid intents. Six kill -9s, each after the held entries were delivered
 * again, then a server that handles them: every intent handled once, none dead. */
TEST_T(queue_kill9_during_500_backlog_no_dead_letters, 120)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	const char *held[] = { "GWB_QUEUE_CONSUMER=steady", "GWB_QUEUE_HANDLER_DELAY_MS=600000",
			       NULL };
	start_server(&s, &r, held, 1);
	put_team(s.proc.url);
	redisContext *c = rc_open(&r);
	char id[33];
	for (int i = 0; i < 500; i++)
		submit(s.proc.url, "backlog", 16, id);
	WAIT_FOR(h_sql_int(s.db, CREATES_UNPUBLISHED) == 0, 20000, "not all published");
	for (int round = 0; round < 6; round++) {
		/* The held entries were handed out again (own pending, re-read at start). */
		WAIT_FOR(readyz_redis_int(s.proc.url, "delivered") >= 256, 10000,
			 "round %d: delivered %lld", round,
			 readyz_redis_int(s.proc.url, "delivered"));
		h_server_kill9(&s);
		start_server(&s, &r, held, 0);
	}
	WAIT_FOR(readyz_redis_int(s.proc.url, "delivered") >= 256, 10000, "not re-delivered");
	h_server_kill9(&s);
	CHECK(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes") == 0);
	const char *quick[] = { "GWB_QUEUE_CONSUMER=steady", NULL };
	start_server(&s, &r, quick, 0);
	WAIT_FOR(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes") == 500, 30000,
		 "handled %lld of 500", h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes"));
	WAIT_FOR(pending(c, "gwb:intents") == 0, 10000, "entries left pending");
	CHECK_INT(rq_int(c, "XLEN %s", "gwb:intents:dead", NULL), 0);
	CHECK_INT(readyz_redis_int(s.proc.url, "dead_lettered"), 0);
	/* Far more deliveries than queue.max_failures (5): they never counted. */
	long long most = h_sql_int(s.db, "SELECT max(deliveries) FROM intent_outcomes");
	CHECKF(most >= 8, "max deliveries %lld", most);
	check_received_once(s.db, 500);
	h_server_stop(&s);
}

TEST_T(queue_cancel_is_durable_and_idempotent, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	start_server(&s, &r, NULL, 1);
	put_team(s.proc.url);
	redisContext *c = rc_open(&r);
	char id[33], path[96], st[32];
	submit(s.proc.url, "to-cancel", 64, id);
	WAIT_FOR(strcmp(task_state(s.proc.url, id, st, sizeof st), "creating") == 0, 10000,
		 "task stayed %s", st);
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	struct h_resp resp;
	h_req(&resp, "POST", s.proc.url, path, ALPHA, NULL, NULL);
	CHECKF(resp.status == 202, "cancel: %ld %s", resp.status, resp.body);
	CHECK_STR(json_string_value(json_object_get(resp.json, "state")), "cancelling");
	CHECK(json_is_string(json_object_get(resp.json, "cancel_requested_at")));
	char first_at[64];
	snprintf(first_at, sizeof first_at, "%s",
		 json_string_value(json_object_get(resp.json, "cancel_requested_at")));
	h_resp_free(&resp);
	h_sleep_ms(20);
	h_req(&resp, "POST", s.proc.url, path, ALPHA, NULL, NULL);
	CHECKF(resp.status == 200, "repeat: %ld %s", resp.status, resp.body);
	CHECK_STR(json_string_value(json_object_get(resp.json, "state")), "cancelling");
	CHECK_STR(json_string_value(json_object_get(resp.json, "cancel_requested_at")), first_at);
	h_resp_free(&resp);
	char sql[200];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox WHERE task_id = '%s' AND kind = "
				  "'cancel'", id);
	CHECK_INT(h_sql_int(s.db, sql), 1);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM task_events WHERE task_id = '%s' AND type = "
				  "'cancel_requested'", id);
	CHECK_INT(h_sql_int(s.db, sql), 1);
	/* The cancel intent reaches the stream and is consumed; the task stays cancelling. */
	WAIT_FOR(rq_int(c, "XLEN %s", "gwb:intents", NULL) == 2, 10000, "no cancel entry");
	redisReply *x = rq(c, "XREVRANGE gwb:intents + - COUNT 1");
	CHECK_STR(fv_str(x->element[0]->element[1], "kind"), "cancel");
	CHECK_STR(fv_str(x->element[0]->element[1], "task"), id);
	freeReplyObject(x);
	WAIT_FOR(h_sql_int(s.db, "SELECT count(*) FROM intent_outcomes") == 2, 10000,
		 "cancel intent not consumed");
	CHECK_STR(task_state(s.proc.url, id, st, sizeof st), "cancelling");

	/* A task that already ended answers with its final state and changes nothing. */
	char done[33];
	submit(s.proc.url, "finished", 64, done);
	snprintf(sql, sizeof sql, "UPDATE tasks SET state = 'succeeded' WHERE id = '%s'", done);
	sql_exec(s.db, sql);
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", done);
	h_req(&resp, "POST", s.proc.url, path, ALPHA, NULL, NULL);
	CHECKF(resp.status == 200, "final: %ld %s", resp.status, resp.body);
	CHECK_STR(json_string_value(json_object_get(resp.json, "state")), "succeeded");
	CHECK(json_is_null(json_object_get(resp.json, "cancel_requested_at")));
	h_resp_free(&resp);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM outbox WHERE task_id = '%s' AND kind = "
				  "'cancel'", done);
	CHECK_INT(h_sql_int(s.db, sql), 0);

	/* Unknown task, wrong method, another team. */
	h_req(&resp, "POST", s.proc.url, "/v1/tasks/t-nosuchtask00/cancel", ALPHA, NULL, NULL);
	CHECK_INT(resp.status, 404);
	h_resp_free(&resp);
	h_req(&resp, "GET", s.proc.url, path, ALPHA, NULL, NULL);
	CHECK_INT(resp.status, 405);
	h_resp_free(&resp);
	h_req(&resp, "PUT", s.proc.url, "/v1/teams/beta", ADMIN,
	      "{\"gpu_memory_mib\": 1024, \"gpu_core_percent\": 100, \"token\": \"beta-token-99\"}",
	      NULL);
	h_resp_free(&resp);
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	h_req(&resp, "POST", s.proc.url, path, "beta-token-99", NULL, NULL);
	CHECK_INT(resp.status, 404); /* another team's task is not found (issue 38) */
	h_resp_free(&resp);
	h_server_stop(&s);
}

TEST_T(queue_readyz_follows_redis, 60)
{
	struct h_redis r;
	h_redis_start(&r);
	struct h_server s;
	start_server(&s, &r, NULL, 1);
	char state[32] = "";
	struct h_resp rz;
#define REDIS_STATE()                                                                       \
	(h_req(&rz, "GET", s.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL),                       \
	 snprintf(state, sizeof state, "%s",                                               \
		  json_string_value(json_object_get(                                       \
			  json_object_get(json_object_get(rz.json, "dependencies"), "redis"), \
			  "state"))),                                                      \
	 h_resp_free(&rz), state)
	WAIT_FOR(strcmp(REDIS_STATE(), "connected") == 0, 5000, "redis is %s", state);
	CHECK(h_proc_stop(&r.proc, SIGTERM, 5000) == 0);
	WAIT_FOR(strcmp(REDIS_STATE(), "connected") != 0, 5000, "still connected");
	t_log("redis stopped: %s", state);
	h_redis_restart(&r);
	WAIT_FOR(strcmp(REDIS_STATE(), "connected") == 0, 10000, "redis is %s", state);
	h_server_stop(&s);
}

TEST_T(queue_server_without_redis_keeps_serving, 30)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	put_team(s.proc.url);
	char id[33];
	submit(s.proc.url, "no-redis", 64, id);
	struct h_resp rz;
	h_req(&rz, "GET", s.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	CHECK_INT(rz.status, 200);
	h_resp_free(&rz);
	CHECK_INT(h_sql_int(s.db, CREATES_UNPUBLISHED), 1);
	h_server_stop(&s);
}
