/* Migrations on databases of an older version, each built by the real migrations up to that
 * version (store_migration_sql) with rows in it:
 * - 8 on version 7: the outbox and the task events keep their rows and ids, lose
 *   AUTOINCREMENT (no sqlite_sequence row) and never hand out an id used before; the tasks'
 *   two indexes on state become one on (state, team), which the reconciler's pass and a
 *   team's active count use;
 * - 9 and 10 on version 8: the tasks keep every column of every row and their seqs, lose
 *   AUTOINCREMENT, and the next seq follows the largest; the reservations move into their
 *   tasks' rows, and the reservations view shows the rows the table held; the team
 *   reference still holds;
 * - 11 on version 10: the final tasks still holding their reservation have their own
 *   partial index, and the store's queries of unreleased tasks give what a scan of
 *   released = 0 gives, each part through an index;
 * - 13 on version 12: the tasks keep every row, lose the index on id, and are found by the
 *   seq their id encodes, or for the ids made before it through task_legacy_ids;
 * - 15 on version 14: the outbox keeps the create intents written before it, published or
 *   not, the intent cursor starts at the last task, and only the tasks made since are their
 *   own create intents;
 * - 16 on version 15: the tasks there run the simulated worker (no workload, no waiting
 *   reason), the teams allow no image; a new task keeps its workload, a team its policy;
 * - a migration that would leave a reference broken is not committed. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "queue/codec.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
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

/* A new database at version v, as migrations 1 to v made it, open. */
static sqlite3 *at_version(const char *db, int v)
{
	sqlite3 *h;
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	exec(h, "PRAGMA journal_mode=WAL");
	for (int i = 0; i < v; i++)
		exec(h, store_migration_sql(i));
	char pragma[64];
	snprintf(pragma, sizeof pragma, "PRAGMA user_version = %d", v);
	exec(h, pragma);
	return h;
}

/* A task row's columns that have no default: the three named, and the rest (TASK_REST). */
#define TASK_MIN                                                                             \
	"id, team, state, name, gpu_memory_mib, gpu_core_percent, gpu_count, duration_seconds, " \
	"qos, experiment, job_name, created_at, updated_at"
#define TASK_REST ", 'n', 1024, 25, 1, 60, 'burst', '', 'gwb-x', 1, 2"

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

/* sql's plan uses the index named. */
static void plan_uses(sqlite3 *h, const char *sql, const char *index)
{
	char p[1024];
	plan(h, sql, p, sizeof p);
	CHECKF(strstr(p, index) != NULL, "%s: %s", sql, p);
}

TEST(store_migration_8_keeps_ids_and_uses_one_state_index)
{
	const char *db = h_path("v7.db");
	sqlite3 *h = at_version(db, 7);
	exec(h, "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		"  VALUES ('alpha', 1, 1, 1, 1), ('beta', 1, 1, 1, 1);"
		"INSERT INTO tasks (" TASK_MIN ") VALUES ('t-a', 'alpha', 'queued'" TASK_REST "),"
		"  ('t-b', 'alpha', 'running'" TASK_REST "), ('t-c', 'beta', 'succeeded'" TASK_REST
		");"
		"INSERT INTO outbox (id, task_id, team, kind, attempt, created_at, published_at,"
		"  stream_id) VALUES (3, 't-a', 'alpha', 'create', 1, 5, 6, '1-0'),"
		"  (7, 't-b', 'alpha', 'create', 2, 8, NULL, NULL);"
		"INSERT INTO task_events (id, task_id, ts, type, to_state, detail) VALUES"
		"  (11, 't-a', 5, 'submitted', 'queued', '{}'), (12, 't-b', 8, 'submitted', 'queued',"
		"  NULL);");
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
	/* (outbox_unpublished, made again here, is gone since 12.) */
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN "
			     "('tasks_state_team', 'task_events_task')"),
		  2);
	plan_uses(h, "SELECT id FROM tasks WHERE state IN ('queued', 'running')",
		  "tasks_state_team");
	plan_uses(h, "SELECT COUNT(*) FROM tasks WHERE team = 'alpha' AND state IN ('queued', "
		     "'running')",
		  "tasks_state_team");
	sqlite3_close(h);
}

static void close_store(void *arg)
{
	store_close(arg);
}

