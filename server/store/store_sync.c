/* Durable later: the group commit's fsync off the event loop.
 *
 * A batch of submissions commits without the sync SQLite asks for at a COMMIT (the VFS leaves
 * it out, store_vfs.c: as synchronous=NORMAL would, in WAL mode), so the batch's frames are
 * in the WAL unsynced, and the loop goes on to the next batch.
 * One thread owns the fsync: it runs fdatasync on the WAL file and tells the loop (a pipe),
 * which then knows every commit made before the sync began is on the disk. Its owner answers
 * the batch's requests only then, so no reply leaves before its decision is durable: the
 * guarantee of synchronous=FULL, with the loop free while the disk works, and one fsync for
 * every batch committed meanwhile.
 *
 * The loop publishes each such commit's number (an atomic store) and wakes the thread only
 * when it sleeps; a thread that ends a sync starts the next one at once if commits wait, and
 * sleeps only when none does. So under load the loop never asks for a sync: a wake-up of
 * another CPU is a write and an inter-processor interrupt (on a virtual machine, an exit to
 * the hypervisor).
 *
 * fdatasync on a descriptor of our own flushes the file's pages whoever wrote them (Linux
 * syncs the inode). The directory is synced once, when the WAL is first opened here, so its
 * name survives a power loss as well. What SQLite itself syncs is unchanged: every other
 * commit (the reconciler's, the informers', an admin's) still runs with synchronous=FULL,
 * which also makes everything before it durable; checkpoints sync the WAL and the database.
 *
 * The outbox relay must not publish an intent whose task could still vanish with a power
 * loss: outbox rows and new tasks written by commits that are not yet durable are held back
 * (store_outbox_gate, store_create_gate), and the relay is woken when they become durable. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store_internal.h"

struct store_sync {
	pthread_t thread;
	int req[2]; /* loop -> thread: one byte asks for a sync; closed to stop */
	int res[2]; /* thread -> loop: one struct sync_result per sync */
	char wal[PATH_MAX];
	char dir[PATH_MAX];
	int wal_fd; /* the thread's own */
	/* Shared. The last commit the loop has made that waits for a sync, and whether the
	 * thread sleeps on req (then the loop, and only the loop, wakes it: the one that turns
	 * parked from 1 to 0 owns the wake-up). */
	_Atomic uint64_t published;
	atomic_int parked;
	/* The loop's side. */
	int64_t syncs, failed;
	int64_t commits_synced; /* commits made durable by the syncs */
	int64_t us_total;       /* time the syncs took */
};

struct sync_result {
	int err;         /* 0, or the errno of the open or the fdatasync */
	int64_t us;      /* how long it took */
	uint64_t target; /* the last commit it covers */
};

/* ---- the thread ---- */

/* Opens the WAL (again, when SQLite replaced the file) and syncs its directory the first
 * time. 0 or an errno. */
static int wal_open(struct store_sync *sy)
{
	if (sy->wal_fd >= 0) {
		struct stat st;
		if (fstat(sy->wal_fd, &st) == 0 && st.st_nlink > 0)
			return 0;
		close(sy->wal_fd);
		sy->wal_fd = -1;
	}
	int fd = open(sy->wal, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	int dfd = open(sy->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		int e = errno;
		if (dfd >= 0)
			close(dfd);
		close(fd);
		return e;
	}
	close(dfd);
	sy->wal_fd = fd;
	return 0;
}

/* One sync of every commit published so far, its result sent to the loop: 0, or -1 when
 * the loop's end of the pipe is gone. target is the last commit it covered. */
static int sync_once(struct store_sync *sy, uint64_t *target)
{
	struct sync_result r;
	memset(&r, 0, sizeof r); /* its padding too: the whole struct goes down the pipe */
	/* The loop publishes a commit after SQLite wrote its frames: they are in the file. */
	r.target = *target = atomic_load(&sy->published);
	int64_t t0 = clock_mono_us();
	r.err = wal_open(sy);
	if (r.err == 0 && fdatasync(sy->wal_fd) < 0)
		r.err = errno;
	r.us = clock_mono_us() - t0;
	ssize_t w;
	do
		w = write(sy->res[1], &r, sizeof r);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)sizeof r ? 0 : -1;
}

