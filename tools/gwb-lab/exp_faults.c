/* The lab's hard questions, with kubesim's faults: the three cases where the quota must not be
 * released (a Pod stuck Terminating, an API that refuses, a Job orphaned with its Pod still
 * running), and a create whose answer never comes (the task is unknown, exactly one Job). */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tools/gwb-lab/exp.h"

/* How long a held reservation is watched: a few reconciler passes (500 ms each on the private
 * stack), long enough that a wrong release would have happened. */
#define HOLD_WATCH_MS 2000

static json_t *running(struct lab *l, const char *label, int secs, char *id, size_t idlen)
{
	json_t *body = lab_body(l, 1024, 25, secs, "LS", "normal");
	json_t *t = lab_start(l, label, body, id, idlen);
	json_decref(body);
	if (t && strcmp(lab_str(t, "state"), "running") != 0) {
		lab_error(l, label, "state %s, not running", lab_str(t, "state"));
		json_decref(t);
		return NULL;
	}
	return t;
}

/* Watches the task for HOLD_WATCH_MS: 1 when it stayed unreleased all along. */
static int held(struct lab *l, const char *id)
{
	int64_t end = clock_mono_ms() + HOLD_WATCH_MS;
	int ok = 1;
	while (clock_mono_ms() < end && ok) {
		json_t *t = lab_task(l, id);
		ok = t && json_is_false(lab_get(t, "reservation.released"));
		json_decref(t);
		lab_sleep_ms(100);
	}
	return ok;
}

static void predict_case(struct lab *l, const char *c, const char *why, const char *reason,
                         const char *final)
{
	char f[96];
	snprintf(f, sizeof f, "%s.held_during_fault", c);
	lab_predict(l, f, json_true(), why);
	snprintf(f, sizeof f, "%s.released_after", c);
	lab_predict(l, f, json_true(), "once every Pod of the task is proven stopped");
	snprintf(f, sizeof f, "%s.release_reason", c);
	lab_predict(l, f, json_string(reason), "what proved the stop");
	snprintf(f, sizeof f, "%s.final_state", c);
	lab_predict(l, f, json_string(final), "the task's end");
}

static void observe_release(struct lab *l, const char *c, const char *id)
{
	char f[96];
	json_t *t = lab_wait(l, id, "reservation.released", "true", 40000);
	snprintf(f, sizeof f, "%s.released_after", c);
	lab_observe(l, f, json_boolean(t != NULL));
	snprintf(f, sizeof f, "%s.release_reason", c);
	json_t *rr = lab_get(t, "reservation.release_reason");
	lab_observe(l, f, rr ? json_incref(rr) : json_null());
	snprintf(f, sizeof f, "%s.final_state", c);
	json_t *st = lab_get(t, "state");
	lab_observe(l, f, st ? json_incref(st) : json_null());
	json_decref(t);
}

static int pod_terminating(struct lab *l, const char *id)
{
	int64_t end = clock_mono_ms() + 15000;
	while (clock_mono_ms() < end) {
		json_t *pods = lab_kube_of(l, "pods", id);
		int term = json_array_size(pods) == 1 &&
		           lab_get(json_array_get(pods, 0), "metadata.deletionTimestamp");
		json_decref(pods);
		if (term)
			return 1;
		lab_sleep_ms(100);
	}
	return 0;
}

