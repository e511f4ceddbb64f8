/* The task model: the lifecycle as one table (states, their flags and the legal next states),
 * the reasons, proofs and events as tables, the move a decider returns for the store's one
 * door, the one struct a task is read into (its column list drives the store's SELECT, column
 * indexes and binds), and the name of a task's Job. Pure code: no SQLite, no I/O. */
#ifndef GWB_TASK_H
#define GWB_TASK_H

#include <stddef.h>
#include <stdint.h>

/* Per-state flags. A final state's task is still looked after and still holds its
 * reservation until its release: TASK_AWAITS_RELEASE says so, and task_flags gives a task's
 * flags with its release taken into account. */
#define TASK_FINAL 0x1u          /* the state never changes again */
#define TASK_ACTIVE 0x2u         /* the reconciler looks after the task */
#define TASK_HOLDS_QUOTA 0x4u    /* the task's reservation is held */
#define TASK_CANCELLABLE 0x8u    /* a cancel request moves it to cancelling */
#define TASK_AWAITS_RELEASE 0x10u /* until its release (released 0 -> 1, which proves its Pods
				   * stopped) the task is TASK_ACTIVE and TASK_HOLDS_QUOTA too */

/* The kinds of state, each its flags; a token, so that the preprocessor can pick the states
 * of a kind (the store's SQL lists: STORE_SQL_FINAL). */
#define TASK_KIND_LIVE (TASK_ACTIVE | TASK_HOLDS_QUOTA | TASK_CANCELLABLE)
#define TASK_KIND_STOPPING (TASK_ACTIVE | TASK_HOLDS_QUOTA)
#define TASK_KIND_ENDED (TASK_FINAL | TASK_AWAITS_RELEASE)
/* Waiting for its team's quota: neither active (no Job, nothing for the reconciler) nor
 * holding quota, but cancellable and not final. */
#define TASK_KIND_WAITING TASK_CANCELLABLE

#define TASK_TO(s) (1u << TASK_##s)

/* The lifecycle, derived from what the code does (see ARCHITECTURE.md's diagram):
 * X(id, name, kind, legal next states).
 * - queued -> creating: the intent arrived (the queue's built-in handler or the reconciler),
 *   or the reconciler took an overdue intent (task_take is the one route). queued ->
 *   pending/running/succeeded/failed: the picture shows the task's Job already (the picture
 *   is the truth about what is).
 * - creating/pending/running/unknown -> pending/running/succeeded/failed: observed from the
 *   Job and its newest Pod (a restarted Pod takes running back to pending), or a release on
 *   a Job observed gone.
 * - creating/pending/running -> unknown: an unanswered create, an unreachable API before a
 *   Job is known, or a Job of that name that is not ours. unknown -> pending: adopted.
 *   pending/running -> unknown -> failed: the Job vanished with a replaced cluster; the task
 *   waits for its Pod's deadline, then the release ends it.
 * - creating -> failed: the API refused the Job.
 * - every state not final and not cancelling -> cancelling: the durable cancel request.
 * - cancelling -> cancelled: only the release, on proof that every Pod stopped.
 * - a final state: then only the release, once (TASK_AWAITS_RELEASE).
 * - waiting -> queued: admitted when its team's quota holds it (server/store/store_queue.c);
 *   waiting -> cancelled: a cancel, at once (nothing is held, nothing to stop). */
#define TASK_STATES(X)                                                                         \
	X(QUEUED, "queued", LIVE,                                                              \
	  TASK_TO(CREATING) | TASK_TO(PENDING) | TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) |         \
		  TASK_TO(FAILED) | TASK_TO(CANCELLING))                                       \
	X(CREATING, "creating", LIVE,                                                          \
	  TASK_TO(PENDING) | TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) |           \
		  TASK_TO(CANCELLING) | TASK_TO(UNKNOWN))                                      \
	X(PENDING, "pending", LIVE,                                                            \
	  TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) | TASK_TO(CANCELLING) |        \
		  TASK_TO(UNKNOWN))                                                            \
	X(RUNNING, "running", LIVE,                                                            \
	  TASK_TO(PENDING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) | TASK_TO(CANCELLING) |        \
		  TASK_TO(UNKNOWN))                                                            \
	X(SUCCEEDED, "succeeded", ENDED, 0u)                                                   \
	X(FAILED, "failed", ENDED, 0u)                                                         \
	X(CANCELLING, "cancelling", STOPPING, TASK_TO(CANCELLED))                               \
	X(CANCELLED, "cancelled", ENDED, 0u)                                                   \
	X(UNKNOWN, "unknown", LIVE,                                                            \
	  TASK_TO(PENDING) | TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) |           \
		  TASK_TO(CANCELLING))                                                         \
	X(WAITING, "waiting", WAITING, TASK_TO(QUEUED) | TASK_TO(CANCELLED))

