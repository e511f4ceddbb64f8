/* Flow control between gwb-server and kubesim, on real parts: a request's time-out runs from
 * its send, not from its wait in the local queue; a 429 with Retry-After is sent again and
 * never makes a task unknown; a burst of intents waits in the Redis stream (new entries, few
 * pending) and a kill -9 in the middle of it dead-letters nothing; a backlog older than the
 * queued grace is not pulled into the client's queue either. Redis, SQLite and kubesim
 * are inspected directly, never through the code under test. */
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define TOK "alpha-token-123"

/* Extra kubesim flags for the next stack_start (NULL-terminated), or NULL. */
static const char *const *kubesim_flags;

/* kubesim (real worker) + gwb-server with a fast housekeeping tick; redis when with_redis;
 * team alpha with token TOK. */
static void stack_start(struct h_stack *st, int with_redis, const char *const *extra_env)
{
	const char *env[32];
	int n = 0;
	env[n++] = "GWB_HTTP_RATE_LIMIT_PER_S=0"; /* bursts of one token, faster than the limit */
	for (const char *const *e = extra_env; e && *e && n < 31; e++)
		env[n++] = *e;
	env[n] = NULL;
	h_stack_start(st, with_redis, kubesim_flags, env, "alpha",
		      "{\"gpu_memory_mib\": 10485760, \"gpu_core_percent\": 1000000, \"token\": \"" TOK
		      "\"}");
}

static void submit(struct h_stack *st, int mem, int core, int secs, char *id)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": %d, "
		 "\"duration_seconds\": %d}",
		 mem, core, secs);
	struct h_resp r;
	h_req(&r, "POST", st->srv.proc.url, "/v1/tasks", TOK, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	snprintf(id, 32, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
}


/* Sum of every sample of metric name whose labels contain match (NULL: any). */
static double metric(struct h_stack *st, const char *name, const char *match)
{
	return h_metric(st->srv.proc.url, name, match);
}

#define WAIT_FOR(cond, ms, ...)                                          \
	do {                                                             \
		int64_t wf_deadline_ = clock_mono_ms() + (ms);           \
		while (!(cond)) {                                        \
			if (clock_mono_ms() > wf_deadline_)              \
				t_fail(__FILE__, __LINE__, __VA_ARGS__); \
			h_sleep_ms(30);                                  \
		}                                                        \
	} while (0)

static void fault(struct h_stack *st, const char *body)
{
	long s = h_kubesim_ctl(&st->ks, body ? "PUT" : "DELETE", "/_kubesim/faults", body, NULL);
	CHECKF(s == 200, "fault %s: %ld", body ? body : "clear", s);
}

static long long jobs_created(struct h_stack *st)
{
	return h_sql_int(st->srv.db, "SELECT count(*) FROM tasks WHERE job_uid IS NOT NULL AND "
				   "job_uid != ''");
}

static long long unknowns(struct h_stack *st)
{
	return h_sql_int(st->srv.db, "SELECT count(*) FROM task_events WHERE to_state = 'unknown'");
}

TEST_T(flow_timeout_counts_from_the_send, 90)
{
	/* One request at a time, each answered after 300 ms, a 1 s time-out: the later
	 * requests wait in the local queue far longer than their time-out, and still end OK. */
	const char *env[] = { "GWB_KUBE_MAX_INFLIGHT=1", "GWB_KUBE_REQUEST_TIMEOUT_MS=1000", NULL };
	struct h_stack st;
	stack_start(&st, 0, env);
	WAIT_FOR(metric(&st, "gwb_kube_picture_fresh", NULL) == 1, 10000, "picture not fresh");
	fault(&st, "{\"slow_ms\": 300}");
	char ids[6][32];
	for (int i = 0; i < 6; i++)
		submit(&st, 9000, 1, 60, ids[i]); /* above one card: pending, no process runs */
	WAIT_FOR(jobs_created(&st) == 6, 60000, "jobs created: %lld of 6", jobs_created(&st));
	CHECK_INT(unknowns(&st), 0);
	CHECK_INT(metric(&st, "gwb_kube_requests_total", "code=\"error\""), 0);
	/* Proof that some waited longer than the time-out: queue waits above 1 s. */
	double waits = metric(&st, "gwb_kube_request_queue_wait_seconds_count", NULL);
	double within = metric(&st, "gwb_kube_request_queue_wait_seconds_bucket", "le=\"1\"");
	CHECKF(waits - within >= 1, "waits %g, within 1 s %g", waits, within);
	CHECK(metric(&st, "gwb_kube_requests_max_inflight", NULL) == 1);
	fault(&st, NULL);
}

TEST_T(flow_429_then_success_is_never_unknown, 90)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	WAIT_FOR(metric(&st, "gwb_kube_picture_fresh", NULL) == 1, 10000, "picture not fresh");
	double before = metric(&st, "gwb_kube_requests_total", "code=\"429\"");
	CHECK(before == 0);
	fault(&st, "{\"throttle\": {\"count\": 4, \"retry_after_s\": 1}}");
	char id[32];
	submit(&st, 1024, 25, 2, id);
	WAIT_FOR(jobs_created(&st) == 1, 30000, "no Job created");
	/* Every 429 was ours and was sent again: none ended the request. */
	CHECK(metric(&st, "gwb_kube_requests_total", "code=\"429\"") == 4);
	CHECK(metric(&st, "gwb_kube_throttled_retries_total", NULL) == 4);
	CHECK_INT(unknowns(&st), 0);
	char sql[160];
	snprintf(sql, sizeof sql,
		 "SELECT count(*) FROM task_events WHERE task_id = '%s' AND type = 'api_unreachable'",
		 id);
	CHECK_INT(h_sql_int(st.srv.db, sql), 0);
	json_t *list = NULL;
	CHECK_INT(h_kube(&st.ks, "GET",
			 "/apis/batch/v1/namespaces/gpu-workbench/jobs?labelSelector=gwb.io%2Fmanaged"
			 "%3Dtrue",
			 NULL, NULL, &list),
		  200);
	CHECK_INT(json_array_size(json_object_get(list, "items")), 1);
	json_decref(list);
}

