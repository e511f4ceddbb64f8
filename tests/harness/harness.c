/* Integration-test harness: real processes, real sockets. */
#include "tests/harness/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/httpc.h"
#include "lib/clock.h"
#include "tests/harness/h_schema.h"
#include "tests/harness/t.h"

static char tmpdir[PATH_MAX];

static const char *ring_fmt(const char *a, const char *b)
{
	static char ring[8][PATH_MAX];
	static unsigned slot;
	char *out = ring[slot++ % 8];
	snprintf(out, PATH_MAX, "%s/%s", a, b);
	return out;
}

const char *h_bin(const char *name)
{
	const char *dir = getenv("GWB_BIN");
	return ring_fmt(dir && dir[0] ? dir : "bin", name);
}

static int can_exec(const char *prog)
{
	if (strchr(prog, '/'))
		return access(prog, X_OK) == 0;
	const char *path = getenv("PATH");
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		char cand[PATH_MAX];
		snprintf(cand, sizeof cand, "%.*s/%s", (int)n, n ? p : ".", prog);
		if (access(cand, X_OK) == 0)
			return 1;
		p += n + (colon != NULL);
	}
	return 0;
}

void h_need_exec(const char *prog)
{
	if (!can_exec(prog))
		t_fail(__FILE__, __LINE__, "%s: not found or not executable (build it with make all, "
					   "or install it with make deps: no case is skipped)",
		       prog);
}

