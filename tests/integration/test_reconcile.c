/* The whole chain on real parts: gwb-server (with and without a real redis-server) against
 * kubesim, whose kubelet runs the real gwb-worker. The lab's experiments and its hard
 * questions: unknown outcomes, cancel before create, the three no-release cases, restart
 * recovery, fragmentation, device health. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
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
	env[n++] = "GWB_KUBE_REQUEST_TIMEOUT_MS=1000";
	for (const char *const *e = extra_env; e && *e && n < 31; e++)
		env[n++] = *e;
	env[n] = NULL;
	h_stack_start(st, with_redis, kubesim_flags, env, "alpha",
		      "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"" TOK "\"}");
}

static const char *url(struct h_stack *st)
{
	return st->srv.proc.url;
}

static json_t *jget(json_t *o, const char *path)
{
	char buf[160];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok && o; tok = dot) {
		dot = strchr(tok, '.');
		if (dot)
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtol(tok, NULL, 10))
				     : json_object_get(o, tok);
	}
	return o;
}

static const char *js(json_t *o, const char *path)
{
	json_t *v = jget(o, path);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Submits and returns the task id (static ring). */
static const char *submit(struct h_stack *st, int mem, int core, int secs, const char *exp)
{
	static char ids[8][32];
	static int slot;
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": %d, "
		 "\"duration_seconds\": %d, \"experiment\": \"%s\"}",
		 mem, core, secs, exp);
	struct h_resp r;
	h_req(&r, "POST", url(st), "/v1/tasks", TOK, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 8];
	snprintf(id, 32, "%s", js(r.json, "id"));
	h_resp_free(&r);
	return id;
}

static json_t *task(struct h_stack *st, const char *id)
{
	char path[64];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", url(st), path, TOK, NULL, NULL);
	CHECKF(r.status == 200, "GET %s: %ld", path, r.status);
	json_t *t = json_incref(r.json);
	h_resp_free(&r);
	return t;
}

/* Waits until the task's field at path equals want; returns the task (caller decrefs). */
static json_t *wait_field(struct h_stack *st, const char *id, const char *path, const char *want,
			  int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		json_t *t = task(st, id);
		json_t *v = jget(t, path);
		const char *s = json_is_string(v) ? json_string_value(v)
				: json_is_true(v)  ? "true"
				: json_is_false(v) ? "false"
						   : NULL;
		if (s && strcmp(s, want) == 0)
			return t;
		if (clock_mono_ms() > deadline) {
			char *d = json_dumps(t, JSON_COMPACT);
			t_log("task: %s", d);
			gwb_free(d); /* jansson allocates through gwb_malloc here */
			json_decref(t);
			h_proc_dump_log(&st->srv.proc, 15);
			t_fail(__FILE__, __LINE__, "%s: %s never became %s", id, path, want);
		}
		json_decref(t);
		h_sleep_ms(50);
	}
}

static long long reserved_mem(struct h_stack *st)
{
	struct h_resp r;
	h_req(&r, "GET", url(st), "/v1/teams/alpha", TOK, NULL, NULL);
	long long v = json_integer_value(jget(r.json, "reserved.gpu_memory_mib"));
	h_resp_free(&r);
	return v;
}

static void cancel(struct h_stack *st, const char *id)
{
	char path[80];
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	struct h_resp r;
	h_req(&r, "POST", url(st), path, TOK, NULL, NULL);
	CHECKF(r.status == 202 || r.status == 200, "cancel: %ld %s", r.status, r.body);
	h_resp_free(&r);
}

/* The Jobs with the task's label, as kubesim lists them. */
static json_t *jobs_of(struct h_stack *st, const char *id)
{
	char path[200];
	snprintf(path, sizeof path,
		 "/apis/batch/v1/namespaces/gpu-workbench/jobs?labelSelector=gwb.io%%2Ftask%%3D%s",
		 id);
	json_t *list = NULL;
	CHECK_INT(h_kube(&st->ks, "GET", path, NULL, NULL, &list), 200);
	json_t *items = json_incref(json_object_get(list, "items"));
	json_decref(list);
	return items;
}

static json_t *pods_of(struct h_stack *st, const char *id)
{
	char path[200];
	snprintf(path, sizeof path,
		 "/api/v1/namespaces/gpu-workbench/pods?labelSelector=gwb.io%%2Ftask%%3D%s", id);
	json_t *list = NULL;
	CHECK_INT(h_kube(&st->ks, "GET", path, NULL, NULL, &list), 200);
	json_t *items = json_incref(json_object_get(list, "items"));
	json_decref(list);
	return items;
}