static void *sync_main(void *arg)
{
	struct store_sync *sy = arg;
	for (;;) {
		char c;
		ssize_t n = read(sy->req[0], &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* the loop closed its end: stop */
		/* Woken: sync until no commit waits. The loop goes on committing meanwhile and
		 * does not wake the thread again while it runs: asking costs the loop a write and
		 * a wake-up of another CPU for every sync, and the next sync would wait for it. */
		for (;;) {
			uint64_t target;
			if (sync_once(sy, &target))
				goto out;
			if (atomic_load(&sy->published) > target)
				continue;
			atomic_store(&sy->parked, 1);
			/* A commit published between the load above and parked's store found the
			 * thread running and wrote no byte: look again. Whoever turns parked back to
			 * 0 owns the wake-up: the loop writes a byte, or the thread goes on itself. */
			if (atomic_load(&sy->published) > target &&
			    atomic_exchange(&sy->parked, 0) == 1)
				continue;
			break; /* no commit waits, or the loop's byte does */
		}
	}
out:
	if (sy->wal_fd >= 0)
		close(sy->wal_fd);
	sy->wal_fd = -1;
	return NULL;
}

/* ---- the loop's side ---- */

int store_thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg)
{
	/* The thread takes no signal: they stay the loop's. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	/* Its name (at most 15 bytes) is what top -H, perf and /proc/PID/task/TID/comm show. */
	if (rc == 0)
		pthread_setname_np(*t, name);
	return rc;
}

static void pipes_close(struct store_sync *sy)
{
	for (int i = 0; i < 2; i++) {
		if (sy->req[i] >= 0)
			close(sy->req[i]);
		if (sy->res[i] >= 0)
			close(sy->res[i]);
		sy->req[i] = sy->res[i] = -1;
	}
}

int store_sync_start(struct store *s)
{
	if (s->sync.thread)
		return 0;
	const char *db = sqlite3_db_filename(s->db, "main");
	const char *wal = db && db[0] ? sqlite3_filename_wal(db) : NULL;
	if (!wal || !wal[0] || strlen(wal) >= PATH_MAX)
		return GWB_EINVAL; /* an in-memory or temporary database: nothing to sync */
	struct store_sync *sy = gwb_calloc(1, sizeof *sy);
	sy->req[0] = sy->req[1] = sy->res[0] = sy->res[1] = -1;
	sy->wal_fd = -1;
	atomic_init(&sy->published, 0);
	atomic_init(&sy->parked, 1); /* it starts waiting on req */
	snprintf(sy->wal, sizeof sy->wal, "%s", wal);
	snprintf(sy->dir, sizeof sy->dir, "%s", wal);
	char *slash = strrchr(sy->dir, '/');
	if (!slash)
		snprintf(sy->dir, sizeof sy->dir, ".");
	else if (slash == sy->dir)
		slash[1] = '\0';
	else
		*slash = '\0';
	/* The loop reads results without blocking; the thread's writes block, so a result is
	 * never lost. It cannot block for long: each result but the last covers a commit
	 * published since the one before, and the loop reads them in the turn that follows
	 * (the pipe holds thousands). */
	if (pipe2(sy->req, O_CLOEXEC) < 0 || pipe2(sy->res, O_CLOEXEC) < 0 ||
	    fcntl(sy->res[0], F_SETFL, O_NONBLOCK) < 0) {
		pipes_close(sy);
		gwb_free(sy);
		return GWB_EIO;
	}
	if (store_thread_start(&sy->thread, "gwb-sync", sync_main, sy) != 0) {
		pipes_close(sy);
		gwb_free(sy);
		return GWB_EIO;
	}
	s->sync.thread = sy;
	return 0;
}

