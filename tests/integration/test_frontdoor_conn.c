/* The front door's connection guard on a real gwb-server: out of descriptors, the listener
 * pauses instead of spinning on the backlog and flooding the log, and recovers once the
 * connections close. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

/* The server's user plus system time so far, in clock ticks (from /proc/PID/stat). */
static long long proc_cpu_ticks(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	CHECKF(f, "cannot open %s", path);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	/* Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15. */
	char *p = strrchr(buf, ')');
	CHECK(p);
	unsigned long long ut = 0, st = 0;
	CHECK_INT(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st),
		  2);
	return (long long)(ut + st);
}

/* A non-blocking connection to url's host:port (left in progress), or -1. */
static int open_idle(const char *url)
{
	const char *c = strrchr(url, ':');
	CHECK(c);
	char *end;
	long port = strtol(c + 1, &end, 10);
	CHECKF(port > 0 && port < 65536, "bad port in %s", url);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	return fd;
}

static long long file_size(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

TEST_T(frontdoor_out_of_descriptors_pauses_the_listener, 60)
{
	enum { IDLE = 300 };
	struct rlimit own;
	CHECK_INT(getrlimit(RLIMIT_NOFILE, &own), 0);
	CHECKF(own.rlim_max >= IDLE + 64, "the hard descriptor limit %llu is too low",
	       (unsigned long long)own.rlim_max);
	if (own.rlim_cur < IDLE + 64) {
		own.rlim_cur = own.rlim_max;
		CHECK_INT(setrlimit(RLIMIT_NOFILE, &own), 0);
	}
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	/* As `ulimit -n 256` would have done, on the running server. */
	struct rlimit low = { 256, 256 };
	CHECK_INT(prlimit(s.proc.pid, RLIMIT_NOFILE, &low, NULL), 0);
	long long log0 = file_size(s.proc.log);
	int fds[IDLE];
	int n = 0;
	for (int i = 0; i < IDLE; i++) {
		int fd = open_idle(s.proc.url);
		if (fd >= 0)
			fds[n++] = fd;
	}
	CHECKF(n == IDLE, "only %d of %d connections opened", n, IDLE);
	h_sleep_ms(300);
	long long hz = sysconf(_SC_CLK_TCK);
	long long c0 = proc_cpu_ticks(s.proc.pid);
	int64_t t0 = clock_mono_ms();
	h_sleep_ms(3000);
	long long c1 = proc_cpu_ticks(s.proc.pid);
	double wall = (double)(clock_mono_ms() - t0) / 1000.0;
	double cpu = (double)(c1 - c0) / (double)hz;
	long long grown = file_size(s.proc.log) - log0;
	t_log("cpu %.2f s over %.2f s, log grew %lld bytes", cpu, wall, grown);
	CHECKF(cpu < wall / 2, "the server used %.2f s of CPU in %.2f s", cpu, wall);
	CHECKF(grown < (1 << 20), "the log grew by %lld bytes", grown);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	int64_t t1 = clock_mono_ms();
	struct h_resp r;
	char url[300];
	snprintf(url, sizeof url, "%s/healthz", s.proc.url);
	CHECK_INT(h_http(&r, "GET", url, NULL, NULL, NULL), 0);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	int64_t took = clock_mono_ms() - t1;
	t_log("/healthz answered %lld ms after the connections closed", (long long)took);
	CHECKF(took < 2000, "/healthz took %lld ms", (long long)took);
	h_server_stop(&s);
}

/* Started under `ulimit -n 256`: the connection cap is lowered below the descriptors, so 300
 * idle connections never run the process out of them. Those over the cap are answered 503 and
 * closed at once; the server stays quiet and serves as soon as places free. */
TEST_T(frontdoor_connection_cap_fits_the_open_files_limit, 60)
{
	enum { IDLE = 300 };
	struct rlimit own;
	CHECK_INT(getrlimit(RLIMIT_NOFILE, &own), 0);
	CHECKF(own.rlim_max >= IDLE + 64, "the hard descriptor limit %llu is too low",
	       (unsigned long long)own.rlim_max);
	struct h_server s;
	h_server_init(&s);
	struct rlimit low = { 256, own.rlim_max };
	CHECK_INT(setrlimit(RLIMIT_NOFILE, &low), 0);
	h_server_start(&s); /* inherits the limit */
	struct rlimit high = { IDLE + 64 > own.rlim_cur ? IDLE + 64 : own.rlim_cur, own.rlim_max };
	CHECK_INT(setrlimit(RLIMIT_NOFILE, &high), 0);
	long long log0 = file_size(s.proc.log);
	int fds[IDLE];
	int n = 0;
	for (int i = 0; i < IDLE; i++) {
		int fd = open_idle(s.proc.url);
		if (fd >= 0)
			fds[n++] = fd;
	}
	CHECKF(n == IDLE, "only %d of %d connections opened", n, IDLE);
	h_sleep_ms(500);
	long long hz = sysconf(_SC_CLK_TCK);
	long long c0 = proc_cpu_ticks(s.proc.pid);
	int64_t t0 = clock_mono_ms();
	h_sleep_ms(2000);
	double cpu = (double)(proc_cpu_ticks(s.proc.pid) - c0) / (double)hz;
	double wall = (double)(clock_mono_ms() - t0) / 1000.0;
	/* The refused ones got their 503 and EOF; the others are open and silent. */
	int refused = 0, open = 0;
	for (int i = 0; i < n; i++) {
		char buf[512];
		ssize_t k = recv(fds[i], buf, sizeof buf - 1, MSG_DONTWAIT);
		if (k > 0) {
			buf[k] = '\0';
			CHECKF(strncmp(buf, "HTTP/1.1 503 ", 13) == 0 &&
			       strstr(buf, "\"too_many_connections\""), "%.300s", buf);
			refused++;
		} else if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			open++;
		}
	}
	long long grown = file_size(s.proc.log) - log0;
	t_log("%d open, %d refused; cpu %.2f s over %.2f s; log grew %lld bytes", open, refused,
	      cpu, wall, grown);
	CHECKF(refused > 0 && open > 0 && open + refused == n, "%d open, %d refused of %d", open,
	       refused, n);
	CHECKF(open <= 256, "%d connections held under a limit of 256 descriptors", open);
	CHECKF(cpu < wall / 2, "the server used %.2f s of CPU in %.2f s", cpu, wall);
	CHECKF(grown < (1 << 20), "the log grew by %lld bytes", grown);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	int64_t t1 = clock_mono_ms();
	struct h_resp r;
	char url[300];
	snprintf(url, sizeof url, "%s/healthz", s.proc.url);
	CHECK_INT(h_http(&r, "GET", url, NULL, NULL, NULL), 0);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	t_log("/healthz answered %lld ms after the connections closed",
	      (long long)(clock_mono_ms() - t1));
	h_server_stop(&s);
}
