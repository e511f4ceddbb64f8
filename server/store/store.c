/* The store: connection set-up, migrations, statement cache, submissions, teams and reads. */
#include "server/store/store_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/log.h"

/* The task columns migration 9 copies, as versions 1 to 8 left them. */
#define V9_TASK_COLUMNS                                                                    \
	"seq, id, team, name, state, gpu_memory_mib, gpu_core_percent, gpu_count, "         \
	"duration_seconds, qos, experiment, idempotency_key, job_name, job_uid, "            \
	"job_suspended, pod_name, pod_uid, pod_node, pod_phase, exit_code, reason, "          \
	"allocation, pending_message, pending_diagnosis, cancel_requested_at, created_at, "   \
	"updated_at, pod_deleted_at, cluster_uid, pod_deadline_at"

/* The definitions of the task columns after id, as migration 9 wrote them (13 too). */
#define V9_TASK_DEFS                                                                        \
	"  team TEXT NOT NULL REFERENCES teams(name),"                                      \
	"  name TEXT NOT NULL,"                                                             \
	"  state TEXT NOT NULL,"                                                            \
	"  gpu_memory_mib INTEGER NOT NULL,"                                                \
	"  gpu_core_percent INTEGER NOT NULL,"                                              \
	"  gpu_count INTEGER NOT NULL,"                                                     \
	"  duration_seconds INTEGER NOT NULL,"                                              \
	"  qos TEXT NOT NULL,"                                                              \
	"  experiment TEXT NOT NULL,"                                                       \
	"  idempotency_key TEXT,"                                                           \
	"  job_name TEXT NOT NULL,"                                                         \
	"  job_uid TEXT,"                                                                   \
	"  job_suspended INTEGER NOT NULL DEFAULT 0,"                                       \
	"  pod_name TEXT, pod_uid TEXT, pod_node TEXT, pod_phase TEXT,"                     \
	"  exit_code INTEGER, reason TEXT,"                                                 \
	"  allocation TEXT,"                                                                \
	"  pending_message TEXT, pending_diagnosis TEXT,"                                   \
	"  cancel_requested_at INTEGER,"                                                    \
	"  created_at INTEGER NOT NULL,"                                                    \
	"  updated_at INTEGER NOT NULL,"                                                    \
	"  pod_deleted_at TEXT, cluster_uid TEXT, pod_deadline_at INTEGER"

/* The task columns migration 13 copies, as versions 10 to 12 left them. */
#define V13_TASK_COLUMNS                                                                   \
	V9_TASK_COLUMNS ", reserved_gpu_memory_mib, reserved_gpu_core_percent, released, "    \
			"released_at, release_reason, release_evidence"

/* Numbered migrations: migrations[i] takes the schema from version i to i + 1. Never edit one
 * that has shipped; append a new one. */
