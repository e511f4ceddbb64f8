/* Waiting for quota on real parts (gwb-server over its SQLite file; kubesim running the real
 * worker for the cases that run tasks to their end): on_quota_full wait against refuse, the
 * line's order (strict, best_effort and its bound), cancels and quota raises that move it, a
 * restart that keeps it, and the predicted admission against the actual one. The file is read
 * directly, never through the code under test, for what the API does not show. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define TOK "alpha-token-123"

#define WAIT_FOR(cond, ms, ...)                                          \
	do {                                                             \
		int64_t wf_deadline_ = clock_mono_ms() + (ms);           \
		while (!(cond)) {                                        \
			if (clock_mono_ms() > wf_deadline_)              \
				t_fail(__FILE__, __LINE__, __VA_ARGS__); \
			h_sleep_ms(30);                                  \
		}                                                        \
	} while (0)

static void team_put(const char *url, const char *body)
{
	h_team_put(url, ADMIN, "alpha", body);
}

/* A server alone (no cluster, no Redis) with team alpha of quota mem / core. */
static void start(struct h_server *s, int mem, int core)
{
	h_server_init(s);
	s->env[0] = "GWB_HTTP_RATE_LIMIT_PER_S=0"; /* the cases submit faster than the limit */
	s->env[1] = NULL;
	h_server_start(s);
	char body[160];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": %d, \"gpu_core_percent\": %d, \"token\": \"" TOK "\"}", mem,
		 core);
	team_put(s->proc.url, body);
}

/* POST /v1/tasks with body; the task's id into id (when 201); returns the status. */
static long submit(const char *url, const char *body, const char *key, char *id)
{
	char hk[200];
	snprintf(hk, sizeof hk, "Idempotency-Key: %s", key ? key : "");
	const char *headers[] = { hk, NULL };
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/tasks", TOK, body, key ? headers : NULL);
	long st = r.status;
	if (id && (st == 201 || st == 200))
		snprintf(id, 32, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
	return st;
}

static long submit_task(const char *url, int mem, int secs, const char *on_full, char *id)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": 10, "
		 "\"duration_seconds\": %d%s%s%s}",
		 mem, secs, on_full ? ", \"on_quota_full\": \"" : "", on_full ? on_full : "",
		 on_full ? "\"" : "");
	return submit(url, body, NULL, id);
}

static long long sql(const struct h_server *s, const char *fmt, const char *arg)
{
	char q[512];
	snprintf(q, sizeof q, fmt, arg);
	return h_sql_int(s->db, q);
}

static long long waiting(const struct h_server *s)
{
	return h_sql_int(s->db, "SELECT count(*) FROM tasks WHERE state = 'waiting'");
}

static long long reserved_mem(const char *url)
{
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/teams/alpha", TOK, NULL, NULL);
	CHECK_INT(r.status, 200);
	long long v = json_integer_value(
		json_object_get(json_object_get(r.json, "reserved"), "gpu_memory_mib"));
	h_resp_free(&r);
	return v;
}

/* The ids of GET /v1/teams/alpha/queue, every page of limit, in order, into ids (n at most
 * max); each entry's position checked against its place. Returns how many. */
static int line_ids(const char *url, int limit, char ids[][32], int max)
{
	int n = 0;
	char cursor[32] = "";
	do {
		char path[128];
		snprintf(path, sizeof path, "/v1/teams/alpha/queue?limit=%d%s%s", limit,
			 cursor[0] ? "&cursor=" : "", cursor);
		struct h_resp r;
		h_req(&r, "GET", url, path, TOK, NULL, NULL);
		CHECKF(r.status == 200, "%s: %ld %s", path, r.status, r.body);
		json_t *tasks = json_object_get(r.json, "tasks"), *t;
		size_t i;
		json_array_foreach(tasks, i, t) {
			CHECK_INT(json_integer_value(json_object_get(t, "position")), n + 1);
			CHECK_INT(json_integer_value(json_object_get(json_object_get(t, "ahead"),
								     "tasks")),
				  n);
			if (n < max)
				snprintf(ids[n], 32, "%s",
					 json_string_value(json_object_get(t, "id")));
			n++;
		}
		json_t *nc = json_object_get(r.json, "next_cursor");
		snprintf(cursor, sizeof cursor, "%s", json_is_string(nc) ? json_string_value(nc) : "");
		h_resp_free(&r);
	} while (cursor[0]);
	return n;
}

