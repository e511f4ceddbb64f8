/* Checkpoints off the event loop, and the WAL's bound.
 *
 * A PASSIVE checkpoint copies the WAL's newest frames into the database file and syncs it:
 * under a steady load of submissions that is thousands of pages and two fsyncs, and every
 * request would wait meanwhile if the loop ran it. Here a thread with
 * a connection of its own runs them. SQLite lets a checkpoint on one connection run beside
 * the commits of another: PASSIVE takes no writer lock and waits for nobody, and copies the
 * frames of the commits made before it began; the loop goes on committing meanwhile.
 *
 * The WAL starts over only at a commit whose transaction began when every frame had been
 * copied, which a checkpoint beside new commits leaves behind only when it ends between two
 * of them. So the loop asks for one each time the WAL grew by 512 KiB (store_wal_bound):
 * each is short, many end between two commits,
 * and the WAL stays small. The bound stays the loop's: above it the loop runs the PASSIVE
 * checkpoint itself, with nothing left to copy but what was committed since the thread's last
 * one, and the next commit starts the WAL over. The idle TRUNCATE is the loop's too (here it
 * would make the loop's writers wait).
 *
 * The thread's connection opens the same file through the same VFS, synchronous=FULL: the
 * checkpoint syncs the WAL before it copies and the database after. It only ever
 * checkpoints; the counters stay the loop's (store_ckpt_done). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "server/store/store_internal.h"

struct store_ckpt {
	pthread_t thread;
	sqlite3 *db; /* the thread's own connection */
	int req[2];  /* loop -> thread: one byte asks for a checkpoint; closed to stop */
	int res[2];  /* thread -> loop: one struct ckpt_result per checkpoint */
	int busy;    /* the loop's side: a checkpoint is running */
	int64_t count, us_total; /* checkpoints run, and the time they took */
};

struct ckpt_result {
	int rc;        /* SQLite's result */
	int log, done; /* frames in the WAL, frames copied */
	int64_t us;    /* how long it took */
	char msg[200]; /* SQLite's message when rc is not SQLITE_OK */
};

