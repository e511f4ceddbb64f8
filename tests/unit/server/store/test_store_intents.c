/* The store's count of failed intent attempts (migration 4): per intent, one more per call,
 * kept across a reopen (a restart), apart from the intent's outcome and its deliveries. What
 * the relay is handed (migration 15): new tasks as their own create intents after the
 * outbox's rows, the intent cursor, and intent ids that are never shared. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "queue/codec.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN; /* migrations log at info on every fresh file */
}

static struct store *open_store(const char *path)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open(&s, path, 10000, err, sizeof err);
	CHECKF(rc == 0, "store_open: %s", err);
	return s;
}

TEST(store_intent_failures_counted_per_intent_across_reopen)
{
	const char *db = h_path("failures.db");
	struct store *s = open_store(db);
	CHECK(store_schema_latest() >= 4);
	struct intent_rx a = { 7, "create", "t-a", "1-1", "me", 1 };
	struct intent_rx b = { 8, "cancel", "t-b", "1-2", "me", 9 };
	int64_t n = -1;
	CHECK_INT(store_intent_failure_add(s, &a, "EBUSY", 1000, &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(store_intent_failure_add(s, &a, "EDB", 2000, &n), 0);
	CHECK_INT(n, 2);
	/* Another intent has its own count, whatever its deliveries. */
	CHECK_INT(store_intent_failure_add(s, &b, "EDB", 2000, &n), 0);
	CHECK_INT(n, 1);
	/* A failure count is not an outcome: the intent is still to be handled. */
	CHECK_INT(store_intent_outcome_exists(s, 7), 0);
	store_close(s);
	s = open_store(db);
	CHECK_INT(store_intent_failure_add(s, &a, "EDB", 3000, &n), 0);
	CHECK_INT(n, 3);
	store_close(s);
}

static void close_store(void *arg)
{
	store_close(arg);
}

/* The relay's read: ids of the intents it is given now, and their kinds ("c" create, "x"
 * cancel), each as text. */
static int relay_read(struct store *s, int64_t *ids, char *kinds, int max)
{
	struct q_intent in[16];
	int n = store_outbox_unpublished(s, in, max < 16 ? max : 16);
	CHECK(n >= 0);
	for (int i = 0; i < n; i++) {
		ids[i] = in[i].id;
		kinds[i] = in[i].kind[1] == 'r' ? 'c' : 'x';
		CHECK(in[i].attempt >= 1);
	}
	kinds[n] = '\0';
	return n;
}

/* A store on db, closed at the case's end, with team alpha. */
static struct store *alpha_store(const char *db)
{
	struct store *s = open_store(db);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1000, 1000, NULL, 1, &created), 0);
	return s;
}

static int64_t unpublished_count(struct store *s)
{
	int64_t n = -1;
	CHECK_INT(store_outbox_unpublished_count(s, &n), 0);
	return n;
}

/* A new task is its own create intent, its seq the intent's id, read after the outbox's rows;
 * a publication moves the intent cursor over the creates published from the first on, and a
 * create published past one that was not is handed out again with it. */