/* A store opened on db, migrated to the latest version, closed at the case's end. */
static struct store *open_migrated(const char *db)
{
	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, db, 10000, err, sizeof err) == 0, "store_open: %s", err);
	t_defer(close_store, s);
	CHECK_INT(store_schema_version(s), store_schema_latest());
	return s;
}

/* Ids of the outbox rows the relay would be given now, as text ("3 5"). */
static void unpublished_ids(struct store *s, char *out, size_t len)
{
	struct q_intent in[16];
	int n = store_outbox_unpublished(s, in, 16);
	CHECK(n >= 0);
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		snprintf(out + strlen(out), len - strlen(out), "%s%lld", i ? " " : "",
			 (long long)in[i].id);
}

TEST(store_migration_12_reads_unpublished_intents_from_the_first_one)
{
	const char *db = h_path("v11.db");
	sqlite3 *h = at_version(db, 11);
	/* Published and not, out of order after the first unpublished one (a partial failure),
	 * and a last row published. */
	exec(h, "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		"  VALUES ('alpha', 1, 1, 1, 1);"
		"INSERT INTO tasks (" TASK_MIN ") VALUES ('t-a', 'alpha', 'queued'" TASK_REST "),"
		"  ('t-b', 'alpha', 'queued'" TASK_REST "), ('t-c', 'alpha', 'queued'" TASK_REST ");"
		"INSERT INTO outbox (id, task_id, team, kind, attempt, created_at, published_at,"
		"  stream_id) VALUES (1, 't-a', 'alpha', 'create', 1, 5, 6, '1-0'),"
		"  (2, 't-b', 'alpha', 'create', 1, 5, 6, '2-0'),"
		"  (3, 't-c', 'alpha', 'create', 1, 5, NULL, NULL),"
		"  (4, 't-a', 'alpha', 'cancel', 1, 5, 6, '4-0'),"
		"  (5, 't-b', 'alpha', 'cancel', 1, 5, NULL, NULL),"
		"  (6, 't-c', 'alpha', 'cancel', 1, 5, 7, '6-0');");
	sqlite3_close(h);

	struct store *s = open_migrated(db);
	char ids[64];
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, "3 5");
	int64_t n = -1;
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 2);
	/* Published one by one: the reads move on, and a new row is found after the last. */
	const char sids[1][48] = {"9-0"};
	int64_t id = 5;
	CHECK_INT(store_outbox_published(s, &id, sids, 1, 8), 0);
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, "3");
	id = 3;
	CHECK_INT(store_outbox_published(s, &id, sids, 1, 8), 0);
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, "");
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 0);
	/* From schema 15 on a new task is its own create intent, its seq the intent's id,
	 * read after the outbox's rows. */
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 100, 100, NULL, 1, &created), 0);
	struct task_req q = {"alpha", "late", 1, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	int64_t late = store_task_id_seq(res.task_id);
	char want[64];
	snprintf(want, sizeof want, "%lld", (long long)late);
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, want);
	/* The count kept in memory follows commits only: a batch rolled back adds nothing, a
	 * decision undone inside a batch neither, a committed one adds its task. */
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	store_batch_rollback(s);
	CHECK_INT(store_batch_begin(s), 0);
	struct task_req big = q;
	big.gpu_memory_mib = 1000; /* over the quota: refused, its unit undone */
	CHECK_INT(store_task_submit(s, &big, NULL, "fp", 10, 100000, &res), GWB_EQUOTA);
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
	int64_t second = store_task_id_seq(res.task_id);
	CHECK(second > late);
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 2);
	/* Published twice (a redelivered record): counted once. */
	id = late;
	CHECK_INT(store_outbox_published(s, &id, sids, 1, 8), 0);
	CHECK_INT(store_outbox_published(s, &id, sids, 1, 8), 0);
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 1);
	snprintf(want, sizeof want, "%lld", (long long)second);
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, want);
	/* A store opened on the file now counts what it holds. */
	struct store *s2 = NULL;
	char err[256];
	CHECKF(store_open(&s2, db, 10000, err, sizeof err) == 0, "store_open: %s", err);
	t_defer(close_store, s2);
	CHECK_INT(store_outbox_unpublished_count(s2, &n), 0);
	CHECK_INT(n, 1);
	unpublished_ids(s2, ids, sizeof ids);
	CHECK_STR(ids, want);

	/* The index is gone, and the relay's read goes by the outbox's primary key. */
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name = "
			     "'outbox_unpublished'"),
		  0);
	char p[1024];
	plan(h, "SELECT o.id FROM outbox o JOIN tasks t ON t.id = o.task_id WHERE o.id >= 3 AND "
		"o.id < 100 AND o.published_at IS NULL ORDER BY o.id LIMIT 16",
	     p, sizeof p);
	CHECKF(strstr(p, "SEARCH o USING INTEGER PRIMARY KEY") != NULL, "%s", p);
	sqlite3_close(h);
}