int exp_norelease(struct lab *l)
{
	if (!lab_need_quota(l, 1024, 25))
		return 0;
	char id[40];
	char f[96];
	predict_case(l, "terminating", "a Terminating Pod may still run", "job_suspended",
	             "cancelled");
	predict_case(l, "api_refused", "an unreachable API proves nothing", "job_suspended",
	             "cancelled");
	predict_case(l, "orphaned", "a Pod without its Job still runs", "job_gone", "succeeded");
	lab_predict(l, "terminating.pod_terminating", json_true(),
	            "the Pod was deleted but the kubelet does not finish it");
	lab_predict(l, "orphaned.jobs_during", json_integer(0), "the Job was deleted");
	lab_predict(l, "orphaned.pods_during", json_integer(1), "its Pod kept running");

	/* 1. A Pod stuck Terminating. */
	json_t *t = running(l, "terminating", 60, id, sizeof id);
	if (!t)
		return 0;
	json_decref(t);
	lab_fault(l, "{\"stuck_terminating\": [\"*\"]}");
	lab_cancel(l, id, NULL);
	lab_observe(l, "terminating.pod_terminating", json_boolean(pod_terminating(l, id)));
	lab_capture_logs(l, id);
	lab_observe(l, "terminating.held_during_fault", json_boolean(held(l, id)));
	lab_fault(l, NULL);
	observe_release(l, "terminating", id);

	/* 2. The API refuses. */
	t = running(l, "api_refused", 60, id, sizeof id);
	if (!t)
		return 0;
	json_decref(t);
	lab_capture_logs(l, id);
	lab_fault(l, "{\"api\": \"refuse\"}");
	lab_cancel(l, id, NULL);
	lab_observe(l, "api_refused.held_during_fault", json_boolean(held(l, id)));
	lab_fault(l, NULL);
	observe_release(l, "api_refused", id);

	/* 3. The Job is deleted with its Pod orphaned; the Pod runs to its end (8 s). */
	t = running(l, "orphaned", 8, id, sizeof id);
	if (!t)
		return 0;
	json_decref(t);
	char body[200];
	snprintf(body, sizeof body, "{\"namespace\": \"%s\", \"name\": \"gwb-%s\"}", l->ns, id);
	lab_action(l, "orphan-job", body);
	lab_sleep_ms(800);
	json_t *jobs = lab_kube_of(l, "jobs", id), *pods = lab_kube_of(l, "pods", id);
	lab_observe(l, "orphaned.jobs_during", json_integer((json_int_t)json_array_size(jobs)));
	lab_observe(l, "orphaned.pods_during", json_integer((json_int_t)json_array_size(pods)));
	json_decref(jobs);
	json_decref(pods);
	lab_capture_logs(l, id);
	snprintf(f, sizeof f, "orphaned.held_during_fault");
	lab_observe(l, f, json_boolean(held(l, id)));
	observe_release(l, "orphaned", id);
	return 0;
}

int exp_timeout(struct lab *l)
{
	if (!lab_need_quota(l, 1024, 25))
		return 0;
	lab_predict(l, "went_unknown", json_true(), "the create's answer never came");
	lab_predict(l, "final_state", json_string("running"), "the next attempt observes the Job");
	lab_predict(l, "jobs_of_task", json_integer(1), "observe before create: never two");
	lab_predict(l, "job_uid_is_the_stored_one", json_true(), "the Job it adopted");
	lab_predict(l, "released_while_unknown", json_false(),
	            "an unknown outcome keeps the quota");
	lab_fault(l, "{\"withhold_create\": {\"resource\": \"jobs\", \"count\": 1}}");
	json_t *body = lab_body(l, 1024, 25, 30, "LS", "normal");
	char id[40];
	json_t *t = lab_start(l, "task", body, id, sizeof id);
	json_decref(body);
	json_decref(t);
	if (!id[0])
		return 0;
	t = lab_wait(l, id, "state", "running", 30000);
	lab_observe(l, "final_state", json_string(t ? lab_str(t, "state") : "not running"));
	json_t *jobs = lab_kube_of(l, "jobs", id);
	lab_observe(l, "jobs_of_task", json_integer((json_int_t)json_array_size(jobs)));
	const char *uid = lab_str(jobs, "0.metadata.uid"), *tuid = lab_str(t, "job.uid");
	lab_observe(l, "job_uid_is_the_stored_one",
	            json_boolean(uid && tuid && strcmp(uid, tuid) == 0));
	json_decref(jobs);
	json_decref(t);
	lab_capture_logs(l, id);
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s/events", id);
	struct httpc_resp r;
	lab_api(l, "events", "GET", path, NULL, &r);
	int unknown = 0, released = 0;
	size_t i;
	json_t *e;
	json_t *kept = json_array();
	json_array_foreach (json_object_get(r.json, "events"), i, e) {
		const char *to = lab_str(e, "to"), *type = lab_str(e, "type");
		unknown |= to && strcmp(to, "unknown") == 0;
		released |= type && strcmp(type, "released") == 0;
		if (to || (type && strcmp(type, "released") == 0))
			json_array_append(kept, e);
	}
	httpc_resp_free(&r);
	lab_measure(l, "state_changes", kept);
	lab_observe(l, "went_unknown", json_boolean(unknown));
	lab_observe(l, "released_while_unknown", json_boolean(released));
	return 0;
}
