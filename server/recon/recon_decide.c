/* The reconciler's decisions: observation, next operation and release, from their arguments
 * alone. */
#include "server/recon/recon_decide.h"

#include <string.h>

#include "lib/clock.h"
#include "lib/devalloc.h"
#include "lib/kobj.h"

/* The worker's exit code when its budget ledger refused the work (worker/: over the limit). */
#define WORKER_EXIT_LIMIT_REJECTED 42

void recon_view_init(struct recon_view *v, const json_t *job, int job_gone)
{
	v->job = job;
	v->job_gone = job_gone;
	v->pods = json_array();
	v->newest = NULL;
	v->all_terminal = 1;
	v->cluster_uid = NULL;
	v->now_ms = 0;
	v->pod_deadline_s = 0;
}

void recon_view_add_pod(struct recon_view *v, json_t *pod)
{
	json_array_append(v->pods, pod);
	v->all_terminal &= kobj_pod_terminal(pod);
	const char *ts = kobj_created(pod);
	const char *best = v->newest ? kobj_created(v->newest) : NULL;
	/* RFC 3339 times of one API server compare as strings; ties keep the first seen. */
	if (!v->newest || (ts && best && strcmp(ts, best) > 0))
		v->newest = pod;
}

void recon_view_clear(struct recon_view *v)
{
	json_decref(v->pods);
	v->pods = NULL;
	v->newest = NULL;
}

const char *recon_action_name(enum recon_action a)
{
	switch (a) {
	case RECON_GET:
		return "get";
	case RECON_CREATE:
		return "create";
	case RECON_SUSPEND:
		return "suspend";
	case RECON_LIST_PODS:
		return "list_pods";
	default:
		return "none";
	}
}

int decide_take_queued(const struct task *t, int has_queue, int64_t grace_ms, int64_t lost_at,
		       int64_t now_ms)
{
	if (t->state != TASK_QUEUED || task_cancel_requested(t))
		return 0;
	/* A task that waited for quota was queued when it was admitted. */
	int64_t queued_at = t->has_admitted_at ? t->admitted_at : t->created_at;
	return !has_queue || (lost_at && queued_at <= lost_at) || now_ms - queued_at >= grace_ms;
}

/* The decided state of an observation: m moves to s. */
static void move_to(struct task_move *m, enum task_state s)
{
	m->to = s;
}

static int pods_all_succeeded(const struct recon_view *v)
{
	size_t i;
	json_t *p;
	json_array_foreach(v->pods, i, p) {
		const char *ph = kobj_phase(p);
		if (!ph || strcmp(ph, "Succeeded") != 0)
			return 0;
	}
	return 1;
}

static void observe_pod(struct task *t, const json_t *pod)
{
	TASK_SET_TEXT(t, pod_name, kobj_name(pod));
	TASK_SET_TEXT(t, pod_uid, kobj_uid(pod));
	TASK_SET_TEXT(t, pod_node, kobj_pstr(pod, "spec", "nodeName"));
	TASK_SET_TEXT(t, pod_phase, kobj_phase(pod));
	TASK_SET_TEXT(t, pod_deleted_at, kobj_pstr(pod, "metadata", "deletionTimestamp"));
	TASK_SET_TEXT(t, allocation, kobj_annotation(pod, DEVALLOC_ANNOTATION));
	json_t *cs = json_array_get(kobj_path(pod, "status", "containerStatuses"), 0);
	json_t *term = kobj_path(cs, "state", "terminated");
	if (json_is_object(term)) {
		task_set_bool(t, &t->has_exit_code, 1);
		task_set_int(t, &t->exit_code, json_integer_value(kobj_get(term, "exitCode")));
		const char *reason = kobj_str(term, "reason");
		if (t->exit_code == WORKER_EXIT_LIMIT_REJECTED)
			reason = task_reason_name(TASK_REASON_LIMIT_REJECTED);
		/* After the release the task's reason is the one its end was given. */
		if (!t->released)
			TASK_SET_TEXT(t, reason, reason);
		/* The container's own word on its end (the worker's verdict), kept once: a later
		 * status of the same end says the same, and a retried Pod's would replace the
		 * task's first account. */
		const char *msg = kobj_str(term, "message");
		if (msg && msg[0] && !t->termination_message[0] &&
		    strlen(msg) <= TASK_TERM_MSG_MAX)
			TASK_SET_TEXT(t, termination_message, msg);
	}
	/* Why the container has not started (a kubelet's CreateContainerError, ErrImagePull,
	 * ...): shown while it waits, gone once it runs or ends. */
	json_t *waiting = kobj_path(cs, "state", "waiting");
	TASK_SET_TEXT(t, waiting_reason, kobj_str(waiting, "reason"));
	TASK_SET_TEXT(t, waiting_message, kobj_str(waiting, "message"));
	const json_t *sched = kobj_condition(pod, "PodScheduled");
	const char *st = kobj_str(sched, "status"), *msg = kobj_str(sched, "message");
	TASK_SET_TEXT(t, pending_message, st && strcmp(st, "False") == 0 ? msg : "");
	/* When the Pod must have stopped at the latest, even with nobody left to stop it: the
	 * kubelet enforces activeDeadlineSeconds from the Pod's start on its own. */
	json_t *ads = kobj_path(pod, "spec", "activeDeadlineSeconds");
	const char *started = kobj_pstr(pod, "status", "startTime");
	int64_t start;
	if (json_is_integer(ads) && started && clock_parse_rfc3339(started, &start) == 0) {
		task_set_bool(t, &t->has_pod_deadline_at, 1);
		task_set_int(t, &t->pod_deadline_at, start + json_integer_value(ads) * 1000);
	}
}