TEST(store_migration_15_keeps_the_outbox_creates_and_starts_the_cursor_at_the_last_task)
{
	const char *db = h_path("v14.db");
	sqlite3 *h = at_version(db, 14);
	/* Two tasks of schema 14 (seqs 1 and 2, ids encoding them), the first's create
	 * published, the second's not. */
	char a[16], b[16], sql[1024];
	store_task_id_encode(1, a);
	store_task_id_encode(2, b);
	snprintf(sql, sizeof sql,
		 "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		 "  VALUES ('alpha', 100, 100, 1, 1);"
		 "INSERT INTO tasks (seq, " TASK_MIN ") VALUES (1, '%s', 'alpha', 'creating'"
		 TASK_REST "), (2, '%s', 'alpha', 'queued'" TASK_REST ");"
		 "INSERT INTO outbox (id, task_id, team, kind, attempt, created_at, published_at,"
		 "  stream_id) VALUES (1, '%s', 'alpha', 'create', 1, 5, 6, '1-0'),"
		 "  (2, '%s', 'alpha', 'create', 1, 5, NULL, NULL);",
		 a, b, a, b);
	exec(h, sql);
	sqlite3_close(h);

	struct store *s = open_migrated(db);
	CHECK_INT(h_sql_int(db, "SELECT create_seq FROM intent_cursor"), 2);
	/* The old task's create comes from its outbox row, once: not again as a task. */
	char ids[64];
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, "2");
	int64_t n = -1;
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 1);
	/* A new task is its own create intent, after the outbox's row. */
	struct task_req q = {"alpha", "new", 1, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	char want[64];
	snprintf(want, sizeof want, "2 %lld", (long long)store_task_id_seq(res.task_id));
	unpublished_ids(s, ids, sizeof ids);
	CHECK_STR(ids, want);
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	CHECK_INT(n, 2);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM outbox"), 2);
	/* The relay's read of the creates is a range of the tasks' primary key. */
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	char p[1024];
	plan(h, "SELECT t.seq FROM tasks t WHERE t.seq > 2 AND t.seq < 100 ORDER BY t.seq LIMIT 64",
	     p, sizeof p);
	CHECKF(strstr(p, "SEARCH t USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") != NULL, "%s",
	       p);
	sqlite3_close(h);
}

