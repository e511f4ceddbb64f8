/* The lab's middle experiments: cancel and reclaim (with the cancel marker), restart recovery
 * (kill -9 of the private stack's gwb-server), fragmentation resolved and a device health
 * change. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tools/gwb-lab/exp.h"

static json_t *job_of(struct lab *l, const char *id)
{
	json_t *jobs = lab_kube_of(l, "jobs", id);
	json_t *j = json_incref(json_array_get(jobs, 0));
	json_decref(jobs);
	return j;
}

static long count_of(struct lab *l, const char *kind, const char *id)
{
	json_t *items = lab_kube_of(l, kind, id);
	long n = items ? (long)json_array_size(items) : -1;
	json_decref(items);
	return n;
}

/* Cancel before the Job exists: the API refuses, the task is unknown, the cancel leaves a
 * suspended Job (the marker) once the API is back, and no Pod ever runs. */
static void cancel_marker(struct lab *l)
{
	lab_predict(l, "marker.state_while_api_refuses", json_string("unknown"),
	            "the create's outcome cannot be known; the quota stays reserved");
	lab_predict(l, "marker.final_state", json_string("cancelled"), "the durable cancel wins");
	lab_predict(l, "marker.job_suspended", json_true(),
	            "the Job is created already suspended: the cancel marker");
	lab_predict(l, "marker.jobs", json_integer(1), "one Job, the marker");
	lab_predict(l, "marker.pods", json_integer(0), "a suspended Job starts no Pod");
	lab_predict(l, "marker.released", json_true(), "suspended with no Pod: proven stopped");
	lab_fault(l, "{\"api\": \"refuse\"}");
	json_t *body = lab_body(l, 1024, 25, 30, "LS", "normal");
	struct httpc_resp r;
	char id[40];
	lab_submit(l, "submit while the API refuses", body, NULL, &r);
	snprintf(id, sizeof id, "%s", lab_str(r.json, "id") ? lab_str(r.json, "id") : "");
	httpc_resp_free(&r);
	json_decref(body);
	if (!id[0]) {
		lab_error(l, "marker.submit", "the submission was refused");
		return;
	}
	json_t *t = lab_wait(l, id, "state", "unknown", 20000);
	lab_observe(l, "marker.state_while_api_refuses",
	            json_string(t ? lab_str(t, "state") : "not unknown"));
	lab_measure(l, "marker_reason_while_refused",
	            t ? json_incref(lab_get(t, "reason")) : json_null());
	json_decref(t);
	lab_cancel(l, id, NULL);
	lab_fault(l, NULL);
	t = lab_wait(l, id, "state", "cancelled", 30000);
	lab_observe(l, "marker.final_state",
	            json_string(t ? lab_str(t, "state") : "not cancelled"));
	lab_observe(l, "marker.released",
	            json_incref(t ? lab_get(t, "reservation.released") : json_false()));
	json_decref(t);
	json_t *job = job_of(l, id);
	lab_observe(l, "marker.job_suspended",
	            json_boolean(json_is_true(lab_get(job, "spec.suspend"))));
	json_decref(job);
	lab_observe(l, "marker.jobs", json_integer(count_of(l, "jobs", id)));
	lab_observe(l, "marker.pods", json_integer(count_of(l, "pods", id)));
}

