/* The schema: the numbered migrations (never edited once shipped: a change is a new one) and
 * the code that runs them on PRAGMA user_version. */
#include <stdio.h>

#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store_internal.h"

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
	 * less), a release updates one row, and no task can be without its reservation.
	 * reservations stays, as a view over tasks with the columns it had, for whoever reads
	 * the file (gwb-load's check, the lab's queries). tasks_unreleased replaces its partial
	 * index, on team, so the audit sums a team's holdings from it (each query must name
	 * released = 0 to use it; the audit's list asks for the seqs through it, or a scan in
	 * seq order wins). A task of the old file without a reservation row (none is ever
	 * written so) gets none: NULL amounts, not in the view, and released so no pass looks
	 * for it; a reservation row of no task (none is either) is gone, and the audit shows
	 * its amount as the team's drift. */
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
	 * (STORE_SQL_TASK_IS), and a submission inserts into one index fewer. The ids of the
	 * tasks already there encode something else (a time and a random part, or only a random
	 * part): task_legacy_ids keeps each with its seq, and is looked up first. The table is
	 * rebuilt without the UNIQUE constraint, its rows, seqs and every column kept; no new
	 * task ever takes an id of this table (store_task_seq_new skips those). */
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
	 * one index fewer. */
	"DROP INDEX tasks_team_seq;",
	/* 15: a new task is its own create intent: a submission writes no outbox row (and one
	 * b-tree fewer in every batch's WAL frames), and the
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
	/* 16: a task may carry the team's own container (workload: its canonical JSON, NULL for
	 * the simulated worker), and shows why its container waits (the Pod's
	 * containerStatuses[0].state.waiting). A team's workload policy: the image prefixes it
	 * may run (a JSON array, NULL for none) and its cpu and memory defaults and per-task
	 * maxima (millicores, bytes; NULL: none). */
	"ALTER TABLE tasks ADD COLUMN workload TEXT;"
	"ALTER TABLE tasks ADD COLUMN waiting_reason TEXT;"
	"ALTER TABLE tasks ADD COLUMN waiting_message TEXT;"
	"ALTER TABLE teams ADD COLUMN allowed_images TEXT;"
	"ALTER TABLE teams ADD COLUMN cpu_default_milli INTEGER;"
	"ALTER TABLE teams ADD COLUMN cpu_max_milli INTEGER;"
	"ALTER TABLE teams ADD COLUMN memory_default_bytes INTEGER;"
	"ALTER TABLE teams ADD COLUMN memory_max_bytes INTEGER;",
	/* 17: waiting for quota (server/store/store_queue.c). A waiting task is a row in state
	 * 'waiting', holding nothing; a team's line is its waiting tasks in seq order, which
	 * tasks_state_team already gives (its entries are (state, team, seq)): no index of its
	 * own, so a submission inserts into none more. admitted_at: when a waiting task was
	 * admitted (such a task's create intent is an outbox row, not its seq);
	 * predicted_admit_at: the admission predicted when it began to wait. The team's
	 * settings: what a submission without on_quota_full does, and the line's order. */
	"ALTER TABLE tasks ADD COLUMN admitted_at INTEGER;"
	"ALTER TABLE tasks ADD COLUMN predicted_admit_at INTEGER;"
	"ALTER TABLE teams ADD COLUMN default_on_quota_full TEXT NOT NULL DEFAULT 'refuse';"
	"ALTER TABLE teams ADD COLUMN queueing TEXT NOT NULL DEFAULT 'strict';",
	/* 18: the termination message of the task's container (the worker's verdict, or a
	 * workload's own text), as the Pod's status had it when the container ended; kept once,
	 * at most 4,096 bytes as a kubelet keeps it. */
	"ALTER TABLE tasks ADD COLUMN termination_message TEXT;",
};
#define NMIGRATIONS ((int)(sizeof migrations / sizeof migrations[0]))

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

int store_schema_migrate(struct store *s, char *err, size_t errlen)
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
		if (store_exec(s, migrations[v]) || store_exec(s, pragma)) {
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