TEST(store_migration_16_leaves_old_tasks_to_the_worker_and_keeps_new_workloads)
{
	const char *db = h_path("v15.db");
	sqlite3 *h = at_version(db, 15);
	char a[16], sql[1024];
	store_task_id_encode(1, a);
	snprintf(sql, sizeof sql,
		 "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		 "  VALUES ('alpha', 100, 100, 1, 1);"
		 "INSERT INTO tasks (seq, " TASK_MIN ") VALUES (1, '%s', 'alpha', 'pending'"
		 TASK_REST ");",
		 a);
	exec(h, sql);
	sqlite3_close(h);

	struct store *s = open_migrated(db);
	struct task *t = gwb_malloc(sizeof *t);
	CHECK_INT(store_task_load(s, a, t), 0);
	CHECK_STR(t->workload, "");
	CHECK_STR(t->waiting_reason, "");
	struct team_policy pol;
	CHECK_INT(store_team_policy(s, "alpha", &pol), 0);
	CHECK_INT(json_array_size(pol.allowed_images), 0);
	CHECK_INT(pol.cpu_max, 0);
	json_decref(pol.allowed_images);
	/* A policy and a workload written now are read back as written. */
	json_t *imgs = json_pack("[s]", "busybox");
	struct team_policy set = { imgs, 500, 2000, 1 << 20, 1 << 30 };
	int created = 1;
	CHECK_INT(store_team_put_policy(s, "alpha", 100, 100, NULL, &set, 5, &created), 0);
	CHECK_INT(created, 0);
	json_decref(imgs);
	CHECK_INT(store_team_policy(s, "alpha", &pol), 0);
	CHECK_STR(json_string_value(json_array_get(pol.allowed_images, 0)), "busybox");
	CHECK_INT(pol.cpu_default, 500);
	CHECK_INT(pol.memory_max, 1 << 30);
	json_decref(pol.allowed_images);
	struct task_req q = { "alpha", "wl", 1, 1, 1, 60, "LS", "normal",
			      "{\"cpu\":\"1\",\"image\":\"busybox\",\"memory\":\"1Gi\"}",
			      STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	CHECK_INT(store_task_load(s, res.task_id, t), 0);
	CHECK_STR(t->workload, q.workload);
	gwb_free(t);
}

/* Every column of every task row, and of every reservation, as one text. */
static void rows_text(sqlite3 *h, const char *sql, char *out, size_t len)
{
	sqlite3_stmt *st = NULL;
	CHECKF(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
	       sqlite3_errmsg(h));
	out[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW)
		for (int c = 0; c < sqlite3_column_count(st); c++) {
			size_t n = strlen(out);
			const unsigned char *v = sqlite3_column_text(st, c);
			snprintf(out + n, len - n, "%s|", v ? (const char *)v : "NULL");
		}
	sqlite3_finalize(st);
}

/* The task columns as version 8 had them, and the reservations' (a table, then a view). */
#define V8_TASK_COLUMNS                                                                     \
	"seq, id, team, name, state, gpu_memory_mib, gpu_core_percent, gpu_count, "            \
	"duration_seconds, qos, experiment, idempotency_key, job_name, job_uid, "              \
	"job_suspended, pod_name, pod_uid, pod_node, pod_phase, exit_code, reason, "            \
	"allocation, pending_message, pending_diagnosis, cancel_requested_at, created_at, "     \
	"updated_at, pod_deleted_at, cluster_uid, pod_deadline_at"
#define V8_TASKS "SELECT " V8_TASK_COLUMNS " FROM tasks ORDER BY seq"
#define ALL_RESERVATIONS                                                                   \
	"SELECT task_id, team, gpu_memory_mib, gpu_core_percent, released, released_at, "     \
	"release_reason, release_evidence FROM reservations ORDER BY task_id"

TEST(store_migrations_9_and_10_keep_tasks_and_move_reservations_into_them)
{
	const char *db = h_path("v8.db");
	sqlite3 *h = at_version(db, 8);
	/* Seqs with a gap, as a version-8 file has after a task insert that was rolled back:
	 * AUTOINCREMENT's counter is ahead of the largest seq. Every column holds a value. A
	 * third task has no reservation row (none is ever written so). */
	exec(h, "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		"  VALUES ('alpha', 10, 10, 1, 1);"
		"INSERT INTO tasks (seq, " TASK_MIN ", idempotency_key, job_uid, job_suspended,"
		"  pod_name, pod_uid, pod_node, pod_phase, exit_code, reason, allocation,"
		"  pending_message, pending_diagnosis, cancel_requested_at, pod_deleted_at,"
		"  cluster_uid, pod_deadline_at) VALUES"
		"  (5, 't-a', 'alpha', 'running'" TASK_REST ", 'k', 'u1', 1, 'p', 'pu', 'node-1',"
		"  'Running', 3, 'r', '{\"gpu\":0}', 'm', 'd', 7, 'z', 'c-1', 99),"
		"  (9, 't-b', 'alpha', 'succeeded'" TASK_REST ", NULL, NULL, 0, NULL, NULL, NULL,"
		"  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),"
		"  (11, 't-n', 'alpha', 'failed'" TASK_REST ", NULL, NULL, 0, NULL, NULL, NULL,"
		"  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);"
		"UPDATE sqlite_sequence SET seq = 12 WHERE name = 'tasks';"
		"INSERT INTO reservations (task_id, team, gpu_memory_mib, gpu_core_percent, released,"
		"  released_at, release_reason, release_evidence) VALUES"
		"  ('t-a', 'alpha', 1024, 25, 0, NULL, NULL, NULL),"
		"  ('t-b', 'alpha', 2048, 50, 1, 40, 'job_succeeded', '{\"pod\":\"p\"}');");
	char tasks_before[4096], res_before[512];
	rows_text(h, V8_TASKS, tasks_before, sizeof tasks_before);
	rows_text(h, ALL_RESERVATIONS, res_before, sizeof res_before);
	sqlite3_close(h);

	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, db, 10000, err, sizeof err) == 0, "store_open: %s", err);
	CHECK_INT(store_schema_version(s), store_schema_latest());
	/* The store's own connection checks references again once the migrations are done. */
	sqlite3_stmt *st = store_stmt(s, "PRAGMA foreign_keys");
	CHECK(st && sqlite3_step(st) == SQLITE_ROW);
	CHECK_INT(sqlite3_column_int(st, 0), 1);
	sqlite3_reset(st);
	/* The reservation read with its task, as the API shows it. */
	struct task *t = gwb_malloc(sizeof *t);
	CHECK_INT(store_task_load(s, "t-b", t), 0);
	CHECK_INT(t->reserved_mem_mib, 2048);
	CHECK_INT(t->released, 1);
	CHECK_INT(t->released_at, 40);
	CHECK_STR(t->release_reason, "job_succeeded");
	gwb_free(t);
	store_close(s);

	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	/* Every task column and every reservation column as they were. */
	char after[4096];
	rows_text(h, V8_TASKS, after, sizeof after);
	CHECK_STR(after, tasks_before);
	rows_text(h, ALL_RESERVATIONS, after, sizeof after);
	CHECK_STR(after, res_before);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name = 'reservations' "
			     "AND type = 'view'"),
		  1);
	/* The task without a reservation holds none, and no pass looks for it. */
	CHECK_INT(one_int(h, "SELECT released FROM tasks WHERE id = 't-n'"), 1);
	CHECK_INT(one_int(h, "SELECT count(*) FROM tasks WHERE id = 't-n' AND "
			     "reserved_gpu_memory_mib IS NULL"),
		  1);
	/* No AUTOINCREMENT on tasks; the next seq follows the largest one. */
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_sequence WHERE name = 'tasks'"), 0);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name = 'tasks' AND sql "
			     "LIKE '%AUTOINCREMENT%'"),
		  0);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%_v9'"), 0);
	exec(h, "INSERT INTO tasks (" TASK_MIN ") VALUES ('t-c', 'alpha', 'queued'" TASK_REST ")");
	CHECK_INT(one_int(h, "SELECT seq FROM tasks WHERE id = 't-c'"), 12);
	/* The team reference survived the rebuild: a task of no team is refused. */
	exec(h, "PRAGMA foreign_keys = ON");
	CHECK(sqlite3_exec(h, "INSERT INTO tasks (" TASK_MIN ") VALUES ('t-d', 'nobody', "
			      "'queued'" TASK_REST ")",
			   NULL, NULL, NULL) == SQLITE_CONSTRAINT);
	/* The unreleased reservations as the view shows them (migration 11's queries are
	 * checked in their own test). */
	CHECK_INT(one_int(h, "SELECT count(*) FROM reservations WHERE released = 0"), 1);
	/* A team's listing reads each state's newest through tasks_state_team (migration 14). */
	plan_uses(h, "SELECT seq FROM tasks WHERE state = 'queued' AND team = 'alpha' AND "
		     "seq < 100 ORDER BY seq DESC LIMIT 5",
		  "tasks_state_team (state=? AND team=? AND rowid<?)");
	sqlite3_close(h);
}

