/* The store's reconciler side: loading a task for a decision, recording what was observed on
 * the cluster, and releasing a reservation together with the evidence that proved it. */
#ifndef GWB_STORE_RECON_H
#define GWB_STORE_RECON_H

#include <jansson.h>
#include <stdint.h>

#include "server/store/store.h"

/* Each write below is one transaction of its own, or, inside a batch (store_batch_begin: the
 * reconciler's safe point), one SAVEPOINT of the batch's transaction, durable with its COMMIT. */

/* The ids of the tasks the reconciler looks after — not final, or final with a reservation
 * not yet released — oldest first, as a new JSON array of strings. 0 or GWB_EDB. */
int store_tasks_active(struct store *s, json_t **ids);

/* Writes t's state and its observed fields (role OBS in TASK_COLUMNS) in one transaction,
 * with a task event when the state changes (type "state", detail borrowed, may be NULL). The
 * write happens only if the stored state still equals t->loaded_state; otherwise
 * GWB_ECONFLICT (reload and decide again). A move the lifecycle does not allow is refused
 * with GWB_ESTATE (logged; nothing written). On success t->loaded_state becomes t->state and
 * t->changed 0. 0, GWB_ECONFLICT, GWB_ESTATE, GWB_EBUSY or GWB_EDB. */
int store_task_observe(struct store *s, struct task *t, const json_t *detail, int64_t now_ms);

/* Appends one event to a task's history (its own transaction, or savepoint). detail borrowed, may be NULL. */
int store_task_note(struct store *s, const char *id, const char *type, const json_t *detail,
		    int64_t now_ms);

/* Releases the task's reservation exactly once, in one transaction that also lowers the team's
 * reserved totals, moves the task to final_state (TASK_NONE: leaves it), sets its reason to
 * task_reason (NULL: leaves it) and records the evidence (borrowed) that proved its Pods
 * stopped. *released is 1 when this call released it,
 * 0 when it was already released. A move the lifecycle does not allow refuses the whole
 * release (GWB_ESTATE, logged). 0, GWB_ENOTFOUND, GWB_ESTATE, GWB_EBUSY or GWB_EDB. */
int store_task_release(struct store *s, const char *id, const char *reason,
		       enum task_state final_state, const char *task_reason, const json_t *evidence,
		       int64_t now_ms, int *released);

#endif