/* 30 racing submissions with wait for room for 2 (fork, one connection each, released by one
 * gate): exit 0 for a 201 queued, 1 for a 201 waiting, 10 for anything else. */
static void race(const char *url, const char *body, int *queued, int *waited, int *other)
{
	enum { N = 30 };
	int gate[2];
	CHECK(pipe(gate) == 0);
	pid_t pids[N];
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(gate[1]);
			char b;
			if (read(gate[0], &b, 1) < 0)
				_exit(20);
			struct h_resp r;
			char u[300];
			snprintf(u, sizeof u, "%s/v1/tasks", url);
			h_http(&r, "POST", u, TOK, body, NULL);
			const char *state = json_string_value(json_object_get(r.json, "state"));
			int code = r.status != 201 || !state	     ? 10
				   : strcmp(state, "queued") == 0 ? 0
				   : strcmp(state, "waiting") == 0 ? 1
								    : 10;
			_exit(code);
		}
	}
	close(gate[0]);
	close(gate[1]);
	*queued = *waited = *other = 0;
	for (int i = 0; i < N; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
		*queued += code == 0;
		*waited += code == 1;
		*other += code != 0 && code != 1;
	}
}

#define WAIT_TASK "{\"team\": \"alpha\", \"name\": \"demo\", \"gpu_memory_mib\": 1024, " \
		  "\"gpu_core_percent\": 25, \"on_quota_full\": \"wait\"}"

TEST_T(queue_wait_30_racers_two_admitted_28_in_line, 120)
{
	struct h_server s;
	start(&s, 2048, 400);
	int queued, waited, other;
	race(s.proc.url, WAIT_TASK, &queued, &waited, &other);
	CHECK_INT(other, 0);
	CHECK_INT(queued, 2);
	CHECK_INT(waited, 28);
	CHECK_INT(reserved_mem(s.proc.url), 2048);
	/* The line is the waiting tasks in the order they were decided (their seq). */
	char ids[40][32];
	CHECK_INT(line_ids(s.proc.url, 5, ids, 40), 28);
	for (int i = 1; i < 28; i++)
		CHECKF(sql(&s, "SELECT seq FROM tasks WHERE id = '%s'", ids[i - 1]) <
			       sql(&s, "SELECT seq FROM tasks WHERE id = '%s'", ids[i]),
		       "line out of order at %d", i);
	/* Nothing waiting holds quota or is an intent: no outbox row, the team's total as is. */
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM outbox"), 0);
	/* A raised quota admits the first two in line, in that transaction. */
	team_put(s.proc.url, "{\"gpu_memory_mib\": 4096, \"gpu_core_percent\": 400}");
	CHECK_INT(waiting(&s), 26);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id IN ('%s') AND state = 'queued'",
		      ids[0]), 1);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'queued'",
		      ids[1]), 1);
	CHECK_INT(sql(&s, "SELECT count(*) FROM outbox WHERE task_id = '%s' AND kind = 'create'",
		      ids[0]), 1);
	CHECK_INT(reserved_mem(s.proc.url), 4096);
	char rest[40][32];
	CHECK_INT(line_ids(s.proc.url, 50, rest, 40), 26);
	for (int i = 0; i < 26; i++)
		CHECK_STR(rest[i], ids[i + 2]);
	h_server_stop(&s);
}