static void fault(struct h_stack *st, const char *body)
{
	long s = h_kubesim_ctl(&st->ks, body ? "PUT" : "DELETE", "/_kubesim/faults", body, NULL);
	CHECKF(s == 200, "fault %s: %ld", body ? body : "clear", s);
}

TEST_T(recon_lab_chain_runs_succeeds_and_releases, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	const char *id = submit(&st, 1024, 25, 2, "normal");
	json_t *t = wait_field(&st, id, "state", "running", 10000);
	CHECK(js(t, "allocation.annotation") != NULL);
	CHECK_INT(json_integer_value(jget(t, "allocation.cards.0.gpu_memory_mib")), 1024);
	CHECK_INT(json_integer_value(jget(t, "allocation.cards.0.gpu_core_percent")), 25);
	CHECK_STR(js(t, "usage.status"), "unknown");
	CHECK(js(t, "job.uid") && js(t, "pod.uid"));
	CHECK_STR(js(t, "pod.node"), "colima-gwb");
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 1024);
	t = wait_field(&st, id, "state", "succeeded", 15000);
	CHECK_INT(json_integer_value(jget(t, "pod.exit_code")), 0);
	json_decref(t);
	t = wait_field(&st, id, "reservation.released", "true", 5000);
	CHECK_STR(js(t, "reservation.release_reason"), "job_complete");
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 0);
	/* The devices view shows both cards, nothing left on them. */
	struct h_resp r;
	h_req(&r, "GET", url(&st), "/v1/devices", TOK, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(json_array_size(json_object_get(r.json, "cards")), 2);
	CHECK_INT(json_integer_value(jget(r.json, "cards.0.total.gpu_memory_mib")), 8192);
	h_resp_free(&r);
	/* Every step of the task's life is a transition in /metrics, as in its history. */
	CHECK(h_metric(url(&st), "gwb_task_transitions_total", "from=\"none\",to=\"queued\"") == 1);
	CHECK(h_metric(url(&st), "gwb_task_transitions_total", "to=\"running\"") == 1);
	double to_succeeded = h_metric(url(&st), "gwb_task_transitions_total", "to=\"succeeded\"");
	CHECKF(to_succeeded == 1, "transitions to succeeded: %.0f", to_succeeded);
	/* A Pod that ended before its Job said so never sent the task back to pending. */
	CHECK(h_metric(url(&st), "gwb_task_transitions_total", "from=\"running\",to=\"pending\"") ==
	      0);
	CHECK(h_metric(url(&st), "gwb_task_transitions_total", "to=\"unknown\"") == 0);
}

TEST_T(recon_sharing_and_overlimit_exit_42, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	const char *a = submit(&st, 1024, 25, 30, "normal");
	const char *b = submit(&st, 1024, 25, 30, "normal");
	const char *c = submit(&st, 1024, 25, 30, "normal");
	json_t *ta = wait_field(&st, a, "state", "running", 10000);
	json_t *tb = wait_field(&st, b, "state", "running", 10000);
	json_t *tc = wait_field(&st, c, "state", "running", 10000);
	/* Three 1024 MiB tasks on two cards: at least two share a card. */
	long long ma = json_integer_value(jget(ta, "allocation.cards.0.minor"));
	long long mb = json_integer_value(jget(tb, "allocation.cards.0.minor"));
	long long mc = json_integer_value(jget(tc, "allocation.cards.0.minor"));
	CHECKF(ma == mb || mb == mc || ma == mc, "minors %lld %lld %lld", ma, mb, mc);
	json_decref(ta);
	json_decref(tb);
	json_decref(tc);
	struct h_resp r;
	h_req(&r, "GET", url(&st), "/v1/devices", TOK, NULL, NULL);
	long long tasks_on_cards = 0;
	for (size_t i = 0; i < 2; i++)
		tasks_on_cards += (long long)json_array_size(
			jget(json_array_get(json_object_get(r.json, "cards"), i), "tasks"));
	CHECK_INT(tasks_on_cards, 3);
	h_resp_free(&r);
	const char *o = submit(&st, 1024, 25, 30, "overlimit");
	json_t *t = wait_field(&st, o, "state", "failed", 15000);
	CHECK_INT(json_integer_value(jget(t, "pod.exit_code")), 42);
	CHECK_STR(js(t, "pod.reason"), "simulated_limit_rejected");
	json_decref(t);
	t = wait_field(&st, o, "reservation.released", "true", 5000);
	/* The worker's own account, from its termination message: its refusal, its ledger's
	 * peak within its budget, and its isolation verdict (never enforced without a GPU). */
	CHECK_STR(js(t, "result.exit_reason"), "simulated_limit_rejected");
	CHECK_INT(json_integer_value(jget(t, "result.exit_code")), 42);
	CHECK_INT(json_integer_value(jget(t, "result.ledger.budget_bytes")), 1024LL << 20);
	CHECK(json_integer_value(jget(t, "result.ledger.peak_bytes")) <= 1024LL << 20);
	CHECK(json_integer_value(jget(t, "result.ledger.refused_bytes")) > 0);
	CHECK(js(t, "isolation.verdict") != NULL);
	CHECK(strcmp(js(t, "isolation.verdict"), "enforced") != 0);
	CHECK(json_is_false(jget(t, "isolation.enforced")));
	CHECK(json_equal(jget(t, "isolation"), jget(t, "result.isolation")));
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 3 * 1024);
}

