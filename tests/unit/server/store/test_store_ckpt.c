/* The checkpoint thread against a real SQLite file: a checkpoint it runs puts the committed
 * frames into the database file itself (read back from a copy of that file alone), the
 * caller's commits go on while it runs, a second request waits for the first, the WAL
 * starts over after one that copied everything, it is counted apart from the caller's own,
 * and the WAL's bound still checkpoints on the caller's thread. */
#include <fcntl.h>
#include <poll.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

static struct store *open_store(const char *path, int64_t wal_max)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open_ex(&s, path, 10000, 0, wal_max, err, sizeof err);
	CHECKF(rc == 0, "store_open_ex: %s", err);
	return s;
}

static void close_store(void *arg)
{
	store_close(arg);
}

/* One batch of n submissions of 1 MiB for alpha, committed. */
static void submit_batch(struct store *s, int n)
{
	struct task_req q = { "alpha", "t", 1, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_batch_begin(s), 0);
	for (int i = 0; i < n; i++)
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1, 100000, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
}

/* Waits for the thread's checkpoint to end and collects its outcome. */
static int ckpt_wait(struct store *s)
{
	struct pollfd p = { store_ckpt_fd(s), POLLIN, 0 };
	CHECK(p.fd >= 0);
	CHECKF(poll(&p, 1, 10000) == 1, "no checkpoint outcome in 10 s");
	char msg[200];
	return store_ckpt_done(s, msg, sizeof msg);
}

/* Asks the thread for a checkpoint once the one a commit may have asked for (every 512 KiB
 * of WAL, store_wal_bound) has ended. */
static void ckpt_ask(struct store *s)
{
	while (store_ckpt_running(s))
		CHECK_INT(ckpt_wait(s), 0);
	CHECK_INT(store_checkpoint_later(s), 0);
}

/* The tasks in a copy of the database file alone, without its WAL: what the checkpoints
 * have put into the file itself. */
static long long tasks_in_file_alone(const char *db)
{
	const char *copy = h_path("alone.db");
	char cmd[2 * 4096 + 16];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", db, copy);
	CHECK(system(cmd) == 0);
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	long long n = -1;
	CHECK(sqlite3_open_v2(copy, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	if (sqlite3_prepare_v2(h, "SELECT count(*) FROM tasks", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	unlink(copy);
	return n;
}

TEST(store_ckpt_thread_copies_the_frames_into_the_database_file)
{
	const char *db = h_path("c.db");
	struct store *s = open_store(db, 64 << 20);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 1 << 20, NULL, 1, &created), 0);
	CHECK_INT(store_ckpt_start(s), 0);
	submit_batch(s, 50);
	/* All in the WAL so far, even the table (-1: the file alone has no tasks table). */
	CHECK(tasks_in_file_alone(db) <= 0);
	struct store_wal_stats w0, w;
	store_wal_stats(s, &w0);
	CHECK(w0.wal_bytes > 0);

	CHECK_INT(store_checkpoint_later(s), 0);
	CHECK(store_ckpt_running(s));
	CHECK_INT(store_checkpoint_later(s), GWB_EBUSY); /* one at a time */
	CHECK_INT(ckpt_wait(s), 0);
	CHECK(!store_ckpt_running(s));
	CHECK_INT(tasks_in_file_alone(db), 50);
	store_wal_stats(s, &w);
	CHECK_INT(w.checkpoints, 1);
	CHECK_INT(w.checkpoints_thread, 1);
	CHECK_INT(w.checkpoints_busy, 0);
	CHECK(w.thread_seconds > 0);

	/* It copied every frame and nothing committed meanwhile: the next commit starts the
	 * WAL over, a few pages long. */
	submit_batch(s, 1);
	store_wal_stats(s, &w);
	t_log("WAL %lld bytes after 50 submissions, %lld after one more once checkpointed",
	      (long long)w0.wal_bytes, (long long)w.wal_bytes);
	CHECK(w.wal_bytes < w0.wal_bytes);
}

/* The caller's commits go on while the thread checkpoints: none waits or is refused, and
 * what the checkpoint did not take is taken by the next one. */
TEST(store_ckpt_commits_go_on_beside_the_thread)
{
	const char *db = h_path("b.db");
	struct store *s = open_store(db, 64 << 20);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 1 << 20, NULL, 1, &created), 0);
	CHECK_INT(store_ckpt_start(s), 0);
	int total = 0;
	for (int round = 0; round < 5; round++) {
		submit_batch(s, 40);
		total += 40;
		ckpt_ask(s);
		for (int i = 0; i < 10; i++) {
			submit_batch(s, 4); /* while the checkpoint runs, or just after */
			total += 4;
		}
		/* Frames committed while it ran may be left for the next one (EBUSY), never
		 * anything worse. */
		int rc = ckpt_wait(s);
		CHECKF(rc == 0 || rc == GWB_EBUSY, "checkpoint: %s", err_name(rc));
	}
	/* The last one, with nothing committed during it, takes everything. */
	ckpt_ask(s);
	CHECK_INT(ckpt_wait(s), 0);
	CHECK_INT(tasks_in_file_alone(db), total);
	struct store_wal_stats w;
	store_wal_stats(s, &w);
	CHECK(w.checkpoints_thread >= 6);
	CHECK_INT(w.checkpoints_failed, 0);
}