static void *ckpt_main(void *arg)
{
	struct store_ckpt *ck = arg;
	for (;;) {
		char c;
		ssize_t n = read(ck->req[0], &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the loop closed its end: stop */
		struct ckpt_result r;
		memset(&r, 0, sizeof r); /* its padding too: the whole struct goes down the pipe */
		int64_t t0 = clock_mono_us();
		r.rc = sqlite3_wal_checkpoint_v2(ck->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &r.log,
		                                 &r.done);
		r.us = clock_mono_us() - t0;
		if (r.rc != SQLITE_OK)
			snprintf(r.msg, sizeof r.msg, "%s", sqlite3_errmsg(ck->db));
		ssize_t w;
		do
			w = write(ck->res[1], &r, sizeof r);
		while (w < 0 && errno == EINTR);
		if (w != (ssize_t)sizeof r)
			break;
	}
	return NULL;
}

static void ckpt_free(struct store_ckpt *ck)
{
	for (int i = 0; i < 2; i++) {
		if (ck->req[i] >= 0)
			close(ck->req[i]);
		if (ck->res[i] >= 0)
			close(ck->res[i]);
	}
	sqlite3_close(ck->db);
	gwb_free(ck);
}

/* The thread's connection on the store's file: 0 or GWB_EDB. */
static int ckpt_open(struct store *s, struct store_ckpt *ck)
{
	const char *path = sqlite3_db_filename(s->db, "main");
	if (!path || !path[0])
		return GWB_EINVAL; /* in memory or temporary: no WAL */
	if (sqlite3_open_v2(path, &ck->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
	                    store_vfs_name()) != SQLITE_OK)
		return GWB_EDB;
	sqlite3_extended_result_codes(ck->db, 0);
	/* Never a busy handler (PASSIVE calls none anyway), and never a checkpoint of its own
	 * making: the connection writes nothing. */
	sqlite3_busy_timeout(ck->db, 0);
	char *err = NULL;
	/* The read opens the WAL and its index for the thread's first checkpoint. */
	int rc = sqlite3_exec(ck->db,
	                      "PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=0; "
	                      "SELECT count(*) FROM sqlite_master",
	                      NULL, NULL, &err);
	sqlite3_free(err);
	return rc == SQLITE_OK ? 0 : GWB_EDB;
}

int store_ckpt_start(struct store *s)
{
	if (s->ckpt.thread)
		return 0;
	struct store_ckpt *ck = gwb_calloc(1, sizeof *ck);
	ck->req[0] = ck->req[1] = ck->res[0] = ck->res[1] = -1;
	int rc = ckpt_open(s, ck);
	if (rc) {
		ckpt_free(ck);
		return rc;
	}
	if (pipe2(ck->req, O_CLOEXEC) < 0 || pipe2(ck->res, O_CLOEXEC | O_NONBLOCK) < 0) {
		ckpt_free(ck);
		return GWB_EIO;
	}
	if (store_thread_start(&ck->thread, "gwb-checkpoint", ckpt_main, ck) != 0) {
		ckpt_free(ck);
		return GWB_EIO;
	}
	s->ckpt.thread = ck;
	return 0;
}

void store_ckpt_stop(struct store *s)
{
	struct store_ckpt *ck = s->ckpt.thread;
	if (!ck)
		return;
	close(ck->req[1]);
	ck->req[1] = -1;
	pthread_join(ck->thread, NULL); /* after the checkpoint it may be running */
	store_ckpt_done(s, NULL, 0);
	ckpt_free(ck);
	s->ckpt.thread = NULL;
}

int store_ckpt_fd(const struct store *s)
{
	return s->ckpt.thread ? s->ckpt.thread->res[0] : -1;
}

int store_ckpt_running(const struct store *s)
{
	return s->ckpt.thread && s->ckpt.thread->busy;
}

int store_checkpoint_later(struct store *s)
{
	struct store_ckpt *ck = s->ckpt.thread;
	if (!ck)
		return store_checkpoint(s, 0);
	if (ck->busy)
		return GWB_EBUSY;
	char c = 1;
	ssize_t w;
	do
		w = write(ck->req[1], &c, 1);
	while (w < 0 && errno == EINTR);
	if (w != 1)
		return GWB_EIO;
	ck->busy = 1;
	return 0;
}

int store_ckpt_done(struct store *s, char *msg, size_t len)
{
	struct store_ckpt *ck = s->ckpt.thread;
	int last = 0;
	if (msg && len)
		msg[0] = '\0';
	while (ck) {
		struct ckpt_result r;
		ssize_t n = read(ck->res[0], &r, sizeof r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof r)
			break; /* EAGAIN: nothing more */
		ck->busy = 0;
		ck->count++;
		ck->us_total += r.us;
		r.msg[sizeof r.msg - 1] = '\0';
		last = store_checkpoint_counted(s, r.rc, r.log, r.done, 0);
		if (last && msg && len)
			snprintf(msg, len, "%s", r.msg[0] ? r.msg : "frames left in the WAL");
	}
	return last;
}

void store_ckpt_stats(const struct store *s, int64_t *count, double *seconds)
{
	*count = s->ckpt.thread ? s->ckpt.thread->count : 0;
	*seconds = s->ckpt.thread ? (double)s->ckpt.thread->us_total / 1e6 : 0;
}

/* The connection's WAL hook: called after each commit with the WAL's size in pages. It
 * replaces SQLite's automatic checkpoint, which would run inside a request's COMMIT. */
static int on_wal(void *arg, sqlite3 *db, const char *name, int pages)
{
	(void)db;
	(void)name;
	struct store *s = arg;
	s->ckpt.wal_pages = pages;
	s->ckpt.wal_wrote = 1; /* called only for a commit that wrote frames */
	return SQLITE_OK;
}

int store_checkpoint_counted(struct store *s, int rc, int log, int done, int truncate)
{
	s->ckpt.runs++;
	if (rc == SQLITE_BUSY || (rc == SQLITE_OK && done < log)) {
		s->ckpt.runs_busy++;
		return GWB_EBUSY;
	}
	if (rc != SQLITE_OK) {
		/* A storage fault is counted, not recorded as the store's fault: only writes
		 * set and clear that, and the frames wait in the WAL for the next try. */
		if (store_fault_kind_of(rc) == STORE_FAULT_NONE)
			return GWB_EDB;
		s->ckpt.runs_failed++;
		return GWB_EUNAVAIL;
	}
	/* Every frame is in the database now: the next commit starts the WAL over (TRUNCATE has
	 * emptied the file as well). */
	s->ckpt.wal_pages = truncate ? 0 : s->ckpt.wal_pages;
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
	s->ckpt.loop_us += clock_mono_us() - t0;
	return store_checkpoint_counted(s, rc, log, done, truncate);
}

/* The WAL's growth after which the checkpoint thread is asked again: small, so that its
 * checkpoints stay short (one that ends between two commits lets the next start the WAL
 * over) and little is left for the loop's own at the bound. */
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
	if (s->ckpt.wal_pages < s->ckpt.asked_pages)
		s->ckpt.asked_pages = 0; /* the WAL started over */
	int64_t step = s->ckpt.wal_max_bytes / 8 < CKPT_STEP_BYTES ? s->ckpt.wal_max_bytes / 8
							       : CKPT_STEP_BYTES;
	if (s->ckpt.wal_pages * s->ckpt.page_size > s->ckpt.wal_max_bytes)
		store_checkpoint(s, 0);
	else if (s->ckpt.thread &&
		 (s->ckpt.wal_pages - s->ckpt.asked_pages) * s->ckpt.page_size > step &&
		 store_checkpoint_later(s) == 0)
		s->ckpt.asked_pages = s->ckpt.wal_pages;
}

