/* Migration 8 on a database of version 7: the outbox and the task events keep their rows and
 * ids, lose AUTOINCREMENT (no sqlite_sequence row) and never hand out an id used before; the
 * tasks' two indexes on state become one on (state, team), which the reconciler's pass and a
 * team's active count use. The version-7 file holds the tables and indexes migration 8
 * touches, as versions 1 to 7 made them. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "server/store.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

static void exec(sqlite3 *h, const char *sql)
{
	char *e = NULL;
	int rc = sqlite3_exec(h, sql, NULL, NULL, &e);
	CHECKF(rc == SQLITE_OK, "%s: %s", sql, e ? e : "?");
	sqlite3_free(e);
}

static long long one_int(sqlite3 *h, const char *sql)
{
	sqlite3_stmt *st = NULL;
	CHECKF(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
	       sqlite3_errmsg(h));
	long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	sqlite3_finalize(st);
	return v;
}

/* The query plan of sql, its details joined by "; ". */
static void plan(sqlite3 *h, const char *sql, char *out, size_t len)
{
	char q[512];
	snprintf(q, sizeof q, "EXPLAIN QUERY PLAN %s", sql);
	sqlite3_stmt *st = NULL;
	CHECKF(sqlite3_prepare_v2(h, q, -1, &st, NULL) == SQLITE_OK, "%s: %s", q,
	       sqlite3_errmsg(h));
	out[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t n = strlen(out);
		snprintf(out + n, len - n, "%s; ", (const char *)sqlite3_column_text(st, 3));
	}
	sqlite3_finalize(st);
}

TEST(store_migration_8_keeps_ids_and_uses_one_state_index)
{
	const char *db = h_path("v7.db");
	sqlite3 *h;
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	exec(h, "PRAGMA journal_mode=WAL;"
		"CREATE TABLE tasks (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
		"  team TEXT NOT NULL, state TEXT NOT NULL);"
		"CREATE INDEX tasks_team_seq ON tasks(team, seq);"
		"CREATE INDEX tasks_team_state ON tasks(team, state);"
		"CREATE INDEX tasks_state ON tasks(state);"
		"CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL,"
		"  team TEXT NOT NULL, kind TEXT NOT NULL CHECK (kind IN ('create', 'cancel')),"
		"  attempt INTEGER NOT NULL, created_at INTEGER NOT NULL, published_at INTEGER,"
		"  stream_id TEXT);"
		"CREATE INDEX outbox_unpublished ON outbox(id) WHERE published_at IS NULL;"
		"CREATE TABLE task_events (id INTEGER PRIMARY KEY AUTOINCREMENT,"
		"  task_id TEXT NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL,"
		"  from_state TEXT, to_state TEXT, detail TEXT);"
		"CREATE INDEX task_events_task ON task_events(task_id, id);"
		"INSERT INTO tasks (id, team, state) VALUES ('t-a', 'alpha', 'queued'),"
		"  ('t-b', 'alpha', 'running'), ('t-c', 'beta', 'succeeded');"
		"INSERT INTO outbox (id, task_id, team, kind, attempt, created_at, published_at,"
		"  stream_id) VALUES (3, 't-a', 'alpha', 'create', 1, 5, 6, '1-0'),"
		"  (7, 't-b', 'alpha', 'create', 2, 8, NULL, NULL);"
		"INSERT INTO task_events (id, task_id, ts, type, to_state, detail) VALUES"
		"  (11, 't-a', 5, 'submitted', 'queued', '{}'), (12, 't-b', 8, 'submitted', 'queued',"
		"  NULL);"
		"PRAGMA user_version = 7;");
	sqlite3_close(h);

	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, db, 10000, err, sizeof err) == 0, "store_open: %s", err);
	CHECK_INT(store_schema_version(s), store_schema_latest());
	store_close(s);

	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	/* Rows and ids as they were. */
	CHECK_INT(one_int(h, "SELECT count(*) FROM outbox"), 2);
	CHECK_INT(one_int(h, "SELECT attempt FROM outbox WHERE id = 7 AND task_id = 't-b' AND "
			     "published_at IS NULL"),
		  2);
	CHECK_INT(one_int(h, "SELECT count(*) FROM outbox WHERE id = 3 AND stream_id = '1-0'"), 1);
	CHECK_INT(one_int(h, "SELECT count(*) FROM task_events WHERE id IN (11, 12)"), 2);
	/* No AUTOINCREMENT left on them; the next ids follow the largest. */
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_sequence WHERE name IN ('outbox', "
			     "'task_events')"),
		  0);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE sql LIKE "
			     "'%AUTOINCREMENT%' AND name IN ('outbox', 'task_events')"),
		  0);
	exec(h, "INSERT INTO outbox (task_id, team, kind, attempt, created_at) VALUES ('t-c', "
		"'beta', 'create', 1, 9)");
	CHECK_INT(one_int(h, "SELECT max(id) FROM outbox"), 8);
	exec(h, "INSERT INTO task_events (task_id, ts, type) VALUES ('t-c', 9, 'submitted')");
	CHECK_INT(one_int(h, "SELECT max(id) FROM task_events"), 13);
	/* The indexes, and the plans that need them. */
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
			     "('tasks_state', 'tasks_team_state')"),
		  0);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
			     "('tasks_state_team', 'outbox_unpublished', 'task_events_task')"),
		  3);
	char p[1024];
	plan(h, "SELECT id FROM tasks WHERE state IN ('queued', 'running')", p, sizeof p);
	CHECKF(strstr(p, "tasks_state_team") != NULL, "by state: %s", p);
	plan(h, "SELECT COUNT(*) FROM tasks WHERE team = 'alpha' AND state IN ('queued', "
		"'running')",
	     p, sizeof p);
	CHECKF(strstr(p, "tasks_state_team") != NULL, "by team and state: %s", p);
	plan(h, "SELECT id FROM outbox WHERE published_at IS NULL ORDER BY id", p, sizeof p);
	CHECKF(strstr(p, "outbox_unpublished") != NULL, "unpublished: %s", p);
	sqlite3_close(h);
}