TEST(queue_refuse_stays_the_default_and_the_team_sets_its_own)
{
	struct h_server s;
	start(&s, 1024, 100);
	char a[32], b[32];
	CHECK_INT(submit_task(s.proc.url, 1024, 60, NULL, a), 201);
	/* Full: refused by default and when asked, 201 waiting when asked. */
	CHECK_INT(submit_task(s.proc.url, 512, 60, NULL, NULL), 403);
	CHECK_INT(submit_task(s.proc.url, 512, 60, "refuse", NULL), 403);
	CHECK_INT(submit_task(s.proc.url, 512, 60, "wait", b), 201);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'waiting'", b), 1);
	CHECK_INT(sql(&s, "SELECT reserved_mem_mib FROM teams WHERE name = '%s'", "alpha"), 1024);
	/* The team's default. */
	team_put(s.proc.url, "{\"gpu_memory_mib\": 1024, \"gpu_core_percent\": 100, "
			     "\"default_on_quota_full\": \"wait\", \"queueing\": \"best_effort\"}");
	struct h_resp r;
	h_req(&r, "GET", s.proc.url, "/v1/teams/alpha", TOK, NULL, NULL);
	CHECK_STR(json_string_value(json_object_get(r.json, "default_on_quota_full")), "wait");
	CHECK_STR(json_string_value(json_object_get(r.json, "queueing")), "best_effort");
	CHECK_INT(json_integer_value(json_object_get(r.json, "waiting_tasks")), 1);
	h_resp_free(&r);
	CHECK_INT(submit_task(s.proc.url, 512, 60, NULL, NULL), 201);
	CHECK_INT(submit_task(s.proc.url, 512, 60, "refuse", NULL), 403);
	CHECK_INT(waiting(&s), 2);
	/* Bad values name their field. */
	h_req(&r, "POST", s.proc.url, "/v1/tasks", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	      "\"on_quota_full\": \"later\"}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "error"), "field")),
		  "on_quota_full");
	h_resp_free(&r);
	h_req(&r, "PUT", s.proc.url, "/v1/teams/alpha", ADMIN,
	      "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"queueing\": \"fair\"}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "error"), "field")),
		  "queueing");
	h_resp_free(&r);
	/* on_quota_full is part of the key's fingerprint. */
	const char *plain = "{\"team\": \"alpha\", \"gpu_memory_mib\": 512, \"gpu_core_percent\": 1}";
	const char *wait = "{\"team\": \"alpha\", \"gpu_memory_mib\": 512, \"gpu_core_percent\": 1, "
			   "\"on_quota_full\": \"wait\"}";
	char k1[32], k2[32];
	CHECK_INT(submit(s.proc.url, wait, "key-1", k1), 201);
	CHECK_INT(submit(s.proc.url, wait, "key-1", k2), 200);
	CHECK_STR(k1, k2);
	CHECK_INT(submit(s.proc.url, plain, "key-1", NULL), 409);
	h_server_stop(&s);
}

TEST(queue_cancel_of_a_waiting_task_is_immediate_and_releases_nothing)
{
	struct h_server s;
	start(&s, 2048, 400);
	char a[32], head[32], second[32];
	CHECK_INT(submit_task(s.proc.url, 1024, 60, NULL, a), 201);
	CHECK_INT(submit_task(s.proc.url, 2048, 60, "wait", head), 201);
	CHECK_INT(submit_task(s.proc.url, 1024, 60, "wait", second), 201);
	/* Strict: the second fits but waits behind the head. */
	CHECK_INT(waiting(&s), 2);
	/* A dry run with wait answers the place it would take, and writes nothing; without,
	 * none. */
	struct h_resp d;
	h_req(&d, "POST", s.proc.url, "/v1/tasks?dry_run=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 16, \"gpu_core_percent\": 1, "
	      "\"on_quota_full\": \"wait\"}", NULL);
	CHECK_INT(d.status, 200);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(d.json, "queue"), "position")),
		  3);
	h_resp_free(&d);
	h_req(&d, "POST", s.proc.url, "/v1/tasks?dry_run=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 16, \"gpu_core_percent\": 1}", NULL);
	CHECK(json_is_null(json_object_get(d.json, "queue")));
	h_resp_free(&d);
	CHECK_INT(waiting(&s), 2);
	struct h_resp r;
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", second);
	h_req(&r, "GET", s.proc.url, path, TOK, NULL, NULL);
	json_t *q = json_object_get(r.json, "queue");
	CHECK_INT(json_integer_value(json_object_get(q, "position")), 2);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(q, "ahead"), "gpu_memory_mib")),
		  2048);
	h_resp_free(&r);
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", head);
	h_req(&r, "POST", s.proc.url, path, TOK, NULL, NULL);
	CHECKF(r.status == 202, "cancel: %ld %s", r.status, r.body);
	CHECK_STR(json_string_value(json_object_get(r.json, "state")), "cancelled");
	h_resp_free(&r);
	/* Nothing was held, nothing is released, no cancel intent; the line moved on. */
	CHECK_INT(sql(&s, "SELECT released FROM tasks WHERE id = '%s'", head), 1);
	CHECK_INT(sql(&s, "SELECT count(*) FROM outbox WHERE task_id = '%s'", head), 0);
	CHECK_INT(sql(&s, "SELECT count(*) FROM task_events WHERE task_id = '%s' AND type = "
			  "'released'", head), 0);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'queued'", second),
		  1);
	CHECK_INT(reserved_mem(s.proc.url), 2048);
	CHECK_INT(h_metric(s.proc.url, "gwb_queue_waiting", NULL), 0);
	/* The audit sees no drift with a task waiting: it holds nothing. */
	char third[32];
	CHECK_INT(submit_task(s.proc.url, 1024, 60, "wait", third), 201);
	CHECK_INT(h_metric(s.proc.url, "gwb_queue_waiting", "team=\"alpha\""), 1);
	h_req(&r, "GET", s.proc.url, "/v1/audit", ADMIN, NULL, NULL);
	CHECKF(r.status == 200, "audit: %ld %s", r.status, r.body);
	CHECK_INT(json_integer_value(json_object_get(r.json, "drift")), 0);
	h_resp_free(&r);
	h_server_stop(&s);
}