int exp_cancel(struct lab *l)
{
	if (!lab_need_quota(l, 1024, 25))
		return 0;
	long long before = lab_reserved_mib(l);
	lab_predict(l, "cancel.status", json_integer(202), "a durable cancel is recorded");
	lab_predict(l, "cancel.state", json_string("cancelling"), "the answer to the cancel");
	lab_predict(l, "final_state", json_string("cancelled"), "the Job is suspended");
	lab_predict(l, "job.spec.suspend", json_true(), "cancel PATCHes spec.suspend: true");
	lab_predict(l, "reservation.released", json_true(),
	            "Suspended condition set and no Pod of the task running");
	lab_predict(l, "reservation.release_reason", json_string("job_suspended"),
	            "what proved the stop");
	lab_predict(l, "reserved_back_to_before", json_true(), "the quota comes back");
	json_t *body = lab_body(l, 1024, 25, 300, "LS", "normal");
	char id[40];
	json_t *t = lab_start(l, "task", body, id, sizeof id);
	json_decref(body);
	if (!t)
		return 0;
	json_decref(t);
	struct httpc_resp r;
	long s = lab_cancel(l, id, &r);
	lab_observe(l, "cancel.status", json_integer(s));
	lab_observe(l, "cancel.state",
	            json_incref(lab_get(r.json, "state") ? lab_get(r.json, "state") : json_null()));
	httpc_resp_free(&r);
	t = lab_wait(l, id, "reservation.released", "true", 30000);
	if (!t)
		return 0;
	lab_observe(l, "final_state", json_incref(lab_get(t, "state")));
	lab_observe(l, "reservation.released", json_incref(lab_get(t, "reservation.released")));
	lab_observe(l, "reservation.release_reason",
	            json_incref(lab_get(t, "reservation.release_reason")));
	json_decref(t);
	json_t *job = job_of(l, id);
	lab_observe(l, "job.spec.suspend",
	            json_boolean(json_is_true(lab_get(job, "spec.suspend"))));
	json_decref(job);
	lab_observe(l, "reserved_back_to_before", json_boolean(lab_reserved_mib(l) == before));
	if (l->faults[0])
		cancel_marker(l);
	else
		lab_measure(l, "cancel_marker", json_string("skipped: no --faults socket"));
	return 0;
}

int exp_restart(struct lab *l)
{
	if (!lab_need_quota(l, 2048, 50))
		return 0;
	lab_predict(l, "job_uid_unchanged", json_true(),
	            "the Job's name is a function of the task and the reconciler observes first");
	lab_predict(l, "jobs_of_task", json_integer(1), "never created twice");
	lab_predict(l, "state_after_restart", json_string("running"),
	            "nothing happened to the Pod");
	lab_predict(l, "late.state", json_string("running"),
	            "its intent, not yet acknowledged, is delivered again");
	lab_predict(l, "late.jobs", json_integer(1), "exactly one Job");
	lab_predict(l, "reserved_kept", json_true(), "a restart releases nothing");
	json_t *body = lab_body(l, 1024, 25, 300, "LS", "normal");
	char id[40], late[40];
	json_t *t = lab_start(l, "task", body, id, sizeof id);
	if (!t) {
		json_decref(body);
		return 0;
	}
	char uid[80];
	snprintf(uid, sizeof uid, "%s", lab_str(t, "job.uid") ? lab_str(t, "job.uid") : "");
	json_decref(t);
	struct httpc_resp r;
	lab_submit(l, "late (just before the kill)", body, NULL, &r);
	snprintf(late, sizeof late, "%s", lab_str(r.json, "id") ? lab_str(r.json, "id") : "");
	httpc_resp_free(&r);
	json_decref(body);
	long long reserved = lab_reserved_mib(l);
	char ts[40];
	json_array_append_new(json_object_get(l->rec, "operations"),
	                      json_pack("{s:s, s:I, s:s, s:{s:I}, s:i}", "at",
	                                clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts),
	                                "at_ms", (json_int_t)clock_now_ms(), "action",
	                                "kill -9 gwb-server", "request", "pid",
	                                (json_int_t)l->stack->server.pid, "status", 0));
	stack_server_kill9(l->stack);
	lab_say(l, "gwb-server killed with SIGKILL; starting it again");
	char err[512];
	if (stack_server_start(l->stack, err, sizeof err) != 0) {
		lab_error(l, "restart", "%s", err);
		return 0;
	}
	json_array_append_new(json_object_get(l->rec, "operations"),
	                      json_pack("{s:s, s:I, s:s, s:{s:I}, s:i}", "at",
	                                clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts),
	                                "at_ms", (json_int_t)clock_now_ms(), "action",
	                                "start gwb-server", "request", "pid",
	                                (json_int_t)l->stack->server.pid, "status", 0));
	t = lab_wait(l, id, "state", "running", 20000);
	lab_observe(l, "state_after_restart", json_string(t ? lab_str(t, "state") : "not running"));
	const char *uid2 = t ? lab_str(t, "job.uid") : NULL;
	lab_measure(l, "job_uid", json_pack("{s:s, s:s?}", "before", uid, "after", uid2));
	lab_observe(l, "job_uid_unchanged", json_boolean(uid[0] && uid2 && strcmp(uid, uid2) == 0));
	json_decref(t);
	lab_observe(l, "jobs_of_task", json_integer(count_of(l, "jobs", id)));
	t = late[0] ? lab_wait(l, late, "state", "running", 30000) : NULL;
	lab_observe(l, "late.state", json_string(t ? lab_str(t, "state") : "not running"));
	json_decref(t);
	lab_capture_logs(l, id);
	lab_capture_logs(l, late);
	lab_observe(l, "late.jobs", json_integer(late[0] ? count_of(l, "jobs", late) : 0));
	lab_observe(l, "reserved_kept", json_boolean(lab_reserved_mib(l) == reserved));
	return 0;
}

