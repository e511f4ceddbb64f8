/* The transactions' parts of struct store (store_batch.c): the open batch, its new tasks
 * waiting for their multi-row INSERT (written by store_tasks.c), and the hooks through which
 * the batch tells the other parts of its moments. */
#ifndef GWB_STORE_BATCH_H
#define GWB_STORE_BATCH_H

#include <sqlite3.h>
#include <stdint.h>

#include "lib/jsonw.h"
#include "server/task.h"

/* A batch's new tasks are inserted STORE_ROWS_MAX at most per statement, into two tables. */
#define STORE_ROWS_MAX 32
enum { STORE_ROWS_TASKS, STORE_ROWS_EVENTS, STORE_ROWS_TABLES };

struct store;

/* The group commit's batch (store_batch_begin). */
struct store_batch {
	/* 1 while a batch's transaction is open, so each decision runs in its own SAVEPOINT
	 * instead of its own transaction. */
	int open;
	/* An optimistic batch (store_batch_begin_optimistic): its decisions run without a
	 * SAVEPOINT each. unit_changes is the connection's change count when the current
	 * decision began; spoiled is set when a decision that wrote something had to be undone,
	 * which only a SAVEPOINT could have done. */
	int optimistic, spoiled;
	int64_t unit_changes;
	/* The error that made SQLite roll the batch's whole transaction back (a full disk or an
	 * I/O error can), 0 while it is open. Once set, every later unit of the batch fails with
	 * it and the batch's commit returns it: no unit may run outside the batch's transaction,
	 * where its RELEASE would be a commit of its own. */
	int lost;
};

/* An optimistic batch's new tasks, inserted once its decisions are made (store_batch_write)
 * with one INSERT of many rows per table, their events too: the rows are the deciders'
 * (store_task_submit_row). unit is their count when the current decision began; write_rc the
 * error of their insert, which the COMMIT then returns. */
struct store_rows {
	struct task **task;
	int n, cap, unit;
	int write_rc;
	/* The multi-row INSERTs, by table and number of rows (store_tasks.c). */
	sqlite3_stmt *st[STORE_ROWS_TABLES][STORE_ROWS_MAX + 1];
	/* The details of the submitted events, written into this one buffer every time. */
	struct jw detail;
};

/* Finalizes the rows' statements and frees them (store_close). */
void store_rows_close(struct store *s);

/* A part of the store whose state lives across a batch's units (a batch's team totals): the
 * batch runs these at its moments, in the order of store_batch_parts. Any may be NULL. */
struct store_batch_hooks {
	/* A unit of the open batch begins: keep what an undo restores. */
	void (*unit_save)(struct store *s);
	/* That unit is undone: back to what unit_save kept. */
	void (*unit_undo)(struct store *s);
	/* Right before the batch's COMMIT: write what the part held back; 0, or the error that
	 * rolls the whole batch back. */
	int (*commit)(struct store *s);
	/* A batch begins, or ends (committed or rolled back): forget the batch's state. */
	void (*forget)(struct store *s);
};
/* The parts the batch runs hooks for, ended by NULL (store_parts.c). */
extern const struct store_batch_hooks *const store_batch_parts[];

#endif
