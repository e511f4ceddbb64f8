/* Benchmark (not a test): submission throughput and latency of a real gwb-server over HTTP,
 * against a baseline measured in the same run — GET /healthz at the same concurrency, which
 * costs the HTTP path but no store transaction. Also the server's resident memory. */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/httpc.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define CLIENTS 8
#define PER_CLIENT 250

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* One client: n requests on one keep-alive connection (one lib/httpc client, as gwbctl and
 * the tests use); latencies (µs) go to fd. */
static void client(const char *url, int submit, int n, int fd)
{
	struct httpc *c = httpc_new();
	char full[300];
	snprintf(full, sizeof full, "%s%s", url, submit ? "/v1/tasks" : "/healthz");
	static const char body[] = "{\"team\": \"bench\", \"gpu_memory_mib\": 1, "
				   "\"gpu_core_percent\": 1}";
	struct httpc_req req = { .method = submit ? "POST" : "GET", .url = full,
				 .token = "bench-team-token", .body = submit ? body : NULL };
	for (int i = 0; i < n; i++) {
		struct timespec a, b;
		struct httpc_resp r;
		clock_gettime(CLOCK_MONOTONIC, &a);
		httpc_do(c, &req, &r);
		clock_gettime(CLOCK_MONOTONIC, &b);
		int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
		if (r.status != (submit ? 201 : 200))
			us = -1;
		httpc_resp_free(&r);
		if (write(fd, &us, sizeof us) != sizeof us)
			break;
	}
	httpc_free(c);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	long v = -1;
	while (f && fgets(line, sizeof line, f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			v = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static void run(const char *label, const char *url, int submit)
{
	int p[2];
	if (pipe(p) < 0)
		return;
	int64_t t0 = clock_mono_ms();
	pid_t pids[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		if ((pids[i] = fork()) == 0) {
			close(p[0]);
			client(url, submit, PER_CLIENT, p[1]);
			_exit(0);
		}
	}
	close(p[1]);
	int64_t *lat = gwb_malloc(sizeof *lat * CLIENTS * PER_CLIENT);
	int n = 0, errors = 0;
	int64_t us;
	while (read(p[0], &us, sizeof us) == sizeof us) {
		if (us < 0)
			errors++;
		else
			lat[n++] = us;
	}
	close(p[0]);
	for (int i = 0; i < CLIENTS; i++)
		waitpid(pids[i], NULL, 0); /* not wait(): the server is our child too */
	int64_t ms = clock_mono_ms() - t0;
	qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
	printf("%-22s %6d req in %5lld ms = %7.0f req/s  p50 %6.2f ms  p99 %6.2f ms  errors %d\n",
	       label, n, (long long)ms, ms ? n * 1000.0 / (double)ms : 0.0,
	       n ? lat[n / 2] / 1000.0 : 0.0, n ? lat[(n * 99) / 100] / 1000.0 : 0.0, errors);
	gwb_free(lat);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	gwb_alloc_init();
	if (setjmp(t_case_jmp_)) {
		fprintf(stderr, "bench_submit: set-up failed\n");
		t_run_defers_();
		return 1;
	}
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	struct h_resp r;
	h_req(&r, "PUT", s.proc.url, "/v1/teams/bench", s.admin,
	      "{\"gpu_memory_mib\": 1000000000, \"gpu_core_percent\": 1000000, \"token\": "
	      "\"bench-team-token\"}",
	      NULL);
	h_resp_free(&r);
	printf("gwb-server at %s, %d clients x %d requests, keep-alive\n", s.proc.url, CLIENTS,
	       PER_CLIENT);
	long rss0 = rss_kib(s.proc.pid);
	run("baseline GET /healthz", s.proc.url, 0);
	run("POST /v1/tasks", s.proc.url, 1);
	printf("server RSS: %ld KiB before, %ld KiB after %d accepted tasks\n", rss0,
	       rss_kib(s.proc.pid), CLIENTS * PER_CLIENT);
	h_server_stop(&s);
	t_run_defers_();
	return 0;
}
