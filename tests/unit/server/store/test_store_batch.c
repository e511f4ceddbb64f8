/* The store's group commit against a real SQLite file: savepoints that undo only their own
 * decision, later decisions that see earlier ones, nothing visible to another connection
 * before the batch's COMMIT, a rolled-back batch that leaves nothing, the counters kept in
 * memory equal to a count over the table, and checkpoints that empty the WAL; an optimistic
 * batch (no savepoints) that refusals leave whole and an undone write spoils; the row a
 * submission hands back equal to the row read back; a team's reservations written once per
 * batch, exact across teams and changes to the team's row; an optimistic batch's new tasks
 * inserted together, in chunks, as the rows handed back, and a taken seq that spoils it. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
#include "server/store/store_recon.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

static struct store *open_store(const char *path, int busy_ms)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open_ex(&s, path, 10000, busy_ms, 1 << 20, err, sizeof err);
	CHECKF(rc == 0, "store_open_ex: %s", err);
	return s;
}

static void close_store(void *arg)
{
	store_close(arg);
}

static struct task_req req_of(const char *team, int64_t mem)
{
	struct task_req q = { team, "t", mem, 10, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	return q;
}

static int64_t reserved_mem(struct store *s, const char *team)
{
	json_t *t = store_team_json(s, team);
	CHECK(t != NULL);
	int64_t v = json_integer_value(
		json_object_get(json_object_get(t, "reserved"), "gpu_memory_mib"));
	json_decref(t);
	return v;
}

/* The counters kept in memory equal a count over the table. */
static void check_counts(struct store *s)
{
	int64_t mem[TASK_NSTATES], table[TASK_NSTATES];
	store_task_counts(s, mem);
	CHECK_INT(store_task_state_counts(s, table), 0);
	for (int i = 0; i < TASK_NSTATES; i++)
		CHECKF(mem[i] == table[i], "%s: %lld in memory, %lld in the table",
		       task_state_name((enum task_state)i), (long long)mem[i],
		       (long long)table[i]);
}

static int64_t tasks_seen_by(struct store *other)
{
	int64_t c[TASK_NSTATES], n = 0;
	CHECK_INT(store_task_state_counts(other, c), 0);
	for (int i = 0; i < TASK_NSTATES; i++)
		n += c[i];
	return n;
}

TEST(store_batch_savepoints_undo_only_their_own_decision)
{
	const char *db = h_path("b.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	struct store *other = open_store(db, 0);
	t_defer(close_store, other);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 3072, 1000, NULL, 1, &created), 0);
	struct submit_result a, b, c, d, e;
	struct task_req one = req_of("alpha", 1024), big = req_of("alpha", 8192);
	struct task_req other_params = req_of("alpha", 2048), nobody = req_of("nobody", 1);

	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_submit(s, &one, "k1", "fp1", 10, 100000, &a), 0);
	CHECK_INT(store_task_submit(s, &big, NULL, "fp2", 10, 100000, &b), GWB_EQUOTA);
	/* The refusal saw the first decision's reservation. */
	CHECK_INT(b.reserved_mem, 1024);
	CHECK_INT(store_task_submit(s, &one, "k1", "fp1", 10, 100000, &c), 0);
	CHECK(c.replayed);
	CHECK_STR(c.task_id, a.task_id);
	CHECK_INT(store_task_submit(s, &other_params, "k1", "fp3", 10, 100000, &d),
		  GWB_ECONFLICT);
	CHECK_INT(store_task_submit(s, &nobody, NULL, "fp4", 10, 100000, &e), GWB_ENOTFOUND);
	CHECK_INT(store_task_submit(s, &one, NULL, "fp1", 10, 100000, &e), 0);
	enum task_state st;
	int changed = 0;
	CHECK_INT(store_task_cancel(s, e.task_id, 11, &st, &changed), 0);
	CHECK(changed);
	CHECK_INT(st, TASK_CANCELLING);
	CHECK_INT(store_task_note(s, a.task_id, "note", NULL, 12), 0);
	/* Nothing is visible to another connection before the COMMIT. */
	CHECK_INT(tasks_seen_by(other), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(tasks_seen_by(other), 2);
	CHECK_INT(reserved_mem(other, "alpha"), 2048);
	check_counts(s);
	int64_t counts[TASK_NSTATES];
	store_task_counts(s, counts);
	CHECK_INT(counts[TASK_QUEUED], 1);
	CHECK_INT(counts[TASK_CANCELLING], 1);
}