/* The state a live Job shows: finished, running (its newest Pod runs) or pending. A finished
 * Job's task becomes final only once its Pods are seen terminal too: the Jobs and the Pods
 * come on two watch streams, and the Job's condition can arrive before the Pod's exit code,
 * which the final task must show. */
static void observe_job(struct task *t, const struct recon_view *v, struct task_move *m)
{
	int finished = kobj_condition_true(v->job, "Complete") ||
		       kobj_condition_true(v->job, "Failed");
	/* A finished Job counts the Pods that ran; when none of them has reached the picture
	 * yet, the Pods' watch lags the Jobs': wait for it (the release, which lists the Pods,
	 * ends the task in any case). */
	int pods_ran = json_integer_value(kobj_path(v->job, "status", "succeeded")) > 0 ||
		       json_integer_value(kobj_path(v->job, "status", "failed")) > 0;
	if (finished && (!v->all_terminal || (!v->newest && !t->pod_name[0] && pods_ran)))
		return;
	if (kobj_condition_true(v->job, "Complete")) {
		move_to(m, TASK_SUCCEEDED);
	} else if (kobj_condition_true(v->job, "Failed")) {
		move_to(m, TASK_FAILED);
		if (!t->reason[0]) {
			const char *why = kobj_str(kobj_condition(v->job, "Failed"), "reason");
			TASK_SET_TEXT(t, reason, why ? why : task_reason_name(TASK_REASON_JOB_FAILED));
		}
	} else {
		const char *phase = v->newest ? kobj_phase(v->newest) : NULL;
		/* A Pod that ended before its Job says so: the Job controller has yet to count it,
		 * and the task is not pending again meanwhile. */
		if (v->newest && kobj_pod_terminal(v->newest))
			return;
		move_to(m, phase && strcmp(phase, "Running") == 0 ? TASK_RUNNING : TASK_PENDING);
	}
}

/* 1 when the Pod is being deleted but has not stopped. */
static int pod_terminating(const json_t *pod)
{
	const char *ph = kobj_phase(pod);
	return pod && kobj_deleting(pod) && !(ph && (strcmp(ph, "Succeeded") == 0 ||
						     strcmp(ph, "Failed") == 0));
}

void decide_reason_now(struct task *t, const struct recon_view *v, enum task_state to)
{
	const char *none = task_reason_name(TASK_REASON_NONE);
	if (t->released)
		return;
	/* The reasons of an unknown outcome describe that state only. */
	if (to != TASK_UNKNOWN && (task_reason_is(t->reason, TASK_REASON_API_UNREACHABLE) ||
				   task_reason_is(t->reason, TASK_REASON_CREATE_UNKNOWN)))
		TASK_SET_TEXT(t, reason, none);
	/* Waiting for a replaced cluster's Pod ends only when its Job is seen after all (a
	 * picture that does not show the gone Job yet, after a restart, changes nothing). */
	if (task_reason_is(t->reason, TASK_REASON_CLUSTER_WAIT) && v->job)
		TASK_SET_TEXT(t, reason, none);
	/* A Pod being deleted still holds its card, and so the task its quota. */
	if (!t->released && v->newest && pod_terminating(v->newest))
		TASK_SET_TEXT(t, reason, task_reason_name(TASK_REASON_POD_TERMINATING));
	else if (task_reason_is(t->reason, TASK_REASON_POD_TERMINATING))
		TASK_SET_TEXT(t, reason, none);
}

