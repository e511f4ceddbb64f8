/* gwb-worker: the simulated GPU worker that runs in each task's Pod. It reads its budget from
 * the scheduler's allocation annotation, reports what it can observe about isolation, books its
 * working set in a simulated ledger (exit 42 on refusal), then does real CPU matrix work in a
 * duty cycle that stands for its compute share. Exit codes: 0 done, 2 no or malformed budget,
 * 42 ledger refusal, 143 SIGTERM. Logs: one JSON object per line on stdout; at exit the verdict
 * (verdict.h) goes to the termination log, which the kubelet makes the termination message. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "worker/budget.h"
#include "worker/ledger.h"
#include "worker/probe.h"
#include "worker/verdict.h"
#include "worker/wconf.h"
#include "worker/wlog.h"
#include "worker/work.h"

#define EXIT_BUDGET  2
#define EXIT_LEDGER  42
#define DEFAULT_TERMINATION_LOG "/dev/termination-log"
#define EXIT_SIGTERM 143 /* 128 + SIGTERM, what a shell reports for a process it killed */

static volatile sig_atomic_t stop_flag;
/* What the run saw and did, for the verdict written at exit. */
static struct verdict verdict;

static void on_term(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void install_handlers(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: the period sleep must wake up at once. */
	sigaction(SIGTERM, &sa, NULL);
}

static int terminated(const char *phase)
{
	verdict.exit_reason = "terminated";
	wlog_emit("terminated", json_pack("{s:s,s:s,s:i}", "signal", "SIGTERM", "phase", phase,
	                                  "exit_code", EXIT_SIGTERM));
	return EXIT_SIGTERM;
}

/* Books the working set; returns 0, or EXIT_LEDGER after logging the refusal. */
static int run_ledger(const struct wconf *c, const struct budget *b)
{
	struct ledger l;
	struct ledger_result r;
	ledger_init(&l, b->mem_bytes);
	int64_t ws = ledger_working_set(b->mem_bytes, c->experiment);
	int refused = ledger_fill(&l, ws, LEDGER_CHUNK, &r) != 0;
	verdict.has_ledger = 1;
	verdict.ledger = r;
	if (refused) {
		verdict.exit_reason = "simulated_limit_rejected";
		wlog_emit("simulated_limit_rejected",
		          json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:i}", "ledger", "simulated",
		                    "requested", (json_int_t)r.requested, "used",
		                    (json_int_t)r.used, "budget", (json_int_t)r.budget,
		                    "working_set", (json_int_t)r.working_set, "chunks_booked",
		                    (json_int_t)r.chunks, "note",
		                    "bookkeeping only: the simulated ledger refused the chunk that "
		                    "would pass the budget; no GPU memory was allocated or touched",
		                    "exit_code", EXIT_LEDGER));
		return EXIT_LEDGER;
	}
	wlog_emit("ledger_booked",
	          json_pack("{s:s,s:I,s:I,s:I,s:I,s:s}", "ledger", "simulated", "working_set",
	                    (json_int_t)r.working_set, "used", (json_int_t)r.used, "budget",
	                    (json_int_t)r.budget, "chunks", (json_int_t)r.chunks, "note",
	                    "bookkeeping only: no GPU memory, and no host memory of this size, "
	                    "was allocated"));
	return 0;
}

static double finite_or_zero(double v)
{
	return isfinite(v) ? v : 0;
}

static json_t *stats_json(const struct work_stats *s, double duration_s)
{
	/* jansson refuses non-finite reals, and a refused field would lose the whole event. */
	return json_pack("{s:f,s:f,s:f,s:f,s:I,s:I,s:f}", "elapsed_s", s->elapsed_s, "duration_s",
	                 duration_s, "cpu_s", s->cpu_s, "cpu_share_percent", s->cpu_share,
	                 "periods", (json_int_t)s->periods, "matmuls", (json_int_t)s->products,
	                 "checksum", finite_or_zero(s->checksum));
}

static void on_progress(const struct work_stats *s, void *arg)
{
	const struct wconf *c = arg;
	wlog_emit("progress", stats_json(s, c->duration_s));
}