TEST_T(recon_timeout_after_create_one_job_quota_kept, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	/* kubesim stores the Job but never answers the create: our POST times out. */
	fault(&st, "{\"withhold_create\": {\"resource\": \"jobs\", \"count\": 1}}");
	const char *id = submit(&st, 1024, 25, 30, "normal");
	json_t *t = wait_field(&st, id, "state", "running", 15000);
	json_t *jobs = jobs_of(&st, id);
	CHECK_INT(json_array_size(jobs), 1);
	CHECK_STR(js(t, "job.uid"), js(json_array_get(jobs, 0), "metadata.uid"));
	json_decref(jobs);
	json_decref(t);
	/* The history shows the unknown outcome, and the quota was never given back. */
	char path[80];
	snprintf(path, sizeof path, "/v1/tasks/%s/events", id);
	struct h_resp r;
	h_req(&r, "GET", url(&st), path, TOK, NULL, NULL);
	int unknown = 0, released = 0;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(r.json, "events"), i, e) {
		unknown |= js(e, "to") && strcmp(js(e, "to"), "unknown") == 0;
		released |= strcmp(js(e, "type"), "released") == 0;
	}
	h_resp_free(&r);
	CHECK(unknown);
	CHECK(!released);
	CHECK_INT(reserved_mem(&st), 1024);
}

TEST_T(recon_api_unreachable_at_create_is_unknown_then_runs, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	fault(&st, "{\"api\": \"refuse\"}");
	const char *id = submit(&st, 1024, 25, 30, "normal");
	json_t *t = wait_field(&st, id, "state", "unknown", 10000);
	CHECK_STR(js(t, "reason"), "api_unreachable");
	CHECK(js(t, "pod.reason") == NULL);
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 1024);
	fault(&st, NULL);
	t = wait_field(&st, id, "state", "running", 20000);
	json_decref(t);
	json_t *jobs = jobs_of(&st, id);
	CHECK_INT(json_array_size(jobs), 1);
	json_decref(jobs);
}

TEST_T(recon_cancel_before_job_exists_leaves_a_suspended_marker, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	fault(&st, "{\"api\": \"refuse\"}");
	const char *id = submit(&st, 1024, 25, 30, "normal");
	cancel(&st, id);
	h_sleep_ms(500);
	json_t *t = task(&st, id);
	CHECK_STR(js(t, "state"), "cancelling");
	CHECK(json_is_false(jget(t, "reservation.released"))); /* API away: nothing proven */
	json_decref(t);
	fault(&st, NULL);
	t = wait_field(&st, id, "state", "cancelled", 15000);
	CHECK(json_is_true(jget(t, "reservation.released")));
	json_decref(t);
	json_t *jobs = jobs_of(&st, id);
	CHECK_INT(json_array_size(jobs), 1);
	CHECK(json_is_true(jget(json_array_get(jobs, 0), "spec.suspend")));
	json_decref(jobs);
	/* A late create (a retry that was in flight) finds the marker and starts nothing. */
	char body[1024];
	snprintf(body, sizeof body,
		 "{\"apiVersion\": \"batch/v1\", \"kind\": \"Job\", \"metadata\": {\"name\": "
		 "\"gwb-%s\", \"labels\": {\"gwb.io/task\": \"%s\", \"gwb.io/managed\": \"true\"}}, "
		 "\"spec\": {\"template\": {\"spec\": {\"restartPolicy\": \"Never\", "
		 "\"containers\": [{\"name\": \"worker\", \"image\": \"x\"}]}}}}",
		 id, id);
	CHECK_INT(h_kube(&st.ks, "POST", "/apis/batch/v1/namespaces/gpu-workbench/jobs", body,
			 NULL, NULL),
		  409);
	h_sleep_ms(500);
	json_t *pods = pods_of(&st, id);
	CHECK_INT(json_array_size(pods), 0);
	json_decref(pods);
	CHECK_INT(reserved_mem(&st), 0);
}