TEST(store_batch_rolled_back_leaves_nothing)
{
	const char *db = h_path("r.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 4096, 1000, NULL, 1, &created), 0);
	struct task_req one = req_of("alpha", 1024);
	struct submit_result a;
	CHECK_INT(store_task_submit(s, &one, NULL, "fp", 1, 100000, &a), 0);
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_submit(s, &one, "k", "fp", 2, 100000, &a), 0);
	enum task_state st;
	int changed = 0;
	CHECK_INT(store_task_cancel(s, a.task_id, 3, &st, &changed), 0);
	store_batch_rollback(s);
	CHECK_INT(reserved_mem(s, "alpha"), 1024);
	CHECK_INT(tasks_seen_by(s), 1);
	check_counts(s);
	/* The key was not consumed: the same submission creates now. */
	CHECK_INT(store_task_submit(s, &one, "k", "fp", 4, 100000, &a), 0);
	CHECK(!a.replayed);
	check_counts(s);
}

TEST(store_batch_busy_at_once_when_another_connection_writes)
{
	const char *db = h_path("l.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	struct store *holder = open_store(db, 0);
	t_defer(close_store, holder);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 4096, 1000, NULL, 1, &created), 0);
	CHECK_INT(store_batch_begin(holder), 0); /* holds the write lock */
	CHECK_INT(store_batch_begin(s), GWB_EBUSY);
	struct task_req one = req_of("alpha", 1024);
	struct submit_result a;
	CHECK_INT(store_task_submit(s, &one, NULL, "fp", 1, 100000, &a), GWB_EBUSY);
	store_batch_rollback(holder);
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_submit(s, &one, NULL, "fp", 1, 100000, &a), 0);
	CHECK_INT(store_batch_commit(s), 0);
	check_counts(s);
}

TEST(store_checkpoint_truncate_empties_the_wal)
{
	const char *db = h_path("w.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 100000, NULL, 1, &created), 0);
	struct task_req one = req_of("alpha", 1);
	struct submit_result a;
	CHECK_INT(store_batch_begin(s), 0);
	for (int i = 0; i < 50; i++)
		CHECK_INT(store_task_submit(s, &one, NULL, "fp", 1, 100000, &a), 0);
	CHECK_INT(store_batch_commit(s), 0);
	struct store_wal_stats w;
	store_wal_stats(s, &w);
	CHECK(w.wal_bytes > 0);
	CHECK_INT(store_checkpoint(s, 1), 0);
	store_wal_stats(s, &w);
	CHECK_INT(w.wal_bytes, 0);
	CHECK_INT(w.checkpoints, 1);
	check_counts(s);
}

/* Compares every column of two task rows (TASK_COLUMNS), naming the first that differs. */
#define ROW_SAME_TEXT(a, b, f) CHECKF(strcmp((a)->f, (b)->f) == 0, #f ": %s / %s", (a)->f, (b)->f);
#define ROW_SAME_INT(a, b, f) CHECKF((a)->f == (b)->f, #f ": %lld / %lld", (long long)(a)->f, \
				     (long long)(b)->f);