/* Every task column as versions 10 to 14 have them. */
#define V12_TASKS                                                                           \
	"SELECT " V8_TASK_COLUMNS ", reserved_gpu_memory_mib, reserved_gpu_core_percent, "     \
	"released, released_at, release_reason, release_evidence FROM tasks ORDER BY seq"

/* Migration 13 on version 12: the tasks keep every column of every row and their seqs, and
 * lose the index on id; each is still found by its id, whatever that id encodes (a time and
 * a random part, only a random part, the largest id there can be, or nothing: an id of a
 * hand-made row); the team reference holds; a new task's id encodes its seq, sorts after the
 * others, and never is an older task's id, even where the next seq would give one. */
TEST(store_migration_13_finds_tasks_by_the_seq_their_id_encodes)
{
	const char *db = h_path("v12.db");
	sqlite3 *h = at_version(db, 12);
	exec(h, "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		"  VALUES ('alpha', 1000000, 1000000, 1, 1);"
		"INSERT INTO tasks (seq, " TASK_MIN ", reserved_gpu_memory_mib,"
		"  reserved_gpu_core_percent, released, release_reason) VALUES"
		"  (1, 't-ocvlaaaaaaaa', 'alpha', 'running'" TASK_REST ", 1024, 25, 0, NULL),"
		"  (2, 't-zzzzzzzzzzzz', 'alpha', 'succeeded'" TASK_REST ", 2048, 50, 1, 'ok'),"
		"  (3, 't-22222222222d', 'alpha', 'queued'" TASK_REST ", 1024, 25, 0, NULL),"
		"  (2097152, 't-a', 'alpha', 'queued'" TASK_REST ", 1024, 25, 0, NULL);"
		"INSERT INTO task_events (task_id, ts, type, to_state) VALUES"
		"  ('t-a', 1, 'submitted', 'queued'),"
		"  ('t-ocvlaaaaaaaa', 1, 'submitted', 'queued');");
	char before[4096];
	rows_text(h, V12_TASKS, before, sizeof before);
	sqlite3_close(h);

	struct store *s = open_migrated(db);
	const char *ids[] = { "t-ocvlaaaaaaaa", "t-zzzzzzzzzzzz", "t-22222222222d", "t-a" };
	const int64_t seqs[] = { 1, 2, 3, 2097152 };
	struct task *t = gwb_malloc(sizeof *t);
	t_defer(gwb_free, t);
	for (int i = 0; i < 4; i++) {
		CHECK_INT(store_task_load(s, ids[i], t), 0);
		CHECK_INT(t->seq, seqs[i]);
		CHECK_STR(t->id, ids[i]);
	}
	/* An id that encodes an existing seq but is not that task's finds nothing. */
	char other[16];
	store_task_id_encode(2097152, other);
	CHECK_INT(store_task_load(s, other, t), GWB_ENOTFOUND);
	CHECK_INT(store_task_load(s, "t-b", t), GWB_ENOTFOUND);
	/* Were the third task's id the one of the next seq (the largest plus one, with a clock
	 * at 0 ms leaving the random part below it), that seq would be skipped. */
	CHECK_INT(s->ids.has_legacy, 1);
	int64_t seq = 0;
	char sql[160];
	store_task_id_encode(2097152 + 1, other);
	snprintf(sql, sizeof sql, "UPDATE task_legacy_ids SET id = '%s' WHERE seq = 3", other);
	CHECK_INT(store_batch_begin(s), 0);
	exec(s->db, sql);
	CHECK_INT(store_task_seq_new(s, 0, &seq), 0);
	CHECK_INT(seq, 2097152 + 2);
	store_batch_rollback(s);
	/* A submission: its id encodes its seq, above every other. */
	struct task_req q = { .team = "alpha", .name = "n", .gpu_memory_mib = 1,
			      .gpu_core_percent = 1, .gpu_count = 1, .duration_seconds = 60,
			      .qos = "LS", .experiment = "normal" };
	struct submit_result r;
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", clock_now_ms(), 100000, &r), 0);
	CHECK_INT(store_task_load(s, r.task_id, t), 0);
	CHECK_INT(store_task_id_seq(r.task_id), t->seq);
	CHECK(t->seq > 2097152);
	/* The lookup by id goes by the primary key. */
	char p[1024];
	plan(s->db, "SELECT state FROM tasks WHERE " STORE_SQL_TASK_IS("", ":id"), p, sizeof p);
	CHECKF(strstr(p, "SEARCH tasks USING INTEGER PRIMARY KEY (rowid=?)"), "%s", p);
	plan(s->db, "SELECT e.id FROM task_events e JOIN tasks t ON " STORE_SQL_TASK_IS(
			    "t.", "e.task_id") " WHERE e.id > 0 ORDER BY e.id LIMIT 5",
	     p, sizeof p);
	CHECKF(strstr(p, "SEARCH t USING INTEGER PRIMARY KEY (rowid=?)"), "%s", p);

	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	char after[4096];
	rows_text(h, V12_TASKS " LIMIT 4", after, sizeof after);
	CHECK_STR(after, before);
	/* No index of tasks is on id; the team reference holds. */
	CHECK_INT(one_int(h, "SELECT count(*) FROM pragma_index_list('tasks') WHERE origin = 'u'"),
		  0);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
			     "tbl_name = 'tasks'"),
		  2); /* tasks_state_team, tasks_final_unreleased (14 dropped tasks_team_seq) */
	CHECK_INT(one_int(h, "SELECT count(*) FROM pragma_foreign_key_list('tasks') WHERE "
			     "\"table\" = 'teams'"),
		  1);
	CHECK_INT(one_int(h, "SELECT count(*) FROM task_legacy_ids"), 4);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name LIKE '%_v13'"), 0);
	CHECK_INT(one_int(h, "SELECT count(*) FROM reservations"), 5);
	sqlite3_close(h);
}