TEST_T(queue_restart_keeps_the_line_and_its_order, 120)
{
	struct h_server s;
	start(&s, 1024, 100);
	char id[32];
	CHECK_INT(submit_task(s.proc.url, 1024, 60, NULL, id), 201);
	enum { N = 1000 };
	for (int i = 0; i < N; i++)
		CHECK_INT(submit_task(s.proc.url, 1 + i % 64, 60, "wait", id), 201);
	static char before[N][32], after[N][32];
	CHECK_INT(line_ids(s.proc.url, 250, before, N), N);
	h_server_kill9(&s);
	h_server_start(&s);
	CHECK_INT(line_ids(s.proc.url, 250, after, N), N);
	for (int i = 0; i < N; i++)
		CHECK_STR(after[i], before[i]);
	CHECK_INT(h_metric(s.proc.url, "gwb_queue_waiting", "team=\"alpha\""), N);
	/* A raised quota admits them all, each once. */
	team_put(s.proc.url, "{\"gpu_memory_mib\": 1048576, \"gpu_core_percent\": 100000}");
	CHECK_INT(waiting(&s), 0);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM outbox WHERE kind = 'create'"), N);
	CHECK_INT(h_sql_int(s.db, "SELECT count(DISTINCT task_id) FROM outbox"), N);
	h_server_stop(&s);
}

TEST(queue_best_effort_lets_a_small_task_pass_a_large_head)
{
	struct h_server s;
	start(&s, 2048, 400);
	char a[32], head[32], small[32];
	CHECK_INT(submit_task(s.proc.url, 1024, 60, NULL, a), 201);
	CHECK_INT(submit_task(s.proc.url, 2048, 60, "wait", head), 201);
	CHECK_INT(submit_task(s.proc.url, 1024, 60, "wait", small), 201);
	/* Strict: a raise that holds the small one but not the head admits neither. */
	team_put(s.proc.url, "{\"gpu_memory_mib\": 2560, \"gpu_core_percent\": 400}");
	CHECK_INT(waiting(&s), 2);
	/* best_effort: the small one goes first; the head keeps its place. */
	team_put(s.proc.url, "{\"gpu_memory_mib\": 2560, \"gpu_core_percent\": 400, "
			     "\"queueing\": \"best_effort\"}");
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'queued'", small),
		  1);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'waiting'", head),
		  1);
	/* A new one that fits passes too, while the head has not waited max_skip_seconds. */
	h_server_stop(&s);
}

/* ---- on kubesim: tasks run to their end ---- */

static void stack(struct h_stack *st, int with_redis, int mem, int core)
{
	static const char *const env[] = { "GWB_HTTP_RATE_LIMIT_PER_S=0", NULL };
	char body[160];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": %d, \"gpu_core_percent\": %d, \"token\": \"" TOK "\"}", mem,
		 core);
	h_stack_start(st, with_redis, NULL, env, "alpha", body);
}

static long long ended(const struct h_server *s)
{
	return h_sql_int(s->db, "SELECT count(*) FROM tasks WHERE state = 'succeeded' AND "
				"released = 1");
}

/* Tasks that had a Job (a scheduler event) before their admission: none may. */
static long long no_job_while_waiting(const struct h_server *s)
{
	return h_sql_int(s->db, "SELECT count(*) FROM task_events e JOIN tasks t ON t.id = "
				"e.task_id WHERE t.admitted_at IS NOT NULL AND e.ts < t.admitted_at "
				"AND e.type = 'scheduler_event'");
}