/* Submits a long 1024 MiB task and waits until it runs; returns its id. */
static const char *running_task(struct h_stack *st)
{
	const char *id = submit(st, 1024, 25, 60, "normal");
	json_decref(wait_field(st, id, "state", "running", 10000));
	return id;
}

/* A while later the task is still cancelling and its 1024 MiB are still reserved. */
static void expect_held(struct h_stack *st, const char *id)
{
	h_sleep_ms(1500);
	json_t *t = task(st, id);
	CHECK_STR(js(t, "state"), "cancelling");
	CHECK(json_is_false(jget(t, "reservation.released")));
	json_decref(t);
	CHECK_INT(reserved_mem(st), 1024);
}

TEST_T(recon_terminating_pod_keeps_the_reservation, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	const char *id = running_task(&st);
	fault(&st, "{\"stuck_terminating\": [\"*\"]}");
	cancel(&st, id);
	/* The Job is suspended and its Pod is deleted, but the Pod stays Terminating. */
	int64_t deadline = clock_mono_ms() + 10000;
	for (;;) {
		json_t *pods = pods_of(&st, id);
		int terminating = json_array_size(pods) == 1 &&
				  jget(json_array_get(pods, 0), "metadata.deletionTimestamp");
		json_decref(pods);
		if (terminating)
			break;
		CHECKF(clock_mono_ms() < deadline, "the pod never showed Terminating");
		h_sleep_ms(50);
	}
	expect_held(&st, id);
	/* The task says what kubectl says: the Pod is terminating, and the quota waits for it. */
	json_t *t = wait_field(&st, id, "reason", "waiting_for_pod_to_stop", 10000);
	CHECK(json_is_true(jget(t, "pod.terminating")));
	CHECK(js(t, "pod.deletion_timestamp") != NULL && js(t, "pod.deletion_timestamp")[0]);
	CHECK_STR(js(t, "pod.phase"), "Running");
	json_decref(t);
	fault(&st, NULL); /* the kubelet finishes the deletion */
	t = wait_field(&st, id, "reservation.released", "true", 15000);
	CHECK_STR(js(t, "state"), "cancelled");
	CHECK_STR(js(t, "reason"), "cancelled");
	CHECK(json_is_false(jget(t, "pod.terminating")));
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 0);
}

TEST_T(recon_api_unreachable_keeps_the_reservation, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	const char *id = running_task(&st);
	fault(&st, "{\"api\": \"refuse\"}");
	cancel(&st, id);
	expect_held(&st, id);
	struct h_resp r;
	h_req(&r, "GET", url(&st), "/readyz", H_METRICS_TOKEN, NULL, NULL);
	const char *kst = js(r.json, "dependencies.kube.state");
	CHECKF(kst && strcmp(kst, "ok") != 0, "kube state %s while the API refuses", kst);
	h_resp_free(&r);
	fault(&st, NULL);
	json_t *t = wait_field(&st, id, "reservation.released", "true", 20000);
	CHECK_STR(js(t, "state"), "cancelled");
	/* The reason says what is true now, not what was true during the outage. */
	CHECK_STR(js(t, "reason"), "cancelled");
	json_decref(t);
}

TEST_T(recon_job_gone_pod_running_keeps_the_reservation, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	const char *id = submit(&st, 1024, 25, 4, "normal");
	json_t *t = wait_field(&st, id, "state", "running", 10000);
	json_decref(t);
	char body[160];
	snprintf(body, sizeof body, "{\"namespace\": \"gpu-workbench\", \"name\": \"gwb-%s\"}", id);
	CHECK_INT(h_kubesim_ctl(&st.ks, "POST", "/_kubesim/actions/orphan-job", body, NULL), 200);
	h_sleep_ms(800);
	json_t *jobs = jobs_of(&st, id);
	CHECK_INT(json_array_size(jobs), 0);
	json_decref(jobs);
	json_t *pods = pods_of(&st, id);
	CHECK_INT(json_array_size(pods), 1);
	json_decref(pods);
	t = task(&st, id);
	CHECK(json_is_false(jget(t, "reservation.released")));
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 1024);
	/* The orphaned Pod runs to its end; then, and only then, the quota comes back. */
	t = wait_field(&st, id, "reservation.released", "true", 15000);
	CHECK_STR(js(t, "reservation.release_reason"), "job_gone");
	CHECK_STR(js(t, "state"), "succeeded");
	CHECK_STR(js(t, "reason"), "job_deleted_pod_completed");
	CHECK_INT(json_integer_value(jget(t, "pod.exit_code")), 0);
	json_decref(t);
}

