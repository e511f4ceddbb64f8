/* Integration-test harness: starts the real binaries (redis-server, gwb-server, kubesim) on
 * loopback or Unix sockets in a per-case temp folder, stops them by PID, and speaks HTTP to them
 * with lib/httpc. Everything a case starts is also killed with its process group when it ends. */
#ifndef GWB_HARNESS_H
#define GWB_HARNESS_H

#include <jansson.h>
#include <limits.h>
#include <sys/types.h>

/* Path of a built binary: $GWB_BIN/name. Static buffer ring; copy it to keep it. */
const char *h_bin(const char *name);
/* Fails the case unless prog can be run (a path that is executable, or a name found on PATH),
 * naming it: the tests skip nothing, so a missing binary or tool is a failure. */
void h_need_exec(const char *prog);
/* The current case's temp folder (created on first use, removed when the case ends). */
const char *h_tmpdir(void);
/* h_tmpdir()/name in a static buffer ring. */
const char *h_path(const char *name);

struct h_proc {
	pid_t pid;
	char log[PATH_MAX];  /* stdout and stderr of the process */
	char url[256];       /* from its "... listening on URL" line, when it prints one */
};

/* Starts argv[0] with the current environment plus env (NULL-terminated "K=V" list, may be
 * NULL), output to log. When ready is not NULL, waits up to timeout_ms for a line containing
 * it and copies the rest of that line (the URL) into p->url. Returns 0, or -1 (the case is not
 * failed: the caller decides); a missing argv[0] fails the case (h_need_exec). */
int h_proc_start(struct h_proc *p, const char *const *argv, const char *const *env,
		 const char *ready, int timeout_ms);
/* Sends sig and waits up to timeout_ms; then SIGKILL. Returns the exit status (0..255), or
 * 128 + the signal that ended it. */
int h_proc_stop(struct h_proc *p, int sig, int timeout_ms);
/* Returns 1 while the process is alive. */
int h_proc_alive(struct h_proc *p);
/* SIGTERM and wait; fails the case unless it exits 0, showing the end of its log. */
void h_proc_stop_ok(struct h_proc *p, const char *name);
/* Every started process is stopped at the end of its case by the harness, which keeps its own
 * record of it (so p may live in the case's stack frame). A watched process is stopped with
 * SIGTERM, and the case fails (without ending early) when it exits non-zero then or had died
 * during the case; others are killed. */
void h_proc_watch(const struct h_proc *p, const char *name);
/* The process is being stopped on purpose (kill -9): no end-of-case check until it is started
 * again through the same p. */
void h_proc_exempt(const struct h_proc *p);
/* Prints the last lines of the process log into the test output. */
void h_proc_dump_log(const struct h_proc *p, int lines);

struct h_redis {
	struct h_proc proc;
	char sock[PATH_MAX];
	char url[PATH_MAX + 16]; /* unix:///path/to/sock */
	int keep_data; /* set after the start: restarts load the append-only file (see below) */
};
/* Starts a private redis-server on a Unix socket in the case folder (fails the case if it
 * cannot). Stopped automatically when the case ends. */
void h_redis_start(struct h_redis *r);
/* Restarts a stopped redis on the same socket. Its data is lost (no persistence), unless
 * keep_data was set and the running one was told to keep an append-only file
 * (CONFIG SET appendonly yes, appendfsync always): then the restart loads it. */
void h_redis_restart(struct h_redis *r);
/* Runs redis-cli against r with the given arguments; returns its stdout (caller frees with
 * gwb_free), or fails the case. */
char *h_redis_cli(const struct h_redis *r, const char *const *args);

struct h_server {
	struct h_proc proc;
	char db[PATH_MAX];
	char admin[64];
	const char *env[32]; /* extra "K=V" settings, NULL-terminated; set before start */
};
/* The metrics token (http.metrics_token) every server h_server_start starts is given: it reads
 * /metrics and the detailed /readyz. */
#define H_METRICS_TOKEN "metrics-secret"

/* Fills defaults: db in the case folder, admin token "admin-secret", listen 127.0.0.1:0. */
void h_server_init(struct h_server *s);
/* Starts gwb-server with s's settings and waits for its listening line (fails the case if it
 * does not come). A server still running when the case ends is stopped with SIGTERM, and a
 * non-zero exit (a sanitizer report, say) fails the case. */
void h_server_start(struct h_server *s);
/* SIGTERM and wait; fails the case unless it exits 0. */
void h_server_stop(struct h_server *s);
/* SIGKILL and reap. */
void h_server_kill9(struct h_server *s);

struct h_resp {
	long status;
	char *body;       /* NUL-terminated; gwb-allocated */
	size_t body_len;
	json_t *json;     /* parsed body, or NULL */
	char headers[8192];
};
/* One HTTP request. token NULL sends no Authorization; body NULL sends none; headers is a
 * NULL-terminated list of "Name: value" lines (may be NULL). Returns 0, or -1 when no answer
 * came (r->status 0). */
int h_http(struct h_resp *r, const char *method, const char *url, const char *token,
	   const char *body, const char *const *headers);
/* h_http that fails the case when no answer comes. */
void h_req(struct h_resp *r, const char *method, const char *base, const char *path,
	   const char *token, const char *body, const char *const *headers);
/* Creates or changes team at base as the admin (PUT /v1/teams/TEAM with body); fails the
 * case unless the answer is 201 or 200, and returns it. */
long h_team_put(const char *base, const char *admin, const char *team, const char *body);
/* The first column of the first row of sql on the SQLite file db, opened read-only (a 5 s busy
 * wait), or -1 when there is no row; fails the case when the statement is not valid. */
long long h_sql_int(const char *db, const char *sql);
/* The sum of the samples of the Prometheus metric name (exact name, any labels) at base's
 * /metrics whose line contains match (NULL: every sample). */
double h_metric(const char *base, const char *name, const char *match);
/* Value of a response header (case-insensitive name) in a static buffer, or NULL. */
const char *h_header(const struct h_resp *r, const char *name);
void h_resp_free(struct h_resp *r);
/* Error code of a JSON error body, or "". */
const char *h_err_code(const struct h_resp *r);

/* Sends raw bytes to host:port (from an http:// URL), returns the whole answer until the peer
 * closes or timeout_ms passes. Caller frees with gwb_free. */
char *h_raw(const char *url, const char *bytes, size_t len, int timeout_ms);

/* Reads fd until end of file into a NUL-terminated gwb_malloc'd buffer (caller frees with
 * gwb_free); closes nothing. */
char *h_read_all(int fd);

/* Writes text into h_path(name) and returns that path (static ring, like h_path); fails the
 * case if it cannot. */
const char *h_write_file(const char *name, const char *text);

/* Sleeps ms milliseconds. */
void h_sleep_ms(int ms);

#endif
