/* The lab's private stack: child processes started with fork/exec, their output in log files
 * under the stack's folder, readiness read from their "listening on" lines, and a stop by PID
 * that a signal handler can also do (kill(2) is async-signal-safe). */
#include "tools/gwb-lab/stack.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a process may take to print its listening line: kubesim and gwb-server need well
 * under a second, but this machine is shared and may be slow. */
#define READY_TIMEOUT_MS 20000
/* SIGTERM first; a process still alive after this gets SIGKILL. */
#define STOP_GRACE_MS 5000

/* The PIDs a signal handler stops: the three processes, kept in step with struct stack. */
static volatile pid_t live[3];

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static void on_signal(int sig)
{
	for (int i = 2; i >= 0; i--)
		if (live[i] > 0)
			kill(live[i], SIGTERM);
	_exit(128 + sig);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	if (ftw->level > 0)
		remove(path);
	return 0;
}

/* Forks argv with env (NULL-terminated "K=V" added to ours), output appended to p->log. */
static int spawn(struct stack_proc *p, const char *const *argv, const char *const *env, char *err,
                 size_t errlen)
{
	int fd = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", p->log, strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(fd);
		return -1;
	}
	if (pid == 0) {
		/* Whatever happens to the lab (even kill -9), its stack goes with it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		for (const char *const *e = env; e && *e; e++)
			putenv((char *)*e);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "gwb-lab: exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	p->pid = pid;
	p->url[0] = '\0';
	return 0;
}

/* Waits for a line "<prefix>URL" in p->log; copies URL. 0, or -1 when the process died or the
 * line never came. */
static int wait_ready(struct stack_proc *p, const char *prefix, const char *name, char *err,
                      size_t errlen)
{
	for (long waited = 0; waited < READY_TIMEOUT_MS; waited += 50) {
		FILE *f = fopen(p->log, "r");
		char line[512];
		while (f && fgets(line, sizeof line, f)) {
			const char *at = strstr(line, prefix);
			if (!at)
				continue;
			snprintf(p->url, sizeof p->url, "%s", at + strlen(prefix));
			p->url[strcspn(p->url, "\r\n")] = '\0';
		}
		if (f)
			fclose(f);
		if (p->url[0])
			return 0;
		int status;
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			p->pid = 0;
			snprintf(err, errlen, "%s exited before it was ready (log: %s)", name,
			         p->log);
			return -1;
		}
		sleep_ms(50);
	}
	snprintf(err, errlen, "%s was not ready after %d ms (log: %s)", name, READY_TIMEOUT_MS,
	         p->log);
	return -1;
}

static int wait_socket(struct stack_proc *p, const char *sock, const char *name, char *err,
                       size_t errlen)
{
	struct stat st;
	for (long waited = 0; waited < READY_TIMEOUT_MS; waited += 50) {
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
			return 0;
		int status;
		if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
			p->pid = 0;
			snprintf(err, errlen, "%s exited before it was ready (log: %s)", name,
			         p->log);
			return -1;
		}
		sleep_ms(50);
	}
	snprintf(err, errlen, "%s made no socket %s (log: %s)", name, sock, p->log);
	return -1;
}

static void sync_live(const struct stack *s)
{
	live[0] = s->redis.pid;
	live[1] = s->kubesim.pid;
	live[2] = s->server.pid;
}

static int start_redis(struct stack *s, char *err, size_t errlen)
{
	const char *argv[] = {"/usr/bin/redis-server",
	                      "--port",
	                      "0",
	                      "--unixsocket",
	                      s->redis_sock,
	                      "--unixsocketperm",
	                      "700",
	                      "--save",
	                      "",
	                      "--appendonly",
	                      "no",
	                      "--dir",
	                      s->dir,
	                      NULL};
	if (access(argv[0], X_OK) != 0) {
		snprintf(err, errlen, "%s is missing: run 'make deps' as root first", argv[0]);
		return -1;
	}
	if (spawn(&s->redis, argv, NULL, err, errlen) != 0)
		return -1;
	sync_live(s);
	return wait_socket(&s->redis, s->redis_sock, "redis-server", err, errlen);
}

static int start_kubesim(struct stack *s, char *err, size_t errlen)
{
	char bin[PATH_MAX + 16], worker[PATH_MAX + 16], state[PATH_MAX + 16];
	snprintf(bin, sizeof bin, "%s/kubesim", s->bindir);
	snprintf(worker, sizeof worker, "%s/gwb-worker", s->bindir);
	snprintf(state, sizeof state, "%s/kubesim", s->dir);
	mkdir(state, 0700);
	const char *argv[] = {bin,           "--listen", "127.0.0.1:0",      "--worker",  worker,
	                      "--state-dir", state,      "--control-socket", s->ctl_sock, NULL};
	if (spawn(&s->kubesim, argv, NULL, err, errlen) != 0)
		return -1;
	sync_live(s);
	if (wait_ready(&s->kubesim, "kubesim listening on ", "kubesim", err, errlen) != 0)
		return -1;
	return wait_socket(&s->kubesim, s->ctl_sock, "kubesim", err, errlen);
}