TEST_T(recon_fragmentation_diagnosed_then_resolved, 90)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	const char *a = submit(&st, 5120, 60, 120, "normal");
	const char *b = submit(&st, 5120, 60, 120, "normal");
	json_t *ta = wait_field(&st, a, "state", "running", 10000);
	json_t *tb = wait_field(&st, b, "state", "running", 10000);
	CHECK(json_integer_value(jget(ta, "allocation.cards.0.minor")) !=
	      json_integer_value(jget(tb, "allocation.cards.0.minor")));
	json_decref(ta);
	json_decref(tb);
	const char *c = submit(&st, 4096, 25, 5, "normal");
	json_t *tc = wait_field(&st, c, "pending.diagnosis.kind", "fragmentation", 10000);
	CHECK_STR(js(tc, "state"), "pending");
	const char *msg = js(tc, "pending.scheduler_message");
	CHECKF(msg && strstr(msg, "0/1 nodes are available"), "message: %s", msg ? msg : "-");
	CHECK_INT(json_integer_value(jget(tc, "pending.diagnosis.cards.total_free_mib")), 6144);
	CHECK_INT(json_array_size(jget(tc, "pending.diagnosis.unblock")), 2);
	json_decref(tc);
	/* The scheduler's own Event is in the task's history. */
	int64_t deadline = clock_mono_ms() + 5000;
	int seen = 0;
	while (!seen) {
		char path[80];
		snprintf(path, sizeof path, "/v1/tasks/%s/events", c);
		struct h_resp r;
		h_req(&r, "GET", url(&st), path, TOK, NULL, NULL);
		size_t i;
		json_t *e;
		json_array_foreach(json_object_get(r.json, "events"), i, e)
			seen |= strcmp(js(e, "type"), "scheduler_event") == 0 &&
				js(e, "detail.reason") &&
				strcmp(js(e, "detail.reason"), "FailedScheduling") == 0;
		h_resp_free(&r);
		CHECKF(seen || clock_mono_ms() < deadline, "no FailedScheduling event noted");
		if (!seen)
			h_sleep_ms(50);
	}
	cancel(&st, a);
	tc = wait_field(&st, c, "state", "running", 20000);
	json_decref(tc);
	/* 9 GiB: never on an 8 GiB card, whatever the quota says. */
	const char *big = submit(&st, 9216, 10, 5, "normal");
	json_t *tg = wait_field(&st, big, "pending.diagnosis.kind", "card_capacity", 10000);
	json_decref(tg);
}

TEST_T(recon_device_health_change, 60)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	CHECK_INT(h_kubesim_ctl(&st.ks, "POST", "/_kubesim/actions/device-health",
				"{\"node\": \"colima-gwb\", \"minor\": 1, \"healthy\": false, "
				"\"xid\": 79}",
				NULL),
		  200);
	int64_t deadline = clock_mono_ms() + 5000;
	for (;;) {
		struct h_resp r;
		h_req(&r, "GET", url(&st), "/v1/devices", TOK, NULL, NULL);
		int unhealthy = json_is_false(jget(r.json, "cards.1.healthy"));
		h_resp_free(&r);
		if (unhealthy)
			break;
		CHECKF(clock_mono_ms() < deadline, "card 1 never showed unhealthy");
		h_sleep_ms(50);
	}
	const char *a = submit(&st, 5120, 60, 60, "normal");
	json_t *t = wait_field(&st, a, "state", "running", 10000);
	CHECK_INT(json_integer_value(jget(t, "allocation.cards.0.minor")), 0);
	json_decref(t);
	const char *b = submit(&st, 5120, 60, 60, "normal");
	t = wait_field(&st, b, "pending.diagnosis.kind", "device_unhealthy", 10000);
	json_decref(t);
	CHECK_INT(h_kubesim_ctl(&st.ks, "POST", "/_kubesim/actions/device-health",
				"{\"node\": \"colima-gwb\", \"minor\": 1, \"healthy\": true}", NULL),
		  200);
	t = wait_field(&st, b, "state", "running", 15000);
	CHECK_INT(json_integer_value(jget(t, "allocation.cards.0.minor")), 1);
	json_decref(t);
}