static void rm_tmpdir(void *arg)
{
	(void)arg;
	if (!tmpdir[0] || getenv("GWB_KEEP_TMP"))
		return;
	pid_t pid = fork();
	if (pid == 0) {
		execlp("rm", "rm", "-rf", tmpdir, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

const char *h_tmpdir(void)
{
	if (!tmpdir[0]) {
		/* Short base: Unix socket paths must fit in 108 bytes. */
		snprintf(tmpdir, sizeof tmpdir, "/tmp/gwbt.XXXXXX");
		if (!mkdtemp(tmpdir))
			t_fail(__FILE__, __LINE__, "mkdtemp: %s", strerror(errno));
		t_defer(rm_tmpdir, NULL);
	}
	return tmpdir;
}

const char *h_path(const char *name)
{
	return ring_fmt(h_tmpdir(), name);
}

char *h_read_all(int fd)
{
	size_t cap = 8192, len = 0;
	char *buf = gwb_malloc(cap);
	for (;;) {
		if (len + 4096 > cap) {
			cap *= 2;
			buf = gwb_realloc(buf, cap);
		}
		ssize_t n = read(fd, buf + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	return buf;
}

const char *h_write_file(const char *name, const char *text)
{
	const char *path = h_path(name);
	FILE *f = fopen(path, "w");
	if (!f)
		t_fail(__FILE__, __LINE__, "cannot write %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
	return path;
}

void h_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int find_ready(const struct h_proc *p, const char *ready, char *url, size_t urllen)
{
	FILE *f = fopen(p->log, "r");
	if (!f)
		return 0;
	char line[1024];
	int found = 0;
	while (fgets(line, sizeof line, f)) {
		char *at = strstr(line, ready);
		if (!at)
			continue;
		at += strlen(ready);
		while (*at == ' ')
			at++;
		at[strcspn(at, " \r\n")] = '\0';
		snprintf(url, urllen, "%s", at);
		found = 1;
		break;
	}
	fclose(f);
	return found;
}

/* Every process a case starts is recorded here, in static storage, keyed by the address of
 * its struct h_proc. The key is never dereferenced: the structs usually live in the case's
 * stack frame, which is gone when the end-of-case clean-up runs. */
struct proc_rec {
	const void *slot;
	pid_t pid;
	char name[32];
	char log[PATH_MAX];
	int watched;  /* checked at the end of the case (h_proc_watch) */
	int exempt;   /* stopped on purpose with a signal (h_proc_exempt) */
	int reaped;   /* its exit status is known */
	int code;     /* exit status, or 128 + signal */
	int died;     /* reaped during the case without being asked to stop */
};
static struct proc_rec recs[64];
static int nrecs;
static pid_t orphans[64];
static int norphans;

static struct proc_rec *rec_of(const struct h_proc *p)
{
	for (int i = 0; i < nrecs; i++)
		if (recs[i].slot == p)
			return &recs[i];
	return NULL;
}

static void procs_end(void *arg);

static void rec_started(const struct h_proc *p, const char *name)
{
	static int deferred;
	struct proc_rec *r = rec_of(p);
	if (r && !r->reaped && r->pid > 0 && norphans < 64)
		orphans[norphans++] = r->pid; /* replaced while alive: killed at the end */
	if (!r && nrecs < 64)
		r = &recs[nrecs++];
	if (!r)
		return;
	int watched = r->slot == p && r->watched;
	char keep[32];
	snprintf(keep, sizeof keep, "%s", r->slot == p ? r->name : name);
	memset(r, 0, sizeof *r);
	r->slot = p;
	r->pid = p->pid;
	r->watched = watched;
	snprintf(r->name, sizeof r->name, "%s", keep);
	snprintf(r->log, sizeof r->log, "%s", p->log);
	if (!deferred) {
		deferred = 1;
		t_defer(procs_end, NULL);
	}
}

static void rec_reaped(const struct h_proc *p, int code, int asked)
{
	struct proc_rec *r = rec_of(p);
	if (!r || r->reaped)
		return;
	r->reaped = 1;
	r->code = code;
	r->died = !asked;
}

static void dump_log_file(const char *log, int lines)
{
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof cmd, "tail -n %d '%s' | sed 's/^/    | /'", lines, log);
	fflush(stdout);
	if (system(cmd) < 0)
		t_log("could not show %s", log);
}

/* The end of a case: a watched process that died during it, or exits non-zero on SIGTERM now,
 * fails the case; everything else still running is killed. */
static void procs_end(void *arg)
{
	(void)arg;
	for (int i = 0; i < nrecs; i++) {
		struct proc_rec *r = &recs[i];
		if (r->pid <= 0)
			continue;
		if (!r->reaped) {
			int st = 0;
			pid_t w = waitpid(r->pid, &st, WNOHANG);
			if (w == r->pid) {
				r->reaped = r->died = 1;
				r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
			}
		}
		if (!r->reaped) {
			struct h_proc tmp = { .pid = r->pid };
			int code = h_proc_stop(&tmp, r->watched && !r->exempt ? SIGTERM : SIGKILL,
					       10000);
			if (r->watched && !r->exempt && code != 0) {
				dump_log_file(r->log, 40);
				t_fail_soft("%s exited %d on SIGTERM at the end of the case", r->name,
					    code);
			}
			continue;
		}
		if (r->watched && !r->exempt && r->died && r->code != 0) {
			dump_log_file(r->log, 40);
			t_fail_soft("%s exited %d during the case", r->name, r->code);
		}
	}
	for (int i = 0; i < norphans; i++) {
		kill(orphans[i], SIGKILL);
		waitpid(orphans[i], NULL, 0);
	}
	nrecs = norphans = 0;
}

void h_proc_watch(const struct h_proc *p, const char *name)
{
	struct proc_rec *r = rec_of(p);
	if (!r)
		return;
	r->watched = 1;
	snprintf(r->name, sizeof r->name, "%s", name);
}

void h_proc_exempt(const struct h_proc *p)
{
	struct proc_rec *r = rec_of(p);
	if (r)
		r->exempt = 1;
}

int h_proc_start(struct h_proc *p, const char *const *argv, const char *const *env,
		 const char *ready, int timeout_ms)
{
	static int seq;
	const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	char name[128];
	snprintf(name, sizeof name, "%s.%d.log", base, ++seq);
	snprintf(p->log, sizeof p->log, "%s", h_path(name));
	p->url[0] = '\0';
	h_need_exec(argv[0]);
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0) {
			dup2(nul, 0);
			close(nul);
		}
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	p->pid = pid;
	rec_started(p, base);
	if (!ready)
		return 0;
	int64_t deadline = clock_mono_ms() + timeout_ms;
	while (clock_mono_ms() < deadline) {
		if (find_ready(p, ready, p->url, sizeof p->url))
			return 0;
		if (!h_proc_alive(p))
			return -1;
		h_sleep_ms(10);
	}
	return -1;
}

int h_proc_alive(struct h_proc *p)
{
	if (p->pid <= 0)
		return 0;
	int st;
	pid_t r = waitpid(p->pid, &st, WNOHANG);
	if (r == p->pid) {
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		p->pid = -code - 1;
		rec_reaped(p, code, 0);
		return 0;
	}
	return r == 0;
}

int h_proc_stop(struct h_proc *p, int sig, int timeout_ms)
{
	if (p->pid <= 0)
		return p->pid < 0 ? -p->pid - 1 : 0;
	pid_t pid = p->pid;
	kill(pid, sig);
	int st = 0;
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			break;
		if (r < 0) {
			p->pid = 0;
			rec_reaped(p, 0, 1);
			return 0;
		}
		if (clock_mono_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			break;
		}
		h_sleep_ms(5);
	}
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	p->pid = -code - 1;
	rec_reaped(p, code, 1);
	return code;
}

void h_proc_stop_ok(struct h_proc *p, const char *name)
{
	int code = h_proc_stop(p, SIGTERM, 10000);
	if (code != 0) {
		h_proc_dump_log(p, 40);
		t_fail(__FILE__, __LINE__, "%s exited %d on SIGTERM", name, code);
	}
}

void h_proc_dump_log(const struct h_proc *p, int lines)
{
	dump_log_file(p->log, lines);
}

/* ---- redis ---- */

static int unix_connectable(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
	close(fd);
	return ok;
}

static void redis_spawn(struct h_redis *r)
{
	const char *argv[] = { "redis-server", "--port", "0", "--unixsocket", r->sock,
			       "--unixsocketperm", "700", "--save", "", "--appendonly",
			       r->keep_data ? "yes" : "no", "--appendfsync", "always", "--dir",
			       h_tmpdir(), NULL };
	if (h_proc_start(&r->proc, argv, NULL, NULL, 0) < 0)
		t_fail(__FILE__, __LINE__, "cannot start redis-server");
	int64_t deadline = clock_mono_ms() + 10000;
	while (!unix_connectable(r->sock)) {
		if (clock_mono_ms() > deadline || !h_proc_alive(&r->proc)) {
			h_proc_dump_log(&r->proc, 20);
			t_fail(__FILE__, __LINE__, "redis-server did not come up");
		}
		h_sleep_ms(10);
	}
}

void h_redis_start(struct h_redis *r)
{
	memset(r, 0, sizeof *r);
	snprintf(r->sock, sizeof r->sock, "%s", h_path("redis.sock"));
	snprintf(r->url, sizeof r->url, "unix://%s", r->sock);
	redis_spawn(r); /* killed at the end of the case like everything it started */
}

void h_redis_restart(struct h_redis *r)
{
	if (h_proc_alive(&r->proc))
		return;
	redis_spawn(r);
}

char *h_redis_cli(const struct h_redis *r, const char *const *args)
{
	int pfd[2];
	h_need_exec("redis-cli");
	if (pipe(pfd) < 0)
		t_fail(__FILE__, __LINE__, "pipe: %s", strerror(errno));
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		const char *argv[64] = { "redis-cli", "-s", r->sock };
		int n = 3;
		for (const char *const *a = args; *a && n < 63; a++)
			argv[n++] = *a;
		argv[n] = NULL;
		dup2(pfd[1], 1);
		close(pfd[0]);
		close(pfd[1]);
		execvp("redis-cli", (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	char *out = h_read_all(pfd[0]);
	close(pfd[0]);
	int st;
	waitpid(pid, &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		t_fail(__FILE__, __LINE__, "redis-cli %s failed", args[0]);
	return out;
}

/* ---- gwb-server ---- */

void h_server_init(struct h_server *s)
{
	memset(s, 0, sizeof *s);
	snprintf(s->db, sizeof s->db, "%s", h_path("gwb.db"));
	snprintf(s->admin, sizeof s->admin, "admin-secret");
}

void h_server_start(struct h_server *s)
{
	static char envbuf[8][PATH_MAX + 32];
	snprintf(envbuf[0], sizeof envbuf[0], "GWB_DB=%s", s->db);
	snprintf(envbuf[1], sizeof envbuf[1], "GWB_ADMIN_TOKEN=%s", s->admin);
	const char *env[48] = { envbuf[0], envbuf[1], "GWB_LISTEN=127.0.0.1:0",
				"GWB_HTTP_METRICS_TOKEN=" H_METRICS_TOKEN };
	int n = 4;
	for (int i = 0; s->env[i] && n < 47; i++)
		env[n++] = s->env[i];
	env[n] = NULL;
	/* GWB_TEST_WRAP (say "valgrind --error-exitcode=99 --leak-check=full") runs the server
	 * under that command: make valgrind. Its words are split at spaces. */
	static char wrap[512];
	const char *argv[24];
	int a = 0;
	const char *w = getenv("GWB_TEST_WRAP");
	if (w && *w) {
		snprintf(wrap, sizeof wrap, "%s", w);
		for (char *save = NULL, *tok = strtok_r(wrap, " ", &save); tok && a < 20;
		     tok = strtok_r(NULL, " ", &save))
			argv[a++] = tok;
	}
	argv[a++] = h_bin("gwb-server");
	argv[a] = NULL;
	if (h_proc_start(&s->proc, argv, env, "gwb-server listening on", 15000) < 0) {
		h_proc_dump_log(&s->proc, 30);
		t_fail(__FILE__, __LINE__, "gwb-server did not start");
	}
	h_proc_watch(&s->proc, "gwb-server");
	h_schema_watch(s->proc.url); /* its answers are held to docs/openapi.yaml */
}

void h_server_stop(struct h_server *s)
{
	h_proc_stop_ok(&s->proc, "gwb-server");
}

void h_server_kill9(struct h_server *s)
{
	h_proc_exempt(&s->proc);
	h_proc_stop(&s->proc, SIGKILL, 5000);
}

/* ---- HTTP ---- */

int h_http(struct h_resp *r, const char *method, const char *url, const char *token,
	   const char *body, const char *const *headers)
{
	memset(r, 0, sizeof *r);
	struct httpc_req req = { .method = method, .url = url, .token = token, .body = body,
				 .body_len = body ? strlen(body) : 0, .headers = headers };
	struct httpc_resp hr;
	int rc = httpc_request(&req, &hr);
	/* The answer's buffers move into r: h_resp_free frees them. */
	r->status = hr.status;
	r->body = hr.body;
	r->body_len = hr.body_len;
	r->json = hr.json;
	memcpy(r->headers, hr.headers, sizeof r->headers);
	const char *path;
	if (rc == 0 && h_schema_watched(url, &path)) {
		char ct[256], why[1024];
		/* libevent's own answers (its HTML 400 and 413) lack the server's nosniff */
		int own = httpc_header(&hr, "X-Content-Type-Options", why, sizeof why) != NULL;
		struct h_answer a = { method ? method : "GET", path, r->status,
				      httpc_header(&hr, "Content-Type", ct, sizeof ct), own,
				      r->headers, r->body_len, r->json };
		if (h_schema_check(&a, why, sizeof why) < 0)
			t_fail_soft("openapi: %s", why);
	}
	return rc == 0 ? 0 : -1;
}

void h_req(struct h_resp *r, const char *method, const char *base, const char *path,
	   const char *token, const char *body, const char *const *headers)
{
	char url[2048];
	snprintf(url, sizeof url, "%s%s", base, path);
	if (h_http(r, method, url, token, body, headers) < 0)
		t_fail(__FILE__, __LINE__, "%s %s: no answer", method, url);
}

const char *h_header(const struct h_resp *r, const char *name)
{
	static char val[1024];
	struct httpc_resp hr;
	memset(&hr, 0, sizeof hr);
	memcpy(hr.headers, r->headers, sizeof hr.headers);
	return httpc_header(&hr, name, val, sizeof val);
}

void h_resp_free(struct h_resp *r)
{
	gwb_free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof *r);
}

const char *h_err_code(const struct h_resp *r)
{
	json_t *code = json_object_get(json_object_get(r->json, "error"), "code");
	return json_is_string(code) ? json_string_value(code) : "";
}

char *h_raw(const char *url, const char *bytes, size_t len, int timeout_ms)
{
	char host[64];
	int port;
	if (sscanf(url, "http://%63[^:]:%d", host, &port) != 2)
		t_fail(__FILE__, __LINE__, "bad url %s", url);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, host, &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		t_fail(__FILE__, __LINE__, "connect %s: %s", url, strerror(errno));
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, bytes + off, len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	size_t cap = 4096, got = 0;
	char *out = gwb_malloc(cap);
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		int left = (int)(deadline - clock_mono_ms());
		if (left <= 0)
			break;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, left) <= 0)
			break;
		if (got + 1024 > cap) {
			cap *= 2;
			out = gwb_realloc(out, cap);
		}
		ssize_t n = read(fd, out + got, cap - got - 1);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	out[got] = '\0';
	close(fd);
	return out;
}

/* ---- reading the server's state directly ---- */

long long h_sql_int(const char *db, const char *sql)
{
	sqlite3 *h;
	CHECK(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
	sqlite3_busy_timeout(h, 5000);
	sqlite3_stmt *st;
	CHECKF(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
	       sqlite3_errmsg(h));
	long long v = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

double h_metric(const char *base, const char *name, const char *match)
{
	struct h_resp r;
	h_req(&r, "GET", base, "/metrics", H_METRICS_TOKEN, NULL, NULL);
	CHECK_INT(r.status, 200);
	double sum = 0;
	size_t nl = strlen(name);
	for (char *line = r.body; line && *line;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = '\0';
		if (strncmp(line, name, nl) == 0 && (line[nl] == ' ' || line[nl] == '{') &&
		    (!match || strstr(line, match))) {
			char *sp = strrchr(line, ' ');
			if (sp)
				sum += strtod(sp + 1, NULL);
		}
		line = end ? end + 1 : NULL;
	}
	h_resp_free(&r);
	return sum;
}

long h_team_put(const char *base, const char *admin, const char *team, const char *body)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/teams/%s", team);
	struct h_resp r;
	h_req(&r, "PUT", base, path, admin, body, NULL);
	CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body);
	long status = r.status;
	h_resp_free(&r);
	return status;
}