static redisContext *rc_open(const struct h_redis *r)
{
	redisContext *c = redisConnectUnix(r->sock);
	CHECKF(c && !c->err, "connect %s: %s", r->sock, c ? c->errstr : "?");
	return c;
}

static long long redis_int(redisContext *c, const char *cmd)
{
	redisReply *x = redisCommand(c, cmd);
	CHECKF(x != NULL, "redis: %s", c->errstr);
	long long v = x->type == REDIS_REPLY_INTEGER ? x->integer
		      : x->type == REDIS_REPLY_ARRAY && x->elements && x->element[0]->type ==
									      REDIS_REPLY_INTEGER
			      ? x->element[0]->integer
			      : -1;
	freeReplyObject(x);
	return v;
}

/* Deliveries the server's consumer holds now (/readyz). */
static long long readyz_in_flight(struct h_stack *st)
{
	struct h_resp rz;
	h_req(&rz, "GET", st->srv.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *redis = json_object_get(json_object_get(rz.json, "dependencies"), "redis");
	long long v = json_integer_value(json_object_get(redis, "in_flight"));
	h_resp_free(&rz);
	return v;
}

TEST_T(flow_burst_waits_in_the_stream_kill9_no_dead_letters, 120)
{
	/* Two requests in flight: the consumer takes at most 2 x 2 intents at a time. A long
	 * request time-out: this case is about where a backlog waits, and a sanitizer build of
	 * kubesim can take seconds for one answer under this load (an answer that late would
	 * rightly make its task unknown). */
	const char *env[] = { "GWB_KUBE_MAX_INFLIGHT=2", "GWB_QUEUE_CONSUMER=steady",
			      "GWB_KUBE_REQUEST_TIMEOUT_MS=60000", NULL };
	struct h_stack st;
	stack_start(&st, 1, env);
	redisContext *c = rc_open(&st.redis);
	WAIT_FOR(metric(&st, "gwb_kube_picture_fresh", NULL) == 1, 10000, "picture not fresh");
	/* Answers slower than submissions come, so a backlog builds up. */
	fault(&st, "{\"slow_ms\": 300}");
	enum { N = 80 };
	char id[32];
	long long most_pending = 0, most_held = 0, waiting_seen = 0;
	for (int i = 0; i < N || jobs_created(&st) < N / 3; i++) {
		if (i < N)
			submit(&st, 9000, 1, 60, id); /* pending in kubesim: no process runs */
		if (i == N)
			fault(&st, "{\"slow_ms\": 20}"); /* then it drains */
		if (i % 10)
			continue;
		/* While the burst drains, the stream holds it: few pending, the rest new. */
		long long held = readyz_in_flight(&st);
		if (held > most_held)
			most_held = held;
		long long pending = redis_int(c, "XPENDING gwb:intents reconcilers");
		long long handled = h_sql_int(st.srv.db, "SELECT count(*) FROM intent_outcomes");
		if (pending > most_pending)
			most_pending = pending;
		if (i >= N && N - handled - pending > 10)
			waiting_seen = 1;
		if (i >= N)
			h_sleep_ms(20);
	}
	t_log("before the kill: at most %lld held by the server, %lld pending in Redis, %lld "
	      "Jobs created",
	      most_held, most_pending, jobs_created(&st));
	h_server_kill9(&st.srv);
	h_server_start(&st.srv);
	t_log("restarted: %lld Jobs created", jobs_created(&st));
	WAIT_FOR(h_sql_int(st.srv.db, "SELECT count(*) FROM intent_outcomes") == N, 90000,
		 "handled %lld of %d",
		 h_sql_int(st.srv.db, "SELECT count(*) FROM intent_outcomes"), N);
	/* Handed to the reconciler: never more than its room (2 x max_inflight). In Redis an
	 * entry stays pending until its XACK lands, a moment after it was answered: a little
	 * more. */
	CHECKF(most_held <= 4, "up to %lld intents held at once", most_held);
	CHECKF(most_pending <= 8, "up to %lld intents pending at once", most_pending);
	CHECK(waiting_seen);
	WAIT_FOR(redis_int(c, "XPENDING gwb:intents reconcilers") == 0, 10000, "left pending");
	CHECK_INT(redis_int(c, "XLEN gwb:intents:dead"), 0);
	CHECK(metric(&st, "gwb_intents_dead_lettered_total", NULL) == 0);
	CHECK_INT(jobs_created(&st), N);
	CHECK_INT(unknowns(&st), 0);
	/* One Job per task, however the kill fell. */
	json_t *list = NULL;
	CHECK_INT(h_kube(&st.ks, "GET",
			 "/apis/batch/v1/namespaces/gpu-workbench/jobs?labelSelector=gwb.io%2Fmanaged"
			 "%3Dtrue",
			 NULL, NULL, &list),
		  200);
	CHECK_INT(json_array_size(json_object_get(list, "items")), N);
	json_decref(list);
	CHECK(metric(&st, "gwb_kube_requests_inflight", NULL) <= 2);
	redisFree(c);
}

TEST_T(flow_overdue_backlog_waits_for_room, 90)
{
	/* Every queued task is overdue at once (grace 0): the reconciler may take it without its
	 * intent, but only while the client has room, so the backlog stays in the stream and
	 * the client's local queue stays short. */
	const char *env[] = { "GWB_KUBE_MAX_INFLIGHT=2", "GWB_RECONCILE_QUEUED_GRACE_MS=0", NULL };
	struct h_stack st;
	stack_start(&st, 1, env);
	WAIT_FOR(metric(&st, "gwb_kube_picture_fresh", NULL) == 1, 10000, "picture not fresh");
	fault(&st, "{\"slow_ms\": 300}");
	enum { N = 40 };
	char id[32];
	double deepest = 0;
	for (int i = 0; i < N || jobs_created(&st) < N; i++) {
		if (i < N)
			submit(&st, 9000, 1, 60, id);
		else
			h_sleep_ms(50);
		double depth = metric(&st, "gwb_kube_request_queue_depth", NULL);
		if (depth > deepest)
			deepest = depth;
		CHECKF(i < 4000, "jobs created: %lld of %d", jobs_created(&st), N);
	}
	t_log("deepest local queue: %g", deepest);
	CHECKF(deepest <= 8, "local queue up to %g deep", deepest);
	CHECK_INT(unknowns(&st), 0);
	fault(&st, NULL);
}

/* kubesim's own in-flight limit, as the API server's --max-mutating-requests-inflight: with 8
 * and answers slowed down, the server's 32 requests in flight meet 429s. A burst of 300 short
 * tasks still all succeeds, none through unknown, nothing dead-lettered. */
TEST_T(flow_burst_of_300_against_an_inflight_limit_of_8, 240)
{
	const char *flags[] = { "--max-mutating-requests-inflight", "8", "--max-requests-inflight",
				"8", NULL };
	kubesim_flags = flags;
	struct h_stack st;
	stack_start(&st, 1, NULL);
	WAIT_FOR(metric(&st, "gwb_kube_picture_fresh", NULL) == 1, 10000, "picture not fresh");
	fault(&st, "{\"slow_ms\": 300}");
	enum { N = 300 };
	char id[32];
	for (int i = 0; i < N; i++)
		submit(&st, 16, 1, 1, id);
	WAIT_FOR(h_sql_int(st.srv.db, "SELECT count(*) FROM tasks WHERE state = 'succeeded'") == N,
		 200000, "succeeded: %lld of %d, 429s so far %.0f",
		 h_sql_int(st.srv.db, "SELECT count(*) FROM tasks WHERE state = 'succeeded'"), N,
		 metric(&st, "gwb_kube_requests_total", "code=\"429\""));
	double throttled = metric(&st, "gwb_kube_requests_total", "code=\"429\"");
	t_log("429 answers: %.0f, retried: %.0f", throttled,
	      metric(&st, "gwb_kube_throttled_retries_total", NULL));
	CHECKF(throttled > 0, "kubesim never answered 429: the case proves nothing");
	CHECK_INT(unknowns(&st), 0);
	CHECK(metric(&st, "gwb_intents_dead_lettered_total", NULL) == 0);
	WAIT_FOR(h_sql_int(st.srv.db, "SELECT count(*) FROM reservations WHERE released = 0") == 0,
		 30000, "reservations still held");
}
