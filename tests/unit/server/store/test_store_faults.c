/* The store when its storage refuses: a VFS over SQLite's own fails writes (or reads) on
 * demand with the code a full disk, a read-only filesystem or a failing disk gives. A refused
 * commit stores nothing, answers GWB_EUNAVAIL and rolls the counters kept in memory back; a
 * batch whose transaction SQLite rolled back mid-way runs no later unit outside it; the fault
 * is kept until a write commits; a failing checkpoint is counted, not taken for the fault; a
 * database that opens read-only is refused. */
#include <sqlite3.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_OFF; /* the store logs each fault at error level */
}

/* ---- the fault VFS ---- */

static int fail_write; /* 0, or the code every xWrite / xTruncate / xSync returns */
static int fail_read;  /* 0, or the code every xRead returns */
static int open_ro;    /* 1: the main database opens read-only, as on a read-only mount */

struct ffile {
	sqlite3_file base;
	sqlite3_file *real; /* right after this struct, szOsFile of the real VFS */
};

static sqlite3_vfs *real_vfs;
static sqlite3_vfs fault_vfs;

#define REAL(f) (((struct ffile *)(f))->real)

static int f_close(sqlite3_file *f)
{
	return REAL(f)->pMethods->xClose(REAL(f));
}
static int f_read(sqlite3_file *f, void *buf, int n, sqlite3_int64 off)
{
	return fail_read ? fail_read : REAL(f)->pMethods->xRead(REAL(f), buf, n, off);
}
static int f_write(sqlite3_file *f, const void *buf, int n, sqlite3_int64 off)
{
	return fail_write ? fail_write : REAL(f)->pMethods->xWrite(REAL(f), buf, n, off);
}
static int f_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	return fail_write ? fail_write : REAL(f)->pMethods->xTruncate(REAL(f), size);
}
static int f_sync(sqlite3_file *f, int flags)
{
	return fail_write ? fail_write : REAL(f)->pMethods->xSync(REAL(f), flags);
}
static int f_size(sqlite3_file *f, sqlite3_int64 *size)
{
	return REAL(f)->pMethods->xFileSize(REAL(f), size);
}
static int f_lock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xLock(REAL(f), l);
}
static int f_unlock(sqlite3_file *f, int l)
{
	return REAL(f)->pMethods->xUnlock(REAL(f), l);
}
static int f_reserved(sqlite3_file *f, int *out)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int f_control(sqlite3_file *f, int op, void *arg)
{
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int f_sector(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}
static int f_device(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}
static int f_shm_map(sqlite3_file *f, int pg, int sz, int extend, void volatile **out)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), pg, sz, extend, out);
}
static int f_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), off, n, flags);
}
static void f_shm_barrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}
static int f_shm_unmap(sqlite3_file *f, int del)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}
/* No memory-mapped reads: every read goes through f_read. */
static int f_fetch(sqlite3_file *f, sqlite3_int64 off, int n, void **out)
{
	(void)f;
	(void)off;
	(void)n;
	*out = NULL;
	return SQLITE_OK;
}
static int f_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	(void)f;
	(void)off;
	(void)p;
	return SQLITE_OK;
}

static const sqlite3_io_methods fault_methods = {
	3,	     f_close,	 f_read,     f_write,	  f_truncate,	 f_sync,
	f_size,	     f_lock,	 f_unlock,   f_reserved,  f_control,	 f_sector,
	f_device,    f_shm_map,	 f_shm_lock, f_shm_barrier, f_shm_unmap, f_fetch,
	f_unfetch,
};

static int f_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
		  int *out_flags)
{
	(void)vfs;
	struct ffile *ff = (struct ffile *)file;
	ff->real = (sqlite3_file *)(ff + 1);
	ff->base.pMethods = NULL;
	if (open_ro && (flags & SQLITE_OPEN_MAIN_DB) && (flags & SQLITE_OPEN_READWRITE))
		flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
			SQLITE_OPEN_READONLY;
	int rc = real_vfs->xOpen(real_vfs, name, ff->real, flags, out_flags);
	if (rc == SQLITE_OK && ff->real->pMethods)
		ff->base.pMethods = &fault_methods;
	return rc;
}

