/* Benchmark (not a test): a burst of tasks through gwb-load --drain against the whole local
 * stack (redis-server, kubesim whose kubelet runs gwb-worker, gwb-server with its defaults),
 * with the figures printed beside the capacity bound read from kubesim: bound = tasks ÷
 * concurrent slots × task duration, the slots being the fewest of what the cards' memory and
 * core, the node's shared-GPU count, its pods, CPU and memory allow at once. The target
 * is every task ended within 2 × bound + 10 s, with no task through `unknown` and no dead
 * letter. GWB_BENCH_LOAD_TASKS sets the burst (default 2000, 16 MiB, 1%, 1 s each); the drain
 * is capped at 3 × bound + 60 s, so a stack that falls behind is reported, not waited for.
 * GWB_BENCH_LOAD_KILLS=N kills gwb-server with SIGKILL N times during the run (the issue's
 * 20), restarting it on the same port, and then counts the Jobs per task. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/quantity.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN        "admin-secret"
#define TOK          "bench-load-token"
#define MEM_MIB      16
#define CORE_PCT     1
#define TASK_SECONDS 1
/* What gwb-server's Job template asks of the node per Pod (server/recon/jobspec.c): 10 milli-CPU per
 * core percent and 256 MiB of memory. */
#define POD_CPU_MILLI_PER_CORE_PCT 10
#define POD_MEMORY_MIB             256

static json_t *jpath(json_t *o, const char *a, const char *b)
{
	return json_object_get(json_object_get(o, a), b);
}

static int64_t qty(json_t *o, const char *key, int milli)
{
	const char *s = json_string_value(json_object_get(o, key));
	int64_t v = -1;
	if (!s || (milli ? quantity_parse_milli(s, &v) : quantity_parse(s, &v)))
		return -1;
	return v;
}

static long min_l(long a, long b)
{
	return a < b ? a : b;
}

/* Concurrent slots for one task on kubesim's node, from its Device and Node objects; why says
 * which resource binds. */
static long slots(const struct h_kubesim *ks, char *why, size_t len)
{
	json_t *dev = h_kube_get(ks, "/apis/scheduling.koordinator.sh/v1alpha1/devices/colima-gwb");
	json_t *node = h_kube_get(ks, "/api/v1/nodes/colima-gwb");
	CHECK(dev && node);
	long cards = 0, ncards = 0;
	size_t i;
	json_t *d;
	json_array_foreach (json_object_get(json_object_get(dev, "spec"), "devices"), i, d) {
		json_t *r = json_object_get(d, "resources");
		int64_t mem = qty(r, "koordinator.sh/gpu-memory", 0);
		int64_t core = qty(r, "koordinator.sh/gpu-core", 0);
		if (mem > 0 && core > 0) {
			cards += min_l((long)(mem / (MEM_MIB << 20)), (long)(core / CORE_PCT));
			ncards++;
		}
	}
	json_t *alloc = jpath(node, "status", "allocatable");
	long shared = (long)qty(alloc, "koordinator.sh/gpu.shared", 0);
	long pods = (long)qty(alloc, "pods", 0);
	long cpu = (long)(qty(alloc, "cpu", 1) / (POD_CPU_MILLI_PER_CORE_PCT * CORE_PCT));
	long memory = (long)(qty(alloc, "memory", 0) / ((int64_t)POD_MEMORY_MIB << 20));
	long s = cards;
	const char *by = "the cards";
	if (shared > 0 && shared < s)
		s = shared, by = "gpu.shared";
	if (pods > 0 && pods < s)
		s = pods, by = "the node's pod limit";
	if (cpu > 0 && cpu < s)
		s = cpu, by = "the node's CPU";
	if (memory > 0 && memory < s)
		s = memory, by = "the node's memory";
	snprintf(
	    why, len,
	    "cards %ld (%ld cards), gpu.shared %ld, pods %ld, cpu %ld, memory %ld: bound by %s",
	    cards, ncards, shared, pods, cpu, memory, by);
	json_decref(dev);
	json_decref(node);
	return s;
}