enum task_state {
#define TASK_STATE_ENUM(id, name, kind, next) TASK_##id,
	TASK_STATES(TASK_STATE_ENUM)
#undef TASK_STATE_ENUM
	TASK_NSTATES,
	TASK_NONE = -1 /* no state: a name that is not a state */
};

/* The state's name as stored and as the API shows it ("?" outside the table). Static. */
const char *task_state_name(enum task_state s);
/* The state named name, or TASK_NONE (also for NULL). */
enum task_state task_state_parse(const char *name);
/* The state's flags (TASK_FINAL, ...); 0 outside the table. */
unsigned task_state_flags(enum task_state s);
/* 1 when the state has every flag in flags. */
int task_state_is(enum task_state s, unsigned flags);
/* A task's flags: its state's, with TASK_ACTIVE and TASK_HOLDS_QUOTA while a state that
 * awaits the release (TASK_AWAITS_RELEASE) is not released; 0 outside the table. */
unsigned task_flags(enum task_state s, int released);
/* 1 when a task may move from one state to the other. Staying in a state is not a transition
 * and is always allowed; TASK_NONE is never a legal end. */
int task_transition_ok(enum task_state from, enum task_state to);
/* Writes a JSON array of the names of the states that have every flag in with and none in
 * without (e.g. ["succeeded","failed","cancelled"]) into buf, for SQL's json_each. Returns
 * buf (truncated, still NUL-terminated, when len is too small). */
char *task_states_json(unsigned with, unsigned without, char *buf, size_t len);

/* The longest workload a task keeps: its canonical JSON text (server/api/workload.h), "" for
 * the simulated worker. */
#define TASK_WORKLOAD_MAX 16384

/* The longest termination message a task keeps: what a kubelet keeps of one. */
#define TASK_TERM_MSG_MAX 4096

/* The columns of a task, in the order the store reads them:
 * X(kind, field, table, column, size, role). kind: TEXT (char field[size], "" for NULL),
 * INT (int64_t), BOOL (int), OPT (int64_t field and int has_field: a NULL-able integer),
 * STATE (enum task_state). table "t" is tasks (a task's reservation is in its row since
 * migration 10). role: REQ (written by the submission), OBS (observed on the cluster: written
 * with every move by the store's door, store_task_move), RO (written elsewhere: the state and
 * cancel_requested_at by the door, the release's columns by the release, the store's own
 * bookkeeping). This list drives struct task, the store's SELECT and its column indexes, the
 * submission's INSERT (REQ) and the door's UPDATE (OBS); adding a task field is one line
 * here, a migration, and its place in the API's view. */
#define TASK_COLUMNS(X)                                                       \
	X(INT, seq, "t", "seq", 0, RO)                                        \
	X(TEXT, id, "t", "id", 32, REQ)                                       \
	X(TEXT, team, "t", "team", 64, REQ)                                   \
	X(TEXT, name, "t", "name", 160, REQ)                                  \
	X(STATE, state, "t", "state", 0, RO)                                  \
	X(INT, gpu_memory_mib, "t", "gpu_memory_mib", 0, REQ)                 \
	X(INT, gpu_core_percent, "t", "gpu_core_percent", 0, REQ)             \
	X(INT, gpu_count, "t", "gpu_count", 0, REQ)                           \
	X(INT, duration_seconds, "t", "duration_seconds", 0, REQ)             \
	X(TEXT, qos, "t", "qos", 8, REQ)                                      \
	X(TEXT, experiment, "t", "experiment", 16, REQ)                       \
	X(TEXT, workload, "t", "workload", TASK_WORKLOAD_MAX + 1, REQ)        \
	X(TEXT, idempotency_key, "t", "idempotency_key", 160, REQ)            \
	X(TEXT, job_name, "t", "job_name", 64, REQ)                           \
	X(TEXT, job_uid, "t", "job_uid", 64, OBS)                             \
	X(BOOL, job_suspended, "t", "job_suspended", 0, OBS)                  \
	X(TEXT, pod_name, "t", "pod_name", 128, OBS)                          \
	X(TEXT, pod_uid, "t", "pod_uid", 64, OBS)                             \
	X(TEXT, pod_node, "t", "pod_node", 64, OBS)                           \
	X(TEXT, pod_phase, "t", "pod_phase", 16, OBS)                         \
	X(TEXT, pod_deleted_at, "t", "pod_deleted_at", 40, OBS)               \
	X(OPT, exit_code, "t", "exit_code", 0, OBS)                           \
	X(TEXT, reason, "t", "reason", 96, OBS)                               \
	X(TEXT, allocation, "t", "allocation", 2048, OBS)                     \
	X(TEXT, pending_message, "t", "pending_message", 1024, OBS)           \
	X(TEXT, waiting_reason, "t", "waiting_reason", 96, OBS)               \
	X(TEXT, waiting_message, "t", "waiting_message", 1024, OBS)           \
	X(TEXT, termination_message, "t", "termination_message", TASK_TERM_MSG_MAX + 1, OBS) \
	X(TEXT, pending_diagnosis, "t", "pending_diagnosis", 8192, OBS)       \
	X(TEXT, cluster_uid, "t", "cluster_uid", 64, OBS)                     \
	X(OPT, pod_deadline_at, "t", "pod_deadline_at", 0, OBS)               \
	X(OPT, cancel_requested_at, "t", "cancel_requested_at", 0, RO)        \
	X(INT, created_at, "t", "created_at", 0, REQ)                         \
	X(INT, updated_at, "t", "updated_at", 0, RO)                          \
	X(INT, reserved_mem_mib, "t", "reserved_gpu_memory_mib", 0, REQ)      \
	X(INT, reserved_core_percent, "t", "reserved_gpu_core_percent", 0, REQ) \
	X(BOOL, released, "t", "released", 0, RO)                             \
	X(OPT, released_at, "t", "released_at", 0, RO)                        \
	X(TEXT, release_reason, "t", "release_reason", 64, RO)                \
	X(OPT, admitted_at, "t", "admitted_at", 0, RO)                        \
	X(OPT, predicted_admit_at, "t", "predicted_admit_at", 0, RO)

