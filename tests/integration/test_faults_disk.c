/* The fault suite, the database's storage: its disk filling up under load (SQLITE_FULL) and
 * its filesystem made read-only, each while gwb-load drives a mix of submissions, replays and
 * cancels. The database lives on a small tmpfs of its own, mounted in a private mount
 * namespace of the case: the mount cannot outlive the case, even one killed at its time
 * limit, and the machine's other mounts never see it. After each fault the frame's checks
 * (h_faults.h): every acknowledged task present and ended, nothing reserved, no audit drift,
 * one Job per task. GWB_FAULTS_LONG=1 runs the long forms (make test-faults).
 *
 * Mounting needs root (or CAP_SYS_ADMIN); without it a case fails saying so, as the harness
 * has no way to skip a case and a pass would claim what was not tested. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_faults.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define TOK   "faults-alpha-token"
/* The database's own filesystem: room for the long form's tasks, their events and a WAL
 * between checkpoints; the filler takes whatever is left when the fault starts. */
#define DBFS_SIZE "size=24m"

struct dbfs {
	char dir[PATH_MAX];
	char db[PATH_MAX];
	char filler[PATH_MAX];
	char env_db[PATH_MAX + 8];
	int mounted;
};

static void dbfs_unmount(void *arg)
{
	struct dbfs *d = arg;
	if (d->mounted && umount2(d->dir, MNT_DETACH) < 0)
		t_fail_soft("umount %s: %s", d->dir, strerror(errno));
	d->mounted = 0;
}

/* A private mount namespace for this case's process and everything it starts, then a tmpfs
 * on h_tmpdir()/dbfs for the database. Fails the case, saying why, when mounting is not
 * allowed here. */
static void dbfs_mount(struct dbfs *d)
{
	memset(d, 0, sizeof *d);
	snprintf(d->dir, sizeof d->dir, "%s", h_path("dbfs"));
	snprintf(d->db, sizeof d->db, "%s/gwb.db", d->dir);
	snprintf(d->filler, sizeof d->filler, "%s/filler", d->dir);
	snprintf(d->env_db, sizeof d->env_db, "GWB_DB=%s", d->db);
	CHECKF(mkdir(d->dir, 0755) == 0, "mkdir %s: %s", d->dir, strerror(errno));
	if (unshare(CLONE_NEWNS) < 0)
		t_fail(__FILE__, __LINE__,
		       "cannot test the database's disk: a private mount namespace needs root or "
		       "CAP_SYS_ADMIN (unshare: %s)",
		       strerror(errno));
	/* Mounts made from here on stay in this namespace, whatever / propagates. */
	CHECKF(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0,
	       "cannot make the mounts private: %s", strerror(errno));
	if (mount("tmpfs", d->dir, "tmpfs", 0, DBFS_SIZE) < 0)
		t_fail(__FILE__, __LINE__, "cannot test the database's disk: mount tmpfs on %s: %s",
		       d->dir, strerror(errno));
	d->mounted = 1;
	/* Before the folder's removal, which was deferred first and so runs last. */
	t_defer(dbfs_unmount, d);
}