/* The task ids an unblock list names (release_tasks of every card), sorted, as a string. */
static json_t *unblock_tasks(json_t *unblock)
{
	char a[4][40];
	int n = 0;
	size_t i, j;
	json_t *u, *t;
	json_array_foreach (unblock, i, u)
		json_array_foreach (json_object_get(u, "release_tasks"), j, t)
			if (n < 4 && json_is_string(t))
				snprintf(a[n++], sizeof a[0], "%s", json_string_value(t));
	for (int x = 0; x < n; x++)
		for (int y = x + 1; y < n; y++)
			if (strcmp(a[y], a[x]) < 0) {
				char tmp[40];
				memcpy(tmp, a[x], sizeof tmp);
				memcpy(a[x], a[y], sizeof tmp);
				memcpy(a[y], tmp, sizeof tmp);
			}
	json_t *out = json_array();
	for (int x = 0; x < n; x++)
		json_array_append_new(out, json_string(a[x]));
	return out;
}

int exp_fragmentation(struct lab *l)
{
	if (!lab_need_quota(l, 14336, 145))
		return 0;
	char a[40], b[40], c[40];
	json_t *body = lab_body(l, 5120, 60, 120, "LS", "normal");
	json_t *ta = lab_start(l, "A", body, a, sizeof a);
	json_t *tb = ta ? lab_start(l, "B", body, b, sizeof b) : NULL;
	json_decref(body);
	if (!ta || !tb) {
		json_decref(ta);
		return 0;
	}
	long long ma = json_integer_value(lab_get(ta, "allocation.cards.0.minor"));
	long long mb = json_integer_value(lab_get(tb, "allocation.cards.0.minor"));
	json_decref(ta);
	json_decref(tb);
	lab_predict(l, "A_and_B_on_different_cards", json_true(),
	            "5120 + 5120 MiB do not fit one 8192 MiB card");
	lab_observe(l, "A_and_B_on_different_cards", json_boolean(ma != mb));
	lab_predict(l, "C.diagnosis", json_string("fragmentation"),
	            "6144 MiB free in total, 3072 on each card, C needs 4096 on one");
	lab_predict(l, "C.total_free_mib", json_integer(2 * 8192 - 2 * 5120),
	            "2 x 8192 - 2 x 5120");
	lab_predict(l, "C.scheduler_says_0_of_1_nodes", json_true(), "the scheduler's own message");
	json_t *sorted = json_array();
	json_array_append_new(sorted, json_string(strcmp(a, b) < 0 ? a : b));
	json_array_append_new(sorted, json_string(strcmp(a, b) < 0 ? b : a));
	lab_predict(l, "C.unblock_tasks", sorted, "either card frees enough once its holder ends");
	body = lab_body(l, 4096, 25, 60, "LS", "normal");
	json_t *tc = lab_start(l, "C", body, c, sizeof c);
	json_decref(body);
	if (!tc)
		return 0;
	lab_observe(l, "C.diagnosis",
	            json_incref(lab_get(tc, "pending.diagnosis.kind")
	                            ? lab_get(tc, "pending.diagnosis.kind")
	                            : json_null()));
	lab_observe(l, "C.total_free_mib",
	            json_integer(
	                json_integer_value(lab_get(tc, "pending.diagnosis.cards.total_free_mib"))));
	const char *msg = lab_str(tc, "pending.scheduler_message");
	if (!msg) {
		/* The scheduler's message may come a moment after our diagnosis. */
		json_decref(tc);
		tc = lab_wait(l, c, "state", "pending", 1000);
		for (int i = 0; i < 50 && tc && !lab_str(tc, "pending.scheduler_message"); i++) {
			json_decref(tc);
			lab_sleep_ms(100);
			tc = lab_task(l, c);
		}
		msg = tc ? lab_str(tc, "pending.scheduler_message") : NULL;
	}
	lab_observe(l, "C.scheduler_says_0_of_1_nodes",
	            json_boolean(msg && strstr(msg, "0/1 nodes are available")));
	lab_observe(l, "C.unblock_tasks", unblock_tasks(lab_get(tc, "pending.diagnosis.unblock")));
	lab_measure(l, "C_pending", json_incref(lab_get(tc, "pending")));
	json_decref(tc);
	/* Whose end unblocks C: the first option of the dry run when there is one (its answer is
	 * what is checked), else A by the rules. */
	json_t *opt = lab_get(json_object_get(l->rec, "dry_runs"), "C.placement.unblock.0");
	const char *victim = lab_str(opt, "release_tasks.0");
	char want[32], field[40];
	if (victim && json_is_integer(json_object_get(opt, "minor"))) {
		snprintf(want, sizeof want, "bind:[%lld]",
		         (long long)json_integer_value(json_object_get(opt, "minor")));
		lab_predict(l, "C.after_cancel_unblocking_task", json_string(want),
		            "dry run: the first unblock option's task ends, C takes its card");
	} else {
		victim = a;
		snprintf(want, sizeof want, "bind:[%lld]", ma);
		lab_predict(l, "C.after_cancel_unblocking_task", json_string(want),
		            "C starts on the card A frees");
	}
	snprintf(field, sizeof field, "%s", victim);
	lab_measure(l, "cancelled_to_unblock", json_string(field));
	lab_cancel(l, field, NULL);
	tc = lab_wait(l, c, "state", "running", 30000);
	char buf[96];
	lab_observe(l, "C.after_cancel_unblocking_task",
	            json_string(lab_task_summary(tc, buf, sizeof buf)));
	lab_capture_logs(l, c);
	json_decref(tc);
	return 0;
}