/* Makes the fault VFS SQLite's default, so store_open uses it. */
static void fault_vfs_install(void)
{
	fail_write = fail_read = open_ro = 0;
	if (real_vfs)
		return;
	sqlite3_initialize();
	real_vfs = sqlite3_vfs_find(NULL);
	fault_vfs = *real_vfs;
	fault_vfs.zName = "gwb-fault";
	fault_vfs.szOsFile = (int)sizeof(struct ffile) + real_vfs->szOsFile;
	fault_vfs.xOpen = f_open;
	sqlite3_vfs_register(&fault_vfs, 1);
}

/* ---- helpers ---- */

static struct store *open_store(const char *path)
{
	struct store *s = NULL;
	char err[512];
	int rc = store_open_ex(&s, path, 10000, 0, 1 << 20, err, sizeof err);
	CHECKF(rc == 0, "store_open_ex: %s", err);
	return s;
}

static void close_store(void *arg)
{
	store_close(arg);
}

static int submit(struct store *s, int64_t mem, struct submit_result *res)
{
	struct task_req q = { "alpha", "t", mem, 10, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	return store_task_submit(s, &q, NULL, "fp", 1000, 60000, res);
}

static int64_t reserved_mem(struct store *s)
{
	json_t *t = store_team_json(s, "alpha");
	CHECK(t != NULL);
	int64_t v = json_integer_value(
		json_object_get(json_object_get(t, "reserved"), "gpu_memory_mib"));
	json_decref(t);
	return v;
}

/* The counters kept in memory equal a count over the table, and the table holds n tasks. */
static void check_counts(struct store *s, int64_t n)
{
	int64_t mem[TASK_NSTATES], table[TASK_NSTATES], sum = 0;
	store_task_counts(s, mem);
	CHECK_INT(store_task_state_counts(s, table), 0);
	for (int i = 0; i < TASK_NSTATES; i++) {
		CHECKF(mem[i] == table[i], "%s: %lld in memory, %lld in the table",
		       task_state_name((enum task_state)i), (long long)mem[i],
		       (long long)table[i]);
		sum += table[i];
	}
	CHECK_INT(sum, n);
	CHECK_INT(store_task_transitions(s, TASK_NONE, TASK_QUEUED), n);
}

static enum store_fault_kind fault_of(struct store *s)
{
	struct store_fault f;
	store_fault_get(s, &f);
	return f.kind;
}

/* A batch of three submissions whose COMMIT the storage refuses with code: nothing stored,
 * the counters back, the fault named; then the storage heals and the next write clears it. */
static void refused_commit(int code, enum store_fault_kind kind)
{
	fault_vfs_install();
	struct store *s = open_store(h_path("f.db"));
	t_defer(close_store, s);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 1000, NULL, 1, &created), 0);
	struct submit_result res;
	CHECK_INT(submit(s, 100, &res), 0);
	CHECK_INT(fault_of(s), STORE_FAULT_NONE);

	CHECK_INT(store_batch_begin(s), 0);
	for (int i = 0; i < 3; i++)
		CHECK_INT(submit(s, 100, &res), 0); /* savepoints: in memory until the COMMIT */
	fail_write = code;
	CHECK_INT(store_batch_commit(s), GWB_EUNAVAIL);
	/* Until the space returns, a write on its own is refused the same way. */
	CHECK_INT(submit(s, 100, &res), GWB_EUNAVAIL);
	fail_write = 0;
	struct store_fault f;
	store_fault_get(s, &f);
	CHECK_INT(f.kind, kind);
	CHECK(f.writes_failed >= 2);
	CHECK_INT(f.faults, 1);
	CHECK(f.since_ms > 0);
	check_counts(s, 1);
	CHECK_INT(reserved_mem(s), 100);

	/* A transaction that writes nothing does not say the storage healed. */
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(fault_of(s), kind);
	/* One that stores a change does. */
	CHECK_INT(submit(s, 100, &res), 0);
	CHECK_INT(fault_of(s), STORE_FAULT_NONE);
	check_counts(s, 2);
	CHECK_INT(reserved_mem(s), 200);
	CHECK_INT(store_check(s), 0);
}

