/* The summary document and its text form. Every figure is read from struct load once, here;
 * the text is drawn from the document so the two never disagree. */
#include "tools/gwb-load/report.h"

#include <stdarg.h>
#include <string.h>

#include "lib/alloc.h"

static json_t *latency(const struct hist *h, double unit)
{
	return json_pack("{s:I, s:f, s:f, s:f, s:f}", "count", (json_int_t)h->count, "p50",
	                 (double)hist_percentile(h, 50) / unit, "p95",
	                 (double)hist_percentile(h, 95) / unit, "p99",
	                 (double)hist_percentile(h, 99) / unit, "max", (double)h->max / unit);
}

static json_t *op_json(const struct load_op_stats *s, double secs)
{
	json_t *st = json_object();
	for (int code = 0; code < 600; code++)
		if (s->status[code]) {
			char k[8];
			snprintf(k, sizeof k, "%d", code);
			json_object_set_new(st, k, json_integer(s->status[code]));
		}
	return json_pack("{s:I, s:I, s:I, s:I, s:f, s:o, s:o}", "sent", (json_int_t)s->sent,
	                 "answered", (json_int_t)s->answered, "ok", (json_int_t)s->ok, "errors",
	                 (json_int_t)s->errors, "rps", secs > 0 ? (double)s->answered / secs : 0.0,
	                 "latency_ms", latency(&s->lat, 1000.0), "status", st);
}

static json_t *run_json(const struct load *l)
{
	const struct load_opts *o = l->o;
	json_t *teams = json_array();
	for (int i = 0; i < o->nteams; i++)
		json_array_append_new(teams, json_string(o->teams[i]));
	json_t *mix = json_object();
	for (int i = 0; i < OP_COUNT; i++)
		json_object_set_new(mix, opts_op_name(i), json_integer(o->mix[i]));
	char seed[32];
	snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
	return json_pack(
	    "{s:s, s:s, s:s, s:s, s:o, s:i, s:o, s:o, s:o, s:o, s:{s:I, s:I, s:I}}", "url", o->url,
	    "run_id", l->run_id, "seed", seed, "loop", o->closed ? "closed" : "open", "rate",
	    o->closed ? json_null() : json_real(o->rate), "connections", o->connections, "count",
	    o->count ? json_integer(o->count) : json_null(), "duration_s",
	    o->count ? json_null() : json_real(o->duration_s), "teams", teams, "mix", mix, "task",
	    "gpu_memory_mib", (json_int_t)o->mem_mib, "gpu_core_percent", (json_int_t)o->core_pct,
	    "duration_seconds", (json_int_t)o->task_seconds);
}

static json_t *quota_json(const struct load *l, long *samples, long *over, int *unsampled)
{
	json_t *arr = json_array();
	*samples = *over = *unsampled = 0;
	for (int i = 0; i < l->o->nteams; i++) {
		const struct load_team *t = &l->teams[i];
		*samples += t->samples;
		*over += t->over;
		*unsampled += t->samples == 0;
		json_t *end =
		    json_pack("{s:b, s:b, s:b, s:{s:I, s:I}, s:{s:I, s:I}, s:I}", "checked",
		              t->end_checked, "stable", t->end_stable, "exact", t->end_exact,
		              "reserved", "gpu_memory_mib", (json_int_t)t->end_reserved_mem,
		              "gpu_core_percent", (json_int_t)t->end_reserved_core, "active_sum",
		              "gpu_memory_mib", (json_int_t)t->end_active_mem, "gpu_core_percent",
		              (json_int_t)t->end_active_core, "active_tasks",
		              (json_int_t)t->end_active_tasks);
		json_array_append_new(
		    arr,
		    json_pack("{s:s, s:{s:I, s:I}, s:{s:I, s:I}, s:I, s:I, s:o}", "team",
		              l->o->teams[i], "quota", "gpu_memory_mib", (json_int_t)t->quota_mem,
		              "gpu_core_percent", (json_int_t)t->quota_core, "max_reserved",
		              "gpu_memory_mib", (json_int_t)t->max_mem, "gpu_core_percent",
		              (json_int_t)t->max_core, "samples", (json_int_t)t->samples, "over",
		              (json_int_t)t->over, "end", end));
	}
	return json_pack("{s:I, s:I, s:I, s:o}", "samples", (json_int_t)*samples, "sample_errors",
	                 (json_int_t)l->quota_sample_errors, "over", (json_int_t)*over, "teams",
	                 arr);
}