int exp_health(struct lab *l)
{
	if (!lab_need_quota(l, 10240, 120))
		return 0;
	lab_predict(l, "card1.healthy", json_false(),
	            "koordlet's health report, through the Device");
	lab_action(l, "device-health",
	           "{\"node\": \"colima-gwb\", \"minor\": 1, \"healthy\": false, \"xid\": 79}");
	int64_t end = clock_mono_ms() + 10000;
	json_t *card = NULL;
	for (;;) {
		struct httpc_resp r;
		lab_api(l, NULL, "GET", "/v1/devices", NULL, &r);
		json_decref(card);
		card = json_incref(lab_get(r.json, "cards.1"));
		httpc_resp_free(&r);
		if (json_is_false(json_object_get(card, "healthy")) || clock_mono_ms() > end)
			break;
		lab_sleep_ms(100);
	}
	lab_observe(l, "card1.healthy",
	            json_incref(json_object_get(card, "healthy") ? json_object_get(card, "healthy")
	                                                         : json_null()));
	lab_measure(l, "card1_unhealthy", card);
	lab_predict(l, "X.minor", json_integer(0), "card 1 is unhealthy: it gets nothing");
	lab_predict(l, "Y.diagnosis", json_string("device_unhealthy"),
	            "card 0 is busy and card 1 could hold Y but is unhealthy");
	lab_predict(l, "Y.after_recovery", json_string("bind:[1]"), "card 1 healthy again");
	json_t *body = lab_body(l, 5120, 60, 60, "LS", "normal");
	char x[40], y[40];
	json_t *tx = lab_start(l, "X", body, x, sizeof x);
	if (tx)
		lab_observe(l, "X.minor",
		            json_incref(lab_get(tx, "allocation.cards.0.minor")
		                            ? lab_get(tx, "allocation.cards.0.minor")
		                            : json_null()));
	json_t *ty = tx ? lab_start(l, "Y", body, y, sizeof y) : NULL;
	json_decref(body);
	json_decref(tx);
	if (!ty)
		return 0;
	lab_observe(l, "Y.diagnosis",
	            json_incref(lab_get(ty, "pending.diagnosis.kind")
	                            ? lab_get(ty, "pending.diagnosis.kind")
	                            : json_null()));
	lab_measure(l, "Y_pending", json_incref(lab_get(ty, "pending")));
	json_decref(ty);
	lab_action(l, "device-health",
	           "{\"node\": \"colima-gwb\", \"minor\": 1, \"healthy\": true}");
	ty = lab_wait(l, y, "state", "running", 30000);
	char buf[96];
	lab_observe(l, "Y.after_recovery", json_string(lab_task_summary(ty, buf, sizeof buf)));
	lab_capture_logs(l, y);
	json_decref(ty);
	return 0;
}