/* Above the bound the caller's own commit checkpoints, on its thread, when the checkpoint
 * thread is not at one. A reader held on an old snapshot keeps any checkpoint from copying
 * the newer frames, so the WAL cannot start over and grows past the bound whatever the
 * timing; once the reader is gone, the bound's checkpoint copies everything and the next
 * commit starts the WAL over. */
TEST(store_ckpt_bound_checkpoints_on_the_callers_thread)
{
	const char *db = h_path("w.db");
	struct store *s = open_store(db, 256 * 1024);
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 1 << 20, NULL, 1, &created), 0);
	CHECK_INT(store_ckpt_start(s), 0);
	sqlite3 *reader = NULL;
	CHECK(sqlite3_open_v2(db, &reader, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	CHECK(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM tasks", NULL, NULL, NULL) ==
	      SQLITE_OK);
	struct store_wal_stats w;
	int total = 0;
	int64_t on_loop = 0;
	for (int i = 0; i < 200 && on_loop == 0; i++) {
		submit_batch(s, 20);
		total += 20;
		while (store_ckpt_running(s))
			CHECK_INT(ckpt_wait(s), GWB_EBUSY); /* the reader holds its frames */
		store_wal_stats(s, &w);
		on_loop = w.checkpoints - w.checkpoints_thread;
	}
	t_log("%d submissions: %lld checkpoints on the thread, %lld on the caller's; WAL %lld "
	      "bytes (bound 262144)",
	      total, (long long)w.checkpoints_thread, (long long)on_loop,
	      (long long)w.wal_bytes);
	CHECK(w.checkpoints_thread >= 1);
	CHECK(on_loop >= 1);
	CHECK(w.wal_bytes > 262144);
	CHECK(w.loop_seconds > 0);

	sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
	sqlite3_close(reader);
	/* Still above the bound: this commit's checkpoint, on the caller's thread, copies every
	 * frame now, and the commit after it starts the WAL over. */
	int64_t before = on_loop;
	submit_batch(s, 1);
	while (store_ckpt_running(s))
		CHECK_INT(ckpt_wait(s), 0);
	store_wal_stats(s, &w);
	CHECK(w.checkpoints - w.checkpoints_thread > before);
	submit_batch(s, 1);
	total += 2;
	store_wal_stats(s, &w);
	CHECKF(w.wal_bytes < 262144, "WAL %lld bytes", (long long)w.wal_bytes);
	while (store_ckpt_running(s))
		CHECK_INT(ckpt_wait(s), 0);
	ckpt_ask(s);
	CHECK_INT(ckpt_wait(s), 0);
	CHECK_INT(tasks_in_file_alone(db), total);
}

/* Without a file there is no WAL and no thread: checkpoints stay the caller's. */
TEST(store_ckpt_not_started_for_a_database_without_a_file)
{
	struct store *s = open_store(":memory:", 64 << 20);
	t_defer(close_store, s);
	CHECK_INT(store_ckpt_start(s), GWB_EINVAL);
	CHECK_INT(store_ckpt_fd(s), -1);
	CHECK(!store_ckpt_running(s));
}