int decide_cluster_replaced(const struct task *t, const struct recon_view *v)
{
	return !v->job && v->job_gone && t->job_uid[0] && t->cluster_uid[0] && v->cluster_uid &&
	       v->cluster_uid[0] && strcmp(t->cluster_uid, v->cluster_uid) != 0 &&
	       !task_state_is(t->state, TASK_FINAL);
}

/* A task whose Job vanished with a replaced cluster: its deadline is that of the Pod last
 * seen, or, when none was seen started, now plus the deadline its Pod was given (any Pod of
 * the old cluster started before now). Until the release it is unknown (cancelling stays
 * cancelling) and says it waits for that deadline. */
static void observe_replaced(struct task *t, const struct recon_view *v, struct task_move *m)
{
	if (!t->has_pod_deadline_at) {
		task_set_bool(t, &t->has_pod_deadline_at, 1);
		task_set_int(t, &t->pod_deadline_at, v->now_ms + v->pod_deadline_s * 1000);
	}
	if (!task_cancel_requested(t) && task_transition_ok(t->state, TASK_UNKNOWN))
		move_to(m, TASK_UNKNOWN);
	TASK_SET_TEXT(t, reason, task_reason_name(TASK_REASON_CLUSTER_WAIT));
}

enum task_reason decide_final_reason(const struct task *t, enum task_proof proof,
				     enum task_state final)
{
	enum task_reason cancelled = TASK_REASON_CANCELLED;
	if (proof == TASK_PROOF_POD_DEADLINE_PASSED)
		return final == TASK_CANCELLED ? cancelled : TASK_REASON_CLUSTER_REPLACED;
	if (proof == TASK_PROOF_JOB_GONE) {
		if (!t->pod_name[0])
			return TASK_REASON_JOB_DELETED;
		int ok = final == TASK_SUCCEEDED ||
			 (final == TASK_CANCELLED && t->has_exit_code && t->exit_code == 0);
		return ok ? TASK_REASON_JOB_DELETED_POD_COMPLETED : TASK_REASON_JOB_DELETED_POD_FAILED;
	}
	if (final == TASK_CANCELLED && proof == TASK_PROOF_JOB_SUSPENDED)
		return cancelled;
	if (task_reason_is(t->reason, TASK_REASON_API_UNREACHABLE) ||
	    task_reason_is(t->reason, TASK_REASON_CREATE_UNKNOWN) ||
	    task_reason_is(t->reason, TASK_REASON_POD_TERMINATING) ||
	    task_reason_is(t->reason, TASK_REASON_CLUSTER_WAIT))
		return final == TASK_CANCELLED ? cancelled : TASK_REASON_NONE;
	return TASK_REASON_KEEP;
}

void decide_observe_listed(struct task *t, const json_t *items)
{
	const json_t *newest = NULL;
	size_t i;
	json_t *p;
	json_array_foreach(items, i, p) {
		const char *ts = kobj_created(p), *best = newest ? kobj_created(newest) : NULL;
		if (!newest || (ts && best && strcmp(ts, best) > 0))
			newest = p;
	}
	if (newest) /* the list is at least as new as the picture */
		observe_pod(t, newest);
}

int decide_observe(struct task *t, const struct recon_view *v, int fresh, struct task_move *m)
{
	*m = task_stay(t);
	if (v->job) {
		TASK_SET_TEXT(t, job_uid, kobj_uid(v->job));
		task_set_bool(t, &t->job_suspended, kobj_suspended(v->job));
		/* The Job is seen on this cluster: that is where its Pods run. */
		if (v->cluster_uid && v->cluster_uid[0])
			TASK_SET_TEXT(t, cluster_uid, v->cluster_uid);
	}
	if (v->newest)
		observe_pod(t, v->newest);
	else if (t->pod_uid[0] && fresh)
		TASK_SET_TEXT(t, pod_phase, "Deleted"); /* shown, never relied on */
	int diag = 0;
	if (decide_cluster_replaced(t, v)) {
		observe_replaced(t, v, m);
		TASK_SET_TEXT(t, pending_diagnosis, "");
		goto out;
	}
	/* Only the release moves a task out of cancelling; nothing out of a final state. */
	if (!task_state_is(t->state, TASK_FINAL) && !task_cancel_requested(t)) {
		if (v->job) {
			observe_job(t, v, m);
		} else if (v->job_gone && v->all_terminal) {
			/* The Job was deleted under us and no Pod of it runs any more. */
			int ok = json_array_size(v->pods) && pods_all_succeeded(v);
			move_to(m, ok ? TASK_SUCCEEDED : TASK_FAILED);
			TASK_SET_TEXT(t, reason,
				      task_reason_name(ok ? TASK_REASON_JOB_DELETED_POD_COMPLETED
						       : json_array_size(v->pods)
							       ? TASK_REASON_JOB_DELETED_POD_FAILED
							       : TASK_REASON_JOB_DELETED));
		}
	}
	decide_reason_now(t, v, m->to);
	if (m->to == TASK_PENDING && t->pending_message[0])
		diag = 1;
	else
		TASK_SET_TEXT(t, pending_diagnosis, "");
out:
	if (m->to != t->state)
		t->changed = 1;
	return diag;
}