static const char *const migrations[] = {
	/* 1: the foundation schema. */
	"CREATE TABLE teams ("
	"  name TEXT PRIMARY KEY,"
	"  quota_mem_mib INTEGER NOT NULL CHECK (quota_mem_mib >= 0),"
	"  quota_core_pct INTEGER NOT NULL CHECK (quota_core_pct >= 0),"
	"  reserved_mem_mib INTEGER NOT NULL DEFAULT 0 CHECK (reserved_mem_mib >= 0),"
	"  reserved_core_pct INTEGER NOT NULL DEFAULT 0 CHECK (reserved_core_pct >= 0),"
	"  token_hash BLOB UNIQUE,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE TABLE tasks ("
	"  seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  id TEXT NOT NULL UNIQUE,"
	"  team TEXT NOT NULL REFERENCES teams(name),"
	"  name TEXT NOT NULL,"
	"  state TEXT NOT NULL,"
	"  gpu_memory_mib INTEGER NOT NULL,"
	"  gpu_core_percent INTEGER NOT NULL,"
	"  gpu_count INTEGER NOT NULL,"
	"  duration_seconds INTEGER NOT NULL,"
	"  qos TEXT NOT NULL,"
	"  experiment TEXT NOT NULL,"
	"  idempotency_key TEXT,"
	"  job_name TEXT NOT NULL,"
	"  job_uid TEXT,"
	"  job_suspended INTEGER NOT NULL DEFAULT 0,"
	"  pod_name TEXT, pod_uid TEXT, pod_node TEXT, pod_phase TEXT,"
	"  exit_code INTEGER, reason TEXT,"
	"  allocation TEXT,"
	"  pending_message TEXT, pending_diagnosis TEXT,"
	"  cancel_requested_at INTEGER,"
	"  created_at INTEGER NOT NULL,"
	"  updated_at INTEGER NOT NULL);"
	"CREATE INDEX tasks_team_seq ON tasks(team, seq);"
	"CREATE INDEX tasks_team_state ON tasks(team, state);"
	"CREATE INDEX tasks_state ON tasks(state);"
	"CREATE TABLE reservations ("
	"  task_id TEXT PRIMARY KEY REFERENCES tasks(id),"
	"  team TEXT NOT NULL REFERENCES teams(name),"
	"  gpu_memory_mib INTEGER NOT NULL,"
	"  gpu_core_percent INTEGER NOT NULL,"
	"  released INTEGER NOT NULL DEFAULT 0,"
	"  released_at INTEGER, release_reason TEXT, release_evidence TEXT);"
	"CREATE TABLE idempotency_keys ("
	"  team TEXT NOT NULL, key TEXT NOT NULL,"
	"  fingerprint TEXT NOT NULL, task_id TEXT NOT NULL,"
	"  created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
	"  PRIMARY KEY (team, key));"
	"CREATE INDEX idempotency_expiry ON idempotency_keys(expires_at);"
	"CREATE TABLE outbox ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  task_id TEXT NOT NULL, team TEXT NOT NULL,"
	"  kind TEXT NOT NULL CHECK (kind IN ('create', 'cancel')),"
	"  attempt INTEGER NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  published_at INTEGER, stream_id TEXT);"
	"CREATE INDEX outbox_unpublished ON outbox(id) WHERE published_at IS NULL;"
	"CREATE TABLE task_events ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  task_id TEXT NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL,"
	"  from_state TEXT, to_state TEXT, detail TEXT);"
	"CREATE INDEX task_events_task ON task_events(task_id, id);",
	/* 2: the outcome of each received intent, recorded once (the intent id is the outbox
	 * row id; from 15 on, a create's is its task's seq), so a redelivered or re-published
	 * intent is recognised. */
	"CREATE TABLE intent_outcomes ("
	"  intent_id INTEGER PRIMARY KEY,"
	"  task_id TEXT NOT NULL, kind TEXT NOT NULL,"
	"  stream_id TEXT, consumer TEXT, deliveries INTEGER NOT NULL,"
	"  outcome TEXT NOT NULL, recorded_at INTEGER NOT NULL);"
	"CREATE INDEX intent_outcomes_task ON intent_outcomes(task_id);",
	/* 3: the reconciler's pass finds its tasks through indexes, whatever the history holds:
	 * unreleased reservations, and tasks by state (tasks_state, from 1; tasks_state_team
	 * from 8). */
	"CREATE INDEX reservations_unreleased ON reservations(task_id) WHERE released = 0;",
	/* 4: failed attempts at handling an intent, next to its outcome. Only these make an
	 * intent dead: deliveries count restarts and claims, which say nothing about it. */
	"CREATE TABLE intent_failures ("
	"  intent_id INTEGER PRIMARY KEY,"
	"  task_id TEXT NOT NULL,"
	"  failures INTEGER NOT NULL,"
	"  last_error TEXT,"
	"  updated_at INTEGER NOT NULL);",
	/* 5: the Pod's deletionTimestamp, so a task can say its Pod is terminating. */
	"ALTER TABLE tasks ADD COLUMN pod_deleted_at TEXT;",
	/* 6: team-level records (server/store/store_audit.c): what an audit repair changed in a
	 * team's stored reserved totals, with the amounts before and after. */
	"CREATE TABLE team_events ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  team TEXT NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL, detail TEXT);"
	"CREATE INDEX team_events_team ON team_events(team, id);",
	/* 7: the identity of the cluster a task's Job was recorded on (the uid of its
	 * kube-system namespace), and when the task's Pod must have stopped at the latest (its
	 * start plus its activeDeadlineSeconds): a task whose Job vanished with a replaced
	 * cluster keeps its quota until then. */
	"ALTER TABLE tasks ADD COLUMN cluster_uid TEXT;"
	"ALTER TABLE tasks ADD COLUMN pod_deadline_at INTEGER;",
	/* 8: less work per submission. The outbox and the task events lose AUTOINCREMENT,
	 * which read and rewrote a row of sqlite_sequence on every insert: their rows are never
	 * deleted, so a new id, the largest plus one, is still never one used before (a
	 * pruning of these tables must keep each table's last row, or bring AUTOINCREMENT
	 * back). The ids are kept. The tasks' two indexes on state become one on (state, team):
	 * it serves both the reconciler's pass (by state) and a team's active count (by team and
	 * state), and a submission updates one index less. */
	"CREATE TABLE outbox_v8 ("
	"  id INTEGER PRIMARY KEY,"
	"  task_id TEXT NOT NULL, team TEXT NOT NULL,"
	"  kind TEXT NOT NULL CHECK (kind IN ('create', 'cancel')),"
	"  attempt INTEGER NOT NULL,"
	"  created_at INTEGER NOT NULL,"
	"  published_at INTEGER, stream_id TEXT);"
	"INSERT INTO outbox_v8 (id, task_id, team, kind, attempt, created_at, published_at, "
	"  stream_id) SELECT id, task_id, team, kind, attempt, created_at, published_at, "
	"  stream_id FROM outbox;"
	"DROP TABLE outbox;"
	"ALTER TABLE outbox_v8 RENAME TO outbox;"
	"CREATE INDEX outbox_unpublished ON outbox(id) WHERE published_at IS NULL;"
	"CREATE TABLE task_events_v8 ("
	"  id INTEGER PRIMARY KEY,"
	"  task_id TEXT NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL,"
	"  from_state TEXT, to_state TEXT, detail TEXT);"
	"INSERT INTO task_events_v8 (id, task_id, ts, type, from_state, to_state, detail) "
	"  SELECT id, task_id, ts, type, from_state, to_state, detail FROM task_events;"
	"DROP TABLE task_events;"
	"ALTER TABLE task_events_v8 RENAME TO task_events;"
	"CREATE INDEX task_events_task ON task_events(task_id, id);"
	"DROP INDEX tasks_team_state;"
	"DROP INDEX tasks_state;"
	"CREATE INDEX tasks_state_team ON tasks(state, team);",
	/* 9: less work per submission again. The tasks lose AUTOINCREMENT as the outbox did in
	 * 8: no task is ever deleted, so the largest seq plus one is still never one used
	 * before, and the API's cursors (seq descending) stay in order (a pruning of tasks must
	 * keep the last row, or bring AUTOINCREMENT back). Rows, seqs and every column are
	 * kept. The migrations run with foreign keys off (tasks is replaced under reservations'
	 * reference), and foreign_key_check runs before their commit. */
	"CREATE TABLE tasks_v9 ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL UNIQUE," V9_TASK_DEFS ");"
	"INSERT INTO tasks_v9 (" V9_TASK_COLUMNS ") SELECT " V9_TASK_COLUMNS " FROM tasks;"
	"DROP TABLE tasks;"
	"ALTER TABLE tasks_v9 RENAME TO tasks;"
	"CREATE INDEX tasks_team_seq ON tasks(team, seq);"
	"CREATE INDEX tasks_state_team ON tasks(state, team);"
	"DELETE FROM sqlite_sequence WHERE name = 'tasks';",
	/* 10: a task's reservation is in the task's own row, written by the task's insert: a
	 * submission writes one row fewer (a statement, two b-trees and two reference checks
	 * less: measured, 8k of its 125k instructions but a fifth of its CPU time), a
	 * release updates one row, and
	 * no task can be without its reservation. reservations stays, as a view over tasks
	 * with the columns it had, for whoever reads the file (gwb-load's check, the lab's
	 * queries). tasks_unreleased replaces its partial index, on team, so the audit sums a
	 * team's holdings from it (each query must name released = 0 to use it; the audit's
	 * list asks for the seqs through it, or a scan in seq order wins). A task of the old
	 * file without a reservation row (none is ever written so) gets none: NULL amounts,
	 * not in the view, and released so no pass looks for it; a reservation row of no task
	 * (none is either) is gone, and the audit shows its amount as the team's drift. */
	"ALTER TABLE tasks ADD COLUMN reserved_gpu_memory_mib INTEGER;"
	"ALTER TABLE tasks ADD COLUMN reserved_gpu_core_percent INTEGER;"
	"ALTER TABLE tasks ADD COLUMN released INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE tasks ADD COLUMN released_at INTEGER;"
	"ALTER TABLE tasks ADD COLUMN release_reason TEXT;"
	"ALTER TABLE tasks ADD COLUMN release_evidence TEXT;"
	"UPDATE tasks SET (reserved_gpu_memory_mib, reserved_gpu_core_percent, released, "
	"  released_at, release_reason, release_evidence) = (SELECT r.gpu_memory_mib, "
	"  r.gpu_core_percent, r.released, r.released_at, r.release_reason, r.release_evidence "
	"  FROM reservations r WHERE r.task_id = tasks.id) "
	"  WHERE id IN (SELECT task_id FROM reservations);"
	"UPDATE tasks SET released = 1 WHERE reserved_gpu_memory_mib IS NULL;"
	"DROP TABLE reservations;"
	"CREATE VIEW reservations AS SELECT id AS task_id, team, "
	"  reserved_gpu_memory_mib AS gpu_memory_mib, reserved_gpu_core_percent AS "
	"  gpu_core_percent, released, released_at, release_reason, release_evidence "
	"  FROM tasks WHERE reserved_gpu_memory_mib IS NOT NULL;"
	"CREATE INDEX tasks_unreleased ON tasks(team) WHERE released = 0;",
	/* 11: only the final tasks still holding their reservation are indexed as such (the
	 * others are found through tasks_state_team: none of them is released): a submission
	 * inserts into one index fewer, and a task released as it ends (the usual way) is never
	 * in this one. The condition's text is STORE_SQL_FINAL's. */
	"DROP INDEX tasks_unreleased;"
	"CREATE INDEX tasks_final_unreleased ON tasks(team) WHERE (state = 'succeeded' OR "
	"state = 'failed' OR state = 'cancelled') AND released = 0;",
	/* 12: the outbox loses its partial index of unpublished rows: an entry inserted with
	 * every intent and deleted when it is published, an index insert a submission and a
	 * delete a publication. The relay publishes in id order, so the unpublished rows are
	 * those from the first unpublished one on, less the few published out of order after a
	 * partial failure: the store keeps that first id (ob_low, found by one scan
	 * when it opens, moved on after each publication) and reads the rows from it, by id. */
	"DROP INDEX outbox_unpublished;",
	/* 13: a task's id no longer needs an index of its own: a new task's id encodes its seq
	 * (store_task_id_encode), so the row of an id is found by its primary key
	 * (STORE_SQL_TASK_IS), and a submission inserts into one index fewer (3.1k of its 77k
	 * instructions, measured). The ids of the tasks already there encode something else (a
	 * time and a random part, or only a random part): task_legacy_ids keeps each with its seq,
	 * and is looked up first. The table is rebuilt without the UNIQUE constraint, its rows,
	 * seqs and every column kept; no new task ever takes an id of this table
	 * (store_task_seq_new skips those). */
	"CREATE TABLE task_legacy_ids (id TEXT PRIMARY KEY, seq INTEGER NOT NULL) WITHOUT ROWID;"
	"INSERT INTO task_legacy_ids (id, seq) SELECT id, seq FROM tasks;"
	"DROP VIEW reservations;"
	"CREATE TABLE tasks_v13 ("
	"  seq INTEGER PRIMARY KEY,"
	"  id TEXT NOT NULL," V9_TASK_DEFS ","
	"  reserved_gpu_memory_mib INTEGER, reserved_gpu_core_percent INTEGER,"
	"  released INTEGER NOT NULL DEFAULT 0, released_at INTEGER, release_reason TEXT,"
	"  release_evidence TEXT);"
	"INSERT INTO tasks_v13 (" V13_TASK_COLUMNS ") SELECT " V13_TASK_COLUMNS " FROM tasks;"
	"DROP TABLE tasks;"
	"ALTER TABLE tasks_v13 RENAME TO tasks;"
	"CREATE INDEX tasks_team_seq ON tasks(team, seq);"
	"CREATE INDEX tasks_state_team ON tasks(state, team);"
	"CREATE INDEX tasks_final_unreleased ON tasks(team) WHERE (state = 'succeeded' OR "
	"state = 'failed' OR state = 'cancelled') AND released = 0;"
	"CREATE VIEW reservations AS SELECT id AS task_id, team, "
	"  reserved_gpu_memory_mib AS gpu_memory_mib, reserved_gpu_core_percent AS "
	"  gpu_core_percent, released, released_at, release_reason, release_evidence "
	"  FROM tasks WHERE reserved_gpu_memory_mib IS NOT NULL;",
	/* 14: a team's tasks are listed through tasks_state_team (newest first in each state,
	 * merged: store_task_list), so the index on (team, seq) goes: a submission inserts into
	 * one index fewer (2.3k of its 74k instructions, measured). */
	"DROP INDEX tasks_team_seq;",
	/* 15: a new task is its own create intent: a submission writes no outbox row (4.1k of its
	 * 70k instructions, measured, and one b-tree fewer in every batch's WAL frames), and the
	 * relay reads the tasks above this cursor, by seq, publishing each with its seq as the
	 * intent's id; a publication moves the cursor instead of updating a row per intent. The
	 * tasks already there had their create intents written to the outbox, which keeps them
	 * (published or not) and every cancel. No two intents share an id: a new task's seq and
	 * a new outbox row's id are drawn above every seq and outbox id there is
	 * (store_task_seq_new, store_intent_id_new). */
	"CREATE TABLE intent_cursor ("
	"  id INTEGER PRIMARY KEY CHECK (id = 1),"
	"  create_seq INTEGER NOT NULL);"
	"INSERT INTO intent_cursor (id, create_seq) SELECT 1, COALESCE(MAX(seq), 0) FROM tasks;",
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

const char *store_errmsg(struct store *s)
{
	return s && s->db ? sqlite3_errmsg(s->db) : "no database";
}

static int wal_setup(struct store *s, int64_t wal_max_bytes, char *err, size_t errlen);

/* The kind of storage fault a SQLite result code is (the connection's codes are primary
 * ones: extended codes are off), or STORE_FAULT_NONE when it is not one. */
static enum store_fault_kind fault_kind(int rc)
{
	switch (rc) {
	case SQLITE_FULL:
		return STORE_FAULT_FULL;
	case SQLITE_READONLY:
		return STORE_FAULT_READONLY;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		return STORE_FAULT_IO;
	default:
		return STORE_FAULT_NONE;
	}
}

int store_rc_err(struct store *s, int rc)
{
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return GWB_EBUSY;
	enum store_fault_kind kind = fault_kind(rc);
	if (kind == STORE_FAULT_NONE)
		return GWB_EDB;
	if (s->fault.kind == STORE_FAULT_NONE) {
		s->fault.since_ms = clock_now_ms();
		s->fault.writes_failed = 0;
		s->fault.faults++;
		log_error("store", "storage_fault", "kind=%s error=%s", store_fault_name(kind),
			  log_q(sqlite3_errstr(rc)));
	}
	s->fault.kind = kind;
	s->fault.writes_failed++;
	return GWB_EUNAVAIL;
}

const char *store_fault_name(enum store_fault_kind kind)
{
	switch (kind) {
	case STORE_FAULT_FULL:
		return "full";
	case STORE_FAULT_READONLY:
		return "read_only";
	case STORE_FAULT_IO:
		return "io_error";
	default:
		return "none";
	}
}

void store_fault_get(struct store *s, struct store_fault *out)
{
	*out = s->fault;
}

/* A transaction that stored a change committed: whatever refused the writes before does not
 * now. */
static void fault_clear(struct store *s)
{
	if (s->fault.kind == STORE_FAULT_NONE ||
	    sqlite3_total_changes64(s->db) == s->changes_at_begin)
		return;
	log_info("store", "storage_recovered", "kind=%s writes_failed=%lld seconds=%lld",
		 store_fault_name(s->fault.kind), (long long)s->fault.writes_failed,
		 (long long)((clock_now_ms() - s->fault.since_ms) / 1000));
	s->fault.kind = STORE_FAULT_NONE;
}

sqlite3_stmt *store_prepare_kept(struct store *s, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		log_error("store", "prepare_failed", "error=%s", log_q(sqlite3_errmsg(s->db)));
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

sqlite3_stmt *store_stmt(struct store *s, const char *sql)
{
	for (int i = 0; i < s->ncache; i++) {
		if (s->cache[i].sql == sql) {
			sqlite3_reset(s->cache[i].stmt);
			sqlite3_clear_bindings(s->cache[i].stmt);
			return s->cache[i].stmt;
		}
	}
	sqlite3_stmt *st = store_prepare_kept(s, sql);
	if (!st)
		return NULL;
	if (s->ncache < STORE_STMT_CACHE) {
		s->cache[s->ncache].sql = sql;
		s->cache[s->ncache].stmt = st;
		s->ncache++;
	} else {
		/* A full cache is a programming error (more statements than slots). */
		log_error("store", "stmt_cache_full", "limit=%d", STORE_STMT_CACHE);
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

static int exec_sql(struct store *s, const char *sql)
{
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : store_rc_err(s, rc);
}

/* Inside a batch: 1 when its transaction is gone (SQLite rolled it back after a storage
 * fault or a lost lock), noting the error every later unit and the commit return. */
static int batch_gone(struct store *s)
{
	if (!s->in_batch || !sqlite3_get_autocommit(s->db))
		return 0;
	if (!s->batch_lost) {
		int rc = sqlite3_errcode(s->db);
		s->batch_lost = fault_kind(rc) != STORE_FAULT_NONE ? store_rc_err(s, rc)
				: s->fault.kind != STORE_FAULT_NONE ? GWB_EUNAVAIL
								      : GWB_EDB;
	}
	return 1;
}

static int begin_immediate(struct store *s)
{
	s->changes_at_begin = sqlite3_total_changes64(s->db);
	return exec_sql(s, "BEGIN IMMEDIATE");
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

static void counts_settle(struct store *s, int apply)
{
	for (int i = 0; i < TASK_NSTATES; i++) {
		if (apply)
			s->counts[i] += s->count_pend[i];
		s->count_pend[i] = 0;
	}
	for (int f = 0; f <= TASK_NSTATES; f++)
		for (int t = 0; t < TASK_NSTATES; t++) {
			if (apply)
				s->trans[f][t] += s->trans_pend[f][t];
			s->trans_pend[f][t] = 0;
		}
	if (apply)
		s->ob_unpub += s->ob_unpub_pend;
	s->ob_unpub_pend = 0;
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
	int rc = exec_sql(s, "COMMIT");
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
	counts_settle(s, 1);
	fault_clear(s);
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
	counts_settle(s, 0);
}

void store_durable_all(struct store *s)
{
	s->durable_seq = s->commit_seq;
	s->nheld = s->held_head = 0;
}

void store_held_push(struct store *s, uint64_t seq, int64_t ob_min, int64_t tk_min)
{
	if (s->held_head > 0 && s->held_head == s->nheld)
		s->nheld = s->held_head = 0;
	if (s->nheld == s->held_cap) {
		/* Room at the front first: the live entries move down. */
		if (s->held_head > 0) {
			memmove(s->held, s->held + s->held_head,
				sizeof *s->held * (size_t)(s->nheld - s->held_head));
			s->nheld -= s->held_head;
			s->held_head = 0;
		} else {
			s->held_cap = s->held_cap ? s->held_cap * 2 : 64;
			s->held = gwb_realloc(s->held, sizeof *s->held * (size_t)s->held_cap);
		}
	}
	s->held[s->nheld].seq = seq;
	s->held[s->nheld].ob_min = ob_min;
	s->held[s->nheld].tk_min = tk_min;
	s->nheld++;
}

int store_held_settle(struct store *s)
{
	int head = s->held_head;
	while (s->held_head < s->nheld && s->held[s->held_head].seq <= s->durable_seq)
		s->held_head++;
	return s->held_head != head;
}

/* The oldest held commit's rows of a kind are the smallest: commits run one after the other
 * on this connection, and a new outbox id or task seq is above every one before it (no row of
 * either is deleted), so each commit's are above every earlier commit's. A held commit may
 * have written one kind only (0 for the other); a handful are held at a time. */
int64_t store_outbox_gate(const struct store *s)
{
	for (int i = s->held_head; i < s->nheld; i++)
		if (s->held[i].ob_min)
			return s->held[i].ob_min;
	return INT64_MAX;
}

int64_t store_create_gate(const struct store *s)
{
	for (int i = s->held_head; i < s->nheld; i++)
		if (s->held[i].tk_min)
			return s->held[i].tk_min;
	return INT64_MAX;
}

void store_count_move(struct store *s, enum task_state from, enum task_state to)
{
	int now = sqlite3_get_autocommit(s->db);
	int64_t *c = now ? s->counts : s->count_pend;
	if (from >= 0 && from < TASK_NSTATES)
		c[from]--;
	if (to >= 0 && to < TASK_NSTATES)
		c[to]++;
	if (to >= 0 && to < TASK_NSTATES && from != to) {
		int row = from >= 0 && from < TASK_NSTATES ? (int)from : TASK_NSTATES;
		(now ? s->trans : s->trans_pend)[row][to]++;
	}
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
	if (rc == GWB_EDB && fault_kind(sqlite3_errcode(s->db)) != STORE_FAULT_NONE)
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

/* The connection's WAL hook: called after each commit with the WAL's size in pages. It
 * replaces SQLite's automatic checkpoint, which would run inside a request's COMMIT. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
	(void)db;
	(void)name;
	struct store *s = arg;
	s->wal_pages = pages;
	s->wal_wrote = 1; /* called only for a commit that wrote frames */
	return SQLITE_OK;
}

int store_checkpoint_counted(struct store *s, int rc, int log, int done, int truncate)
{
	s->checkpoints++;
	if (rc == SQLITE_BUSY || (rc == SQLITE_OK && done < log)) {
		s->checkpoint_busy++;
		return GWB_EBUSY;
	}
	if (rc != SQLITE_OK) {
		/* A storage fault is counted, not recorded as the store's fault: only writes
		 * set and clear that, and the frames wait in the WAL for the next try. */
		if (fault_kind(rc) == STORE_FAULT_NONE)
			return GWB_EDB;
		s->checkpoint_failed++;
		return GWB_EUNAVAIL;
	}
	/* Every frame is in the database now: the next commit starts the WAL over (TRUNCATE has
	 * emptied the file as well). */
	s->wal_pages = truncate ? 0 : s->wal_pages;
	return 0;
}

int store_checkpoint(struct store *s, int truncate)
{
	int log = 0, done = 0;
	int64_t t0 = clock_mono_us();
	int rc = sqlite3_wal_checkpoint_v2(s->db, NULL,
					   truncate ? SQLITE_CHECKPOINT_TRUNCATE
						    : SQLITE_CHECKPOINT_PASSIVE,
					   &log, &done);
	s->ckpt_loop_us += clock_mono_us() - t0;
	return store_checkpoint_counted(s, rc, log, done, truncate);
}

/* The WAL's growth after which the checkpoint thread is asked again: small, so that its
 * checkpoints stay short and little is left for the loop's own at the bound (2.4-2.5 ms once
 * per 64 MiB under the submission bench, against 11-22 ms once a second before the thread).
 * Beside a continuous writer one seldom ends between two commits, the only moment that lets
 * the next start the WAL over: the WAL then grows to the bound. Steps of 32 and 128 KiB did
 * worse (more syncs of the database file), 2 and 8 MiB no better. */
#define CKPT_STEP_BYTES (512 * 1024)

/* Above the bound the loop checkpoints at once: what the checkpoint thread has not copied
 * yet is copied here, and the next commit starts the WAL over (store_ckpt.c). While the
 * thread's checkpoint runs this one would only find it busy: the next commit tries again.
 * Below it the thread is asked each time the WAL grew by CKPT_STEP_BYTES (an eighth of the
 * bound at most), so that little is left for the loop when the bound is reached. */
void store_wal_bound(struct store *s)
{
	if (store_ckpt_running(s))
		return;
	if (s->wal_pages < s->ckpt_asked_pages)
		s->ckpt_asked_pages = 0; /* the WAL started over */
	int64_t step = s->wal_max_bytes / 8 < CKPT_STEP_BYTES ? s->wal_max_bytes / 8
							       : CKPT_STEP_BYTES;
	if (s->wal_pages * s->page_size > s->wal_max_bytes)
		store_checkpoint(s, 0);
	else if (s->ckpt && (s->wal_pages - s->ckpt_asked_pages) * s->page_size > step &&
		 store_checkpoint_later(s) == 0)
		s->ckpt_asked_pages = s->wal_pages;
}

void store_wal_stats(struct store *s, struct store_wal_stats *out)
{
	out->wal_bytes = s->wal_pages * s->page_size;
	out->wal_max_bytes = s->wal_max_bytes;
	out->checkpoints = s->checkpoints;
	out->checkpoints_busy = s->checkpoint_busy;
	out->checkpoints_failed = s->checkpoint_failed;
	out->loop_seconds = (double)s->ckpt_loop_us / 1e6;
	store_ckpt_stats(s, &out->checkpoints_thread, &out->thread_seconds);
}

void store_task_counts(struct store *s, int64_t *counts)
{
	for (int i = 0; i < TASK_NSTATES; i++)
		counts[i] = s->counts[i];
}

int64_t store_task_transitions(struct store *s, enum task_state from, enum task_state to)
{
	int row = from >= 0 && from < TASK_NSTATES ? (int)from : TASK_NSTATES;
	return to >= 0 && to < TASK_NSTATES ? s->trans[row][to] : 0;
}

int store_step_done(struct store *s, sqlite3_stmt *st)
{
	if (!st)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : store_rc_err(s, rc);
}

void store_bind_text(sqlite3_stmt *st, int idx, const char *v)
{
	if (v)
		sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, idx);
}

void store_bind_text_until_step(sqlite3_stmt *st, int idx, const char *v)
{
	if (v)
		sqlite3_bind_text(st, idx, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, idx);
}

const char *store_col_text(sqlite3_stmt *st, int idx)
{
	return (const char *)sqlite3_column_text(st, idx);
}

int store_schema_latest(void)
{
	return NMIGRATIONS;
}

const char *store_migration_sql(int v)
{
	return v >= 0 && v < NMIGRATIONS ? migrations[v] : NULL;
}

int store_schema_version(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "PRAGMA user_version");
	int v = -1;
	if (st && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	if (st)
		sqlite3_reset(st);
	return v;
}

/* 0 when no row breaks a foreign key; else GWB_EDB, with the first such row in err. */
static int foreign_keys_hold(struct store *s, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "PRAGMA foreign_key_check", -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "foreign_key_check: %s", store_errmsg(s));
		return GWB_EDB;
	}
	int rc = sqlite3_step(st), bad = rc == SQLITE_ROW;
	if (bad)
		snprintf(err, errlen, "a row of %s (rowid %lld) references a missing row of %s",
			 store_col_text(st, 0), (long long)sqlite3_column_int64(st, 1),
			 store_col_text(st, 2));
	else if (rc != SQLITE_DONE)
		snprintf(err, errlen, "foreign_key_check: %s", store_errmsg(s));
	sqlite3_finalize(st);
	return bad || rc != SQLITE_DONE ? GWB_EDB : 0;
}

static int migrate(struct store *s, char *err, size_t errlen)
{
	int rc = store_begin(s);
	if (rc) {
		snprintf(err, errlen, "cannot lock the database to migrate: %s", store_errmsg(s));
		return rc;
	}
	int v = store_schema_version(s), migrated = 0;
	if (v < 0 || v > NMIGRATIONS) {
		snprintf(err, errlen, "schema version %d is not one this build knows (max %d)", v,
			 NMIGRATIONS);
		store_rollback(s);
		return GWB_EDB;
	}
	for (; v < NMIGRATIONS; v++) {
		char pragma[64];
		snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v + 1);
		if (exec_sql(s, migrations[v]) || exec_sql(s, pragma)) {
			snprintf(err, errlen, "migration %d failed: %s", v + 1, store_errmsg(s));
			store_rollback(s);
			return GWB_EDB;
		}
		log_info("store", "migrated", "version=%d", v + 1);
		migrated = 1;
	}
	/* Migrations run with foreign keys off (a table can be rebuilt under a reference to
	 * it): what they leave must satisfy every reference before it is committed. */
	if (migrated && (rc = foreign_keys_hold(s, err, errlen))) {
		store_rollback(s);
		return rc;
	}
	rc = store_commit(s);
	if (rc)
		snprintf(err, errlen, "migration commit failed: %s", store_errmsg(s));
	return rc;
}

/* The page size of a new database file. A commit writes every page it changed, whole, to
 * the WAL, and a batch of submissions changed the last page of about ten b-trees then (the
 * tasks, their four indexes, the outbox, the events and their index, the team; two of the
 * tasks' indexes went since, in migrations 13 and 14): with pages of half
 * SQLite's 4 KiB, about half the bytes to checksum, copy, sync and checkpoint. Measured with
 * the submission bench's client (2 vCPUs, 64 connections, ten alternate rounds): the loop's
 * CPU per submission 17.4 us against 18.4, the rate 0.45 of /healthz's against 0.44.
 * 1 KiB pages did as well, but a task's row once it has ended (its allocation and release
 * evidence, about 1.1 KiB) no longer fits in one and takes an overflow page; 512 bytes did
 * worse. */
#define STORE_PAGE_SIZE_TEXT "2048"

/* gwb_task_seq(id): the seq a task id encodes, or NULL for a text that is not one. */
static void sql_task_seq(sqlite3_context *cx, int argc, sqlite3_value **argv)
{
	(void)argc;
	int64_t v = store_task_id_seq((const char *)sqlite3_value_text(argv[0]));
	if (v < 0)
		sqlite3_result_null(cx);
	else
		sqlite3_result_int64(cx, v);
}

/* Whether task_legacy_ids has any row (a file made before schema 13 with tasks in it). */
static int legacy_find(struct store *s)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v2(s->db, "SELECT EXISTS (SELECT 1 FROM task_legacy_ids)", -1, &st,
			       NULL) != SQLITE_OK)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		s->has_legacy = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : GWB_EDB;
}