TEST_T(recon_restart_recovery_with_the_queue, 90)
{
	struct h_stack st;
	stack_start(&st, 1, NULL);
	const char *id = submit(&st, 1024, 25, 60, "normal");
	json_t *t = wait_field(&st, id, "state", "running", 15000);
	char uid[64];
	snprintf(uid, sizeof uid, "%s", js(t, "job.uid"));
	json_decref(t);
	/* A task being cancelled while the API refuses: cancelling, its quota held. */
	const char *stopping = submit(&st, 1024, 25, 60, "normal");
	t = wait_field(&st, stopping, "state", "running", 15000);
	json_decref(t);
	fault(&st, "{\"api\": \"refuse\"}");
	cancel(&st, stopping);
	t = wait_field(&st, stopping, "state", "cancelling", 5000);
	json_decref(t);
	/* Killed in the middle of things, with one more task submitted just before. */
	const char *late = submit(&st, 1024, 25, 60, "normal");
	h_server_kill9(&st.srv);
	h_server_start(&st.srv);
	h_sleep_ms(300);
	t = task(&st, stopping);
	CHECK_STR(js(t, "state"), "cancelling");
	CHECK(json_is_false(jget(t, "reservation.released")));
	json_decref(t);
	fault(&st, NULL);
	t = wait_field(&st, stopping, "state", "cancelled", 15000);
	CHECK(json_is_true(jget(t, "reservation.released")));
	json_decref(t);
	t = wait_field(&st, id, "state", "running", 10000);
	CHECK_STR(js(t, "job.uid"), uid); /* the same Job: not created twice */
	json_decref(t);
	json_t *jobs = jobs_of(&st, id);
	CHECK_INT(json_array_size(jobs), 1);
	json_decref(jobs);
	t = wait_field(&st, late, "state", "running", 15000);
	json_decref(t);
	jobs = jobs_of(&st, late);
	CHECK_INT(json_array_size(jobs), 1);
	json_decref(jobs);
	CHECK_INT(reserved_mem(&st), 2048);
	cancel(&st, id);
	t = wait_field(&st, id, "reservation.released", "true", 15000);
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 1024);
}

/* ---- outages longer than a watch renewal (the picture must come back fresh) ---- */

/* 1 when every informer named in /readyz says fresh; *names gets the stale ones. */
static int informers_fresh(struct h_stack *st, char *stale, size_t len)
{
	struct h_resp r;
	h_req(&r, "GET", url(st), "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *infs = jget(r.json, "dependencies.kube.informers");
	int all = json_object_size(infs) == 4;
	const char *name;
	json_t *inf;
	stale[0] = '\0';
	json_object_foreach(infs, name, inf) {
		if (json_is_true(json_object_get(inf, "fresh")))
			continue;
		all = 0;
		size_t n = strlen(stale);
		snprintf(stale + n, len - n, "%s(%llds) ", name,
			 (long long)json_integer_value(json_object_get(inf, "stale_seconds")));
	}
	h_resp_free(&r);
	return all;
}

/* Two running tasks; the API goes away (fault) for outage_ms, which with watches renewed every
 * second spans one or several renewals; one task is cancelled during the outage. While the
 * fault lasts nothing is released; once it is cleared the picture becomes fresh again without a
 * restart, the cancel finishes and releases, and the other task is untouched. */
static void outage_case(const char *fault_body, int outage_ms, int expect_stale)
{
	struct h_stack st;
	const char *env[] = { "GWB_KUBE_WATCH_TIMEOUT_SECONDS=1", "GWB_KUBE_WATCH_IDLE_SECONDS=2",
			      NULL };
	stack_start(&st, 0, env);
	char stale[256];
	int64_t deadline = clock_mono_ms() + 10000;
	while (!informers_fresh(&st, stale, sizeof stale)) {
		CHECKF(clock_mono_ms() < deadline, "never fresh at start: %s", stale);
		h_sleep_ms(50);
	}
	char victim[32], other[32];
	snprintf(victim, sizeof victim, "%s", running_task(&st));
	snprintf(other, sizeof other, "%s", running_task(&st));

	fault(&st, fault_body);
	h_sleep_ms(300);
	cancel(&st, victim);
	int saw_stale = 0;
	int64_t end = clock_mono_ms() + outage_ms;
	while (clock_mono_ms() < end) {
		if (!informers_fresh(&st, stale, sizeof stale))
			saw_stale = 1;
		json_t *t = task(&st, victim);
		CHECKF(json_is_false(jget(t, "reservation.released")),
		       "released during the outage (%s)", js(t, "reservation.release_reason"));
		json_decref(t);
		h_sleep_ms(200);
	}
	if (expect_stale)
		CHECKF(saw_stale, "the picture never went stale during a %d ms outage", outage_ms);
	fault(&st, NULL);

	deadline = clock_mono_ms() + 20000;
	while (!informers_fresh(&st, stale, sizeof stale)) {
		CHECKF(clock_mono_ms() < deadline, "still stale 20 s after the outage: %s", stale);
		h_sleep_ms(100);
	}
	json_t *t = wait_field(&st, victim, "reservation.released", "true", 20000);
	CHECK_STR(js(t, "state"), "cancelled");
	json_decref(t);
	t = task(&st, other);
	CHECK_STR(js(t, "state"), "running");
	CHECK(json_is_false(jget(t, "reservation.released")));
	json_decref(t);
	CHECK_INT(reserved_mem(&st), 1024);
	/* Nothing is left waiting on the outage. */
	struct h_resp r;
	const char *states[] = { "cancelling", "unknown" };
	for (size_t i = 0; i < 2; i++) {
		char path[80];
		snprintf(path, sizeof path, "/v1/tasks?state=%s", states[i]);
		h_req(&r, "GET", url(&st), path, TOK, NULL, NULL);
		CHECKF(json_array_size(json_object_get(r.json, "tasks")) == 0, "%s: %s", states[i],
		       r.body);
		h_resp_free(&r);
	}
}

TEST_T(recon_outage_refuse_one_watch_renewal, 90)
{
	outage_case("{\"api\": \"refuse\"}", 1500, 1);
}

TEST_T(recon_outage_refuse_several_watch_renewals, 90)
{
	outage_case("{\"api\": \"refuse\"}", 5000, 1);
}

TEST_T(recon_outage_hang_several_watch_renewals, 90)
{
	outage_case("{\"api\": \"hang\"}", 5000, 1);
}

TEST_T(recon_outage_slow_several_watch_renewals, 90)
{
	/* Slower than the request time-out (1 s): the cancel's PATCH has no known outcome. */
	outage_case("{\"slow_ms\": 1500}", 5000, 0);
}

/* ---- prediction: the dry run against what kubesim's scheduler then does ---- */

static json_t *dry_run(struct h_stack *st, int mem, int core)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": %d, "
		 "\"duration_seconds\": 120}",
		 mem, core);
	struct h_resp r;
	h_req(&r, "POST", url(st), "/v1/tasks?dry_run=true", TOK, body, NULL);
	CHECKF(r.status == 200, "dry run: %ld %s", r.status, r.body);
	json_t *d = json_incref(r.json);
	h_resp_free(&r);
	return d;
}