#define TASK_FIELD_TEXT(f, size) char f[size];
#define TASK_FIELD_INT(f, size) int64_t f;
#define TASK_FIELD_BOOL(f, size) int f;
#define TASK_FIELD_OPT(f, size) int64_t f; int has_##f;
#define TASK_FIELD_STATE(f, size) enum task_state f;

/* One task as stored (times in ms since the epoch). */
struct task {
#define TASK_FIELD(kind, f, tbl, col, size, role) TASK_FIELD_##kind(f, size)
	TASK_COLUMNS(TASK_FIELD)
#undef TASK_FIELD
	/* Not columns: the state the row was loaded with (the state its deciders saw), and
	 * whether a task_set_* call or a decided move changed anything since. */
	enum task_state loaded_state;
	int changed;
};

/* Column indexes of the store's task SELECT. */
enum task_col {
#define TASK_COL_ENUM(kind, f, tbl, col, size, role) TASK_COL_##f,
	TASK_COLUMNS(TASK_COL_ENUM)
#undef TASK_COL_ENUM
	TASK_NCOLS
};

/* Empties t: every text "" (its first byte only), every number 0, no state (TASK_NONE). */
void task_clear(struct task *t);

/* Setters of an observation: each writes the field only when the value differs and then sets
 * t->changed, so "did anything change?" needs neither a copy of the task nor a memcmp.
 * task_set_text takes NULL as "". A task's state is not set here: only the store's door
 * (store_task_move) writes it, with a move. */
void task_set_text(struct task *t, char *field, size_t size, const char *v);
void task_set_int(struct task *t, int64_t *field, int64_t v);
void task_set_bool(struct task *t, int *field, int v);
#define TASK_SET_TEXT(t, f, v) task_set_text((t), (t)->f, sizeof (t)->f, (v))

/* The reasons the server gives a task (its reason column, shown by the API): X(id, text).
 * The reasons of a passing state (decide_reason_now clears them when the state moves on):
 * the API could not be reached before the Job was known, a create got no answer, the task's
 * Pod is being deleted and still holds its card, the Job vanished with a replaced cluster
 * (its Pod may still run on a node of the old cluster until its deadline, pod_deadline_at:
 * the task stays unknown with its quota until then, and then ends with CLUSTER_REPLACED).
 * Then the ends the reconciler gives: a Job name taken by a Job not ours, a Job the API
 * refused, a Job deleted under the task (with how its Pod ended), a processed cancel, the
 * worker's budget ledger refusing the work, a failed Job whose condition gave no reason. */
#define TASK_REASONS(X)                                                         \
	X(NONE, "")                                                             \
	X(API_UNREACHABLE, "api_unreachable")                                   \
	X(CREATE_UNKNOWN, "create_outcome_unknown")                             \
	X(POD_TERMINATING, "waiting_for_pod_to_stop")                           \
	X(CLUSTER_WAIT, "cluster_replaced_waiting_for_pod_deadline")            \
	X(CLUSTER_REPLACED, "cluster_replaced")                                 \
	X(JOB_NAME_CONFLICT, "job_name_conflict")                               \
	X(JOB_REJECTED, "job_rejected")                                         \
	X(JOB_DELETED, "job_deleted")                                           \
	X(JOB_DELETED_POD_COMPLETED, "job_deleted_pod_completed")               \
	X(JOB_DELETED_POD_FAILED, "job_deleted_pod_failed")                     \
	X(CANCELLED, "cancelled")                                               \
	X(LIMIT_REJECTED, "simulated_limit_rejected")                           \
	X(JOB_FAILED, "Failed")

