/* The store's reconciler side: the tasks to look after, the one door that applies a decided
 * move (store_move.c), the task's history, and releasing a reservation together with the
 * evidence that proved it. */
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

/* The one door of a task's state, for a decider outside a transaction: applies move m to t,
 * the task as its deciders saw it, in one transaction (store_move_write: the check against
 * the lifecycle, the row with t's observed fields, the event, the counters). The stored state
 * must still be t->loaded_state, the state the deciders saw; otherwise GWB_ECONFLICT (reload
 * and decide again). On success t holds the new state, loaded, with t->changed 0; on failure
 * its state is the one it was loaded with. 0, GWB_ECONFLICT, GWB_ESTATE, GWB_EBUSY,
 * GWB_EUNAVAIL or GWB_EDB. */
int store_task_move(struct store *s, struct task *t, const struct task_move *m, int64_t now_ms);

/* Appends one event to a task's history (its own transaction, or savepoint). detail borrowed, may be NULL. */
int store_task_note(struct store *s, const char *id, const char *type, const json_t *detail,
		    int64_t now_ms);

/* Releases the task's reservation exactly once, in one transaction that also lowers the team's
 * reserved totals, moves the task to final_state (TASK_NONE: leaves it) through the door
 * with task_reason (TASK_REASON_KEEP: leaves the reason) and records the evidence (borrowed)
 * that proved its Pods stopped, proof being the release's reason. *released is 1 when this
 * call released it, 0 when it was already released. A move the lifecycle does not allow
 * refuses the whole release (GWB_ESTATE, logged). 0, GWB_ENOTFOUND, GWB_ESTATE, GWB_EBUSY or
 * GWB_EDB. */
int store_task_release(struct store *s, const char *id, enum task_proof proof,
		       enum task_state final_state, enum task_reason task_reason,
		       const json_t *evidence, int64_t now_ms, int *released);

#endif
