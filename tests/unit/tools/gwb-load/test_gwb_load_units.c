/* Unit tests of gwb-load's pure parts: the log-bucket histogram against exact sorted samples,
 * flag parsing and its errors, the reading of a task's event history, and the Prometheus
 * counter reader. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "tests/harness/t.h"
#include "tools/gwb-load/drain.h"
#include "tools/gwb-load/hist.h"
#include "tools/gwb-load/opts.h"
#include "tools/gwb-load/verify.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

TEST(hist_small_values_are_exact)
{
	struct hist h;
	hist_init(&h);
	CHECK_INT(hist_percentile(&h, 50), 0);
	for (int v = 1; v <= 10; v++)
		hist_add(&h, v);
	CHECK_INT(h.count, 10);
	CHECK_INT(h.min, 1);
	CHECK_INT(h.max, 10);
	CHECK_INT(hist_percentile(&h, 50), 5);
	CHECK_INT(hist_percentile(&h, 90), 9);
	CHECK_INT(hist_percentile(&h, 100), 10);
	hist_add(&h, -5); /* counts as 0 */
	CHECK_INT(h.min, 0);
}

TEST(hist_percentiles_within_bucket_precision)
{
	enum { N = 20000 };
	int64_t *v = gwb_malloc(sizeof *v * N);
	struct hist h, a, b;
	hist_init(&h);
	hist_init(&a);
	hist_init(&b);
	uint64_t x = 88172645463325252ULL;
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* spread over six decades: 1 us .. about 4 s */
		v[i] = (int64_t)exp((double)(x % 1000000) / 1000000.0 * 15.2);
		hist_add(&h, v[i]);
		hist_add(i % 2 ? &a : &b, v[i]);
	}
	hist_merge(&a, &b);
	qsort(v, N, sizeof *v, cmp_i64);
	const double ps[] = {1, 50, 90, 95, 99, 99.9, 100};
	for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
		int64_t exact = v[(size_t)ceil(ps[k] / 100.0 * N) - 1];
		int64_t got = hist_percentile(&h, ps[k]);
		CHECKF(got >= exact && (double)got <= (double)exact * 1.0325 + 1,
		       "p%.1f: %lld, exact %lld", ps[k], (long long)got, (long long)exact);
		CHECK_INT(hist_percentile(&a, ps[k]), got);
	}
	CHECK_INT(h.max, v[N - 1]);
	CHECK_INT(a.count, N);
	hist_add(&h, HIST_VALUE_MAX * 4); /* clamped, never out of the array */
	CHECK_INT(h.max, HIST_VALUE_MAX);
	gwb_free(v);
}

static int parse(struct load_opts *o, char *err, const char *const *args)
{
	char *argv[32];
	int argc = 0;
	argv[argc++] = (char *)"gwb-load";
	for (; *args; args++)
		argv[argc++] = (char *)*args;
	return opts_parse(o, argc, argv, err, 256);
}

TEST(opts_defaults_and_values)
{
	struct load_opts o;
	char err[256] = "";
	unsetenv("GWB_URL");
	setenv("GWB_TOKEN", "env-token", 1);
	CHECK_INT(parse(&o, err, (const char *[]){NULL}), 0);
	CHECK_STR(o.url, "http://127.0.0.1:8080");
	CHECK_STR(o.token, "env-token");
	CHECK_INT(o.closed, 1);
	CHECK(o.duration_s == 10);
	CHECK_INT(o.count, 0);
	CHECK_INT(o.nteams, 1);
	CHECK_STR(o.teams[0], "alpha");
	CHECK_INT(o.mix[OP_SUBMIT], 90);
	CHECK_INT(o.mem_mib, 16);
	CHECK_INT(
	    parse(&o, err,
	          (const char *[]){"--url", "http://127.0.0.1:9", "--token=t", "--rate", "50",
	                           "--count", "7", "--teams", "a,b-2", "--mix", "replay=1,submit=3",
	                           "--drain", "--json", "--mem", "64", NULL}),
	    0);
	CHECK_INT(o.closed, 0);
	CHECK(o.rate == 50);
	CHECK_INT(o.count, 7);
	CHECK(o.duration_s == 0);
	CHECK_INT(o.nteams, 2);
	CHECK_STR(o.teams[1], "b-2");
	CHECK_INT(o.mix[OP_SUBMIT], 3);
	CHECK_INT(o.mix[OP_REPLAY], 1);
	CHECK_INT(o.mix[OP_CANCEL], 0);
	CHECK_INT(o.drain, 1);
	CHECK_INT(o.json, 1);
	CHECK_INT(o.mem_mib, 64);
	CHECK_INT(parse(&o, err, (const char *[]){"--help", NULL}), 1);
}

/* Each usage error names its flag. */
static void bad(const char *const *args, const char *flag)
{
	struct load_opts o;
	char err[256] = "";
	CHECKF(parse(&o, err, args) == -1, "%s accepted", args[0]);
	CHECKF(strstr(err, flag) != NULL, "error \"%s\" does not name %s", err, flag);
}

