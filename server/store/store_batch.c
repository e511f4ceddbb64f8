/* Transactions: a decision's unit (BEGIN IMMEDIATE, or a SAVEPOINT of the open batch) and the
 * group commit's batch, with the in-memory state that commits and rolls back with them. */
#include <string.h>

#include "lib/err.h"
#include "server/store/store_internal.h"

/* Inside a batch: 1 when its transaction is gone (SQLite rolled it back after a storage
 * fault or a lost lock), noting the error every later unit and the commit return. */
static int batch_gone(struct store *s)
{
	if (!s->in_batch || !sqlite3_get_autocommit(s->db))
		return 0;
	if (!s->batch_lost) {
		int rc = sqlite3_errcode(s->db);
		s->batch_lost = store_fault_kind_of(rc) != STORE_FAULT_NONE ? store_rc_err(s, rc)
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

/* exec_sql for the statements a batch runs once per decision (its SAVEPOINT and RELEASE):
 * prepared once and kept, since compiling them on every decision cost as much as the
 * decision's own inserts. sql is a string literal (the cache's key is its address). */
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
	if (s->in_batch) {
		/* Outside a transaction SAVEPOINT would open one of its own, whose RELEASE
		 * commits: a unit of a batch that is gone fails instead. */
		if (batch_gone(s))
			return s->batch_lost;
		/* Inside a batch a decision is a savepoint of the batch's transaction; the
		 * counters' moves so far are kept to be restored if it is undone. */
		memcpy(s->count_sp, s->count_pend, sizeof s->count_sp);
		memcpy(s->trans_sp, s->trans_pend, sizeof s->trans_sp);
		s->ob_unpub_sp = s->ob_unpub_pend;
		s->tp_sp = s->tp;
		if (s->batch_optimistic) {
			s->unit_changes = sqlite3_total_changes64(s->db);
			s->unit_rows = s->nrows;
			return 0;
		}
		return exec_kept(s, "SAVEPOINT unit");
	}
	return begin_immediate(s);
}


int store_commit(struct store *s)
{
	if (s->in_batch && s->batch_optimistic) {
		/* Its writes simply stay in the batch's transaction, while there is one. */
		if (batch_gone(s)) {
			s->batch_spoiled = 1;
			return s->batch_lost;
		}
		return 0;
	}
	if (s->in_batch) {
		int rc = batch_gone(s) ? s->batch_lost : exec_kept(s, "RELEASE unit");
		if (rc) {
			store_rollback(s);
			if (s->batch_lost)
				rc = s->batch_lost;
		}
		return rc;
	}
	s->wal_wrote = 0;
	int rc = store_exec(s, "COMMIT");
	if (rc) {
		store_rollback(s);
		return rc;
	}
	/* Only a commit that wrote frames counts (SQLite neither writes nor syncs for one that
	 * changed nothing, and so makes nothing durable). One with synchronous=FULL synced the
	 * WAL, and with it every commit before; a batch's waits for the sync thread. */
	if (s->wal_wrote) {
		s->commit_seq++;
		if (s->batch_later) {
			if (s->ob_txn_min || s->tk_txn_min)
				store_held_push(s, s->commit_seq, s->ob_txn_min, s->tk_txn_min);
		} else
			store_durable_all(s);
	}
	s->ob_txn_min = s->tk_txn_min = 0;
	store_counts_settle(s, 1);
	store_fault_clear(s);
	store_wal_bound(s);
	return 0;
}

void store_rollback(struct store *s)
{
	if (s->in_batch && s->batch_optimistic) {
		/* Nothing to undo when the decision wrote nothing (a refusal, a replay) and the
		 * transaction is still open; otherwise the batch must be run again with
		 * savepoints (store_batch_spoiled). */
		if (sqlite3_total_changes64(s->db) != s->unit_changes ||
		    sqlite3_get_autocommit(s->db))
			s->batch_spoiled = 1;
		memcpy(s->count_pend, s->count_sp, sizeof s->count_pend);
		memcpy(s->trans_pend, s->trans_sp, sizeof s->trans_pend);
		s->ob_unpub_pend = s->ob_unpub_sp;
		s->tp = s->tp_sp;
		s->nrows = s->unit_rows; /* its new task, if it had come so far, is not written */
		return;
	}
	if (s->in_batch) {
		/* ROLLBACK TO undoes the unit's writes and keeps the savepoint open; RELEASE
		 * closes it, leaving the batch's transaction as it was before the unit. When
		 * SQLite has rolled the whole transaction back there is nothing left to undo. */
		if (!batch_gone(s)) {
			sqlite3_exec(s->db, "ROLLBACK TO unit", NULL, NULL, NULL);
			sqlite3_exec(s->db, "RELEASE unit", NULL, NULL, NULL);
			batch_gone(s);
		}
		memcpy(s->count_pend, s->count_sp, sizeof s->count_pend);
		memcpy(s->trans_pend, s->trans_sp, sizeof s->trans_pend);
		s->ob_unpub_pend = s->ob_unpub_sp;
		s->tp = s->tp_sp;
		return;
	}
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	s->ob_txn_min = s->tk_txn_min = 0;
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
	return s->in_batch && s->batch_lost ? s->batch_lost : rc;
}

int store_batch_begin(struct store *s)
{
	if (s->in_batch)
		return GWB_EBUSY; /* one batch at a time: the caller runs without one */
	int rc = begin_immediate(s);
	s->in_batch = rc == 0;
	store_team_forget(s);
	s->batch_lost = 0;
	s->batch_optimistic = 0;
	s->batch_spoiled = 0;
	s->nrows = 0;
	s->next_seq = 0;
	s->write_rc = 0;
	return rc;
}

int store_batch_begin_optimistic(struct store *s)
{
	int rc = store_batch_begin(s);
	s->batch_optimistic = rc == 0;
	return rc;
}

int store_batch_spoiled(const struct store *s)
{
	return s->in_batch && s->batch_spoiled;
}

int store_batch_commit(struct store *s)
{
	/* Rows the caller did not write with store_batch_write: written now. An id taken twice
	 * (which would spoil the batch there) fails it here. */
	if (s->nrows && store_batch_write(s) == 0 && s->batch_spoiled)
		s->write_rc = GWB_EDB;
	if (s->write_rc) {
		int rc = s->write_rc;
		store_batch_rollback(s);
		return rc;
	}
	int lost = batch_gone(s) ? s->batch_lost : 0;
	if (!lost) {
		/* The team's reservations, one UPDATE for the batch; a failure undoes it all. */
		int rc = store_team_flush(s);
		if (rc) {
			store_batch_rollback(s);
			return rc;
		}
	}
	store_team_forget(s);
	s->in_batch = 0;
	s->batch_lost = 0;
	s->batch_optimistic = 0;
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
	s->nrows = 0;
	s->write_rc = 0;
	store_team_forget(s);
	s->in_batch = 0;
	s->batch_lost = 0;
	s->batch_optimistic = 0;
	store_rollback(s);
	store_batch_later_end(s, 0);
}