enum task_proof decide_job_settled(const struct task *t, const struct recon_view *v,
				   enum task_state *final)
{
	int cancel = task_cancel_requested(t);
	if (v->job) {
		if (kobj_condition_true(v->job, "Complete")) {
			*final = cancel ? TASK_CANCELLED : TASK_SUCCEEDED;
			return TASK_PROOF_JOB_COMPLETE;
		}
		if (kobj_condition_true(v->job, "Failed")) {
			*final = cancel ? TASK_CANCELLED : TASK_FAILED;
			return TASK_PROOF_JOB_FAILED;
		}
		if (cancel && kobj_suspended(v->job) && kobj_condition_true(v->job, "Suspended")) {
			*final = TASK_CANCELLED;
			return TASK_PROOF_JOB_SUSPENDED;
		}
		return TASK_PROOF_NONE;
	}
	if (decide_cluster_replaced(t, v)) {
		/* Its Pod may still run on the old cluster: only its deadline ends it. */
		if (!t->has_pod_deadline_at || v->now_ms < t->pod_deadline_at)
			return TASK_PROOF_NONE;
		*final = cancel ? TASK_CANCELLED : TASK_FAILED;
		return TASK_PROOF_POD_DEADLINE_PASSED;
	}
	if (v->job_gone) {
		if (cancel)
			*final = TASK_CANCELLED;
		else if (task_state_is(t->state, TASK_FINAL))
			*final = t->state;
		else
			*final = json_array_size(v->pods) && pods_all_succeeded(v) ? TASK_SUCCEEDED
										 : TASK_FAILED;
		return TASK_PROOF_JOB_GONE;
	}
	return TASK_PROOF_NONE;
}

enum recon_action decide_action(const struct task *t, const struct recon_view *v, int fresh)
{
	int cancel = task_cancel_requested(t);
	enum task_state final;
	/* Step one of a release: the picture suggests the task's Pods stopped. Never on a stale
	 * picture; step two (decide_release) confirms it with an authoritative list, so a
	 * lagging watch can never release early. */
	if (!t->released && fresh && v->all_terminal &&
	    decide_job_settled(t, v, &final) != TASK_PROOF_NONE)
		return RECON_LIST_PODS;
	if (t->released || v->job_gone)
		return RECON_NONE;
	if (cancel && v->job && !kobj_suspended(v->job))
		return RECON_SUSPEND;
	if (v->job)
		return RECON_NONE;
	/* No Job in the picture: observe before creating (or, with a uid recorded, find out
	 * whether it is gone). A cancelled task gets the suspended marker. When the picture is
	 * fresh and no Job was ever recorded, the picture is the observation: create at once
	 * (a Job the watch has not shown yet answers the POST with 409, which is then observed
	 * and adopted), which spares the API server one GET per task. */
	if (t->job_uid[0] || cancel ||
	    (!task_state_is(t->state, TASK_FINAL) && t->state != TASK_QUEUED)) {
		if (fresh && !t->job_uid[0] && !task_state_is(t->state, TASK_FINAL))
			return RECON_CREATE;
		return RECON_GET;
	}
	return RECON_NONE;
}

enum task_proof decide_release(const struct task *t, const struct recon_view *v,
			       const json_t *items, int fresh, struct task_move *m)
{
	if (t->released || !fresh || !json_is_array(items))
		return TASK_PROOF_NONE;
	size_t i;
	json_t *p;
	json_array_foreach(items, i, p)
		if (!kobj_pod_terminal(p))
			return TASK_PROOF_NONE;
	enum task_state final = TASK_NONE;
	enum task_proof proof = decide_job_settled(t, v, &final);
	if (proof != TASK_PROOF_NONE) {
		m->to = final;
		m->reason = decide_final_reason(t, proof, final);
		m->event = TASK_EVENT_STATE;
		m->detail = NULL;
	}
	return proof;
}