TEST_T(queue_wait_30_racers_all_run_in_line_order_never_above_quota, 240)
{
	struct h_stack st;
	stack(&st, 1, 2048, 400);
	const char *url = st.srv.proc.url;
	int queued, waited, other;
	race(url,
	     "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 25, "
	     "\"duration_seconds\": 1, \"on_quota_full\": \"wait\"}",
	     &queued, &waited, &other);
	CHECK_INT(other, 0);
	CHECK_INT(queued, 2);
	CHECK_INT(waited, 28);
	/* Sampled while they run: the team never holds more than its quota. */
	int64_t deadline = clock_mono_ms() + 200000;
	long long samples = 0;
	while (ended(&st.srv) < 30) {
		CHECKF(clock_mono_ms() < deadline, "ended %lld of 30, waiting %lld", ended(&st.srv),
		       waiting(&st.srv));
		long long r = reserved_mem(url);
		CHECKF(r >= 0 && r <= 2048, "reserved %lld above the quota", r);
		samples++;
		h_sleep_ms(50);
	}
	CHECK(samples > 0);
	CHECK_INT(reserved_mem(url), 0);
	/* Admitted in line order (strict): by seq, the admissions' times never go back. */
	CHECK_INT(h_sql_int(st.srv.db, "SELECT count(*) FROM tasks WHERE admitted_at IS NOT NULL"),
		  28);
	CHECK_INT(h_sql_int(st.srv.db,
			    "SELECT count(*) FROM tasks a JOIN tasks b ON b.seq > a.seq WHERE "
			    "a.admitted_at IS NOT NULL AND b.admitted_at IS NOT NULL AND "
			    "b.admitted_at < a.admitted_at"),
		  0);
	/* Each admitted once, with one create intent; no drift. */
	CHECK_INT(h_sql_int(st.srv.db, "SELECT count(*) FROM task_events WHERE type = 'admitted'"),
		  28);
	CHECK_INT(h_sql_int(st.srv.db, "SELECT count(*) FROM outbox WHERE kind = 'create'"), 28);
	CHECK_INT(h_metric(url, "gwb_queue_wait_seconds_count", NULL), 28);
	CHECK_INT(no_job_while_waiting(&st.srv), 0);
	h_server_stop(&st.srv);
}

/* Waits until task id is in state. */
static void wait_state(const struct h_server *s, const char *id, const char *state)
{
	char q[256];
	snprintf(q, sizeof q, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = '%s'", id,
		 state);
	WAIT_FOR(h_sql_int(s->db, q) == 1, 60000, "%s never %s", id, state);
}

TEST_T(queue_prediction_within_a_second_or_a_tenth, 180)
{
	struct h_stack st;
	stack(&st, 0, 2048, 400);
	const char *url = st.srv.proc.url;
	char a[32], b[32], w[4][32];
	CHECK_INT(submit_task(url, 1024, 4, NULL, a), 201);
	CHECK_INT(submit_task(url, 1024, 6, NULL, b), 201);
	wait_state(&st.srv, a, "running");
	wait_state(&st.srv, b, "running");
	for (int i = 0; i < 4; i++)
		CHECK_INT(submit_task(url, 1024, 3, "wait", w[i]), 201);
	/* A dry run with wait: the fifth place, predicted after the four ahead. */
	struct h_resp d;
	h_req(&d, "POST", url, "/v1/tasks?dry_run=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10, "
	      "\"duration_seconds\": 3, \"on_quota_full\": \"wait\"}", NULL);
	CHECK_INT(d.status, 200);
	json_t *dq = json_object_get(d.json, "queue");
	CHECK_INT(json_integer_value(json_object_get(dq, "position")), 5);
	CHECK(json_is_string(json_object_get(dq, "predicted_admit_at")));
	h_resp_free(&d);
	/* The view names what the head waits for: a's end. */
	struct h_resp r;
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", w[0]);
	h_req(&r, "GET", url, path, TOK, NULL, NULL);
	json_t *q = json_object_get(r.json, "queue");
	CHECK_INT(json_integer_value(json_object_get(q, "position")), 1);
	CHECK(json_is_string(json_object_get(q, "predicted_admit_at")));
	CHECK_STR(json_string_value(json_array_get(json_object_get(q, "basis"), 0)), a);
	h_resp_free(&r);
	WAIT_FOR(ended(&st.srv) == 6, 120000, "ended %lld of 6", ended(&st.srv));
	for (int i = 0; i < 4; i++) {
		char sql_[256];
		snprintf(sql_, sizeof sql_, "SELECT admitted_at - created_at FROM tasks WHERE id = '%s'",
			 w[i]);
		long long waited_ms = h_sql_int(st.srv.db, sql_);
		snprintf(sql_, sizeof sql_,
			 "SELECT abs(admitted_at - predicted_admit_at) FROM tasks WHERE id = '%s'",
			 w[i]);
		long long err = h_sql_int(st.srv.db, sql_);
		long long bound = waited_ms / 10 > 1000 ? waited_ms / 10 : 1000;
		t_log("waiting task %d: waited %lld ms, predicted within %lld ms", i, waited_ms, err);
		CHECKF(err >= 0 && err <= bound, "task %d: error %lld ms over %lld", i, err, bound);
	}
	CHECK_INT(no_job_while_waiting(&st.srv), 0);
	CHECK_INT(h_metric(url, "gwb_queue_prediction_error_seconds_count", NULL), 4);
	h_server_stop(&st.srv);
}