/* Dry run, then submit the same task, and check the prediction against what happened: the
 * card kubesim gave it, or Pending with the predicted kind. Returns the task id (static ring)
 * and *placement (caller decrefs). */
static const char *predict_then_submit(struct h_stack *st, int mem, int core, json_t **placement)
{
	json_t *d = dry_run(st, mem, core);
	CHECK(json_is_true(jget(d, "quota.admitted")));
	CHECK(json_is_true(jget(d, "basis.picture_fresh")));
	json_t *p = json_incref(jget(d, "placement"));
	json_decref(d);
	const char *outcome = js(p, "outcome");
	const char *id = submit(st, mem, core, 120, "normal");
	if (strcmp(outcome, "bind") == 0) {
		json_t *t = wait_field(st, id, "state", "running", 15000);
		CHECK_STR(js(t, "pod.node"), js(p, "node"));
		CHECKF(json_array_size(jget(p, "cards")) == 1 &&
			       json_integer_value(jget(p, "cards.0")) ==
				       json_integer_value(jget(t, "allocation.cards.0.minor")),
		       "%d MiB: predicted card %lld, kubesim chose %lld", mem,
		       (long long)json_integer_value(jget(p, "cards.0")),
		       (long long)json_integer_value(jget(t, "allocation.cards.0.minor")));
		json_decref(t);
	} else {
		CHECK_STR(outcome, "pending");
		json_t *t = wait_field(st, id, "pending.diagnosis.kind",
				       js(p, "diagnosis.kind"), 15000);
		CHECK_STR(js(t, "state"), "pending");
		json_decref(t);
	}
	*placement = p;
	return id;
}

/* A sequence of tasks, each predicted then submitted; the last one waits, and ending the
 * first task its prediction names lets it bind on the card named with it. */