TEST(store_fault_disk_full_commit_stores_nothing)
{
	refused_commit(SQLITE_FULL, STORE_FAULT_FULL);
}

TEST(store_fault_io_error_commit_stores_nothing)
{
	refused_commit(SQLITE_IOERR_WRITE, STORE_FAULT_IO);
}

TEST(store_fault_read_only_commit_stores_nothing)
{
	refused_commit(SQLITE_READONLY, STORE_FAULT_READONLY);
}

/* An I/O error inside a unit makes SQLite roll the batch's whole transaction back. The units
 * after it must not run on their own (a SAVEPOINT outside a transaction opens one, and its
 * RELEASE commits it: a task stored while its answer says it failed), and the counters'
 * moves of the units before it go with them. */
TEST(store_fault_batch_rolled_back_by_sqlite_runs_no_later_unit)
{
	fault_vfs_install();
	const char *db = h_path("m.db");
	struct store *s = open_store(db);
	t_defer(close_store, s);
	struct store *other = open_store(db);
	t_defer(close_store, other);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 1000, NULL, 1, &created), 0);
	struct submit_result res;
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(submit(s, 100, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);

	/* Another connection's write: s reads its pages again in its next transaction. */
	CHECK_INT(store_team_put(other, "beta", 10240, 1000, NULL, 2, &created), 0);
	CHECK_INT(store_batch_begin(s), 0);
	fail_read = SQLITE_IOERR_READ;
	CHECK_INT(submit(s, 100, &res), GWB_EUNAVAIL);
	fail_read = 0;
	/* The storage is fine again, but the batch is gone: its later units fail too. */
	CHECK_INT(submit(s, 100, &res), GWB_EUNAVAIL);
	enum task_state st;
	int changed = 0;
	CHECK_INT(store_task_cancel(s, res.task_id[0] ? res.task_id : "t-none", 3000, &st,
				    &changed),
		  GWB_EUNAVAIL);
	CHECK_INT(store_batch_commit(s), GWB_EUNAVAIL);
	CHECK_INT(fault_of(s), STORE_FAULT_IO);
	check_counts(s, 1);
	int64_t c[TASK_NSTATES], n = 0;
	CHECK_INT(store_task_state_counts(other, c), 0);
	for (int i = 0; i < TASK_NSTATES; i++)
		n += c[i];
	CHECK_INT(n, 1); /* as another connection sees the file */
	CHECK_INT(reserved_mem(s), 100);

	/* The next batch works and clears the fault. */
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(submit(s, 100, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(fault_of(s), STORE_FAULT_NONE);
	check_counts(s, 2);
	CHECK_INT(reserved_mem(s), 200);
}

/* The same in an optimistic batch (no SAVEPOINT per decision, as the HTTP path runs it
 * first): the unit that met the fault spoils the batch, the later ones fail without running on
 * their own, and nothing is stored; run again with savepoints, the batch is decided anew. */
TEST(store_fault_optimistic_batch_rolled_back_by_sqlite_is_spoiled)
{
	fault_vfs_install();
	const char *db = h_path("o.db");
	struct store *s = open_store(db);
	t_defer(close_store, s);
	struct store *other = open_store(db);
	t_defer(close_store, other);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 1000, NULL, 1, &created), 0);
	struct submit_result res;
	CHECK_INT(submit(s, 100, &res), 0);

	CHECK_INT(store_team_put(other, "beta", 10240, 1000, NULL, 2, &created), 0);
	CHECK_INT(store_batch_begin_optimistic(s), 0);
	fail_read = SQLITE_IOERR_READ;
	CHECK_INT(submit(s, 100, &res), GWB_EUNAVAIL);
	fail_read = 0;
	CHECK(store_batch_spoiled(s));
	CHECK_INT(submit(s, 100, &res), GWB_EUNAVAIL); /* never autocommitted on its own */
	store_batch_rollback(s);
	check_counts(s, 1);
	CHECK_INT(reserved_mem(s), 100);

	/* Decided again with savepoints, on a healthy storage: both stored. */
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(submit(s, 100, &res), 0);
	CHECK_INT(submit(s, 100, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK_INT(fault_of(s), STORE_FAULT_NONE);
	check_counts(s, 3);
	CHECK_INT(reserved_mem(s), 300);
}

/* A checkpoint that cannot write the database file keeps its frames in the WAL: counted as
 * failed, not taken for the store's fault (writes alone set and clear that). */
TEST(store_fault_checkpoint_refused_is_counted)
{
	fault_vfs_install();
	struct store *s = open_store(h_path("c.db"));
	t_defer(close_store, s);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 1000, NULL, 1, &created), 0);
	struct submit_result res;
	CHECK_INT(submit(s, 100, &res), 0);
	fail_write = SQLITE_FULL;
	CHECK_INT(store_checkpoint(s, 0), GWB_EUNAVAIL);
	fail_write = 0;
	struct store_wal_stats w;
	store_wal_stats(s, &w);
	CHECK_INT(w.checkpoints_failed, 1);
	CHECK_INT(fault_of(s), STORE_FAULT_NONE);
	CHECK_INT(store_checkpoint(s, 1), 0);
	CHECK_INT(submit(s, 100, &res), 0);
	check_counts(s, 2);
}