static double jd(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(o, a);
	if (b)
		v = json_object_get(v, b);
	return json_number_value(v);
}

static void lat_line(const char *label, const json_t *h)
{
	printf("  %-24s p50 %8.0f ms  p99 %8.0f ms  max %8.0f ms  (%.0f tasks)\n", label,
	       jd(h, "p50", NULL), jd(h, "p99", NULL), jd(h, "max", NULL), jd(h, "count", NULL));
}

static void report(const json_t *s, long tasks, double bound)
{
	const json_t *d = json_object_get(s, "drain"),
	             *sub = jpath((json_t *)s, "operations", "submit");
	double target = 2 * bound + 10;
	printf("submissions: %.0f accepted of %ld in %.1f s = %.0f/s  (p50 %.1f ms, p99 %.1f ms, "
	       "errors %.0f)\n",
	       jd(s, "tasks", "accepted"), tasks, jd(s, "send", "seconds"), jd(s, "send", "rps"),
	       jd(json_object_get(sub, "latency_ms"), "p50", NULL),
	       jd(json_object_get(sub, "latency_ms"), "p99", NULL), jd(s, "send", "errors"));
	double took = jd(d, "since_send_start_seconds", NULL);
	int all = jd(d, "not_ended", NULL) == 0;
	if (all)
		printf(
		    "drain: all %.0f tasks ended %.1f s after the first submission (server clock, "
		    "first created to last released: %.1f s)\n",
		    jd(d, "tasks", NULL), took, jd(d, "server_seconds", NULL));
	else
		printf(
		    "drain: %.0f of %.0f tasks ended; gave up %.1f s after the first submission\n",
		    jd(d, "ended", NULL), jd(d, "tasks", NULL), took);
	printf("  against the bound: %.1f s = %.2f x bound; target 2 x bound + 10 s = %.1f s: %s\n",
	       took, bound > 0 ? took / bound : 0.0, target,
	       all && took <= target ? "met" : "NOT met");
	const char *k;
	json_t *v;
	printf("  final states:");
	json_object_foreach (json_object_get(d, "states"), k, v)
		printf(" %s %lld", k, (long long)json_integer_value(v));
	printf("\n");
	lat_line("intent -> Job created", json_object_get(d, "intent_to_job_ms"));
	lat_line("Job -> Pod bound", json_object_get(d, "job_to_pod_ms"));
	printf("  tasks that entered unknown: %.0f (%.0f transitions)  [target 0]\n",
	       jd(d, "tasks_ever_unknown", NULL), jd(d, "unknown_transitions", NULL));
	const json_t *dl = json_object_get(s, "dead_letters");
	if (json_is_string(json_object_get(dl, "source")))
		printf("  dead letters during the run: %.0f (from %s)  [target 0]\n",
		       jd(dl, "during_run", NULL),
		       json_string_value(json_object_get(dl, "source")));
	else
		printf("  dead letters: not available\n");
	const json_t *team = json_array_get(jpath((json_t *)s, "quota", "teams"), 0);
	const json_t *end = jpath(json_object_get(team, "end"), "reserved", "gpu_memory_mib");
	printf("  quota: %.0f samples, %.0f over the quota; reserved at the end %.0f MiB\n",
	       jd(s, "quota", "samples"), jd(s, "quota", "over"), json_number_value(end));
	const json_t *m = json_object_get(s, "server_metrics");
	if (json_is_integer(json_object_get(m, "kube_requests_inflight_max")))
		printf(
		    "  server: Kubernetes requests in flight at most %.0f, queued at most %.0f\n",
		    jd(m, "kube_requests_inflight_max", NULL),
		    jd(m, "kube_request_queue_depth_max", NULL));
	else
		printf("  server: no gwb_kube_requests_inflight on /metrics\n");
	size_t i;
	json_t *c;
	json_array_foreach (json_object_get(s, "checks"), i, c)
		if (!json_is_true(json_object_get(c, "ok")))
			printf("  gwb-load check failed: %s: %s\n",
			       json_string_value(json_object_get(c, "name")),
			       json_string_value(json_object_get(c, "detail")));
}