#define ROW_SAME_BOOL(a, b, f) CHECK_INT((a)->f, (b)->f);
#define ROW_SAME_OPT(a, b, f)                                     \
	CHECK_INT((a)->has_##f, (b)->has_##f);                    \
	if ((a)->has_##f)                                         \
		CHECK_INT((long long)(a)->f, (long long)(b)->f);
#define ROW_SAME_STATE(a, b, f) CHECK_INT((a)->f, (b)->f);
#define ROW_SAME(kind, f, tbl, col, size, role) ROW_SAME_##kind(a, b, f)

static void rows_same(const struct task *a, const struct task *b)
{
	TASK_COLUMNS(ROW_SAME)
	CHECK_INT(a->loaded_state, b->loaded_state);
}

/* The row a submission hands back is the row a read of the same task gives, inside the batch
 * and after its COMMIT, with and without a key. A replay leaves it alone. Both start as
 * garbage: neither the new row (task_clear) nor a read writes a task's 12 KiB whole, and no
 * field may be left as it was. */
TEST(store_batch_submit_row_equals_the_row_read_back)
{
	const char *db = h_path("row.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 100000, NULL, 1, &created), 0);
	struct task_req big = { "alpha", "n\xc3\xa9", 512, 33, 4, 86400, "BE", "overlimit",
				NULL, STORE_ON_FULL_DEFAULT };
	struct task_req one = req_of("alpha", 1);
	struct task *row = gwb_malloc(sizeof *row), *back = gwb_malloc(sizeof *back);
	t_defer(gwb_free, row);
	t_defer(gwb_free, back);
	memset(row, 0xa5, sizeof *row);
	memset(back, 0x5a, sizeof *back);
	struct submit_result r;
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_submit_row(s, &big, "key-1", "fp", 1234567, 100000, &r, row), 0);
	CHECK_INT(r.replayed, 0);
	CHECK_INT(store_task_load(s, r.task_id, back), 0);
	rows_same(row, back);
	CHECK_INT((long long)row->reserved_mem_mib, 512 * 4);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(store_task_load(s, r.task_id, back), 0);
	rows_same(row, back);
	/* Outside a batch, without a key. */
	CHECK_INT(store_task_submit_row(s, &one, NULL, "fp", 2000, 100000, &r, row), 0);
	CHECK_INT(store_task_load(s, r.task_id, back), 0);
	rows_same(row, back);
	CHECK_STR(row->idempotency_key, "");
}

/* An optimistic batch (no SAVEPOINT per decision) decides as a batch with savepoints does:
 * refusals, replays and conflicts write nothing, so none spoils it; later decisions see the
 * earlier ones; nothing shows before the COMMIT. */
TEST(store_batch_optimistic_refusals_need_no_undo)
{
	const char *db = h_path("o.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	struct store *other = open_store(db, 0);
	t_defer(close_store, other);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 3072, 1000, NULL, 1, &created), 0);
	struct submit_result a, b, c, d, e;
	struct task_req one = req_of("alpha", 1024), big = req_of("alpha", 8192);
	struct task_req other_params = req_of("alpha", 2048), nobody = req_of("nobody", 1);
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit(s, &one, "k1", "fp1", 10, 100000, &a), 0);
	CHECK_INT(store_task_submit(s, &big, NULL, "fp2", 10, 100000, &b), GWB_EQUOTA);
	CHECK_INT(b.reserved_mem, 1024);
	CHECK_INT(store_task_submit(s, &one, "k1", "fp1", 10, 100000, &c), 0);
	CHECK(c.replayed);
	CHECK_STR(c.task_id, a.task_id);
	CHECK_INT(store_task_submit(s, &other_params, "k1", "fp3", 10, 100000, &d),
		  GWB_ECONFLICT);
	CHECK_INT(store_task_submit(s, &nobody, NULL, "fp4", 10, 100000, &e), GWB_ENOTFOUND);
	CHECK_INT(store_task_submit(s, &one, NULL, "fp1", 10, 100000, &e), 0);
	enum task_state st;
	int changed = 0;
	CHECK_INT(store_task_cancel(s, e.task_id, 11, &st, &changed), 0);
	CHECK(changed);
	CHECK_INT(store_task_cancel(s, e.task_id, 12, &st, &changed), 0); /* a repeat */
	CHECK(!changed);
	CHECK_INT(store_batch_spoiled(s), 0);
	CHECK_INT(tasks_seen_by(other), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(tasks_seen_by(other), 2);
	CHECK_INT(reserved_mem(other, "alpha"), 2048);
	check_counts(s);
}

/* A decision that wrote and then has to be undone (here: it deleted an expired key, then the
 * quota refused it) spoils an optimistic batch; decided again with savepoints, it alone is
 * undone: the others commit, the expired key row is still there. */
TEST(store_batch_optimistic_spoiled_then_decided_with_savepoints)
{
	const char *db = h_path("sp.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 3072, 1000, NULL, 1, &created), 0);
	struct task_req one = req_of("alpha", 1024), big = req_of("alpha", 8192);
	struct submit_result a, b, c;
	CHECK_INT(store_task_submit(s, &one, "old", "fp", 10, 5, &a), 0); /* expires at 15 */
	for (int round = 0; round < 2; round++) {
		int optimistic = round == 0;
		CHECK_INT(optimistic ? store_batch_begin_optimistic(s) : store_batch_begin(s), 0);
		CHECK_INT(store_task_submit(s, &one, NULL, "fp", 100, 100000, &b), 0);
		CHECK_INT(store_task_submit(s, &big, "old", "fp2", 100, 100000, &c), GWB_EQUOTA);
		CHECK_INT(store_task_submit(s, &one, NULL, "fp", 100, 100000, &c), 0);
		CHECK_INT(store_batch_spoiled(s), optimistic);
		if (optimistic)
			store_batch_rollback(s);
	}
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(tasks_seen_by(s), 3);
	CHECK_INT(reserved_mem(s, "alpha"), 3072);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM idempotency_keys WHERE key = 'old'"), 1);
	check_counts(s);
}

/* An optimistic batch's new tasks are inserted together by store_batch_write (40: a chunk of
 * 32 and one of 8): each as the row its decision handed back, with its submitted event (the
 * key in its detail), seqs growing in the order decided, each the seq its id encodes; a
 * refusal among them leaves no row. Each new task is its own create intent, above the intent
 * cursor, with no outbox row. */
TEST(store_batch_optimistic_writes_its_new_tasks_together)
{
	const char *db = h_path("w.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 40 * 1024, 100000, NULL, 1, &created), 0);
	enum { N = 40 };
	struct task *rows[N], *back = gwb_malloc(sizeof *back);
	t_defer(gwb_free, back);
	struct task_req one = req_of("alpha", 1024), big = req_of("alpha", 1 << 20);
	struct submit_result r;
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	for (int i = 0; i < N; i++) {
		rows[i] = gwb_malloc(sizeof *rows[i]);
		t_defer(gwb_free, rows[i]);
		char key[16];
		snprintf(key, sizeof key, "k%d", i);
		CHECK_INT(store_task_submit_row(s, &one, i % 3 ? NULL : key, "fp", 100 + i, 100000,
						&r, rows[i]),
			  0);
		if (i == N / 2)
			CHECK_INT(store_task_submit_row(s, &big, NULL, "fp", 100, 100000, &r, back),
				  GWB_EQUOTA);
	}
	/* Not in the table before the write. */
	CHECK_INT(store_task_load(s, rows[0]->id, back), GWB_ENOTFOUND);
	CHECK_INT(store_batch_write(s), 0);
	CHECK_INT(store_batch_spoiled(s), 0);
	for (int i = 0; i < N; i++) {
		CHECK_INT(store_task_load(s, rows[i]->id, back), 0);
		rows_same(rows[i], back);
		CHECK_INT(store_task_id_seq(rows[i]->id), rows[i]->seq);
		if (i)
			CHECKF(rows[i]->seq > rows[i - 1]->seq, "seq %lld after %lld",
			       (long long)rows[i]->seq, (long long)rows[i - 1]->seq);
	}
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM tasks"), N);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM tasks WHERE seq > (SELECT create_seq FROM "
				"intent_cursor)"),
		  N);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM outbox"), 0);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM task_events e JOIN tasks t ON t.id = "
				"e.task_id AND e.type = 'submitted' AND e.to_state = 'queued' AND "
				"e.from_state IS NULL AND e.ts = t.created_at"),
		  N);
	char sql[256];
	snprintf(sql, sizeof sql,
		 "SELECT count(*) FROM task_events WHERE task_id = '%s' AND detail = "
		 "'{\"idempotency_key\":\"k3\",\"reserved_gpu_core_percent\":10,"
		 "\"reserved_gpu_memory_mib\":1024}'",
		 rows[3]->id);
	CHECK_INT(h_sql_int(db, sql), 1);
	snprintf(sql, sizeof sql,
		 "SELECT count(*) FROM task_events WHERE task_id = '%s' AND detail = "
		 "'{\"reserved_gpu_core_percent\":10,\"reserved_gpu_memory_mib\":1024}'",
		 rows[4]->id);
	CHECK_INT(h_sql_int(db, sql), 1);
	CHECK_INT(reserved_mem(s, "alpha"), N * 1024);
	/* Rows its caller did not write are written by the COMMIT. */
	CHECK_INT(store_team_put(s, "alpha", (N + 2) * 1024, 100000, NULL, 1, &created), 0);
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit_row(s, &one, NULL, "fp", 500, 100000, &r, rows[0]), 0);
	CHECK_INT(store_task_submit_row(s, &one, NULL, "fp", 500, 100000, &r, rows[1]), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM tasks"), N + 2);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM tasks WHERE seq > (SELECT create_seq FROM "
				"intent_cursor)"),
		  N + 2);
	CHECK_INT(store_task_load(s, rows[1]->id, back), 0);
	rows_same(rows[1], back);
	check_counts(s);
}