TEST_T(queue_best_effort_passes_the_head_only_within_max_skip_seconds, 180)
{
	struct h_stack st;
	static const char *const env[] = { "GWB_HTTP_RATE_LIMIT_PER_S=0",
					   "GWB_QUEUE_MAX_SKIP_SECONDS=6", NULL };
	h_stack_start(&st, 0, NULL, env, "alpha",
		      "{\"gpu_memory_mib\": 2048, \"gpu_core_percent\": 400, \"queueing\": "
		      "\"best_effort\", \"token\": \"" TOK "\"}");
	const char *url = st.srv.proc.url;
	char a[32], b[32], head[32], small[6][32];
	CHECK_INT(submit_task(url, 1024, 2, NULL, a), 201);
	CHECK_INT(submit_task(url, 1024, 2, NULL, b), 201);
	CHECK_INT(submit_task(url, 2048, 1, "wait", head), 201);
	for (int i = 0; i < 6; i++)
		CHECK_INT(submit_task(url, 1024, 3, "wait", small[i]), 201);
	WAIT_FOR(ended(&st.srv) == 9, 150000, "ended %lld of 9", ended(&st.srv));
	/* Small ones passed the head, each while the head had waited at most 6 s; the head
	 * was admitted in the end. */
	long long passed = sql(&st.srv,
			       "SELECT count(*) FROM tasks s, tasks h WHERE h.id = '%s' AND "
			       "s.admitted_at < h.admitted_at AND s.seq > h.seq", head);
	CHECK(passed >= 1);
	CHECK_INT(sql(&st.srv,
		      "SELECT count(*) FROM tasks s, tasks h WHERE h.id = '%s' AND s.admitted_at < "
		      "h.admitted_at AND s.seq > h.seq AND s.admitted_at - h.created_at > 6000", head),
		  0);
	CHECK_INT(reserved_mem(url), 0);
	CHECK_INT(no_job_while_waiting(&st.srv), 0);
	h_server_stop(&st.srv);
}

TEST_T(queue_kill9_during_admissions_admits_nothing_twice, 240)
{
	struct h_stack st;
	stack(&st, 1, 2048, 400);
	const char *url = st.srv.proc.url;
	enum { N = 12 };
	char id[N][32];
	for (int i = 0; i < N; i++)
		CHECK_INT(submit_task(url, 1024, 1, "wait", id[i]), 201);
	/* Killed once the line has begun to move, then again a little later. */
	WAIT_FOR(h_sql_int(st.srv.db, "SELECT count(*) FROM tasks WHERE admitted_at IS NOT NULL") >= 2,
		 60000, "no admission");
	h_server_kill9(&st.srv);
	h_server_start(&st.srv);
	WAIT_FOR(h_sql_int(st.srv.db, "SELECT count(*) FROM tasks WHERE admitted_at IS NOT NULL") >= 5,
		 60000, "no admission after the restart");
	h_server_kill9(&st.srv);
	h_server_start(&st.srv);
	url = st.srv.proc.url;
	WAIT_FOR(ended(&st.srv) == N, 180000, "ended %lld of %d", ended(&st.srv), N);
	/* Every acknowledged task is there and ran; none was admitted twice or has two create
	 * intents; nothing is held and the audit finds no drift. */
	for (int i = 0; i < N; i++) {
		CHECK_INT(sql(&st.srv, "SELECT count(*) FROM task_events WHERE task_id = '%s' AND "
				       "type = 'admitted'", id[i]) <= 1, 1);
		CHECK_INT(sql(&st.srv, "SELECT count(*) FROM outbox WHERE task_id = '%s' AND kind = "
				       "'create'", id[i]),
			  sql(&st.srv, "SELECT admitted_at IS NOT NULL FROM tasks WHERE id = '%s'",
			      id[i]));
	}
	CHECK_INT(reserved_mem(url), 0);
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/audit", ADMIN, NULL, NULL);
	CHECK_INT(json_integer_value(json_object_get(r.json, "drift")), 0);
	h_resp_free(&r);
	h_server_stop(&st.srv);
}