/* The server's Kubernetes requests by verb, so a drain that falls behind shows whether the
 * client's rate (kube.qps) or the cluster bound it. */
static void kube_requests(const char *base, double secs)
{
	static const char *const verbs[] = { "get", "list", "watch", "create", "patch", "delete" };
	double total = 0;
	printf("  server: Kubernetes requests");
	for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
		char match[32];
		snprintf(match, sizeof match, "verb=\"%s\"", verbs[i]);
		double n = h_metric(base, "gwb_kube_requests_total", match);
		if (n > 0)
			printf(" %s %.0f", verbs[i], n);
		total += n > 0 ? n : 0;
	}
	printf("; %.0f in all, %.1f/s from the first submission to the drain's end\n", total,
	       secs > 0 ? total / secs : 0);
}

/* GWB_BENCH_LOAD_KILLS=N: kill -9 gwb-server N times, at random moments of the burst and its
 * drain, each time starting it again on the same port (gwb-load's requests meanwhile fail and
 * are counted as errors; every task it had accepted must still end). It runs while gwb-load
 * works in its own process; gwb-load writes its summary only at the end, so nothing waits. */
static void kill_server_during(struct h_server *srv, long kills)
{
	char listen[300];
	const char *hp = strstr(srv->proc.url, "://");
	snprintf(listen, sizeof listen, "GWB_LISTEN=%s", hp ? hp + 3 : srv->proc.url);
	int n = 0;
	while (srv->env[n])
		n++;
	srv->env[n] = listen;
	srv->env[n + 1] = NULL;
	srand((unsigned)getpid());
	for (long k = 0; k < kills; k++) {
		h_sleep_ms(500 + rand() % 2500);
		h_server_kill9(srv);
		h_server_start(srv);
		printf("kill -9 %ld of %ld: gwb-server restarted at %s\n", k + 1, kills,
		       srv->proc.url);
	}
}