/* A new task whose seq (and so its id) turns out taken when the batch writes its rows spoils
 * the batch (only another writer of the file could have taken it): run again with
 * savepoints, each insert runs at once and draws another seq, above the other writer's. */
TEST(store_batch_write_of_a_taken_seq_spoils_the_batch)
{
	const char *db = h_path("id.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 100000, NULL, 1, &created), 0);
	struct task *rows[3];
	for (int i = 0; i < 3; i++) {
		rows[i] = gwb_malloc(sizeof *rows[i]);
		t_defer(gwb_free, rows[i]);
	}
	struct task_req one = req_of("alpha", 1024);
	struct submit_result r;
	for (int round = 0; round < 2; round++) {
		int optimistic = round == 0;
		CHECK_INT(optimistic ? store_batch_begin_optimistic(s) : store_batch_begin(s), 0);
		for (int i = 0; i < 3; i++)
			CHECK_INT(store_task_submit_row(s, &one, NULL, "fp", 100, 100000, &r, rows[i]),
				  0);
		if (optimistic) {
			/* Another task took the second one's seq and id meanwhile. */
			char sql[512];
			snprintf(sql, sizeof sql,
				 "INSERT INTO tasks (seq, id, team, state, name, gpu_memory_mib, "
				 "gpu_core_percent, gpu_count, duration_seconds, qos, experiment, "
				 "job_name, created_at, updated_at) VALUES (%lld, '%s', 'alpha', "
				 "'failed', 'x', 1, 1, 1, 60, 'LS', 'normal', 'j', 1, 1)",
				 (long long)rows[1]->seq, rows[1]->id);
			CHECK(sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK);
		}
		CHECK_INT(store_batch_write(s), 0);
		CHECK_INT(store_batch_spoiled(s), optimistic);
		if (optimistic)
			store_batch_rollback(s);
	}
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM tasks"), 3);
	CHECK_INT(h_sql_int(db, "SELECT count(*) FROM outbox"), 0);
	CHECK_INT(reserved_mem(s, "alpha"), 3 * 1024);
	check_counts(s);
}

/* A batch writes its team's row once, at its commit: decisions still see every earlier one of
 * the batch, for each team in turn, and a change another statement makes to the team's row
 * inside the batch (its quota here) is read again by the next decision. */
TEST(store_batch_team_totals_exact_across_teams_and_row_changes)
{
	const char *db = h_path("t.db");
	struct store *s = open_store(db, 0);
	t_defer(close_store, s);
	struct store *other = open_store(db, 0);
	t_defer(close_store, other);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 4096, 1000, NULL, 1, &created), 0);
	CHECK_INT(store_team_put(s, "beta", 1024, 1000, NULL, 1, &created), 0);
	struct task_req a = req_of("alpha", 1024), b = req_of("beta", 1024);
	struct submit_result r;

	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit(s, &a, NULL, "fp", 10, 100000, &r), 0);
	CHECK_INT(store_task_submit(s, &b, NULL, "fp", 10, 100000, &r), 0);
	CHECK_INT(store_task_submit(s, &b, NULL, "fp", 10, 100000, &r), GWB_EQUOTA);
	CHECK_INT(r.reserved_mem, 1024);
	CHECK_INT(store_task_submit(s, &a, NULL, "fp", 10, 100000, &r), 0);
	CHECK_INT(r.reserved_mem, 1024); /* before this one: the first alpha task */
	/* Moving from alpha to beta wrote alpha's first reservation: nothing of it is seen
	 * outside before the COMMIT either. */
	CHECK_INT(reserved_mem(other, "alpha"), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(reserved_mem(other, "alpha"), 2048);
	CHECK_INT(reserved_mem(other, "beta"), 1024);

	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit(s, &a, NULL, "fp", 10, 100000, &r), 0);
	CHECK_INT(r.reserved_mem, 2048);
	/* The quota drops from 4096 to what is reserved now (3072) inside the batch: the next
	 * alpha decision reads the row again and is refused. */
	CHECK_INT(store_team_put(s, "alpha", 3072, 1000, NULL, 0, &created), 0);
	CHECK_INT(store_task_submit(s, &a, NULL, "fp", 10, 100000, &r), GWB_EQUOTA);
	CHECK_INT(r.quota_mem, 3072);
	CHECK_INT(r.reserved_mem, 3072);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(reserved_mem(other, "alpha"), 3072);

	/* A batch rolled back leaves the row as it was, and the next batch starts afresh. */
	CHECK_INT(store_team_put(s, "gamma", 1024, 1000, NULL, 1, &created), 0);
	struct task_req g = req_of("gamma", 1024);
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit(s, &g, NULL, "fp", 10, 100000, &r), 0);
	store_batch_rollback(s);
	CHECK_INT(reserved_mem(other, "gamma"), 0);
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	CHECK_INT(store_task_submit(s, &g, NULL, "fp", 10, 100000, &r), 0);
	CHECK_INT(r.reserved_mem, 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(reserved_mem(other, "gamma"), 1024);
	check_counts(s);
}