static void prediction_case(const char *strategy, const int *sizes, int n, int expect_second)
{
	const char *flags[] = { "--score-strategy", strategy, NULL };
	char env_strategy[64];
	snprintf(env_strategy, sizeof env_strategy, "GWB_PREDICT_STRATEGY=%s", strategy);
	const char *env[] = { env_strategy, NULL };
	kubesim_flags = flags;
	struct h_stack st;
	stack_start(&st, 0, env);
	/* A prediction is made from the reconciler's picture, which is fresh once the informers'
	 * first lists are in: not yet when the server has just started. */
	int64_t until = clock_mono_ms() + 10000;
	while (h_metric(url(&st), "gwb_kube_picture_fresh", NULL) != 1) {
		CHECKF(clock_mono_ms() < until, "the picture never became fresh");
		h_sleep_ms(20);
	}
	json_t *p = NULL;
	const char *last = NULL;
	for (int i = 0; i < n; i++) {
		json_decref(p);
		last = predict_then_submit(&st, sizes[i], 25, &p);
		if (i == 1) /* the strategies part at the second task: spread or pack */
			CHECK_INT(json_integer_value(jget(p, "cards.0")), expect_second);
	}
	char waiting[32];
	snprintf(waiting, sizeof waiting, "%s", last);
	CHECK_STR(js(p, "outcome"), "pending");
	json_t *opt = jget(p, "unblock.0");
	CHECKF(opt && json_array_size(json_object_get(opt, "tasks")) >= 1, "no unblock option");
	CHECK(js(opt, "tasks.0.due_at") != NULL);
	CHECK(json_integer_value(jget(opt, "tasks.0.due_in_seconds")) > 0);
	int minor = (int)json_integer_value(json_object_get(opt, "minor"));
	json_t *ids = json_object_get(opt, "tasks");
	for (size_t i = 0; i < json_array_size(ids); i++)
		cancel(&st, js(json_array_get(ids, i), "task"));
	json_t *t = wait_field(&st, waiting, "state", "running", 20000);
	CHECK_INT(json_integer_value(jget(t, "allocation.cards.0.minor")), minor);
	json_decref(t);
	json_decref(p);
}

TEST_T(recon_prediction_matches_the_scheduler_least_allocated, 120)
{
	/* 0: 1024; 1: 1024 (an unused card wins); 0: 7168; 1: 5120; then 4096 fits nowhere
	 * although 4096 are free in total: fragmentation. */
	const int sizes[] = { 1024, 1024, 6144, 4096, 4096 };
	prediction_case("LeastAllocated", sizes, 5, 1);
}

TEST_T(recon_prediction_matches_the_scheduler_most_allocated, 120)
{
	/* 0: 1024; 0: 2048 (a used card wins); 0: 8192; 1: 4096; 1: 8192; then 4096 waits for
	 * a card to free. */
	const int sizes[] = { 1024, 1024, 6144, 4096, 4096, 4096 };
	prediction_case("MostAllocated", sizes, 6, 0);
}

TEST(recon_dry_run_writes_nothing_and_refuses_unknown_parameters)
{
	struct h_stack st;
	stack_start(&st, 0, NULL);
	struct h_resp r;
	h_req(&r, "POST", url(&st), "/v1/tasks?dryrun=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 25}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_STR(js(r.json, "error.field"), "dryrun");
	h_resp_free(&r);
	h_req(&r, "POST", url(&st), "/v1/tasks?dry_run=yes", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 25}", NULL);
	CHECK_INT(r.status, 400);
	h_resp_free(&r);
	/* Bad bodies get a submission's 400s. */
	h_req(&r, "POST", url(&st), "/v1/tasks?dry_run=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": -1, \"gpu_core_percent\": 25}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_STR(js(r.json, "error.field"), "gpu_memory_mib");
	h_resp_free(&r);
	/* Within quota (8 × 4096 = 32768 of 40960) but 8 cards: admitted, pending for capacity. */
	h_req(&r, "POST", url(&st), "/v1/tasks?dry_run=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 4096, \"gpu_core_percent\": 25, "
	      "\"gpu_count\": 8}", NULL);
	CHECK_INT(r.status, 200);
	CHECK(json_is_true(jget(r.json, "quota.admitted")));
	CHECK_STR(js(r.json, "placement.outcome"), "pending");
	h_resp_free(&r);
	/* Over quota: not admitted, no placement. */
	const char *hdrs[] = { "Idempotency-Key: dry-1", NULL };
	h_req(&r, "POST", url(&st), "/v1/tasks?dry_run=true", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 8192, \"gpu_core_percent\": 100, "
	      "\"gpu_count\": 8}", hdrs);
	CHECK_INT(r.status, 200);
	CHECK(json_is_false(jget(r.json, "quota.admitted")));
	CHECK_STR(js(r.json, "quota.code"), "quota_exceeded");
	CHECK(json_is_null(jget(r.json, "placement")));
	h_resp_free(&r);
	/* Nothing was written, and the key is still free for a real submission. */
	h_req(&r, "GET", url(&st), "/v1/tasks", TOK, NULL, NULL);
	CHECK_INT(json_array_size(jget(r.json, "tasks")), 0);
	h_resp_free(&r);
	CHECK_INT(reserved_mem(&st), 0);
	h_req(&r, "POST", url(&st), "/v1/tasks", TOK,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 25}", hdrs);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);
}
