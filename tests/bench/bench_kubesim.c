/* Benchmark (not a test): kubesim at scale. 2,000 Jobs (their pods stay Pending: no scheduler
 * serves them) and 8,000 more pods, 10,000 in all; then the installed `kubectl get pods -A`
 * (bound 1 s) beside `kubectl get nodes` as the same run's baseline (kubectl's own start-up),
 * a label-selector list of one task's pods beside a GET of one pod, and the Job controller's
 * pass: over every Job (a resync), the once-a-second timed pass, and a pass after one Job
 * changed. */
#include <curl/curl.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define JOBS 2000
#define PODS 10000
#define KUBECTL_RUNS 3

static int64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static size_t discard(char *d, size_t s, size_t n, void *a)
{
	(void)d;
	(void)a;
	return s * n;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

/* One keep-alive connection for the set-up and the API timings. */
static CURL *conn(void)
{
	static CURL *c;
	static struct curl_slist *h;
	if (!c) {
		c = curl_easy_init();
		h = curl_slist_append(NULL, "Content-Type: application/json");
		h = curl_slist_append(h, "Accept: application/json");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	}
	return c;
}

/* One request; returns the status (0 when no answer). */
static long call(const struct h_kubesim *k, const char *method, const char *path,
		 const char *body)
{
	CURL *c = conn();
	char url[512];
	snprintf(url, sizeof url, "%s%s", k->url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	if (!body)
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	long status = 0;
	if (curl_easy_perform(c) == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

static void setup(const struct h_kubesim *k)
{
	char body[1024];
	int64_t t0 = clock_mono_ms();
	int bad = 0;
	for (int i = 0; i < JOBS; i++) {
		snprintf(body, sizeof body,
			 "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":"
			 "\"bench-j-%d\",\"labels\":{\"gwb.io/task\":\"bench-j-%d\"}},\"spec\":{"
			 "\"template\":{\"metadata\":{\"labels\":{\"gwb.io/task\":\"bench-j-%d\","
			 "\"bench\":\"job\"}},\"spec\":{\"schedulerName\":\"nobody\","
			 "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":"
			 "\"x\"}]}}}}",
			 i, i, i);
		bad += call(k, "POST", "/apis/batch/v1/namespaces/gpu-workbench/jobs", body) != 201;
	}
	for (int i = 0; i < PODS - JOBS; i++) {
		snprintf(body, sizeof body,
			 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
			 "\"bench-p-%d\",\"labels\":{\"gwb.io/task\":\"bench-p-%d\",\"bench\":"
			 "\"pod\"}},\"spec\":{\"schedulerName\":\"nobody\",\"containers\":[{"
			 "\"name\":\"c\",\"image\":\"x\"}]}}",
			 i, i);
		bad += call(k, "POST", "/api/v1/namespaces/gpu-workbench/pods", body) != 201;
	}
	int64_t ms = clock_mono_ms() - t0;
	printf("created %d Jobs and %d Pods in %lld ms (%.0f creates/s), %d failed\n", JOBS,
	       PODS - JOBS, (long long)ms, ms ? (JOBS + PODS - JOBS) * 1000.0 / (double)ms : 0.0,
	       bad);
	/* Wait for the Job controller's pods. */
	for (int i = 0; i < 600; i++) {
		json_t *st = NULL;
		h_kube(k, "GET", "/api/v1/pods?labelSelector=bench%3Djob&limit=1", NULL, NULL, &st);
		json_t *meta = json_object_get(st, "metadata");
		long n = json_array_size(json_object_get(st, "items")) +
			 (long)json_integer_value(json_object_get(meta, "remainingItemCount"));
		json_decref(st);
		if (n >= JOBS)
			break;
		h_sleep_ms(100);
	}
}

/* CPU time (user + system) of process pid so far, in ms, from /proc. */
static int64_t proc_cpu_ms(pid_t pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields after the command name (which may hold spaces): state is field 3; utime and
	 * stime are fields 14 and 15. */
	const char *p = strrchr(buf, ')');
	long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld", &ut,
			 &st) != 2)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	return (ut + st) * 1000 / (hz > 0 ? hz : 100);
}

static int64_t children_cpu_us(void)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 + ru.ru_utime.tv_usec +
	       ru.ru_stime.tv_usec;
}

/* Best of KUBECTL_RUNS runs of kubectl with args, in ms; *lines the output's line count and
 * *cpu_ms kubectl's own CPU time (user + system) in that run. */
static int64_t time_kubectl(const struct h_kubesim *k, const char *const *args, int *lines,
			    int64_t *cpu_ms)
{
	int64_t best = -1;
	for (int r = 0; r < KUBECTL_RUNS; r++) {
		char *out = NULL;
		int64_t t0 = now_us(), c0 = children_cpu_us();
		int rc = h_kubectl(k, &out, args);
		int64_t us = now_us() - t0, cpu = children_cpu_us() - c0;
		*lines = 0;
		for (const char *p = out; p && *p; p++)
			*lines += *p == '\n';
		if (rc != 0)
			fprintf(stderr, "kubectl failed (%d): %.300s\n", rc, out ? out : "");
		gwb_free(out);
		if (best < 0 || us < best) {
			best = us;
			*cpu_ms = cpu / 1000;
		}
	}
	return best / 1000;
}

static size_t keep(char *d, size_t s, size_t n, void *a)
{
	struct { char *p; size_t len, cap; } *b = a;
	if (b->len + s * n + 1 > b->cap) {
		b->cap = (b->len + s * n + 1) * 2;
		b->p = gwb_realloc(b->p, b->cap);
	}
	memcpy(b->p + b->len, d, s * n);
	b->len += s * n;
	b->p[b->len] = '\0';
	return s * n;
}

/* One run of kubectl with args and -v=6: the time client-go's rate limiter held its requests
 * back (its log lines "Waited for 181.49ms due to client-side throttling"), in ms; *waits how
 * many requests waited. kubectl's requests are limited to 5/s with a burst of 10 whatever the
 * server: of a list in N chunks of 500, the last leaves at least (N - 10) / 5 s after the
 * first. */
static int64_t kubectl_throttle_ms(const struct h_kubesim *k, const char *const *args, int *waits)
{
	const char *argv[16];
	int n = 0;
	for (; args[n] && n < 14; n++)
		argv[n] = args[n];
	argv[n++] = "-v=6";
	argv[n] = NULL;
	char *out = NULL;
	h_kubectl(k, &out, argv);
	double ms = 0;
	*waits = 0;
	for (const char *p = out; p && (p = strstr(p, "Waited for ")); p++) {
		char *end;
		double v = strtod(p + strlen("Waited for "), &end);
		if (strncmp(end, "ms", 2) == 0)
			ms += v;
		else if (strncmp(end, "µs", strlen("µs")) == 0)
			ms += v / 1000;
		else if (*end == 's')
			ms += v * 1000;
		(*waits)++;
	}
	gwb_free(out);
	return (int64_t)ms;
}

/* The requests kubectl get pods -A makes (Tables in chunks of 500, following continue), from
 * here: the API's share of the command. Returns ms; *chunks the requests made. */
static int64_t time_chunked_table(const struct h_kubesim *k, int *chunks)
{
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(
		NULL, "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json");
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	struct { char *p; size_t len, cap; } b = { 0 };
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	char cont[1400] = "";
	int64_t t0 = now_us();
	*chunks = 0;
	do {
		char url[1700];
		snprintf(url, sizeof url, "%s/api/v1/pods?limit=500%s%s", k->url,
			 cont[0] ? "&continue=" : "", cont);
		curl_easy_setopt(c, CURLOPT_URL, url);
		b.len = 0;
		if (curl_easy_perform(c) != CURLE_OK)
			break;
		(*chunks)++;
		/* The token is hex: read it without parsing the whole Table. */
		const char *at = b.p ? strstr(b.p, "\"continue\":\"") : NULL;
		size_t n = at ? strspn(at + 12, "0123456789abcdef") : 0;
		snprintf(cont, sizeof cont, "%.*s", (int)n, at ? at + 12 : "");
	} while (cont[0]);
	int64_t ms = (now_us() - t0) / 1000;
	gwb_free(b.p);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return ms;
}

/* n requests of path: p50 and p99 in µs. */
static void time_api(const struct h_kubesim *k, const char *label, const char *path, int n)
{
	int64_t *lat = gwb_malloc(sizeof *lat * (size_t)n);
	int errors = 0;
	for (int i = 0; i < n; i++) {
		int64_t t0 = now_us();
		errors += call(k, "GET", path, NULL) != 200;
		lat[i] = now_us() - t0;
	}
	qsort(lat, (size_t)n, sizeof *lat, cmp_i64);
	printf("  %-46s p50 %8.2f ms  p99 %8.2f ms  (%d requests, %d errors)\n", label,
	       lat[n / 2] / 1000.0, lat[(n * 99) / 100] / 1000.0, n, errors);
	gwb_free(lat);
}

/* The Job controller's figures from /_kubesim/state (caller decrefs). */
static json_t *jobctl_state(const struct h_kubesim *k)
{
	json_t *st = NULL;
	h_kubesim_ctl(k, "GET", "/_kubesim/state", NULL, &st);
	json_t *jc = json_incref(json_object_get(st, "jobctl"));
	json_decref(st);
	return jc;
}

static void jobctl_figures(const struct h_kubesim *k)
{
	/* A pass over every Job (what every pass was before the dirty set): best of 5 resyncs. */
	int64_t best = -1, jobs = 0;
	for (int i = 0; i < 5; i++) {
		json_t *jc = NULL;
		h_kubesim_ctl(k, "POST", "/_kubesim/actions/resync", NULL, &jc);
		json_t *last = json_object_get(jc, "last");
		int64_t us = json_integer_value(json_object_get(last, "us"));
		if (best < 0 || us < best) {
			best = us;
			jobs = json_integer_value(json_object_get(last, "jobs"));
		}
		json_decref(jc);
	}
	printf("  %-46s %8.2f ms  (bound 100 ms; %lld Jobs synced; best of 5)\n",
	       "pass over every Job (resync)", best / 1000.0, (long long)jobs);
	/* The once-a-second pass takes only Jobs with timed work: none here. */
	h_sleep_ms(1500);
	json_t *jc = jobctl_state(k);
	json_t *timed = json_object_get(jc, "last_timed");
	printf("  %-46s %8.2f ms  (bound 10 ms; %lld Jobs with timed work)\n",
	       "timed pass (once a second)",
	       json_integer_value(json_object_get(timed, "us")) / 1000.0,
	       (long long)json_integer_value(json_object_get(timed, "jobs")));
	json_decref(jc);
	/* A pass after one Job changed: the dirty set holds it alone. */
	best = -1;
	jobs = 0;
	for (int i = 0; i < 20; i++) {
		char path[256], body[128];
		snprintf(path, sizeof path, "/apis/batch/v1/namespaces/gpu-workbench/jobs/bench-j-%d",
			 i);
		snprintf(body, sizeof body, "{\"metadata\":{\"annotations\":{\"touch\":\"%d\"}}}", i);
		h_kube(k, "PATCH", path, body, "application/merge-patch+json", NULL);
		h_sleep_ms(20);
		jc = jobctl_state(k);
		json_t *last = json_object_get(jc, "last");
		int64_t us = json_integer_value(json_object_get(last, "us"));
		int64_t n = json_integer_value(json_object_get(last, "jobs"));
		if (n >= 1 && n <= 2 && (best < 0 || us < best)) {
			best = us;
			jobs = n;
		}
		json_decref(jc);
	}
	printf("  %-46s %8.3f ms  (bound 1 ms; %lld Job synced; best of 20)\n",
	       "pass after one Job changed", best / 1000.0, (long long)jobs);
	jc = jobctl_state(k);
	printf("  %-46s %8.2f ms\n", "longest pass so far (includes the burst)",
	       json_integer_value(json_object_get(jc, "max_us")) / 1000.0);
	json_decref(jc);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	gwb_alloc_init();
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (setjmp(t_case_jmp_)) {
		fprintf(stderr, "bench_kubesim: set-up failed\n");
		t_run_defers_();
		return 1;
	}
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--log-level";
	k.args[1] = "warn";
	k.args[2] = "--history";
	k.args[3] = "100000";
	h_kubesim_start(&k);
	printf("kubesim at %s: %d Jobs, %d Pods\n", k.url, JOBS, PODS);
	setup(&k);

	int lines = 0, chunks = 0;
	int64_t cpu = 0;
	const char *nodes[] = { "get", "nodes", NULL };
	const char *all[] = { "get", "pods", "-A", NULL };
	const char *one[] = { "get", "pods", "-A", "-l", "gwb.io/task=bench-j-1234", NULL };
	int64_t base = time_kubectl(&k, nodes, &lines, &cpu);
	printf("  %-46s %8lld ms  (baseline: kubectl start-up, %d lines; kubectl CPU %lld ms)\n",
	       "kubectl get nodes", (long long)base, lines, (long long)cpu);
	int64_t ms = time_kubectl(&k, all, &lines, &cpu);
	printf("  %-46s %8lld ms  (bound 1000 ms; %d lines; best of %d; kubectl CPU %lld ms)\n",
	       "kubectl get pods -A", (long long)ms, lines, KUBECTL_RUNS, (long long)cpu);
	int64_t ks0 = proc_cpu_ms(k.proc.pid);
	ms = time_chunked_table(&k, &chunks);
	printf("  %-46s %8lld ms  (its API part: %d Table chunks of 500; kubesim CPU %lld ms)\n",
	       "the same requests without kubectl", (long long)ms, chunks,
	       (long long)(proc_cpu_ms(k.proc.pid) - ks0));
	int waits = 0;
	int64_t held = kubectl_throttle_ms(&k, all, &waits);
	printf("  %-46s %8lld ms  (%d requests waited; at client-go's 5/s with a burst of 10, "
	       "chunk %d leaves >= %d ms after the first, whatever the server)\n",
	       "of which kubectl's client-side throttling", (long long)held, waits, chunks,
	       chunks > 10 ? (chunks - 10) * 200 : 0);
	ms = time_kubectl(&k, one, &lines, &cpu);
	printf("  %-46s %8lld ms  (bound: the baseline + 100 ms; %d lines)\n",
	       "kubectl get pods -A -l gwb.io/task=bench-j-1234", (long long)ms, lines);

	time_api(&k, "GET one pod (baseline)", "/api/v1/namespaces/gpu-workbench/pods/bench-p-42",
		 200);
	time_api(&k, "GET pods?labelSelector=gwb.io/task=bench-p-42",
		 "/api/v1/pods?labelSelector=gwb.io/task%3Dbench-p-42", 200);
	time_api(&k, "GET pods?labelSelector=bench!=x (a full scan)",
		 "/api/v1/namespaces/gpu-workbench/pods?labelSelector=bench!%3Dx&limit=1", 20);
	time_api(&k, "GET /api/v1/pods (10,000 items, JSON)", "/api/v1/pods", 5);

	jobctl_figures(&k);
	h_kubesim_stop(&k);
	t_run_defers_();
	return 0;
}