/* Writes the filler until the filesystem is full; returns the bytes it took. */
static long long dbfs_fill(struct dbfs *d)
{
	int fd = open(d->filler, O_WRONLY | O_CREAT | O_APPEND, 0644);
	CHECKF(fd >= 0, "open %s: %s", d->filler, strerror(errno));
	static char block[64 * 1024];
	long long total = 0;
	size_t len = sizeof block;
	for (;;) {
		ssize_t n = write(fd, block, len);
		if (n > 0) {
			total += n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (len == 1)
			break; /* ENOSPC down to the last byte */
		len = len > 4096 ? 4096 : 1;
	}
	close(fd);
	return total;
}

/* Remounts the tmpfs read-only (ro 1) or writable. 0, or -errno. */
static int dbfs_remount(struct dbfs *d, int ro)
{
	unsigned long flags = MS_REMOUNT | (ro ? MS_RDONLY : 0);
	return mount("tmpfs", d->dir, "tmpfs", flags, DBFS_SIZE) < 0 ? -errno : 0;
}

/* Starts the stack with the database on d. */
static void start_on(struct h_faults *f, struct dbfs *d, const char *name, long requests)
{
	const char *env[] = { d->env_db, NULL };
	h_faults_start(f, name, requests, NULL, env);
	/* h_server_init chose the case folder; the setting above wins, and so does this. */
	snprintf(f->st.srv.db, sizeof f->st.srv.db, "%s", d->db);
}

/* One submission of our own: 16 MiB, 1 %, 1 s, like gwb-load's. */
static long probe_submit(const struct h_faults *f, struct h_resp *r, char *id, size_t idlen)
{
	static const char body[] = "{\"team\": \"alpha\", \"name\": \"probe\", \"gpu_memory_mib\": "
				   "16, \"gpu_core_percent\": 1, \"gpu_count\": 1, "
				   "\"duration_seconds\": 1}";
	char url[512];
	snprintf(url, sizeof url, "%s/v1/tasks", f->st.srv.proc.url);
	if (h_http(r, "POST", url, TOK, body, NULL) < 0)
		return 0;
	const char *tid = json_string_value(json_object_get(r->json, "id"));
	if (id)
		snprintf(id, idlen, "%s", r->status == 201 && tid ? tid : "");
	return r->status;
}

/* Counts the lines of the server's log that contain what. */
static long log_count(const struct h_faults *f, const char *what)
{
	FILE *fp = fopen(f->st.srv.proc.log, "r");
	long n = 0;
	char line[4096];
	while (fp && fgets(line, sizeof line, fp))
		n += strstr(line, what) != NULL;
	if (fp)
		fclose(fp);
	return n;
}

/* The store's rows agree with themselves: every task has its reservation, and each team's
 * stored totals are the sum of its unreleased reservations. Read from the file itself, so it
 * holds whatever the server believes. */
static void check_rows(const struct h_faults *f, const char *when)
{
	long long orphans = h_sql_int(f->st.srv.db, "SELECT count(*) FROM tasks t LEFT JOIN "
						    "reservations r ON r.task_id = t.id WHERE "
						    "r.task_id IS NULL");
	CHECKF(orphans == 0, "%s: %lld tasks without their reservation", f->name, orphans);
	long long off = h_sql_int(
		f->st.srv.db,
		"SELECT count(*) FROM teams tm WHERE reserved_mem_mib != (SELECT "
		"coalesce(sum(gpu_memory_mib), 0) FROM reservations r WHERE r.team = tm.name AND "
		"released = 0) OR reserved_core_pct != (SELECT coalesce(sum(gpu_core_percent), 0) "
		"FROM reservations r WHERE r.team = tm.name AND released = 0)");
	CHECKF(off == 0, "%s: %s: %lld teams whose totals are not their reservations' sum",
	       f->name, when, off);
}

/* The counters kept in memory (tasks by state) against the table, once nothing moves. */
static void check_counts(const struct h_faults *f)
{
	static const char *const states[] = { "queued",	 "creating",  "pending",
					      "running", "unknown",   "cancelling",
					      "succeeded", "failed", "cancelled" };
	for (size_t i = 0; i < sizeof states / sizeof states[0]; i++) {
		char sql[160], match[64];
		snprintf(sql, sizeof sql, "SELECT count(*) FROM tasks WHERE state = '%s'",
			 states[i]);
		snprintf(match, sizeof match, "state=\"%s\"", states[i]);
		long long rows = h_sql_int(f->st.srv.db, sql);
		double mem = h_metric(f->st.srv.proc.url, "gwb_tasks", match);
		CHECKF((long long)mem == rows, "%s: gwb_tasks{%s} is %.0f, the table holds %lld",
		       f->name, match, mem, rows);
	}
}

/* A paced gwb-load beside the frame's burst: submissions, replays and cancels before, during
 * and after the fault, acknowledged into the frame's file so the checks count them. */
static void paced_load_start(struct h_faults *f, struct h_proc *p, int seconds)
{
	char dur[16];
	snprintf(dur, sizeof dur, "%d", seconds);
	const char *argv[] = { h_bin("gwb-load"), "--url", f->st.srv.proc.url, "--token", TOK,
			       "--rate", "20", "--connections", "4", "--duration", dur, "--mix",
			       "submit=80,replay=10,cancel=10", "--mem", "16", "--core", "1",
			       "--task-seconds", "1", "--timeout", "5", "--acked", f->acked, NULL };
	CHECKF(h_proc_start(p, argv, NULL, NULL, 0) == 0, "cannot start the paced gwb-load");
	h_proc_exempt(p); /* it exits 1 when the fault made requests fail, as expected */
}

static void paced_load_wait(struct h_proc *p, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	while (h_proc_alive(p) && clock_mono_ms() < deadline)
		h_sleep_ms(100);
	CHECKF(!h_proc_alive(p), "the paced gwb-load still runs after %d ms", timeout_ms);
	h_proc_stop(p, SIGTERM, 1000);
}

TEST_T(faults_disk_full_under_load, 600)
{
	struct dbfs d;
	dbfs_mount(&d);
	struct h_faults f;
	start_on(&f, &d, "disk_full", h_faults_n(150, 1000));
	int hold_ms = (int)h_faults_n(3000, 10000);
	struct h_proc paced;
	int paced_s = (int)h_faults_n(9, 20);
	paced_load_start(&f, &paced, paced_s);
	f.requests += 20L * paced_s; /* the figure line counts both loads' requests */
	/* Tasks get their Jobs, run and end before the fault: their releases come during it. */
	h_sleep_ms((int)h_faults_n(2500, 5000));
	long long filled = 0;

	/* The first write that needs a new page of the WAL or of the file fails: the WAL
	 * may still hold reusable room for a few commits, and a checkpoint that truncates the
	 * WAL gives pages back (a commit then succeeds, and the server rightly says the
	 * storage works again), so the filler is topped up before each try. Acknowledged probes
	 * count like gwb-load's. */
	json_t *probes = json_array();
	struct h_resp r = { 0 }, ready = { 0 };
	int64_t deadline = clock_mono_ms() + 30000;
	long st = 0;
	const char *state = NULL;
	for (;;) {
		char id[64];
		h_resp_free(&r);
		h_resp_free(&ready);
		filled += dbfs_fill(&d);
		st = probe_submit(&f, &r, id, sizeof id);
		if (id[0])
			json_array_append_new(probes, json_string(id));
		if (st == 503 && strncmp(h_err_code(&r), "storage", 7) == 0) {
			/* /readyz names the problem (unless a write got through meanwhile). */
			h_req(&ready, "GET", f.st.srv.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
			json_t *deps = json_object_get(ready.json, "dependencies");
			state = json_string_value(
				json_object_get(json_object_get(deps, "store"), "state"));
			if (state && strcmp(state, "ok") != 0)
				break;
		}
		CHECKF(clock_mono_ms() < deadline,
		       "%s: 30 s after the disk filled up a submission answers %ld (%s), /readyz "
		       "says the store is %s",
		       f.name, st, h_err_code(&r), state ? state : "?");
		h_sleep_ms(20);
	}
	int64_t full_at = clock_mono_ms();
	CHECK_STR(h_err_code(&r), "storage_full");
	const char *ra = h_header(&r, "Retry-After");
	CHECKF(ra && strtol(ra, NULL, 10) > 0, "%s: the 503 has no Retry-After", f.name);
	CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "error"), "storage")),
		  "full");
	h_resp_free(&r);
	CHECK_INT(ready.status, 503);
	json_t *store = json_object_get(json_object_get(ready.json, "dependencies"), "store");
	CHECK_STR(json_string_value(json_object_get(store, "state")), "full");
	CHECK_STR(json_string_value(json_object_get(json_object_get(store, "fault"), "kind")),
		  "full");
	h_resp_free(&ready);
	/* An administrator's write is refused the same way, never with a 500 (or it fits in
	 * space the WAL file already holds, and is stored). */
	filled += dbfs_fill(&d);
	h_req(&r, "PUT", f.st.srv.proc.url, "/v1/teams/full-disk-team", ADMIN,
	      "{\"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10}", NULL);
	CHECKF(r.status == 201 ||
		       (r.status == 503 && strncmp(h_err_code(&r), "storage", 7) == 0 &&
			h_header(&r, "Retry-After")),
	       "%s: PUT /v1/teams while full: %ld %s", f.name, r.status, h_err_code(&r));
	t_log("%s: PUT /v1/teams while full: %ld %s", f.name, r.status, h_err_code(&r));
	h_resp_free(&r);

	/* Full for a while under load, kept full: tasks end meanwhile, and their releases
	 * cannot be written. Nothing half-written at any moment. */
	for (int64_t until = clock_mono_ms() + hold_ms; clock_mono_ms() < until;) {
		filled += dbfs_fill(&d);
		h_sleep_ms(100);
	}
	check_rows(&f, "while full");
	long release_failed = log_count(&f, "event=release_failed");
	long batch_failed = log_count(&f, "event=batch_failed");

	/* Space returns: service resumes by itself. */
	CHECKF(unlink(d.filler) == 0, "unlink %s: %s", d.filler, strerror(errno));
	h_faults_cleared(&f);
	deadline = clock_mono_ms() + 30000;
	for (;;) {
		char id[64];
		h_resp_free(&r);
		st = probe_submit(&f, &r, id, sizeof id);
		if (id[0])
			json_array_append_new(probes, json_string(id));
		if (st == 201)
			break;
		CHECKF(clock_mono_ms() < deadline,
		       "%s: 30 s after space returned a submission still answers %ld (%s)", f.name,
		       st, h_err_code(&r));
		h_sleep_ms(50);
	}
	double resumed_s = (double)(clock_mono_ms() - f.cleared_ms) / 1000.0;
	h_resp_free(&r);
	paced_load_wait(&paced, 60000);

	h_faults_verify(&f, h_faults_n(180, 400));
	/* The probes acknowledged are there too, and ended like the rest. */
	size_t i;
	json_t *id;
	json_array_foreach(probes, i, id) {
		char path[128];
		snprintf(path, sizeof path, "/v1/tasks/%s", json_string_value(id));
		h_req(&r, "GET", f.st.srv.proc.url, path, ADMIN, NULL, NULL);
		CHECKF(r.status == 200, "%s: acknowledged probe %s answers %ld", f.name,
		       json_string_value(id), r.status);
		h_resp_free(&r);
	}
	check_rows(&f, "after");
	check_counts(&f);
	h_req(&r, "GET", f.st.srv.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	state = json_string_value(json_object_get(
		json_object_get(json_object_get(r.json, "dependencies"), "store"), "state"));
	CHECK_STR(state, "ok");
	h_resp_free(&r);
	printf("fault %s: filler %lld KiB; full for %.1f s (%ld failed batches, %ld failed "
	       "releases logged); submissions accepted again %.1f s after space returned; %zu "
	       "probes acknowledged\n",
	       f.name, filled / 1024, (double)(f.cleared_ms - full_at) / 1000.0, batch_failed,
	       release_failed, resumed_s, json_array_size(probes));
	json_decref(probes);
}