void store_sync_stop(struct store *s)
{
	struct store_sync *sy = s->sync.thread;
	if (!sy)
		return;
	close(sy->req[1]);
	sy->req[1] = -1;
	pthread_join(sy->thread, NULL);
	/* What is still waiting was committed: one last sync, here, makes it durable before
	 * the owner answers it or closes. */
	if (s->sync.durable_seq < s->sync.commit_seq) {
		int err = wal_open(sy);
		if (err == 0 && fdatasync(sy->wal_fd) < 0)
			err = errno;
		if (err) {
			s->sync.error_upto = s->sync.commit_seq;
			log_error("store", "wal_sync_failed", "error=%s wal=%s",
			          log_q(strerror(err)), log_q(sy->wal));
		}
		store_durable_all(s);
	}
	if (sy->wal_fd >= 0)
		close(sy->wal_fd);
	pipes_close(sy);
	gwb_free(sy);
	s->sync.thread = NULL;
}

int store_sync_fd(const struct store *s)
{
	return s->sync.thread ? s->sync.thread->res[0] : -1;
}

/* Tells the thread that every commit so far waits for a sync, and wakes it if it sleeps. */
static void sync_request(struct store *s)
{
	struct store_sync *sy = s->sync.thread;
	if (s->sync.durable_seq >= s->sync.commit_seq)
		return;
	atomic_store(&sy->published, s->sync.commit_seq);
	if (atomic_exchange(&sy->parked, 0) != 1)
		return; /* it runs, and will see the commit before it sleeps */
	char c = 1;
	ssize_t w;
	do
		w = write(sy->req[1], &c, 1);
	while (w < 0 && errno == EINTR);
	if (w != 1) {
		/* The thread stays parked: the next commit tries again. */
		atomic_store(&sy->parked, 1);
		log_error("store", "sync_request_failed", "error=%s", log_q(strerror(errno)));
	}
}

int store_sync_done(struct store *s)
{
	struct store_sync *sy = s->sync.thread;
	if (!sy)
		return 0;
	int rc = 0;
	for (;;) {
		struct sync_result r;
		ssize_t n = read(sy->res[0], &r, sizeof r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof r)
			break; /* EAGAIN: nothing more */
		sy->syncs++;
		sy->us_total += r.us;
		if (r.err) {
			/* The frames' fate is unknown: the owner answers 503 for every commit the
			 * sync covered, and the next sync tries again. */
			sy->failed++;
			rc = GWB_EIO;
			if (r.target > s->sync.error_upto)
				s->sync.error_upto = r.target;
			log_error("store", "wal_sync_failed", "error=%s wal=%s",
			          log_q(strerror(r.err)), log_q(sy->wal));
		}
		if (r.target > s->sync.durable_seq) {
			sy->commits_synced += (int64_t)(r.target - s->sync.durable_seq);
			s->sync.durable_seq = r.target;
		}
		if (store_held_settle(s) && s->outbox.fn)
			s->outbox.fn(s->outbox.arg); /* the relay: its rows may go now */
	}
	return rc;
}

/* Whether the connection's commits leave their WAL sync to the thread (the VFS's
 * STORE_FCNTL_SYNC_LATER): 0 or GWB_EDB. The setting stays synchronous=FULL: a file control,
 * not a PRAGMA, which acts only when its statement is prepared. */
static int sync_later(struct store *s, int on)
{
	return sqlite3_file_control(s->db, "main", STORE_FCNTL_SYNC_LATER, &on) == SQLITE_OK
		   ? 0
		   : GWB_EDB;
}

int store_batch_begin_later(struct store *s)
{
	if (!s->sync.thread || s->batch.open)
		return store_batch_begin_optimistic(s);
	/* Only this batch's COMMIT skips SQLite's own sync: every other one syncs again as soon
	 * as the batch is closed (store_batch_later_end), before any other write. */
	int rc = sync_later(s, 1);
	if (rc)
		return rc;
	rc = store_batch_begin_optimistic(s);
	if (rc) {
		sync_later(s, 0);
		return rc;
	}
	s->sync.batch_later = 1;
	return 0;
}