TEST(opts_errors_name_the_flag)
{
	setenv("GWB_TOKEN", "env-token", 1);
	bad((const char *[]){"--bogus", NULL}, "--bogus");
	bad((const char *[]){"--connections", "0", NULL}, "--connections");
	bad((const char *[]){"--rate", "10", "--closed", NULL}, "--rate");
	bad((const char *[]){"--closed", "--rate", "10", NULL}, "--rate");
	bad((const char *[]){"--count", "5", "--duration", "2", NULL}, "--count");
	bad((const char *[]){"--count", "x", NULL}, "--count");
	bad((const char *[]){"--mix", "submit=1,explode=2", NULL}, "--mix");
	bad((const char *[]){"--mix", "submit=0,replay=5", NULL}, "--mix");
	bad((const char *[]){"--teams", "Alpha", NULL}, "--teams");
	bad((const char *[]){"--teams", "a,,b", NULL}, "--teams");
	bad((const char *[]){"--core", "101", NULL}, "--core");
	bad((const char *[]){"--url", "https://x", NULL}, "--url");
	bad((const char *[]){"--rate", "1000", "--duration", "2000", NULL}, "--rate");
	bad((const char *[]){"--drain-timeout", NULL}, "--drain-timeout");
	unsetenv("GWB_TOKEN");
	bad((const char *[]){"--count", "1", NULL}, "--token");
}

/* The shape GET /v1/tasks/ID/events answers today (server/store/store_tasks.c). */
static const char events_fixture[] =
    "["
    "{\"seq\":1,\"ts\":\"2026-11-30T18:41:22.916Z\",\"type\":\"submitted\",\"from\":null,"
    "\"to\":\"queued\",\"detail\":{\"idempotency_key\":\"k1\"}},"
    "{\"seq\":2,\"ts\":\"2026-11-30T18:41:22.926Z\",\"type\":\"state\",\"from\":\"queued\","
    "\"to\":\"creating\",\"detail\":{\"intent\":\"create\"}},"
    "{\"seq\":3,\"ts\":\"2026-11-30T18:41:23.100Z\",\"type\":\"state\",\"from\":\"creating\","
    "\"to\":\"unknown\",\"detail\":{\"operation\":\"create_job\"}},"
    "{\"seq\":4,\"ts\":\"2026-11-30T18:41:23.514Z\",\"type\":\"state\",\"from\":\"unknown\","
    "\"to\":\"pending\",\"detail\":{\"job_uid\":\"e374\"}},"
    "{\"seq\":5,\"ts\":\"2026-11-30T18:41:23.533Z\",\"type\":\"scheduler_event\",\"from\":null,"
    "\"to\":null,\"detail\":{\"reason\":\"FailedScheduling\"}},"
    "{\"seq\":6,\"ts\":\"2026-11-30T18:41:23.733Z\",\"type\":\"scheduler_event\",\"from\":null,"
    "\"to\":null,\"detail\":{\"reason\":\"Scheduled\"}},"
    "{\"seq\":7,\"ts\":\"2026-11-30T18:41:23.747Z\",\"type\":\"state\",\"from\":\"pending\","
    "\"to\":\"running\",\"detail\":null},"
    "{\"seq\":8,\"ts\":\"2026-11-30T18:41:24.005Z\",\"type\":\"state\",\"from\":\"running\","
    "\"to\":\"succeeded\",\"detail\":null}"
    "]";

TEST(events_give_job_bound_and_unknown)
{
	json_t *ev = json_loads(events_fixture, 0, NULL);
	CHECK(ev != NULL);
	struct drain_figures f;
	CHECK_INT(drain_events_read(ev, &f), 0);
	CHECK_INT(f.job_ms - f.submitted_ms, 598);
	CHECK_INT(f.bound_ms - f.job_ms, 219);
	CHECK_INT(f.unknown_transitions, 1);
	/* Without the scheduler's event the first running stands for the binding; without a
	 * job_uid the move out of creating marks the Job. */
	json_array_remove(ev, 5);
	json_object_set_new(json_array_get(ev, 3), "detail", json_null());
	json_array_remove(ev, 2);
	json_object_set_new(json_array_get(ev, 2), "from", json_string("creating"));
	CHECK_INT(drain_events_read(ev, &f), 0);
	CHECK_INT(f.job_ms - f.submitted_ms, 598);
	CHECK_INT(f.bound_ms - f.job_ms, 233);
	CHECK_INT(f.unknown_transitions, 0);
	json_decref(ev);
	CHECK_INT(drain_events_read(NULL, &f), -1);
	/* A task that never got a Job has no figures. */
	ev = json_loads("[{\"ts\":\"2026-11-30T18:41:22.916Z\",\"type\":\"submitted\"}]", 0, NULL);
	CHECK_INT(drain_events_read(ev, &f), 0);
	CHECK_INT(f.job_ms, 0);
	CHECK_INT(f.bound_ms, 0);
	json_decref(ev);
}

TEST(metric_sum_reads_prometheus_text)
{
	const char *text = "# TYPE gwb_intents_dead_lettered_total counter\n"
	                   "gwb_intents_dead_lettered_total 3\n"
	                   "gwb_intents_dead_lettered_total_other 100\n"
	                   "gwb_x{reason=\"a\"} 2\n"
	                   "gwb_x{reason=\"b\"} 5\n";
	CHECK_INT(verify_metric_sum(text, "gwb_intents_dead_lettered_total"), 3);
	CHECK_INT(verify_metric_sum(text, "gwb_x"), 7);
	CHECK_INT(verify_metric_sum(text, "gwb_absent"), -1);
	CHECK_INT(verify_metric_sum("", "gwb_x"), -1);
}