int stack_server_start(struct stack *s, char *err, size_t errlen)
{
	/* putenv keeps these pointers: they live until exec, in this frame of the parent. */
	static char e_admin[96], e_db[PATH_MAX + 16], e_listen[64], e_redis[PATH_MAX + 32],
	    e_kube[300];
	char bin[PATH_MAX + 16];
	snprintf(bin, sizeof bin, "%s/gwb-server", s->bindir);
	snprintf(e_admin, sizeof e_admin, "GWB_ADMIN_TOKEN=%s", s->admin);
	snprintf(e_db, sizeof e_db, "GWB_DB=%s", s->db);
	snprintf(e_listen, sizeof e_listen, "GWB_LISTEN=127.0.0.1:%d", s->port);
	snprintf(e_redis, sizeof e_redis, "GWB_REDIS=unix://%s", s->redis_sock);
	snprintf(e_kube, sizeof e_kube, "GWB_KUBE_SERVER=%s", s->kubesim.url);
	/* A fast housekeeping tick and resync, and a short Kubernetes time-out, so that each
	 * experiment's outcome shows within seconds (the same values as the integration tests). */
	const char *env[] = {e_admin,
	                     e_db,
	                     e_listen,
	                     e_redis,
	                     e_kube,
	                     "GWB_MODE=sim",
	                     "GWB_HOUSEKEEPING_INTERVAL_MS=100",
	                     "GWB_RECONCILE_RESYNC_MS=500",
	                     "GWB_KUBE_REQUEST_TIMEOUT_MS=1000",
	                     NULL};
	const char *argv[] = {bin, NULL};
	if (spawn(&s->server, argv, env, err, errlen) != 0)
		return -1;
	sync_live(s);
	if (wait_ready(&s->server, "gwb-server listening on ", "gwb-server", err, errlen) != 0)
		return -1;
	const char *colon = strrchr(s->server.url, ':');
	if (s->port == 0 && colon)
		s->port = (int)strtol(colon + 1, NULL, 10);
	return 0;
}

int stack_start(struct stack *s, const char *bindir, const char *dir, char *err, size_t errlen)
{
	memset(s, 0, sizeof *s);
	snprintf(s->bindir, sizeof s->bindir, "%s", bindir);
	snprintf(s->dir, sizeof s->dir, "%s", dir);
	snprintf(s->admin, sizeof s->admin, "lab-admin-token");
	mkdir(dir, 0700);
	/* A fresh start: the previous run's database, sockets and pod logs go. */
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	snprintf(s->redis_sock, sizeof s->redis_sock, "%s/redis.sock", dir);
	snprintf(s->ctl_sock, sizeof s->ctl_sock, "%s/kubesim.sock", dir);
	snprintf(s->db, sizeof s->db, "%s/gwb.db", dir);
	snprintf(s->redis.log, sizeof s->redis.log, "%s/redis.log", dir);
	snprintf(s->kubesim.log, sizeof s->kubesim.log, "%s/kubesim.log", dir);
	snprintf(s->server.log, sizeof s->server.log, "%s/gwb-server.log", dir);
	if (strlen(s->redis_sock) >= 100 || strlen(s->ctl_sock) >= 100) {
		snprintf(err, errlen, "%s: too long for a Unix socket path", dir);
		return -1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (start_redis(s, err, errlen) != 0 || start_kubesim(s, err, errlen) != 0)
		return -1;
	return stack_server_start(s, err, errlen);
}

int stack_server_kill9(struct stack *s)
{
	if (s->server.pid <= 0)
		return -1;
	kill(s->server.pid, SIGKILL);
	waitpid(s->server.pid, NULL, 0);
	s->server.pid = 0;
	sync_live(s);
	return 0;
}

static void stop_one(struct stack_proc *p)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, SIGTERM);
	for (long waited = 0; waited < STOP_GRACE_MS; waited += 20) {
		if (waitpid(p->pid, NULL, WNOHANG) == p->pid) {
			p->pid = 0;
			return;
		}
		sleep_ms(20);
	}
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	p->pid = 0;
}

void stack_stop(struct stack *s)
{
	stop_one(&s->server);
	stop_one(&s->kubesim);
	stop_one(&s->redis);
	sync_live(s);
}