/* Starts gwb-server on f's settings and waits for it to exit; returns its exit status and
 * its log in *log (gwb_free). Fails the case if it starts listening or does not exit. */
static int start_refused(struct h_faults *f, char **log)
{
	static char envbuf[2][PATH_MAX + 32];
	snprintf(envbuf[0], sizeof envbuf[0], "GWB_DB=%s", f->st.srv.db);
	snprintf(envbuf[1], sizeof envbuf[1], "GWB_ADMIN_TOKEN=%s", f->st.srv.admin);
	const char *env[40] = { envbuf[0], envbuf[1] };
	int n = 2;
	for (int i = 0; f->st.srv.env[i] && n < 39; i++)
		env[n++] = f->st.srv.env[i];
	env[n] = NULL;
	const char *argv[] = { h_bin("gwb-server"), NULL };
	struct h_proc p;
	CHECKF(h_proc_start(&p, argv, env, NULL, 0) == 0, "cannot start gwb-server");
	h_proc_exempt(&p);
	int64_t deadline = clock_mono_ms() + 15000;
	while (h_proc_alive(&p) && clock_mono_ms() < deadline)
		h_sleep_ms(50);
	int alive = h_proc_alive(&p);
	int status = h_proc_stop(&p, SIGKILL, 1000);
	int fd = open(p.log, O_RDONLY);
	*log = fd >= 0 ? h_read_all(fd) : NULL;
	if (fd >= 0)
		close(fd);
	CHECKF(!alive, "%s: gwb-server kept running on a read-only database: %s", f->name,
	       *log ? *log : "");
	return status;
}

