/* The store's VFS (server/store/store_vfs.c), which gathers a commit's WAL frames into one write:
 * a batch of 30 submissions costs a couple of write system calls, not two per frame; what
 * a batch commits is visible to another connection (over SQLite's own VFS) at once, while
 * the store stays open and nothing is checkpointed; a transaction larger than the buffer,
 * and one that spills pages to the WAL before its commit, read back whole; a commit after
 * a checkpoint that reset the WAL (its header rewritten at offset 0) too. */
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

static struct store *open_store(const char *path)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open_ex(&s, path, 10000, 0, 64 << 20, err, sizeof err);
	CHECKF(rc == 0, "store_open_ex: %s", err);
	return s;
}

static void close_store(void *arg)
{
	store_close(arg);
}

static void close_db(void *arg)
{
	sqlite3_close(arg);
}

/* This process's write system calls so far (write, pwrite, writev...: /proc/self/io). */
static long long write_calls(void)
{
	FILE *f = fopen("/proc/self/io", "r");
	CHECK(f != NULL);
	char line[128];
	long long v = -1;
	while (fgets(line, sizeof line, f))
		if (sscanf(line, "syscw: %lld", &v) == 1)
			break;
	fclose(f);
	CHECK(v >= 0);
	return v;
}

/* A second connection over SQLite's default VFS, as gwbctl or another tool opens the file. */
static sqlite3 *reader(const char *path)
{
	sqlite3 *db = NULL;
	CHECK_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	t_defer(close_db, db);
	return db;
}

static long long count_tasks(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	CHECK_INT(sqlite3_prepare_v2(db, "SELECT count(*) FROM tasks", -1, &st, NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	long long n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

/* n submissions of team alpha in one batch; the batch commits. */
static void batch(struct store *s, int n)
{
	struct task_req q = {"alpha", "t", 16, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	for (int i = 0; i < n; i++)
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1000, 60000, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
}

static struct store *store_with_team(const char *path)
{
	struct store *s = open_store(path);
	t_defer(close_store, s);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 1 << 30, 1 << 30, NULL, 1, &created), 0);
	return s;
}

TEST(store_vfs_batch_is_one_write)
{
	const char *path = h_path("v.db");
	struct store *s = store_with_team(path);
	batch(s, 30); /* the first pages of every table and index exist from here */
	long long w0 = write_calls();
	batch(s, 30);
	long long w = write_calls() - w0;
	/* Each submission changes pages of five tables and their indexes: without the gathering
	 * the WAL took two writes per changed page, dozens for the batch. */
	CHECKF(w <= 2, "%lld write calls for a batch of 30 submissions", w);
	CHECK_INT(count_tasks(reader(path)), 60);
	CHECK_INT(store_check(s), 0);
}

TEST(store_vfs_commit_visible_to_another_connection_at_once)
{
	const char *path = h_path("v.db");
	struct store *s = store_with_team(path);
	sqlite3 *other = reader(path);
	for (int i = 1; i <= 5; i++) {
		batch(s, 7);
		CHECK_INT(count_tasks(other), 7 * i);
	}
	/* A checkpoint that empties the WAL, then commits that start it again from its header. */
	CHECK_INT(store_checkpoint(s, 1), 0);
	batch(s, 3);
	CHECK_INT(count_tasks(other), 38);
	CHECK_INT(count_tasks(reader(path)), 38);
	CHECK_INT(store_check(s), 0);
}

TEST(store_vfs_transaction_larger_than_the_buffer)
{
	const char *path = h_path("v.db");
	struct store *s = store_with_team(path);
	/* 3,000 submissions change far more than the buffer's 128 KiB of frames. */
	batch(s, 3000);
	sqlite3 *other = reader(path);
	CHECK_INT(count_tasks(other), 3000);
	batch(s, 1);
	CHECK_INT(count_tasks(other), 3001);
	CHECK_INT(store_check(s), 0);
	CHECK_INT(store_checkpoint(s, 1), 0);
	CHECK_INT(count_tasks(reader(path)), 3001);
}

static long long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

TEST(store_vfs_spilled_pages_read_back_before_the_commit)
{
	const char *path = h_path("v.db");
	struct store *s = store_with_team(path);
	batch(s, 1);
	char wal[600];
	snprintf(wal, sizeof wal, "%s-wal", path);
	long long wal0 = file_size(wal);
	/* One batch larger than SQLite's page cache (2 MiB): it spills changed pages into the
	 * WAL before its commit frame, and reads them back while it runs. */
	struct task_req q = {"alpha", "t", 16, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	int n = 0;
	while (file_size(wal) == wal0 && n < 60000) {
		for (int i = 0; i < 100; i++, n++)
			CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1000, 60000, &res), 0);
	}
	CHECKF(file_size(wal) > wal0, "no page spilled after %d submissions", n);
	for (int i = 0; i < 1000; i++, n++)
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1000, 60000, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(count_tasks(reader(path)), n + 1);
	CHECK_INT(store_check(s), 0);
}