/* Runs gwbctl against s with args (a word list of the case's own) and TOK; its stdout
 * (gwb_malloc'd) and exit code. */
static char *ctl(const struct h_server *s, const char *args, int *code)
{
	char cmd[2048];
	snprintf(cmd, sizeof cmd, "GWB_URL='%s' GWB_TOKEN=%s '%s' %s 2>/dev/null", s->proc.url, TOK,
		 h_bin("gwbctl"), args);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t cap = 1 << 18, len = 0, n;
	char *buf = gwb_malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += n;
	buf[len] = '\0';
	int st = pclose(p);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	return buf;
}

TEST(queue_gwbctl_submits_to_wait_and_shows_the_line)
{
	struct h_server s;
	start(&s, 1024, 100);
	int code;
	char *out = ctl(&s, "-o name submit --team alpha --mem 1024 --core 10", &code);
	CHECK_INT(code, 0);
	gwb_free(out);
	out = ctl(&s, "-o json submit --team alpha --mem 512 --core 10 --name second "
		      "--on-quota-full wait", &code);
	CHECK_INT(code, 0);
	json_t *t = json_loads(out, 0, NULL);
	gwb_free(out);
	CHECK_STR(json_string_value(json_object_get(t, "state")), "waiting");
	char id[32];
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(t, "id")));
	CHECK_INT(json_integer_value(json_object_get(json_object_get(t, "queue"), "position")), 1);
	json_decref(t);
	/* get shows the place in text; queue lists the line (every team the token sees). */
	char args[128];
	snprintf(args, sizeof args, "-o text get %s", id);
	out = ctl(&s, args, &code);
	CHECK_INT(code, 0);
	CHECKF(strstr(out, "position 1, 0 ahead"), "%s", out);
	gwb_free(out);
	out = ctl(&s, "-o text queue", &code);
	CHECK_INT(code, 0);
	CHECKF(strstr(out, id) && strstr(out, "second"), "%s", out);
	gwb_free(out);
	out = ctl(&s, "-o name queue --team alpha", &code);
	CHECK_INT(code, 0);
	CHECK(strncmp(out, id, strlen(id)) == 0);
	gwb_free(out);
	/* cancel --all takes the line too, so that nothing of it is admitted afterwards. */
	out = ctl(&s, "-o name cancel --all --team alpha --yes", &code);
	CHECK_INT(code, 0);
	CHECKF(strstr(out, id) != NULL, "%s", out);
	gwb_free(out);
	CHECK_INT(waiting(&s), 0);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'cancelled'", id),
		  1);
	h_server_stop(&s);
}

/* Whether the task at path shows a pending diagnosis with a predicted_bind_at. */
static int diagnosis_has_bind(const char *url, const char *path)
{
	struct h_resp r;
	h_req(&r, "GET", url, path, TOK, NULL, NULL);
	const json_t *d = json_object_get(json_object_get(r.json, "pending"), "diagnosis");
	int has = json_is_string(json_object_get(d, "predicted_bind_at"));
	h_resp_free(&r);
	return has;
}