static int run_work(const struct wconf *c, const struct budget *b)
{
	struct work_opts o = {.duty_percent = budget_duty_percent(b),
	                      .period_ms = c->period_ms,
	                      .duration_s = c->duration_s,
	                      .progress_s = c->progress_s,
	                      .stop = &stop_flag};
	wlog_emit("work_started",
	          json_pack("{s:i,s:i,s:f,s:i,s:s}", "cpu_duty_percent", o.duty_percent,
	                    "period_ms", (int)o.period_ms, "duration_s", o.duration_s, "matrix_n",
	                    WORK_N, "note",
	                    "real matrix multiplication on one CPU thread; the duty cycle stands "
	                    "for the GPU compute share"));
	struct work_stats s;
	int stopped = work_run(&o, on_progress, (void *)c, &s);
	verdict.has_work = 1;
	verdict.duty_percent = o.duty_percent;
	verdict.work = s;
	json_t *f = stats_json(&s, c->duration_s);
	if (stopped) {
		wlog_emit("work_stopped", f);
		return terminated("work");
	}
	wlog_emit("done", f);
	verdict.exit_reason = "done";
	return 0;
}

/* Logs the budget problem; the probe still ran, so the isolation event is there too. */
static int budget_failed(const struct wconf *c, const struct budget_err *e)
{
	verdict.exit_reason = "budget_invalid";
	wlog_emit("budget_invalid",
	          json_pack("{s:o,s:s,s:s,s:o,s:i}", "path", wlog_str(c->annotations_file),
	                    "annotation", DEVALLOC_ANNOTATION, "problem", e->problem, "reason",
	                    wlog_str(e->reason), "exit_code", EXIT_BUDGET));
	return EXIT_BUDGET;
}

static int run(const struct wconf *c)
{
	static struct budget b; /* the verdict points at it until exit */
	struct budget_err e;
	int brc = budget_load(c->annotations_file, &b, &e);
	struct probe_opts po = {.maps_path = c->proc_maps,
	                        .cuda_library = c->cuda_library,
	                        .alloc = brc == 0 ? &b.alloc : NULL};
	json_t *iso = probe_run(&po);
	verdict.isolation = json_incref(iso);
	wlog_emit("isolation", iso);
	if (brc != 0)
		return budget_failed(c, &e);
	verdict.budget = &b;
	wlog_emit("budget", budget_to_json(&b));
	if (stop_flag)
		return terminated("start");
	int rc = run_ledger(c, &b);
	if (rc != 0)
		return rc;
	if (stop_flag)
		return terminated("ledger");
	return run_work(c, &b);
}

/* Writes the verdict where the kubelet looks for the termination message; a failure is logged
 * (the log still has every event). */
static void write_verdict(const char *path)
{
	if (verdict_write(&verdict, path) != 0)
		wlog_emit("termination_log_failed",
		          json_pack("{s:o,s:s}", "path", wlog_str(path), "error", strerror(errno)));
}

int main(int argc, char **argv)
{
	struct wconf c;
	char err[320];
	gwb_alloc_init();
	install_handlers();
	int rc = wconf_load(&c, argc, argv, err, sizeof err);
	if (rc == 1) {
		wconf_usage(stdout);
		return 0;
	}
	if (rc != 0) {
		wlog_emit("config_invalid", json_pack("{s:o,s:i}", "reason", wlog_str(err),
		                                      "exit_code", EXIT_BUDGET));
		verdict.exit_reason = "config_invalid";
		verdict.exit_code = EXIT_BUDGET;
		/* The setting may be the one refused, or not read yet: the environment's then. */
		const char *tl = getenv("GWB_TERMINATION_LOG");
		write_verdict(c.termination_log[0] ? c.termination_log
		                                   : tl && tl[0] ? tl : DEFAULT_TERMINATION_LOG);
		return EXIT_BUDGET;
	}
	json_t *start = json_pack("{s:i,s:o}", "pid", (int)getpid(), "settings", wconf_to_json(&c));
	wlog_emit("start", start);
	rc = run(&c);
	verdict.exit_code = rc;
	write_verdict(c.termination_log);
	json_decref(verdict.isolation);
	return rc;
}