/* The store's query of the tasks holding their reservation (STORE_SQL_UNRELEASED) on the
 * file's own connection: its ids in seq order, as text. */
static void unreleased_ids(sqlite3 *h, char *out, size_t len)
{
	sqlite3_stmt *st = NULL;
	const char *sql = "SELECT id FROM tasks WHERE seq IN (" STORE_SQL_UNRELEASED("seq", 1) ") "
			  "ORDER BY seq";
	CHECKF(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s", sqlite3_errmsg(h));
	store_bind_states(st, 1, TASK_HOLDS_QUOTA, TASK_FINAL);
	out[0] = '\0';
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t n = strlen(out);
		snprintf(out + n, len - n, "%s ", (const char *)sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
}

TEST(store_migration_11_indexes_only_the_final_tasks_holding_quota)
{
	/* The one hand-written list of states is the lifecycle table's final states, and every
	 * other state is active (store_tasks_active relies on it) but waiting, which holds
	 * nothing and is no Job's. */
	char json[256], want[256] = "(";
	task_states_json(TASK_FINAL, 0, json, sizeof json);
	for (const char *p = json; *p; p++) {
		size_t n = strlen(want);
		if (*p == '"')
			snprintf(want + n, sizeof want - n, "%s", p[-1] == '[' || p[-1] == ',' ?
									"state = '" : "'");
		else if (*p == ',')
			snprintf(want + n, sizeof want - n, " OR ");
		else if (*p != '[' && *p != ']')
			snprintf(want + n, sizeof want - n, "%c", *p);
	}
	size_t wn = strlen(want);
	snprintf(want + wn, sizeof want - wn, ")");
	CHECK_STR(STORE_SQL_FINAL, want);
	for (int st = 0; st < TASK_NSTATES; st++)
		CHECKF(task_state_is(st, TASK_FINAL) || task_state_is(st, TASK_ACTIVE) ||
			       (st == TASK_WAITING && !task_state_is(st, TASK_HOLDS_QUOTA)),
		       "%s", task_state_name(st));

	const char *db = h_path("v10.db");
	sqlite3 *h = at_version(db, 10);
	/* Every state, each released and not (a task not final is never released, but the
	 * query must not count on it). */
	exec(h, "INSERT INTO teams (name, quota_mem_mib, quota_core_pct, created_at, updated_at)"
		"  VALUES ('alpha', 10, 10, 1, 1), ('beta', 10, 10, 1, 1)");
	int seq = 0;
	for (int st = 0; st < TASK_NSTATES; st++) {
		for (int rel = 0; rel < 2; rel++) {
			char sql[512];
			seq++;
			snprintf(sql, sizeof sql,
				 "INSERT INTO tasks (seq, " TASK_MIN ", reserved_gpu_memory_mib, "
				 "reserved_gpu_core_percent, released) VALUES (%d, 't-%02d', '%s', "
				 "'%s'" TASK_REST ", 1, 1, %d)",
				 seq, seq, seq % 3 ? "alpha" : "beta", task_state_name(st), rel);
			exec(h, sql);
		}
	}
	sqlite3_close(h);
	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, db, 10000, err, sizeof err) == 0, "store_open: %s", err);
	store_close(s);

	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name = 'tasks_unreleased'"),
		  0);
	char got[512], all[512];
	unreleased_ids(h, got, sizeof got);
	all[0] = '\0';
	sqlite3_stmt *st = NULL;
	CHECK(sqlite3_prepare_v2(h, "SELECT id FROM tasks WHERE released = 0 AND state <> 'waiting' "
				    "ORDER BY seq", -1, &st, NULL) == SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		size_t n = strlen(all);
		snprintf(all + n, sizeof all - n, "%s ", (const char *)sqlite3_column_text(st, 0));
	}
	sqlite3_finalize(st);
	CHECK_STR(got, all);
	CHECK(strlen(all) > 0);
	/* Each half through its index; none scans the history. */
	char p[1024];
	plan(h, "SELECT id FROM tasks WHERE seq IN (" STORE_SQL_UNRELEASED("seq", 1) ")", p,
	     sizeof p);
	CHECKF(strstr(p, "tasks_state_team") && strstr(p, "tasks_final_unreleased"), "%s", p);
	CHECKF(strstr(p, "SCAN tasks; ") == NULL, "%s", p);
	plan(h, "SELECT team, SUM(m) FROM (" STORE_SQL_UNRELEASED("team, reserved_gpu_memory_mib "
								  "AS m", 1) ") GROUP BY team",
	     p, sizeof p);
	CHECKF(strstr(p, "tasks_state_team") && strstr(p, "tasks_final_unreleased"), "%s", p);
	/* A new task is in no partial index; it enters this one when it ends unreleased. */
	CHECK_INT(one_int(h, "SELECT count(*) FROM tasks INDEXED BY tasks_final_unreleased WHERE "
			     STORE_SQL_FINAL " AND released = 0"),
		  3);
	sqlite3_close(h);
}

