/* The counters' part of struct store (store_counts.c): figures kept in memory for /metrics
 * that move only when the transaction that moved them commits. */
#ifndef GWB_STORE_COUNTS_H
#define GWB_STORE_COUNTS_H

#include <stdint.h>

#include "server/task.h"

struct store;

/* Each figure has three copies: the committed value, the moves of the open transaction
 * (pend, applied at its COMMIT), and pend when the batch's current unit began (sp, restored
 * when the unit is undone). */
struct store_counters {
	/* Tasks by state, counted from the table at open. */
	int64_t counts[TASK_NSTATES], pend[TASK_NSTATES], sp[TASK_NSTATES];
	/* State changes by (from, to) since the store was opened; the row TASK_NSTATES stands
	 * for "none" (a submission creating the task). */
	int64_t trans[TASK_NSTATES + 1][TASK_NSTATES];
	int64_t trans_pend[TASK_NSTATES + 1][TASK_NSTATES];
	int64_t trans_sp[TASK_NSTATES + 1][TASK_NSTATES];
	/* The intents not published (outbox rows and tasks above the intent cursor), counted at
	 * open (store_outbox_low_find) and moved by the update hook and the publications. */
	int64_t unpub, unpub_pend, unpub_sp;
};

/* Counts the tasks by state from the table (at open): 0 or GWB_EDB. */
int store_counts_open(struct store *s);
/* A unit of the open batch begins: keeps the pending moves (sp). */
void store_counts_save(struct store *s);
/* That unit is undone: its moves go (pend back to sp). */
void store_counts_undo(struct store *s);
/* Ends the open transaction's moves: applied when it committed (apply 1), dropped when it
 * rolled back. */
void store_counts_settle(struct store *s, int apply);

#endif