TEST_T(faults_disk_read_only, 600)
{
	struct dbfs d;
	dbfs_mount(&d);
	struct h_faults f;
	start_on(&f, &d, "read_only", h_faults_n(300, 1000));
	h_sleep_ms((int)h_faults_n(1000, 3000));

	/* Linux refuses to make a filesystem read-only while a file on it is open for
	 * writing, as the database is: the fault cannot come under a running server through a
	 * remount, only when the server is down (or as a kernel's emergency remount after disk
	 * errors, which SQLite sees as I/O errors: 503 storage_error, see docs/RELIABILITY.md). */
	int rc = dbfs_remount(&d, 1);
	t_log("remount read-only under the running server: %s",
	      rc == 0 ? "done" : strerror(-rc));
	if (rc == 0) {
		struct h_resp r;
		long st = probe_submit(&f, &r, NULL, 0);
		CHECKF(st == 503, "%s: a submission on a read-only filesystem answers %ld", f.name,
		       st);
		h_resp_free(&r);
		CHECK_INT(dbfs_remount(&d, 0), 0);
	}

	/* Down, made read-only, started: it refuses, in one line naming the file and why. */
	h_server_kill9(&f.st.srv);
	CHECKF((rc = dbfs_remount(&d, 1)) == 0, "remount read-only: %s", strerror(-rc));
	char *log = NULL;
	int status = start_refused(&f, &log);
	/* A refusal (exit 1), not a crash: a signal would give 128 + its number. */
	CHECKF(status == 1, "%s: gwb-server exited %d on a read-only database, not 1", f.name,
	       status);
	long lines = 0;
	const char *line = NULL;
	for (const char *p = log; p && (p = strstr(p, "gwb-server: ")) != NULL; p++, lines++)
		line = p;
	CHECKF(lines == 1 && strstr(line, d.db) && strstr(line, "read-only"),
	       "%s: expected one line naming %s and read-only, got: %s", f.name, d.db,
	       log ? log : "");
	char first[512];
	snprintf(first, sizeof first, "%.*s", (int)strcspn(line, "\n"), line);
	t_log("exit %d: %s", status, first);
	gwb_free(log);

	/* Writable again: started, every acknowledged task is there and ends. */
	CHECKF((rc = dbfs_remount(&d, 0)) == 0, "remount writable: %s", strerror(-rc));
	h_server_start(&f.st.srv);
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(180, 400));
	check_rows(&f, "after");
	check_counts(&f);
}