/* The same refusal met by the checkpoint thread: counted as failed by the owner, with
 * SQLite's message, and not the store's fault; the next checkpoint, once the storage takes
 * writes again, succeeds. */
TEST(store_fault_thread_checkpoint_refused_is_counted)
{
	fault_vfs_install();
	struct store *s = open_store(h_path("t.db"));
	t_defer(close_store, s);
	CHECK_INT(store_ckpt_start(s), 0);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 1000, NULL, 1, &created), 0);
	struct submit_result res;
	CHECK_INT(submit(s, 100, &res), 0);
	/* The new file's schema took the WAL past an eighth of its bound: that commit asked the
	 * thread already. Its checkpoint is let finish, and one more commit leaves frames. */
	struct pollfd p = { store_ckpt_fd(s), POLLIN, 0 };
	char msg[200];
	while (store_ckpt_running(s)) {
		CHECK_INT(poll(&p, 1, 10000), 1);
		CHECK_INT(store_ckpt_done(s, msg, sizeof msg), 0);
	}
	struct store_wal_stats w;
	store_wal_stats(s, &w);
	int64_t before = w.checkpoints_thread;
	CHECK_INT(submit(s, 100, &res), 0);
	fail_write = SQLITE_FULL;
	CHECK_INT(store_checkpoint_later(s), 0);
	CHECK_INT(poll(&p, 1, 10000), 1);
	CHECK_INT(store_ckpt_done(s, msg, sizeof msg), GWB_EUNAVAIL);
	fail_write = 0;
	t_log("the thread's checkpoint: %s", msg);
	CHECK(msg[0] != '\0');
	store_wal_stats(s, &w);
	CHECK_INT(w.checkpoints_failed, 1);
	CHECK_INT(w.checkpoints_thread, before + 1);
	CHECK_INT(fault_of(s), STORE_FAULT_NONE);
	CHECK_INT(store_checkpoint_later(s), 0);
	CHECK_INT(poll(&p, 1, 10000), 1);
	CHECK_INT(store_ckpt_done(s, msg, sizeof msg), 0);
	CHECK_INT(submit(s, 100, &res), 0);
	check_counts(s, 3);
}

/* A database that can only be opened read-only is refused at open, naming the file. */
TEST(store_fault_read_only_database_refused_at_open)
{
	fault_vfs_install();
	const char *db = h_path("ro.db");
	struct store *s = open_store(db);
	store_close(s);
	open_ro = 1;
	char err[512] = "";
	s = NULL;
	int rc = store_open_ex(&s, db, 1000, 0, 1 << 20, err, sizeof err);
	open_ro = 0;
	CHECK_INT(rc, GWB_EUNAVAIL);
	CHECK(s == NULL);
	CHECKF(strstr(err, db) && strstr(err, "read-only"), "err: %s", err);
}