void store_batch_later_end(struct store *s, int committed)
{
	if (!s->sync.batch_later)
		return;
	s->sync.batch_later = 0;
	if (sync_later(s, 0))
		log_error("store", "sync_not_restored", "db=%s", log_q(store_errmsg(s)));
	if (committed)
		sync_request(s);
}

void store_wal_syncs(struct store *s, int64_t *passed, int64_t *left)
{
	int64_t n[2] = { 0, 0 };
	sqlite3_file_control(s->db, "main", STORE_FCNTL_WAL_SYNCS, n);
	*passed = n[0];
	*left = n[1];
}

int store_synchronous(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "PRAGMA synchronous");
	if (!st)
		return GWB_EDB;
	int v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : GWB_EDB;
	sqlite3_reset(st);
	return v;
}

uint64_t store_commit_seq(const struct store *s)
{
	return s->sync.commit_seq;
}

uint64_t store_durable_seq(const struct store *s)
{
	return s->sync.durable_seq;
}

int store_sync_failed_upto(const struct store *s, uint64_t seq)
{
	return seq <= s->sync.error_upto;
}

void store_sync_stats(const struct store *s, struct store_sync_stats *out)
{
	memset(out, 0, sizeof *out);
	if (!s->sync.thread)
		return;
	out->syncs = s->sync.thread->syncs;
	out->failed = s->sync.thread->failed;
	out->commits = s->sync.thread->commits_synced;
	out->pending = (int64_t)(s->sync.commit_seq - s->sync.durable_seq);
	out->seconds = (double)s->sync.thread->us_total / 1e6;
}

void store_durable_all(struct store *s)
{
	s->sync.durable_seq = s->sync.commit_seq;
	s->gate.n = s->gate.head = 0;
}

void store_held_push(struct store *s, uint64_t seq, int64_t ob_min, int64_t tk_min)
{
	if (s->gate.head > 0 && s->gate.head == s->gate.n)
		s->gate.n = s->gate.head = 0;
	if (s->gate.n == s->gate.cap) {
		/* Room at the front first: the live entries move down. */
		if (s->gate.head > 0) {
			memmove(s->gate.held, s->gate.held + s->gate.head,
				sizeof *s->gate.held * (size_t)(s->gate.n - s->gate.head));
			s->gate.n -= s->gate.head;
			s->gate.head = 0;
		} else {
			s->gate.cap = s->gate.cap ? s->gate.cap * 2 : 64;
			s->gate.held = gwb_realloc(s->gate.held,
						   sizeof *s->gate.held * (size_t)s->gate.cap);
		}
	}
	s->gate.held[s->gate.n].seq = seq;
	s->gate.held[s->gate.n].ob_min = ob_min;
	s->gate.held[s->gate.n].tk_min = tk_min;
	s->gate.n++;
}

void store_gate_close(struct store *s)
{
	gwb_free(s->gate.held);
}

int store_held_settle(struct store *s)
{
	int head = s->gate.head;
	while (s->gate.head < s->gate.n && s->gate.held[s->gate.head].seq <= s->sync.durable_seq)
		s->gate.head++;
	return s->gate.head != head;
}

/* The oldest held commit's rows of a kind are the smallest: commits run one after the other
 * on this connection, and a new outbox id or task seq is above every one before it (no row of
 * either is deleted), so each commit's are above every earlier commit's. A held commit may
 * have written one kind only (0 for the other); a handful are held at a time. */
int64_t store_outbox_gate(const struct store *s)
{
	for (int i = s->gate.head; i < s->gate.n; i++)
		if (s->gate.held[i].ob_min)
			return s->gate.held[i].ob_min;
	return INT64_MAX;
}

int64_t store_create_gate(const struct store *s)
{
	for (int i = s->gate.head; i < s->gate.n; i++)
		if (s->gate.held[i].tk_min)
			return s->gate.held[i].tk_min;
	return INT64_MAX;
}