TEST(store_intents_new_tasks_are_create_intents_the_cursor_moves_over_published_ones)
{
	const char *db = h_path("creates.db");
	struct store *s = alpha_store(db);
	struct task_req q = {"alpha", "c", 1, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	int64_t seq[3];
	for (int i = 0; i < 3; i++) {
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1000 + i, 100000, &res), 0);
		seq[i] = store_task_id_seq(res.task_id);
	}
	enum task_state st;
	int changed = 0;
	CHECK_INT(store_task_cancel(s, res.task_id, 2000, &st, &changed), 0);
	CHECK_INT(changed, 1);
	CHECK_INT(unpublished_count(s), 4);
	int64_t ids[16];
	char kinds[17];
	CHECK_INT(relay_read(s, ids, kinds, 16), 4);
	CHECK_STR(kinds, "xccc"); /* the cancel's outbox row first */
	CHECK_INT(h_sql_int(db, "SELECT attempt FROM outbox WHERE kind = 'cancel'"), 1);
	/* Its attempt counts the task's earlier cancels through the events' index, not by a scan
	 * of the outbox. */
	sqlite3 *h = NULL;
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	sqlite3_stmt *pl = NULL;
	CHECK(sqlite3_prepare_v2(h, "EXPLAIN QUERY PLAN SELECT " STORE_SQL_CANCELS_BEFORE, -1, &pl,
				 NULL) == SQLITE_OK);
	char plan[512] = "";
	while (sqlite3_step(pl) == SQLITE_ROW)
		snprintf(plan + strlen(plan), sizeof plan - strlen(plan), "%s; ",
			 (const char *)sqlite3_column_text(pl, 3));
	sqlite3_finalize(pl);
	sqlite3_close(h);
	CHECKF(strstr(plan, "SEARCH task_events USING INDEX task_events_task (task_id=?)") != NULL,
	       "%s", plan);
	int64_t cancel = ids[0];
	for (int i = 0; i < 3; i++)
		CHECK_INT(ids[1 + i], seq[i]);
	/* Published: the cancel and the last two creates, not the first. */
	const char sids[4][48] = {"1-0", "2-0", "3-0", "4-0"};
	int64_t pub[3] = {cancel, seq[1], seq[2]};
	CHECK_INT(store_outbox_published(s, pub, sids, 3, 3000), 0);
	CHECK_INT(unpublished_count(s), 3);
	CHECK_INT(h_sql_int(db, "SELECT create_seq < (SELECT MIN(seq) FROM tasks) FROM "
				"intent_cursor"),
		  1);
	CHECK_INT(relay_read(s, ids, kinds, 16), 3);
	CHECK_STR(kinds, "ccc");
	CHECK_INT(ids[0], seq[0]);
	/* All three now, the first only once the others are: the cursor moves over the three. */
	pub[0] = seq[0], pub[1] = seq[1], pub[2] = seq[2];
	CHECK_INT(store_outbox_published(s, pub, sids, 3, 3000), 0);
	CHECK_INT(unpublished_count(s), 0);
	CHECK_INT(relay_read(s, ids, kinds, 16), 0);
	char sql[128];
	snprintf(sql, sizeof sql, "SELECT create_seq = %lld FROM intent_cursor", (long long)seq[2]);
	CHECK_INT(h_sql_int(db, sql), 1);
	/* A read cut at max hands out the first creates; publishing them moves the cursor. */
	for (int i = 0; i < 3; i++)
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 4000 + i, 100000, &res), 0);
	CHECK_INT(relay_read(s, ids, kinds, 2), 2);
	CHECK_INT(store_outbox_published(s, ids, sids, 2, 5000), 0);
	CHECK_INT(unpublished_count(s), 1);
	CHECK_INT(relay_read(s, ids, kinds, 16), 1);
	CHECK_INT(ids[0], store_task_id_seq(res.task_id));
	/* A store opened on the file reads the cursor and counts what is above it. */
	struct store *s2 = open_store(db);
	t_defer(close_store, s2);
	CHECK_INT(unpublished_count(s2), 1);
	CHECK_INT(relay_read(s2, ids, kinds, 16), 1);
	CHECK_INT(ids[0], store_task_id_seq(res.task_id));
}

/* No two intents share an id, whatever the clock gives: a new task's seq (its create's id)
 * and a cancel's outbox id are drawn above every seq and outbox id there is, in a batch too,
 * where new tasks are inserted after every decision. A clock at 1 ms makes seqs small (about
 * 2^20), below an outbox id of the file's past (5,000,000 here). */
TEST(store_intents_never_share_an_id_between_cancels_and_creates)
{
	const char *db = h_path("ids.db");
	store_close(open_store(db));
	sqlite3 *h = NULL;
	CHECK(sqlite3_open(db, &h) == SQLITE_OK);
	CHECK(sqlite3_exec(h, "INSERT INTO outbox (id, task_id, team, kind, attempt, created_at, "
			      "published_at, stream_id) VALUES (5000000, 't-old', 'alpha', "
			      "'create', 1, 1, 1, '1-0')",
			   NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(h);
	struct store *s = alpha_store(db);
	struct task_req q = {"alpha", "i", 1, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	enum task_state st;
	int changed;
	for (int round = 0; round < 3; round++) {
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1, 100000, &res), 0);
		CHECK_INT(store_task_cancel(s, res.task_id, 1, &st, &changed), 0);
		CHECK_INT(changed, 1);
	}
	/* One optimistic batch: two new tasks around a cancel of an earlier one. */
	struct task *rows[2];
	for (int i = 0; i < 2; i++) {
		rows[i] = gwb_malloc(sizeof *rows[i]);
		t_defer(gwb_free, rows[i]);
	}
	char earlier[32];
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1, 100000, &res), 0);
	snprintf(earlier, sizeof earlier, "%s", res.task_id);
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit_row(s, &q, NULL, "fp", 1, 100000, &res, rows[0]), 0);
	CHECK_INT(store_task_cancel(s, earlier, 1, &st, &changed), 0);
	CHECK_INT(store_task_submit_row(s, &q, NULL, "fp", 1, 100000, &res, rows[1]), 0);
	CHECK_INT(store_batch_write(s), 0);
	CHECK_INT(store_batch_spoiled(s), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM tasks"), 6);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM outbox"), 5);
	CHECK_INT(h_sql_int(db, "SELECT MIN(seq) > 5000000 FROM tasks"), 1);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM (SELECT seq FROM tasks UNION SELECT id FROM "
				"outbox)"),
		  11);
	/* And the relay hands out ten intents with ten ids. */
	int64_t ids[16];
	char kinds[17];
	CHECK_INT(relay_read(s, ids, kinds, 16), 10);
	CHECK_STR(kinds, "xxxxcccccc");
	for (int i = 0; i < 10; i++)
		for (int j = 0; j < i; j++)
			CHECKF(ids[i] != ids[j], "intent id %lld twice", (long long)ids[i]);
}