enum task_reason {
	TASK_REASON_KEEP = -1, /* no reason of the server's: the task keeps the one it has */
#define TASK_REASON_ENUM(id, text) TASK_REASON_##id,
	TASK_REASONS(TASK_REASON_ENUM)
#undef TASK_REASON_ENUM
	TASK_NREASONS
};
/* The reason's text as stored and shown (NULL for TASK_REASON_KEEP and outside the table). */
const char *task_reason_name(enum task_reason r);
/* 1 when text is the reason r's. */
int task_reason_is(const char *text, enum task_reason r);

/* What proves that a task's Pods stopped, so that its reservation may be released (the
 * release's reason, stored as it is): its Job finished, was suspended with the suspension
 * processed (a cancel), was observed gone, or vanished with a replaced cluster whose Pod's
 * deadline has passed, or was cancelled while waiting, never admitted (nothing held, nothing
 * to stop). NONE: nothing proves it (yet). */
#define TASK_PROOFS(X)                                  \
	X(NONE, "")                                     \
	X(JOB_COMPLETE, "job_complete")                 \
	X(JOB_FAILED, "job_failed")                     \
	X(JOB_SUSPENDED, "job_suspended")               \
	X(JOB_GONE, "job_gone")                         \
	X(POD_DEADLINE_PASSED, "pod_deadline_passed")         \
	X(NEVER_ADMITTED, "never_admitted")

enum task_proof {
#define TASK_PROOF_ENUM(id, text) TASK_PROOF_##id,
	TASK_PROOFS(TASK_PROOF_ENUM)
#undef TASK_PROOF_ENUM
	TASK_NPROOFS
};
/* The proof's name ("" for NONE, "?" outside the table). */
const char *task_proof_name(enum task_proof p);

/* The events a move is recorded with in the task's history (their type): an observation or
 * a decision of the reconciler's, an intent received by the queue's built-in handler, the
 * durable cancel request, a waiting task admitted by its team's quota. */
#define TASK_EVENTS(X)                                  \
	X(STATE, "state")                               \
	X(INTENT, "intent_received")                    \
	X(CANCEL, "cancel_requested")                   \
	X(ADMITTED, "admitted")

enum task_event_type {
#define TASK_EVENT_ENUM(id, text) TASK_EVENT_##id,
	TASK_EVENTS(TASK_EVENT_ENUM)
#undef TASK_EVENT_ENUM
	TASK_NEVENTS
};
/* The event's type as stored ("?" outside the table). */
const char *task_event_name(enum task_event_type e);

struct json_t;
/* A decision about a task's state, as a decider returns it and the store's one door
 * (store_task_move) applies it against the state the decider saw: the state to move to (the
 * task's own: only its observed fields are written), the reason the task is to show
 * (TASK_REASON_KEEP: its own), the event that records a change of state, and that event's
 * detail (borrowed, may be NULL). */
struct task_move {
	enum task_state to;
	enum task_reason reason;
	enum task_event_type event;
	const struct json_t *detail;
};
/* The move that keeps t where it is (its observed fields written, nothing else). */
struct task_move task_stay(const struct task *t);
/* The one route to creating: a queued task whose create intent arrived, or that the
 * reconciler takes without it, moves to creating, recorded as event with detail. Returns 1
 * and fills *m; 0 when t is not queued (m untouched). */
int task_take(const struct task *t, enum task_event_type event, const struct json_t *detail,
	      struct task_move *m);
/* The cancel request: a cancellable task (TASK_CANCELLABLE) moves to cancelling, recorded as
 * TASK_EVENT_CANCEL (a waiting one straight to cancelled: it holds nothing and has no Job).
 * Returns 1 and fills *m; 0 when t is not cancellable (m untouched). */
int task_cancel(const struct task *t, struct task_move *m);

/* 1 when a cancel was asked for the task (it is cancelling, or was cancelled on request). */
int task_cancel_requested(const struct task *t);

/* The name of a task's Job (and the prefix of its Pods): "gwb-<task id>". Returns out. */
char *task_job_name(const char *task_id, char *out, size_t len);
/* The task id of a Job or Pod name made by task_job_name ("gwb-<id>" or "gwb-<id>-<suffix>"
 * when pod is 1) into out; 0, or -1 when name is not one of ours. */
int task_of_name(const char *name, int pod, char *out, size_t len);

#endif
