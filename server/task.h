/* The task model: the lifecycle as one table (states, their flags and the legal next states),
 * the one struct a task is read into (its column list drives the store's SELECT, column
 * indexes and binds), and the name of a task's Job. Pure code: no SQLite, no I/O. */
#ifndef GWB_TASK_H
#define GWB_TASK_H

#include <stddef.h>
#include <stdint.h>

/* Per-state flags. */
#define TASK_FINAL 0x1u       /* the task ended: its state never changes again */
#define TASK_ACTIVE 0x2u      /* the reconciler looks after it (it also looks after final tasks
			       * whose reservation is not released yet) */
#define TASK_HOLDS_QUOTA 0x4u /* its reservation is held for certain (a final task's is held
			       * until the release proves its Pods stopped) */
#define TASK_CANCELLABLE 0x8u /* a cancel request moves it to cancelling */

#define TASK_TO(s) (1u << TASK_##s)

/* The lifecycle, derived from what the code does (see ARCHITECTURE.md's diagram):
 * X(id, name, flags, legal next states).
 * - queued -> creating: the intent arrived (the queue's built-in handler or the reconciler),
 *   or the reconciler took an overdue intent. queued -> pending/running/succeeded/failed: the
 *   picture shows the task's Job already (the picture is the truth about what is).
 * - creating/pending/running/unknown -> pending/running/succeeded/failed: observed from the
 *   Job and its newest Pod (a restarted Pod takes running back to pending), or a release on
 *   a Job observed gone.
 * - creating/pending/running -> unknown: an unanswered create, an unreachable API before a
 *   Job is known, or a Job of that name that is not ours. unknown -> pending: adopted.
 * - creating -> failed: the API refused the Job.
 * - every state not final and not cancelling -> cancelling: the durable cancel request.
 * - cancelling -> cancelled: only the release, on proof that every Pod stopped. */
#define TASK_STATES(X)                                                                         \
	X(QUEUED, "queued", TASK_ACTIVE | TASK_HOLDS_QUOTA | TASK_CANCELLABLE,                  \
	  TASK_TO(CREATING) | TASK_TO(PENDING) | TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) |         \
		  TASK_TO(FAILED) | TASK_TO(CANCELLING))                                       \
	X(CREATING, "creating", TASK_ACTIVE | TASK_HOLDS_QUOTA | TASK_CANCELLABLE,              \
	  TASK_TO(PENDING) | TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) |           \
		  TASK_TO(CANCELLING) | TASK_TO(UNKNOWN))                                      \
	X(PENDING, "pending", TASK_ACTIVE | TASK_HOLDS_QUOTA | TASK_CANCELLABLE,                \
	  TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) | TASK_TO(CANCELLING) |        \
		  TASK_TO(UNKNOWN))                                                            \
	X(RUNNING, "running", TASK_ACTIVE | TASK_HOLDS_QUOTA | TASK_CANCELLABLE,                \
	  TASK_TO(PENDING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) | TASK_TO(CANCELLING) |        \
		  TASK_TO(UNKNOWN))                                                            \
	X(SUCCEEDED, "succeeded", TASK_FINAL, 0u)                                              \
	X(FAILED, "failed", TASK_FINAL, 0u)                                                    \
	X(CANCELLING, "cancelling", TASK_ACTIVE | TASK_HOLDS_QUOTA, TASK_TO(CANCELLED))         \
	X(CANCELLED, "cancelled", TASK_FINAL, 0u)                                              \
	X(UNKNOWN, "unknown", TASK_ACTIVE | TASK_HOLDS_QUOTA | TASK_CANCELLABLE,                \
	  TASK_TO(PENDING) | TASK_TO(RUNNING) | TASK_TO(SUCCEEDED) | TASK_TO(FAILED) |           \
		  TASK_TO(CANCELLING))

enum task_state {
#define TASK_STATE_ENUM(id, name, flags, next) TASK_##id,
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
/* 1 when a task may move from one state to the other. Staying in a state is not a transition
 * and is always allowed; TASK_NONE is never a legal end. */
int task_transition_ok(enum task_state from, enum task_state to);
/* Writes a JSON array of the names of the states that have every flag in with and none in
 * without (e.g. ["succeeded","failed","cancelled"]) into buf, for SQL's json_each. Returns
 * buf (truncated, still NUL-terminated, when len is too small). */
char *task_states_json(unsigned with, unsigned without, char *buf, size_t len);

/* The name of a task's Job (and the prefix of its Pods): "gwb-<task id>". Returns out. */
char *task_job_name(const char *task_id, char *out, size_t len);
/* The task id of a Job or Pod name made by task_job_name ("gwb-<id>" or "gwb-<id>-<suffix>"
 * when pod is 1) into out; 0, or -1 when name is not one of ours. */
int task_of_name(const char *name, int pod, char *out, size_t len);

#endif
