/* Duty-cycled matrix multiplication. */
#include "worker/work.h"

#include <string.h>
#include <time.h>

#include "lib/alloc.h"

double work_matmul(const double *a, const double *b, double *c, int n)
{
	double trace = 0;
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < n; j++)
			c[i * n + j] = 0;
		/* i-k-j order walks b and c along rows, which the cache likes. */
		for (int k = 0; k < n; k++) {
			double aik = a[i * n + k];
			for (int j = 0; j < n; j++)
				c[i * n + j] += aik * b[k * n + j];
		}
		trace += c[i * n + i];
	}
	return trace;
}

static int64_t ns_of(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleeps until the monotonic time deadline_ns, or until a signal interrupts the sleep. */
static void sleep_until(int64_t deadline_ns)
{
	struct timespec ts = {(time_t)(deadline_ns / 1000000000LL),
	                      (long)(deadline_ns % 1000000000LL)};
	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

struct state {
	double *a, *b, *c;
	struct work_stats st;
	int64_t t0, cpu0;
};

static void fill(struct state *s)
{
	size_t n = (size_t)WORK_N * WORK_N;
	s->a = gwb_malloc(n * sizeof *s->a);
	s->b = gwb_malloc(n * sizeof *s->b);
	s->c = gwb_malloc(n * sizeof *s->c);
	/* Entries in [-0.5, 0.5), scaled so that products stay bounded: b is near-orthogonal in
	 * magnitude, and a is fed back from c after each product. */
	for (size_t i = 0; i < n; i++) {
		s->a[i] = (double)((i * 7919) % 1000) / 1000.0 - 0.5;
		s->b[i] = ((double)((i * 104729) % 1000) / 1000.0 - 0.5) / WORK_N;
	}
}

static void product(struct state *s)
{
	s->st.checksum += work_matmul(s->a, s->b, s->c, WORK_N);
	/* Feed the result back so every product depends on the previous one; renormalise to
	 * keep the values finite. */
	double m = 0;
	for (int i = 0; i < WORK_N * WORK_N; i++)
		m = s->c[i] > m ? s->c[i] : (-s->c[i] > m ? -s->c[i] : m);
	for (int i = 0; i < WORK_N * WORK_N; i++)
		s->a[i] = m > 0 ? s->c[i] / m : s->a[i];
	s->st.products++;
}

static void update(struct state *s)
{
	int64_t now = ns_of(CLOCK_MONOTONIC);
	s->st.elapsed_s = (double)(now - s->t0) / 1e9;
	s->st.cpu_s = (double)(ns_of(CLOCK_THREAD_CPUTIME_ID) - s->cpu0) / 1e9;
	s->st.cpu_share = s->st.elapsed_s > 0 ? 100.0 * s->st.cpu_s / s->st.elapsed_s : 0;
}

int work_run(const struct work_opts *o, work_progress_fn *progress, void *arg,
             struct work_stats *out)
{
	struct state s;
	memset(&s, 0, sizeof s);
	fill(&s);
	const int64_t period = (int64_t)o->period_ms * 1000000LL;
	const int64_t busy = period * o->duty_percent / 100;
	s.t0 = ns_of(CLOCK_MONOTONIC);
	s.cpu0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
	const int64_t end = s.t0 + (int64_t)(o->duration_s * 1e9);
	int64_t next_progress = s.t0 + (int64_t)o->progress_s * 1000000000LL;
	int stopped = 0;
	for (int64_t start = s.t0; start < end && !(stopped = *o->stop);) {
		int64_t period_end = start + period < end ? start + period : end;
		int64_t cpu_start = ns_of(CLOCK_THREAD_CPUTIME_ID);
		/* Busy by CPU time, not wall time: under contention the share stays honest. */
		while (busy > 0 && !*o->stop && ns_of(CLOCK_THREAD_CPUTIME_ID) - cpu_start < busy &&
		       ns_of(CLOCK_MONOTONIC) < period_end)
			product(&s);
		if (!*o->stop && ns_of(CLOCK_MONOTONIC) < period_end)
			sleep_until(period_end);
		s.st.periods++;
		int64_t now = ns_of(CLOCK_MONOTONIC);
		/* A late period starts the next one now instead of catching up in a burst. */
		start = now > period_end ? now : period_end;
		if (progress && now >= next_progress && now < end) {
			update(&s);
			progress(&s.st, arg);
			next_progress += (int64_t)o->progress_s * 1000000000LL;
		}
	}
	stopped = stopped || *o->stop;
	update(&s);
	*out = s.st;
	gwb_free(s.a);
	gwb_free(s.b);
	gwb_free(s.c);
	return stopped ? 1 : 0;
}