void store_wal_stats(struct store *s, struct store_wal_stats *out)
{
	out->wal_bytes = s->ckpt.wal_pages * s->ckpt.page_size;
	out->wal_max_bytes = s->ckpt.wal_max_bytes;
	out->checkpoints = s->ckpt.runs;
	out->checkpoints_busy = s->ckpt.runs_busy;
	out->checkpoints_failed = s->ckpt.runs_failed;
	out->loop_seconds = (double)s->ckpt.loop_us / 1e6;
	store_ckpt_stats(s, &out->checkpoints_thread, &out->thread_seconds);
}


/* No automatic checkpoint (the hook replaces it; the owner checkpoints from its timer), and
 * a WAL file cut back to the bound after it is reset. */
int store_wal_setup(struct store *s, int64_t wal_max_bytes, char *err, size_t errlen)
{
	char pragma[80];
	snprintf(pragma, sizeof pragma, "PRAGMA journal_size_limit = %lld",
		 (long long)wal_max_bytes);
	sqlite3_stmt *st = NULL;
	/* temp_store=MEMORY: a batch's SAVEPOINTs keep their statement journal in memory, not
	 * in a temporary file written page by page and deleted per batch. */
	if (store_exec(s, "PRAGMA wal_autocheckpoint = 0") || store_exec(s, pragma) ||
	    store_exec(s, "PRAGMA temp_store = MEMORY") ||
	    sqlite3_prepare_v2(s->db, "PRAGMA page_size", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW) {
		snprintf(err, errlen, "cannot configure the WAL: %s", store_errmsg(s));
		sqlite3_finalize(st);
		return GWB_EDB;
	}
	s->ckpt.page_size = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	s->ckpt.wal_max_bytes = wal_max_bytes;
	sqlite3_wal_hook(s->db, on_wal, s);
	return 0;
}