/* A version-8 file with a task of a team it does not hold: the migrations would carry the
 * broken reference over, so the store refuses to open it, and the file stays at 8. */
TEST(store_migration_with_a_broken_reference_is_not_committed)
{
	const char *db = h_path("broken.db");
	sqlite3 *h = at_version(db, 8);
	exec(h, "INSERT INTO tasks (" TASK_MIN ") VALUES ('t-a', 'ghost', 'queued'" TASK_REST ")");
	sqlite3_close(h);
	struct store *s = NULL;
	char err[256];
	CHECK_INT(store_open(&s, db, 10000, err, sizeof err), GWB_EDB);
	CHECKF(strstr(err, "tasks") && strstr(err, "teams"), "%s", err);
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	CHECK_INT(one_int(h, "PRAGMA user_version"), 8);
	CHECK_INT(one_int(h, "SELECT count(*) FROM sqlite_master WHERE name = 'reservations' "
			     "AND type = 'table'"),
		  1);
	sqlite3_close(h);
}

/* A new file gets the store's page size (2 KiB, against SQLite's 4 KiB); a file made with
 * other pages keeps them and is migrated and used as before. */
TEST(store_new_file_has_small_pages_an_old_one_keeps_its_own)
{
	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, h_path("new.db"), 1000, err, sizeof err) == 0, "%s", err);
	store_close(s);
	sqlite3 *h;
	CHECK(sqlite3_open(h_path("new.db"), &h) == SQLITE_OK);
	CHECK(one_int(h, "PRAGMA page_size") == 2048);
	sqlite3_close(h);

	const char *old = h_path("old.db");
	CHECK(sqlite3_open(old, &h) == SQLITE_OK);
	exec(h, "PRAGMA page_size = 4096");
	sqlite3_close(h);
	h = at_version(old, 3);
	sqlite3_close(h);
	CHECKF(store_open(&s, old, 1000, err, sizeof err) == 0, "%s", err);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1000, 100, NULL, 1, &created), 0);
	struct task_req q = {"alpha", "one", 16, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	CHECK(sqlite3_open(old, &h) == SQLITE_OK);
	CHECK(one_int(h, "PRAGMA page_size") == 4096);
	CHECK(one_int(h, "SELECT count(*) FROM tasks") == 1);
	sqlite3_close(h);
}
