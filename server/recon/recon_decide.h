/* The reconciler's decisions, as pure functions of (task, picture view, freshness, time):
 * what the cluster shows about the task (its observed fields and state), which Kubernetes
 * operation to start next, and whether the reservation may be released. No I/O, no store, no
 * clock: everything they know is in their arguments, so each can be tested from a JSON
 * fixture (tests/fixtures/decide/). The rules they keep:
 * - a stale picture is never evidence: nothing is released and no Pod is called deleted;
 * - a Pod that is not terminal (Running, Pending, or Terminating: a deletionTimestamp with a
 *   phase that is not Succeeded/Failed) keeps the reservation;
 * - a Job observed gone while a Pod of it still runs keeps the reservation;
 * - a Job that vanished with a replaced cluster (the cluster's identity changed since the Job
 *   was recorded) keeps the reservation until its Pod's deadline has passed: that Pod may
 *   still run on a node of the old cluster, where only its activeDeadlineSeconds stops it;
 * - only the release moves a task out of cancelling; nothing moves a task out of a final
 *   state. */
#ifndef GWB_RECON_DECIDE_H
#define GWB_RECON_DECIDE_H

#include <jansson.h>
#include <stdint.h>

#include "server/task.h"

/* The picture as one task sees it. */
struct recon_view {
	const json_t *job;     /* the task's Job (carrying our labels), or NULL */
	int job_gone;          /* the Job whose uid the task recorded was observed deleted */
	json_t *pods;          /* a new array of the task's Pods (elements borrowed) */
	const json_t *newest;  /* the newest of them by creationTimestamp, or NULL */
	int all_terminal;      /* every Pod Succeeded or Failed (1 when there is none) */
	/* The identity of the cluster the picture shows (the uid of its kube-system
	 * namespace): NULL or "" when it is not known, in which case no replacement is
	 * recognised and a vanished Job counts as deleted. */
	const char *cluster_uid;
	int64_t now_ms;        /* wall clock of the decision */
	int64_t pod_deadline_s; /* the activeDeadlineSeconds the task's Pods are given */
};

/* Starts a view with its Job (borrowed, may be NULL) and no Pod, no cluster identity, time 0
 * and no Pod deadline (the caller sets those fields). Clear with recon_view_clear. */
void recon_view_init(struct recon_view *v, const json_t *job, int job_gone);
/* Adds one Pod of the task (borrowed: it must outlive the view). */
void recon_view_add_pod(struct recon_view *v, json_t *pod);
/* Frees the view's array. */
void recon_view_clear(struct recon_view *v);

/* The next Kubernetes operation for a task. */
enum recon_action {
	RECON_NONE,
	RECON_GET,       /* observe the Job by name (before creating it, or to learn it is gone) */
	RECON_CREATE,    /* POST the Job (a fresh picture shows none and none was recorded) */
	RECON_SUSPEND,   /* PATCH spec.suspend: true (a cancel) */
	RECON_LIST_PODS, /* step one of a release: list every Pod of the task to confirm */
};
/* "none", "get", "create", "suspend", "list_pods". */
const char *recon_action_name(enum recon_action a);

/* 1 when a queued task is the reconciler's to create now, without its intent: there is no
 * queue to carry its intent (has_queue 0), the queue lost the stream after the task was made
 * (lost_at, wall ms; 0: never), or the intent is overdue (grace_ms after its creation: lost in
 * a way nothing noticed). The move itself is task_take's. */
int decide_take_queued(const struct task *t, int has_queue, int64_t grace_ms, int64_t lost_at,
		       int64_t now_ms);

/* Brings t's observed fields up to the view (through the task_set_* setters) and decides its
 * state: *m, the move for the store's door (its own state when it stays). t->changed says
 * whether anything, fields or state, moved; t->state is left as loaded. fresh is whether the
 * Job and Pod picture is fresh. Returns 1 when the task is to be pending with a scheduler
 * message and so needs a pending diagnosis (the caller computes it and sets
 * pending_diagnosis); otherwise the diagnosis is cleared and 0 returned. */
int decide_observe(struct task *t, const struct recon_view *v, int fresh, struct task_move *m);

/* Brings t's Pod fields (name, phase, exit code, reason) up to the newest Pod of items, the
 * answer of an authoritative list of the task's Pods: the Pods' watch may lag that list, and
 * the task ends with how its Pod ended. */
void decide_observe_listed(struct task *t, const json_t *items);

/* Makes t's reason describe the present, to being the state t moves to (called by
 * decide_observe): an unknown outcome's reason is cleared once the task left unknown, and a
 * task whose Pod is being deleted but still runs says that its quota waits for that Pod to
 * stop. */
void decide_reason_now(struct task *t, const struct recon_view *v, enum task_state to);

/* 1 when t's Job vanished with a replaced cluster: it was recorded on a cluster whose
 * identity differs from the one the view shows, is not in the picture, and was observed gone
 * there (not found); t is not final (a final task's Pods were seen stopped). */
int decide_cluster_replaced(const struct task *t, const struct recon_view *v);

/* The reason a task ends with when its release proves proof and moves it to final: a Job that
 * was deleted under its Pod says how that Pod ended (JOB_DELETED_POD_COMPLETED or
 * JOB_DELETED_POD_FAILED; JOB_DELETED when it never had one), a processed cancel says
 * CANCELLED, a task of a replaced cluster (POD_DEADLINE_PASSED) says CLUSTER_REPLACED (or
 * CANCELLED), a reason of a passing state gives way (CANCELLED or NONE). TASK_REASON_KEEP:
 * keep the reason the Pod gave. */
enum task_reason decide_final_reason(const struct task *t, enum task_proof proof,
				     enum task_state final);

/* Whether the Job side lets the task end: finished, suspended with the suspension processed
 * (a cancel: no Pod will be made any more), or observed gone; a Job that vanished with a
 * replaced cluster only once the task's Pod deadline has passed. Returns the proof
 * (JOB_COMPLETE, JOB_FAILED, JOB_SUSPENDED, JOB_GONE, POD_DEADLINE_PASSED) and sets *final, or
 * TASK_PROOF_NONE. */
enum task_proof decide_job_settled(const struct task *t, const struct recon_view *v,
				   enum task_state *final);

/* The operation to start for the task now (the caller checks its back-off first). */
enum recon_action decide_action(const struct task *t, const struct recon_view *v, int fresh);

/* Step two of a release: items is the answer of the authoritative list of the task's Pods.
 * Returns the proof, and fills *m with the release's move (to the final state, with the
 * reason decide_final_reason gives), when the reservation may be released now: the Job side
 * settled, no listed Pod is anything but Succeeded or Failed (a Terminating Pod still runs),
 * and the picture is fresh. TASK_PROOF_NONE otherwise (retry later; m untouched). */
enum task_proof decide_release(const struct task *t, const struct recon_view *v,
			       const json_t *items, int fresh, struct task_move *m);

#endif