/* After a run with kills: one Job per task, whatever the kills interrupted. */
static void jobs_per_task(struct h_kubesim *ks)
{
	json_t *list = NULL;
	long st = h_kube(ks, "GET",
			 "/apis/batch/v1/namespaces/gpu-workbench/jobs?labelSelector=gwb.io%2Fmanaged"
			 "%3Dtrue",
			 NULL, NULL, &list);
	json_t *seen = json_object();
	size_t i, dup = 0;
	json_t *j;
	json_array_foreach(json_object_get(list, "items"), i, j) {
		const char *task = json_string_value(json_object_get(
			json_object_get(json_object_get(j, "metadata"), "labels"), "gwb.io/task"));
		if (!task)
			continue;
		if (json_object_get(seen, task))
			dup++;
		json_object_set_new(seen, task, json_true());
	}
	printf("after the kills: %zu Jobs for %zu tasks (status %ld): %s\n",
	       json_array_size(json_object_get(list, "items")), json_object_size(seen), st,
	       dup ? "a task has two Jobs: FAILED" : "one Job per task");
	json_decref(seen);
	json_decref(list);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	gwb_alloc_init();
	if (setjmp(t_case_jmp_)) {
		fprintf(stderr, "bench_load: set-up failed\n");
		t_run_defers_();
		return 1;
	}
	const char *e = getenv("GWB_BENCH_LOAD_TASKS");
	long tasks = e ? strtol(e, NULL, 10) : 2000;
	if (tasks < 1 || tasks > 100000)
		tasks = 2000;
	struct h_redis redis;
	struct h_kubesim ks;
	struct h_server srv;
	h_redis_start(&redis);
	h_kubesim_init(&ks);
	snprintf(ks.worker, sizeof ks.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(ks.worker);
	/* GWB_BENCH_KUBESIM_ARGS: extra kubesim flags, split at spaces (at most 16). */
	static char ks_args[1024];
	e = getenv("GWB_BENCH_KUBESIM_ARGS");
	snprintf(ks_args, sizeof ks_args, "%s", e ? e : "");
	int nargs = 0;
	for (char *save = NULL, *a = strtok_r(ks_args, " ", &save); a && nargs < 16;
	     a = strtok_r(NULL, " ", &save))
		ks.args[nargs++] = a;
	ks.args[nargs] = NULL;
	h_kubesim_start(&ks);
	char env_kube[300], env_redis[PATH_MAX + 32];
	h_server_init(&srv);
	snprintf(env_kube, sizeof env_kube, "GWB_KUBE_SERVER=%s", ks.url);
	snprintf(env_redis, sizeof env_redis, "GWB_REDIS=%s", redis.url);
	srv.env[0] = env_kube;
	srv.env[1] = env_redis;
	srv.env[2] = "GWB_HTTP_RATE_LIMIT_PER_S=0"; /* gwb-load's one token runs unthrottled */
	srv.env[3] = NULL;
	h_server_start(&srv);
	char body[200];
	snprintf(body, sizeof body,
	         "{\"gpu_memory_mib\": %ld, \"gpu_core_percent\": %ld, \"token\": \"" TOK "\"}",
	         tasks * MEM_MIB, tasks * CORE_PCT);
	struct h_resp r;
	h_req(&r, "PUT", srv.proc.url, "/v1/teams/bench", ADMIN, body, NULL);
	CHECKF(r.status == 201, "team: %ld", r.status);
	h_resp_free(&r);

	char why[256];
	long s = slots(&ks, why, sizeof why);
	CHECK(s > 0);
	double bound = (double)tasks / (double)s * TASK_SECONDS;
	double cap = 3 * bound + 60;
	printf("%ld tasks of %d MiB, %d%%, %d s; slots %ld (%s)\n", tasks, MEM_MIB, CORE_PCT,
	       TASK_SECONDS, s, why);
	printf("capacity bound: %ld / %ld x %d s = %.1f s; drain capped at %.0f s\n", tasks, s,
	       TASK_SECONDS, bound, cap);
	const char *qps = getenv("GWB_KUBE_QPS"), *burst = getenv("GWB_KUBE_BURST");
	printf("gwb-server kube.qps %s, kube.burst %s; kubesim flags: %s\n",
	       qps ? qps : "50 (default)", burst ? burst : "100 (default)",
	       nargs ? getenv("GWB_BENCH_KUBESIM_ARGS") : "(defaults)");

	e = getenv("GWB_BENCH_LOAD_KILLS");
	long kills = e ? strtol(e, NULL, 10) : 0;
	if (kills < 0 || kills > 100)
		kills = 0;
	char cmd[2048];
	snprintf(cmd, sizeof cmd,
	         "'%s' --url %s --token " TOK " --metrics-token " H_METRICS_TOKEN " --teams bench --closed --connections 8 --count %ld "
	         "--mix submit=1 --mem %d --core %d --task-seconds %d --drain --drain-timeout %.0f "
	         "--poll-ms 1000 --redis %s --json",
	         h_bin("gwb-load"), srv.proc.url, tasks, MEM_MIB, CORE_PCT, TASK_SECONDS, cap,
	         redis.url);
	fflush(stdout);
	FILE *p = popen(cmd, "r"); /* gwb-load's progress goes to our stderr */
	CHECK(p != NULL);
	if (kills > 0)
		kill_server_during(&srv, kills);
	char *out = h_read_all(fileno(p));
	int st = pclose(p);
	if (kills > 0)
		jobs_per_task(&ks);
	json_t *sum = json_loads(out, 0, NULL);
	if (!sum) {
		printf("gwb-load gave no summary (exit %d): %.2000s\n",
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
	} else {
		report(sum, tasks, bound);
		kube_requests(srv.proc.url, jd(sum, "drain", "since_send_start_seconds"));
		printf("gwb-load: %s (exit %d)\n",
		       json_is_true(json_object_get(sum, "passed")) ? "every check passed"
		                                                    : "some checks failed",
		       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	}
	json_decref(sum);
	gwb_free(out);
	h_server_stop(&srv);
	t_run_defers_();
	return 0;
}