TEST_T(queue_pending_diagnosis_predicts_the_bind, 120)
{
	struct h_stack st;
	stack(&st, 0, 1 << 20, 100000);
	const char *url = st.srv.proc.url;
	int64_t until = clock_mono_ms() + 10000;
	while (h_metric(url, "gwb_kube_picture_fresh", NULL) != 1) {
		CHECKF(clock_mono_ms() < until, "the picture never became fresh");
		h_sleep_ms(20);
	}
	/* Every card filled by one task that runs 3 s (card k's a second later than k-1's). */
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/devices", TOK, NULL, NULL);
	json_t *cards = json_object_get(r.json, "cards");
	int n = (int)json_array_size(cards);
	CHECK(n >= 1 && n <= 16);
	long long card_mem = json_integer_value(json_object_get(
		json_object_get(json_array_get(cards, 0), "total"), "gpu_memory_mib"));
	h_resp_free(&r);
	CHECK(card_mem > 0);
	char ids[16][32];
	for (int i = 0; i < n; i++) {
		CHECK_INT(submit_task(url, (int)card_mem, 3 + i, NULL, ids[i]), 201);
		wait_state(&st.srv, ids[i], "running");
	}
	/* A whole card asked: pending until the first card frees, which the dry run predicts
	 * from the same replay as the line. */
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": %lld, \"gpu_core_percent\": 10}", card_mem);
	h_req(&r, "POST", url, "/v1/tasks?dry_run=true", TOK, body, NULL);
	json_t *p = json_object_get(r.json, "placement");
	CHECK_STR(json_string_value(json_object_get(p, "outcome")), "pending");
	const char *pred = json_string_value(
		json_object_get(json_object_get(p, "diagnosis"), "predicted_bind_at"));
	CHECKF(pred != NULL, "%s", r.body);
	int64_t predicted;
	CHECK_INT(clock_parse_rfc3339(pred, &predicted), 0);
	h_resp_free(&r);
	char id[32];
	CHECK_INT(submit(url, body, NULL, id), 201);
	wait_state(&st.srv, id, "pending");
	/* The task's own diagnosis carries it too, once its Pod is Pending. */
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	WAIT_FOR(diagnosis_has_bind(url, path), 20000, "no predicted_bind_at in the diagnosis");
	wait_state(&st.srv, id, "running");
	char q[256];
	/* The bind as the scheduler's Scheduled event recorded it. */
	snprintf(q, sizeof q,
		 "SELECT max(ts) FROM task_events WHERE task_id = '%s' AND type = 'scheduler_event' "
		 "AND json_extract(detail, '$.reason') = 'Scheduled'", id);
	long long ran = h_sql_int(st.srv.db, q);
	long long err = ran - predicted;
	t_log("bind predicted within %lld ms", err);
	/* The card frees at the first task's end (its container's start plus 3 s); the bind
	 * follows at the scheduler's next pass, which the replay does not model: within 2 s. */
	CHECKF(err > -1000 && err < 2000, "bound %lld ms from the prediction", err);
	h_server_stop(&st.srv);
}

/* Writes sql into the stopped server's file (a drift the audit finds). */
static void tamper(const char *db, const char *q)
{
	sqlite3 *h;
	CHECK_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	char *err = NULL;
	int rc = sqlite3_exec(h, q, NULL, NULL, &err);
	CHECKF(rc == SQLITE_OK, "%s: %s", q, err ? err : "?");
	sqlite3_close(h);
}

TEST(queue_an_audit_repair_that_gives_quota_back_moves_the_line)
{
	struct h_server s;
	start(&s, 2048, 400);
	char a[32], w[32];
	CHECK_INT(submit_task(s.proc.url, 1024, 60, NULL, a), 201);
	h_server_stop(&s);
	/* The team's total holds 1024 more than its tasks do: it looks full. */
	tamper(s.db, "UPDATE teams SET reserved_mem_mib = 2048 WHERE name = 'alpha'");
	h_server_start(&s);
	CHECK_INT(submit_task(s.proc.url, 1024, 60, "wait", w), 201);
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'waiting'", w), 1);
	struct h_resp r;
	h_req(&r, "POST", s.proc.url, "/v1/audit/repair", ADMIN, NULL, NULL);
	CHECKF(r.status == 200, "repair: %ld %s", r.status, r.body);
	h_resp_free(&r);
	/* The repair gave 1024 back, and the line took it in the same transaction. */
	CHECK_INT(sql(&s, "SELECT count(*) FROM tasks WHERE id = '%s' AND state = 'queued'", w), 1);
	CHECK_INT(reserved_mem(s.proc.url), 2048);
	h_server_stop(&s);
}