static json_t *drain_json(const struct load *l)
{
	const struct load_drain *d = &l->drain;
	if (!d->run)
		return json_null();
	json_t *states = json_object();
	for (int i = 0; i < 9; i++)
		if (d->states[i])
			json_object_set_new(states, load_state_name(i), json_integer(d->states[i]));
	double secs = (double)(d->end_us - d->start_us) / 1e6;
	double server = d->first_created_ms && d->last_ended_ms >= d->first_created_ms
	                    ? (double)(d->last_ended_ms - d->first_created_ms) / 1e3
	                    : 0.0;
	json_t *j =
	    json_pack("{s:f, s:b, s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I, s:o}", "timeout_s",
	              l->o->drain_timeout_s, "timed_out", d->timed_out, "tasks",
	              (json_int_t)l->ntasks, "ended", (json_int_t)d->ended, "not_ended",
	              (json_int_t)d->not_ended, "seconds", secs, "server_seconds", server, "passes",
	              (json_int_t)d->passes, "list_requests", (json_int_t)d->list_requests,
	              "list_errors", (json_int_t)d->list_errors, "states", states);
	json_object_set_new(j, "since_send_start_seconds",
	                    json_real((double)(d->end_us - l->t0_us) / 1e6));
	json_object_set_new(j, "intent_to_job_ms", latency(&d->intent_to_job, 1.0));
	json_object_set_new(j, "job_to_pod_ms", latency(&d->job_to_pod, 1.0));
	json_object_set_new(j, "tasks_ever_unknown", json_integer(d->ever_unknown));
	json_object_set_new(j, "unknown_transitions", json_integer(d->unknown_transitions));
	json_object_set_new(j, "events_read", json_integer(d->events_read));
	json_object_set_new(j, "events_failed", json_integer(d->events_failed));
	return j;
}

static json_t *dead_json(const struct load *l)
{
	const struct load_dead *d = &l->dead;
	if (!d->source)
		return json_pack("{s:n, s:n, s:n, s:n}", "source", "before", "after", "during_run");
	return json_pack("{s:s, s:I, s:I, s:I}", "source", d->source, "before",
	                 (json_int_t)d->before, "after", (json_int_t)d->after, "during_run",
	                 (json_int_t)(d->after - d->before));
}