int store_open(struct store **out, const char *path, int busy_timeout_ms, char *err, size_t errlen)
{
	return store_open_ex(out, path, busy_timeout_ms, busy_timeout_ms, STORE_WAL_MAX_DEFAULT, err,
			     errlen);
}

int store_open_ex(struct store **out, const char *path, int open_busy_ms, int busy_ms,
		  int64_t wal_max_bytes, char *err, size_t errlen)
{
	int busy_timeout_ms = open_busy_ms;
	/* SQLite's allocations through free lists of size classes (store_mem.c), and no
	 * memory statistics: SQLite would take a global mutex on every allocation to keep them,
	 * and nothing here reads them. Only possible before SQLite is initialised (the first
	 * open); later calls fail harmlessly. */
	static int configured;
	if (!configured) {
		configured = 1;
		store_mem_install();
		sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	}
	struct store *s = gwb_calloc(1, sizeof *s);
	int rc = sqlite3_open_v2(path, &s->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
				 store_vfs_name());
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	/* SQLite opens a file it cannot write read-only, silently: the server must write its
	 * database (every answer is a commit), so it says so now rather than at the first
	 * submission. */
	if (sqlite3_db_readonly(s->db, "main") == 1) {
		snprintf(err, errlen,
			 "%s: read-only: the file or its filesystem cannot be written, and every "
			 "decision is written to it (make it writable, or set GWB_DB to a writable "
			 "path)",
			 path);
		store_close(s);
		return GWB_EUNAVAIL;
	}
	sqlite3_busy_timeout(s->db, busy_timeout_ms);
	sqlite3_extended_result_codes(s->db, 0);
	/* Task ids to seqs, for the statements that find a task by its id (STORE_SQL_TASK_IS)
	 * and for migration 13. Nothing in the schema calls it: other programs read the file
	 * without it. */
	if (sqlite3_create_function_v2(s->db, "gwb_task_seq", 1,
				       SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, NULL,
				       sql_task_seq, NULL, NULL, NULL) != SQLITE_OK) {
		snprintf(err, errlen, "%s: cannot configure: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	/* A new file gets pages of STORE_PAGE_SIZE_TEXT bytes; a file that has any keeps its own
	 * (SQLite ignores the pragma then: only a VACUUM outside WAL mode could change it).
	 * WAL lets readers run beside the writer; synchronous=FULL makes every acknowledged
	 * commit survive a power loss too, not only a process kill. */
	if (exec_sql(s, "PRAGMA page_size=" STORE_PAGE_SIZE_TEXT) ||
	    exec_sql(s, "PRAGMA journal_mode=WAL") || exec_sql(s, "PRAGMA synchronous=FULL")) {
		snprintf(err, errlen, "%s: cannot configure: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	char why[400];
	if ((rc = migrate(s, why, sizeof why)) ||
	    (rc = wal_setup(s, wal_max_bytes, why, sizeof why))) {
		snprintf(err, errlen, "%s: %s", path, why);
		store_close(s);
		return rc;
	}
	/* Foreign keys from here on (not in a transaction: SQLite ignores the pragma there). */
	if (exec_sql(s, "PRAGMA foreign_keys=ON")) {
		snprintf(err, errlen, "%s: cannot configure: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	if ((rc = legacy_find(s))) {
		snprintf(err, errlen, "%s: cannot read the task ids: %s", path, store_errmsg(s));
		store_close(s);
		return rc;
	}
	if ((rc = store_task_state_counts(s, s->counts))) {
		snprintf(err, errlen, "%s: cannot count the tasks: %s", path, store_errmsg(s));
		store_close(s);
		return rc;
	}
	if ((rc = store_outbox_low_find(s))) {
		snprintf(err, errlen, "%s: cannot read the outbox: %s", path, store_errmsg(s));
		store_close(s);
		return rc;
	}
	/* From here on the connection never sleeps for a lock (0: no busy handler) unless the
	 * caller asked for it: SQLITE_BUSY comes back at once as GWB_EBUSY. */
	sqlite3_busy_timeout(s->db, busy_ms);
	store_outbox_hook(s);
	*out = s;
	return 0;
}

/* No automatic checkpoint (the hook replaces it; the owner checkpoints from its timer), and
 * a WAL file cut back to the bound after it is reset. */
static int wal_setup(struct store *s, int64_t wal_max_bytes, char *err, size_t errlen)
{
	char pragma[80];
	snprintf(pragma, sizeof pragma, "PRAGMA journal_size_limit = %lld",
		 (long long)wal_max_bytes);
	sqlite3_stmt *st = NULL;
	/* temp_store=MEMORY: a batch's SAVEPOINTs keep their statement journal in memory, not
	 * in a temporary file written page by page and deleted per batch. */
	if (exec_sql(s, "PRAGMA wal_autocheckpoint = 0") || exec_sql(s, pragma) ||
	    exec_sql(s, "PRAGMA temp_store = MEMORY") ||
	    sqlite3_prepare_v2(s->db, "PRAGMA page_size", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW) {
		snprintf(err, errlen, "cannot configure the WAL: %s", store_errmsg(s));
		sqlite3_finalize(st);
		return GWB_EDB;
	}
	s->page_size = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	s->wal_max_bytes = wal_max_bytes;
	sqlite3_wal_hook(s->db, on_wal, s);
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	store_sync_stop(s);
	store_ckpt_stop(s);
	for (int i = 0; i < s->ncache; i++)
		sqlite3_finalize(s->cache[i].stmt);
	for (int t = 0; t < STORE_ROWS_TABLES; t++)
		for (int n = 0; n <= STORE_ROWS_MAX; n++)
			sqlite3_finalize(s->rows_st[t][n]);
	sqlite3_close(s->db);
	jw_free(&s->submit_detail);
	gwb_free(s->new_rows);
	gwb_free(s->held);
	gwb_free(s->ic_fetched);
	gwb_free(s);
}

int store_check(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "PRAGMA quick_check");
	int ok = st && sqlite3_step(st) == SQLITE_ROW &&
		 strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
	if (st)
		sqlite3_reset(st);
	return ok ? 0 : GWB_EDB;
}

/* Random words for task ids, fetched ID_RANDOM_POOL at a time: one getrandom call per 64
 * ids, not one per id (a system call cost more than the rest of a submission's id). A forked
 * child starts with an empty pool, so two processes never hand out the same words. */
#define ID_RANDOM_POOL 64
static uint32_t id_random[ID_RANDOM_POOL];
static size_t id_random_left;

static void id_random_forget(void)
{
	id_random_left = 0;
}

static void id_random_at_fork(void)
{
	pthread_atfork(NULL, NULL, id_random_forget);
}

/* The next random word (0 when the system has none to give, as before the pool). */
static uint32_t id_random_next(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, id_random_at_fork);
	if (id_random_left == 0) {
		size_t got = 0;
		while (got < sizeof id_random) {
			ssize_t k = getrandom((char *)id_random + got, sizeof id_random - got, 0);
			if (k > 0)
				got += (size_t)k;
			else if (errno != EINTR)
				break;
		}
		id_random_left = got / sizeof id_random[0];
		if (id_random_left == 0)
			return 0;
	}
	uint32_t r = id_random[--id_random_left];
	id_random[id_random_left] = 0; /* a word is handed out once */
	return r;
}

/* Base32 digits in ASCII order, so that ids sort as the numbers they encode. */
static const char id_digits[] = "234567abcdefghijklmnopqrstuvwxyz";

void store_task_id_encode(int64_t seq, char out[16])
{
	uint64_t v = (uint64_t)seq;
	out[0] = 't';
	out[1] = '-';
	for (int i = 11; i >= 0; i--) {
		out[2 + i] = id_digits[v & 31];
		v >>= 5;
	}
	out[14] = '\0';
}

int64_t store_task_id_seq(const char *id)
{
	if (!id || id[0] != 't' || id[1] != '-')
		return -1;
	uint64_t v = 0;
	for (int i = 2; i < 14; i++) {
		char c = id[i];
		int d = c >= '2' && c <= '7' ? c - '2' : c >= 'a' && c <= 'z' ? c - 'a' + 6 : -1;
		if (d < 0)
			return -1;
		v = v << 5 | (uint64_t)d;
	}
	return id[14] == '\0' ? (int64_t)v : -1;
}

/* 1 when seq's id is a legacy task's, 0 when not, -1 on a read error. */
static int legacy_taken(struct store *s, int64_t seq)
{
	char id[16];
	store_task_id_encode(seq, id);
	sqlite3_stmt *st = store_stmt(s, "SELECT 1 FROM task_legacy_ids WHERE id = ?");
	if (!st)
		return -1;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

int store_one_int(sqlite3_stmt *st, int64_t *v)
{
	if (!st)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : GWB_EDB;
}

/* Reads next_seq when it is not known: one more than every task seq and outbox id. */
static int next_seq_read(struct store *s)
{
	if (s->next_seq)
		return 0;
	int rc = store_one_int(store_stmt(s, "SELECT MAX((SELECT COALESCE(MAX(seq), 0) FROM "
					     "tasks), (SELECT COALESCE(MAX(id), 0) FROM outbox)) + 1"),
			       &s->next_seq);
	if (rc || !s->next_seq) {
		s->next_seq = 0;
		return GWB_EDB;
	}
	return 0;
}

int store_intent_id_new(struct store *s, int64_t *id)
{
	int rc = next_seq_read(s);
	if (rc)
		return rc;
	if (s->next_seq >= STORE_TASK_SEQ_END)
		return GWB_EDB;
	*id = s->next_seq++;
	return 0;
}

int store_task_seq_new(struct store *s, int64_t now_ms, int64_t *seq)
{
	int rc = next_seq_read(s);
	if (rc)
		return rc;
	/* The millisecond (its low 40 bits: they wrap every 34.8 years), then 20 random bits:
	 * ids made close in time sort together, so a batch's inserts into the indexes keyed by
	 * task id (the events, the outcomes) touch the same few pages; one more than the last
	 * when that is larger (several in a millisecond, a clock set back, the wrap), so that
	 * seqs only grow and none is handed out twice. */
	uint64_t ms = (uint64_t)now_ms & ((UINT64_C(1) << 40) - 1);
	int64_t v = (int64_t)(ms << 20 | (id_random_next() & 0xfffff));
	if (v < s->next_seq)
		v = s->next_seq;
	/* Nor the id of a task made before schema 13 (the lookup would find that one first). */
	int taken;
	while (s->has_legacy && (taken = legacy_taken(s, v)) != 0) {
		if (taken < 0)
			return GWB_EDB;
		v++;
	}
	if (v >= STORE_TASK_SEQ_END)
		return GWB_EDB; /* 2^60 tasks: never */
	s->next_seq = v + 1;
	*seq = v;
	return 0;
}

/* store_event_add with the detail already as JSON text (NULL for none). */
static int event_add_text(struct store *s, const char *task_id, int64_t now_ms, const char *type,
			  const char *from_state, const char *to_state, const char *detail)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO task_events (task_id, ts, type, from_state, "
					 "to_state, detail) VALUES (?, ?, ?, ?, ?, ?)");
	if (!st)
		return GWB_EDB;
	/* The texts are the caller's and live until this returns: SQLite need not copy them. */
	store_bind_text_until_step(st, 1, task_id);
	sqlite3_bind_int64(st, 2, now_ms);
	store_bind_text_until_step(st, 3, type);
	store_bind_text_until_step(st, 4, from_state);
	store_bind_text_until_step(st, 5, to_state);
	store_bind_text_until_step(st, 6, detail);
	return store_step_done(s, st);
}

int store_event_add(struct store *s, const char *task_id, int64_t now_ms, const char *type,
		    const char *from_state, const char *to_state, const json_t *detail)
{
	/* The text jx_dump gives, in one pass into a buffer on the stack when it fits (every
	 * event's detail but the scheduler's longest messages); jx_dump sizes it first. */
	char small[512], *d = NULL, *heap = NULL;
	if (detail) {
		size_t n = json_dumpb(detail, small, sizeof small,
				      JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
		if (n > 0 && n < sizeof small) {
			small[n] = '\0';
			d = small;
		} else {
			d = heap = jx_dump(detail);
		}
	}
	int rc = event_add_text(s, task_id, now_ms, type, from_state, to_state, d);
	gwb_free(heap);
	return rc;
}

int store_state_get(struct store *s, const char *id, enum task_state *out)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT state FROM tasks WHERE " STORE_SQL_TASK_IS("", ":id"));
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = task_state_parse(store_col_text(st, 0));
	sqlite3_reset(st);
	if (rc == SQLITE_ROW)
		return *out == TASK_NONE ? GWB_EDB : 0;
	return rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}

int store_state_check(const char *id, enum task_state from, enum task_state to)
{
	if (task_transition_ok(from, to))
		return 0;
	log_error("store", "illegal_transition", "task=%s from=%s to=%s", log_q(id),
		  task_state_name(from), task_state_name(to));
	return GWB_ESTATE;
}

void store_bind_states(sqlite3_stmt *st, int idx, unsigned with, unsigned without)
{
	char buf[256]; /* nine short names fit many times over */
	task_states_json(with, without, buf, sizeof buf);
	sqlite3_bind_text(st, idx, buf, -1, SQLITE_TRANSIENT); /* buf dies with this frame */
}
