/* Transactions: a decision's unit (BEGIN IMMEDIATE, or a SAVEPOINT of the open batch) and the
 * group commit's batch, with the in-memory state that commits and rolls back with them. */
#include "lib/alloc.h"
#include "lib/err.h"
#include "server/store/store_internal.h"

/* ---- the parts' hooks (store_batch_parts) ---- */

static void parts_unit_save(struct store *s)
{
	for (const struct store_batch_hooks *const *p = store_batch_parts; *p; p++)
		if ((*p)->unit_save)
			(*p)->unit_save(s);
}

static void parts_unit_undo(struct store *s)
{
	for (const struct store_batch_hooks *const *p = store_batch_parts; *p; p++)
		if ((*p)->unit_undo)
			(*p)->unit_undo(s);
}

/* 0, or the first part's error (the parts after it are not run). */
static int parts_commit(struct store *s)
{
	for (const struct store_batch_hooks *const *p = store_batch_parts; *p; p++) {
		int rc = (*p)->commit ? (*p)->commit(s) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

static void parts_forget(struct store *s)
{
	for (const struct store_batch_hooks *const *p = store_batch_parts; *p; p++)
		if ((*p)->forget)
			(*p)->forget(s);
}

/* ---- units and transactions ---- */

/* Inside a batch: 1 when its transaction is gone (SQLite rolled it back after a storage
 * fault or a lost lock), noting the error every later unit and the commit return. */
static int batch_gone(struct store *s)
{
	if (!s->batch.open || !sqlite3_get_autocommit(s->db))
		return 0;
	if (!s->batch.lost) {
		int rc = sqlite3_errcode(s->db);
		s->batch.lost = store_fault_kind_of(rc) != STORE_FAULT_NONE ? store_rc_err(s, rc)
				: s->fault.kind != STORE_FAULT_NONE ? GWB_EUNAVAIL
								      : GWB_EDB;
	}
	return 1;
}

static int begin_immediate(struct store *s)
{
	s->changes_at_begin = sqlite3_total_changes64(s->db);
	return store_exec(s, "BEGIN IMMEDIATE");
}

/* store_exec for the statements a batch runs once per decision (its SAVEPOINT and RELEASE):
 * prepared once and kept, not compiled for every decision. sql is a string literal (the
 * cache's key is its address). */
static int exec_kept(struct store *s, const char *sql)
{
	sqlite3_stmt *st = store_stmt(s, sql);
	if (!st)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : store_rc_err(s, rc);
}

int store_begin(struct store *s)
{
	if (s->batch.open) {
		/* Outside a transaction SAVEPOINT would open one of its own, whose RELEASE
		 * commits: a unit of a batch that is gone fails instead. */
		if (batch_gone(s))
			return s->batch.lost;
		/* Inside a batch a decision is a savepoint of the batch's transaction; the
		 * counters' moves so far, and the parts' state, are kept to be restored if it is
		 * undone. */
		store_counts_save(s);
		parts_unit_save(s);
		if (s->batch.optimistic) {
			s->batch.unit_changes = sqlite3_total_changes64(s->db);
			s->rows.unit = s->rows.n;
			return 0;
		}
		return exec_kept(s, "SAVEPOINT unit");
	}
	return begin_immediate(s);
}

int store_commit(struct store *s)
{
	if (s->batch.open && s->batch.optimistic) {
		/* Its writes simply stay in the batch's transaction, while there is one. */
		if (batch_gone(s)) {
			s->batch.spoiled = 1;
			return s->batch.lost;
		}
		return 0;
	}
	if (s->batch.open) {
		int rc = batch_gone(s) ? s->batch.lost : exec_kept(s, "RELEASE unit");
		if (rc) {
			store_rollback(s);
			if (s->batch.lost)
				rc = s->batch.lost;
		}
		return rc;
	}
	s->ckpt.wal_wrote = 0;
	int rc = store_exec(s, "COMMIT");
	if (rc) {
		store_rollback(s);
		return rc;
	}
	/* Only a commit that wrote frames counts (SQLite neither writes nor syncs for one that
	 * changed nothing, and so makes nothing durable). One with synchronous=FULL synced the
	 * WAL, and with it every commit before; a batch's waits for the sync thread. */
	if (s->ckpt.wal_wrote) {
		s->sync.commit_seq++;
		if (s->sync.batch_later) {
			if (s->gate.ob_txn_min || s->gate.tk_txn_min)
				store_held_push(s, s->sync.commit_seq, s->gate.ob_txn_min,
						s->gate.tk_txn_min);
		} else
			store_durable_all(s);
	}
	s->gate.ob_txn_min = s->gate.tk_txn_min = 0;
	store_counts_settle(s, 1);
	store_fault_clear(s);
	store_wal_bound(s);
	return 0;
}

void store_rollback(struct store *s)
{
	if (s->batch.open && s->batch.optimistic) {
		/* Nothing to undo when the decision wrote nothing (a refusal, a replay) and the
		 * transaction is still open; otherwise the batch must be run again with
		 * savepoints (store_batch_spoiled). */
		if (sqlite3_total_changes64(s->db) != s->batch.unit_changes ||
		    sqlite3_get_autocommit(s->db))
			s->batch.spoiled = 1;
		store_counts_undo(s);
		parts_unit_undo(s);
		s->rows.n = s->rows.unit; /* its new task, if it had come so far, is not written */
		return;
	}
	if (s->batch.open) {
		/* ROLLBACK TO undoes the unit's writes and keeps the savepoint open; RELEASE
		 * closes it, leaving the batch's transaction as it was before the unit. When
		 * SQLite has rolled the whole transaction back there is nothing left to undo. */
		if (!batch_gone(s)) {
			sqlite3_exec(s->db, "ROLLBACK TO unit", NULL, NULL, NULL);
			sqlite3_exec(s->db, "RELEASE unit", NULL, NULL, NULL);
			batch_gone(s);
		}
		store_counts_undo(s);
		parts_unit_undo(s);
		return;
	}
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	s->gate.ob_txn_min = s->gate.tk_txn_min = 0;
	store_counts_settle(s, 0);
}

int store_unit_begin(struct store *s)
{
	return store_begin(s);
}

int store_unit_end(struct store *s, int rc)
{
	if (rc == 0)
		return store_commit(s);
	/* A statement the unit stepped itself maps any failure to GWB_EDB; the connection's
	 * last error tells a storage fault from the rest. */
	if (rc == GWB_EDB && store_fault_kind_of(sqlite3_errcode(s->db)) != STORE_FAULT_NONE)
		rc = store_rc_err(s, sqlite3_errcode(s->db));
	store_rollback(s);
	return s->batch.open && s->batch.lost ? s->batch.lost : rc;
}

int store_batch_begin(struct store *s)
{
	if (s->batch.open)
		return GWB_EBUSY; /* one batch at a time: the caller runs without one */
	int rc = begin_immediate(s);
	s->batch.open = rc == 0;
	parts_forget(s);
	s->batch.lost = 0;
	s->batch.optimistic = 0;
	s->batch.spoiled = 0;
	s->rows.n = 0;
	store_ids_forget(s);
	s->rows.write_rc = 0;
	return rc;
}

int store_batch_begin_optimistic(struct store *s)
{
	int rc = store_batch_begin(s);
	s->batch.optimistic = rc == 0;
	return rc;
}

int store_batch_spoiled(const struct store *s)
{
	return s->batch.open && s->batch.spoiled;
}

int store_batch_commit(struct store *s)
{
	/* Rows the caller did not write with store_batch_write: written now. An id taken twice
	 * (which would spoil the batch there) fails it here. */
	if (s->rows.n && store_batch_write(s) == 0 && s->batch.spoiled)
		s->rows.write_rc = GWB_EDB;
	if (s->rows.write_rc) {
		int rc = s->rows.write_rc;
		store_batch_rollback(s);
		return rc;
	}
	int lost = batch_gone(s) ? s->batch.lost : 0;
	if (!lost) {
		/* What the parts held back for the batch (a team's reservations, one UPDATE for
		 * the batch); a failure undoes it all. */
		int rc = parts_commit(s);
		if (rc) {
			store_batch_rollback(s);
			return rc;
		}
	}
	parts_forget(s);
	s->batch.open = 0;
	s->batch.lost = 0;
	s->batch.optimistic = 0;
	if (lost) {
		store_rollback(s); /* the counters' moves go; nothing else is left */
		store_batch_later_end(s, 0);
		return lost;
	}
	int rc = store_commit(s);
	store_batch_later_end(s, rc == 0);
	return rc;
}

void store_batch_rollback(struct store *s)
{
	s->rows.n = 0;
	s->rows.write_rc = 0;
	parts_forget(s);
	s->batch.open = 0;
	s->batch.lost = 0;
	s->batch.optimistic = 0;
	store_rollback(s);
	store_batch_later_end(s, 0);
}

void store_rows_close(struct store *s)
{
	for (int t = 0; t < STORE_ROWS_TABLES; t++)
		for (int n = 0; n <= STORE_ROWS_MAX; n++)
			sqlite3_finalize(s->rows.st[t][n]);
	jw_free(&s->rows.detail);
	gwb_free(s->rows.task);
}