static void check(json_t *arr, const char *name, int ok, int skipped, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void check(json_t *arr, const char *name, int ok, int skipped, const char *fmt, ...)
{
	char detail[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	json_array_append_new(arr, json_pack("{s:s, s:b, s:b, s:s}", "name", name, "ok",
	                                     skipped || ok, "skipped", skipped, "detail", detail));
}

static json_t *checks_json(const struct load *l, long samples, long over, int unsampled)
{
	json_t *c = json_array();
	check(c, "answers", l->errors == 0, 0,
	      "%ld of %ld answers were not what the operation expects", l->errors, l->answered);
	check(c, "replay_same_id", l->replay_mismatch == 0, 0,
	      "%ld replays answered the first task, %ld answered otherwise", l->replay_same,
	      l->replay_mismatch);
	check(c, "quota_never_over", over == 0 && !unsampled, 0,
	      "%ld samples, %ld above the quota, %d teams never sampled", samples, over, unsampled);
	int checked = 1, stable = 1, exact = 1;
	for (int i = 0; i < l->o->nteams; i++) {
		checked &= l->teams[i].end_checked;
		stable &= l->teams[i].end_stable;
		exact &= l->teams[i].end_exact;
	}
	if (!checked)
		check(c, "quota_exact_at_end", 0, 0, "a team or its tasks could not be read");
	else if (!stable && !l->drain.run)
		check(c, "quota_exact_at_end", 1, 1,
		      "reservations kept moving (tasks still running; use --drain)");
	else
		check(c, "quota_exact_at_end", exact, 0,
		      exact    ? "every team's reserved equals the sum of its active tasks'"
		      : stable ? "a team's reserved differs from the sum of its active tasks'"
		               : "reservations kept moving after the drain");
	if (l->drain.run)
		check(c, "all_tasks_ended", l->drain.not_ended == 0, 0,
		      "%ld of %ld tasks ended (final state, reservation released)%s",
		      l->drain.ended, l->ntasks, l->drain.timed_out ? "; the drain timed out" : "");
	if (l->interrupted)
		check(c, "completed", 0, 0,
		      "interrupted (Ctrl-C): the figures cover what was seen");
	if (l->dead.source)
		check(c, "no_dead_letters", l->dead.after == l->dead.before, 0,
		      "%ld dead letters during the run (%s)", l->dead.after - l->dead.before,
		      l->dead.source);
	else
		check(c, "no_dead_letters", 1, 1,
		      "not available: no gwb_intents_dead_lettered_total on /metrics, no --redis");
	return c;
}

json_t *report_build(const struct load *l)
{
	double secs = (double)(l->send_end_us - l->t0_us) / 1e6;
	json_t *ops = json_object();
	for (int i = 0; i < OP_COUNT; i++)
		json_object_set_new(ops, opts_op_name(i), op_json(&l->ops[i], secs));
	long samples, over;
	int unsampled;
	json_t *quota = quota_json(l, &samples, &over, &unsampled);
	json_t *checks = checks_json(l, samples, over, unsampled);
	int passed = 1;
	size_t i;
	json_t *c;
	json_array_foreach (checks, i, c)
		passed &= json_is_true(json_object_get(c, "ok"));
	json_t *s = json_object();
	json_object_set_new(s, "run", run_json(l));
	json_object_set_new(s, "send",
	                    json_pack("{s:f, s:I, s:I, s:I, s:f, s:I}", "seconds", secs, "sent",
	                              (json_int_t)l->sent, "answered", (json_int_t)l->answered,
	                              "errors", (json_int_t)l->errors, "rps",
	                              secs > 0 ? (double)l->answered / secs : 0.0,
	                              "fallbacks_to_submit", (json_int_t)l->fallbacks));
	json_object_set_new(s, "operations", ops);
	json_object_set_new(s, "tasks",
	                    json_pack("{s:I, s:I, s:I}", "accepted",
	                              (json_int_t)(l->ntasks - l->strays), "refused_quota",
	                              (json_int_t)l->refused_quota, "strays",
	                              (json_int_t)l->strays));
	json_object_set_new(s, "replays",
	                    json_pack("{s:I, s:I, s:I}", "sent", (json_int_t)l->ops[OP_REPLAY].sent,
	                              "same_id", (json_int_t)l->replay_same, "mismatched",
	                              (json_int_t)l->replay_mismatch));
	json_object_set_new(s, "quota", quota);
	json_object_set_new(s, "drain", drain_json(l));
	json_object_set_new(s, "dead_letters", dead_json(l));
	json_object_set_new(
	    s, "server_metrics",
	    json_pack("{s:I, s:o, s:o}", "samples", (json_int_t)l->metrics_samples,
	              "kube_requests_inflight_max",
	              l->kube_inflight_max >= 0 ? json_integer(l->kube_inflight_max) : json_null(),
	              "kube_request_queue_depth_max",
	              l->kube_queue_max >= 0 ? json_integer(l->kube_queue_max) : json_null()));
	json_object_set_new(s, "checks", checks);
	json_object_set_new(s, "passed", json_boolean(passed));
	return s;
}

/* ---- text ---- */

static json_int_t ji(const json_t *o, const char *path)
{
	char buf[128];
	snprintf(buf, sizeof buf, "%s", path);
	const json_t *v = o;
	for (char *p = buf, *dot; p && v; p = dot) {
		if ((dot = strchr(p, '.')))
			*dot++ = '\0';
		v = json_object_get(v, p);
	}
	return json_is_integer(v) ? json_integer_value(v) : 0;
}

static double jd(const json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

static void print_lat(FILE *f, const char *label, const json_t *h)
{
	fprintf(f, "  %-22s p50 %8.1f  p95 %8.1f  p99 %8.1f  max %8.1f ms  (%lld tasks)\n", label,
	        jd(h, "p50"), jd(h, "p95"), jd(h, "p99"), jd(h, "max"), (long long)ji(h, "count"));
}

static void print_drain(FILE *f, const json_t *d)
{
	if (ji(d, "not_ended"))
		fprintf(f, "drain: %lld of %lld tasks ended; gave up after %.1f s (%s)\n",
		        (long long)ji(d, "ended"), (long long)ji(d, "tasks"), jd(d, "seconds"),
		        json_is_true(json_object_get(d, "timed_out")) ? "--drain-timeout"
		                                                      : "interrupted");
	else
		fprintf(f,
		        "drain: all %lld tasks ended %.1f s after sending, %.1f s after the first "
		        "request (server clock, first created to last released: %.1f s)\n",
		        (long long)ji(d, "tasks"), jd(d, "seconds"),
		        jd(d, "since_send_start_seconds"), jd(d, "server_seconds"));
	const char *k;
	json_t *v;
	fprintf(f, "  final states:");
	json_object_foreach (json_object_get(d, "states"), k, v)
		fprintf(f, " %s %lld", k, (long long)json_integer_value(v));
	fprintf(f, "\n");
	print_lat(f, "intent -> Job created", json_object_get(d, "intent_to_job_ms"));
	print_lat(f, "Job -> Pod bound", json_object_get(d, "job_to_pod_ms"));
	fprintf(f,
	        "  tasks that entered unknown: %lld (%lld transitions); histories read %lld, "
	        "unreadable %lld\n",
	        (long long)ji(d, "tasks_ever_unknown"), (long long)ji(d, "unknown_transitions"),
	        (long long)ji(d, "events_read"), (long long)ji(d, "events_failed"));
}

/* Says so when the server's per-token rate limit answered 429: the figures then measure it. */
static void print_rate_limited(const json_t *s, FILE *f)
{
	long long n = 0;
	const char *name;
	json_t *op;
	json_object_foreach (json_object_get(s, "operations"), name, op)
		n += (long long)json_integer_value(json_object_get(json_object_get(op, "status"),
		                                                   "429"));
	if (n > 0)
		fprintf(f,
		        "rate limited: %lld answers were 429 (the server's http.rate_limit_per_s and "
		        "http.rate_limit_burst; raise them, or send with --rate below them)\n",
		        n);
}

void report_print_text(const json_t *s, FILE *f)
{
	const json_t *run = json_object_get(s, "run"), *send = json_object_get(s, "send");
	fprintf(f,
	        "gwb-load: %s loop, %lld connections, %lld requests in %.2f s = %.1f req/s "
	        "(seed %s)\n",
	        json_string_value(json_object_get(run, "loop")), (long long)ji(run, "connections"),
	        (long long)ji(send, "answered"), jd(send, "seconds"), jd(send, "rps"),
	        json_string_value(json_object_get(run, "seed")));
	fprintf(f, "%-8s %8s %8s %7s %9s %9s %9s %9s %9s  status\n", "op", "answered", "ok",
	        "errors", "req/s", "p50 ms", "p95 ms", "p99 ms", "max ms");
	const char *name;
	json_t *op;
	json_object_foreach (json_object_get(s, "operations"), name, op) {
		const json_t *lat = json_object_get(op, "latency_ms");
		fprintf(f, "%-8s %8lld %8lld %7lld %9.1f %9.2f %9.2f %9.2f %9.2f ", name,
		        (long long)ji(op, "answered"), (long long)ji(op, "ok"),
		        (long long)ji(op, "errors"), jd(op, "rps"), jd(lat, "p50"), jd(lat, "p95"),
		        jd(lat, "p99"), jd(lat, "max"));
		const char *code;
		json_t *n;
		json_object_foreach (json_object_get(op, "status"), code, n)
			fprintf(f, " %s:%lld", strcmp(code, "0") ? code : "none",
			        (long long)json_integer_value(n));
		fprintf(f, "\n");
	}
	print_rate_limited(s, f);
	fprintf(f,
	        "tasks: %lld accepted, %lld refused by quota; replays: %lld same task, %lld "
	        "another\n",
	        (long long)ji(s, "tasks.accepted"), (long long)ji(s, "tasks.refused_quota"),
	        (long long)ji(s, "replays.same_id"), (long long)ji(s, "replays.mismatched"));
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(json_object_get(s, "quota"), "teams"), i, t) {
		fprintf(f,
		        "quota %s: max reserved %lld MiB %lld%% of %lld MiB %lld%% (%lld samples, "
		        "%lld over); ",
		        json_string_value(json_object_get(t, "team")),
		        (long long)ji(t, "max_reserved.gpu_memory_mib"),
		        (long long)ji(t, "max_reserved.gpu_core_percent"),
		        (long long)ji(t, "quota.gpu_memory_mib"),
		        (long long)ji(t, "quota.gpu_core_percent"), (long long)ji(t, "samples"),
		        (long long)ji(t, "over"));
		if (json_is_true(json_object_get(json_object_get(t, "end"), "checked")))
			fprintf(f,
			        "at the end reserved %lld MiB %lld%%, active tasks %lld holding "
			        "%lld MiB %lld%%\n",
			        (long long)ji(t, "end.reserved.gpu_memory_mib"),
			        (long long)ji(t, "end.reserved.gpu_core_percent"),
			        (long long)ji(t, "end.active_tasks"),
			        (long long)ji(t, "end.active_sum.gpu_memory_mib"),
			        (long long)ji(t, "end.active_sum.gpu_core_percent"));
		else
			fprintf(f, "at the end: could not be read\n");
	}
	const json_t *d = json_object_get(s, "drain");
	if (json_is_object(d))
		print_drain(f, d);
	const json_t *dl = json_object_get(s, "dead_letters");
	if (json_is_string(json_object_get(dl, "source")))
		fprintf(f, "dead letters: %lld during the run (from %s)\n",
		        (long long)ji(dl, "during_run"),
		        json_string_value(json_object_get(dl, "source")));
	else
		fprintf(f, "dead letters: not available\n");
	const json_t *m = json_object_get(s, "server_metrics");
	if (json_is_integer(json_object_get(m, "kube_requests_inflight_max")))
		fprintf(f,
		        "server: Kubernetes requests in flight at most %lld, queued at most %lld "
		        "(%lld scrapes of /metrics)\n",
		        (long long)ji(m, "kube_requests_inflight_max"),
		        (long long)ji(m, "kube_request_queue_depth_max"),
		        (long long)ji(m, "samples"));
	json_array_foreach (json_object_get(s, "checks"), i, t)
		fprintf(f, "check %-20s %s  %s\n", json_string_value(json_object_get(t, "name")),
		        json_is_true(json_object_get(t, "skipped")) ? "skip"
		        : json_is_true(json_object_get(t, "ok"))    ? "ok  "
		                                                    : "FAIL",
		        json_string_value(json_object_get(t, "detail")));
	fprintf(f, "%s\n", json_is_true(json_object_get(s, "passed")) ? "PASSED" : "FAILED");
}
