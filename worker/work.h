/* The worker's compute: real matrix multiplications on the CPU in a duty cycle, so that a
 * 25 % compute share costs about 25 % of one CPU in every period. This module owns the
 * matrices, the period timing and the CPU accounting. */
#ifndef GWB_WORKER_WORK_H
#define GWB_WORKER_WORK_H

#include <signal.h>
#include <stdint.h>

/* The matrix side: 3 x 64 x 64 doubles (96 KiB), and one product takes a fraction of a
 * millisecond, fine-grained enough to stop on time inside a 10 ms period. */
#define WORK_N 64

struct work_opts {
	int duty_percent;            /* 0..100 of one CPU */
	long period_ms;              /* > 0 */
	double duration_s;           /* >= 0 */
	long progress_s;             /* > 0: seconds between progress callbacks */
	volatile sig_atomic_t *stop; /* set by a signal handler; checked between products */
};

struct work_stats {
	double elapsed_s; /* wall time since the start */
	double cpu_s;     /* CPU time this thread spent */
	double cpu_share; /* cpu_s / elapsed_s, in percent of one CPU */
	int64_t periods;
	int64_t products; /* matrix products computed */
	double checksum;  /* a value that depends on every product, so none is optimised away */
};

/* Called every progress_s seconds with the figures so far. */
typedef void work_progress_fn(const struct work_stats *s, void *arg);

/* Multiplies the n x n row-major matrices a and b into c; returns the trace of c. */
double work_matmul(const double *a, const double *b, double *c, int n);

/* Runs the duty cycle for o->duration_s: in each period it multiplies until the thread has
 * used duty_percent of the period in CPU time (or the period is over), then sleeps to the end
 * of the period. Returns 0 when the duration ran out, 1 when *o->stop was seen (within one
 * product's time, or at once while sleeping). *out gets the final figures. progress may be
 * NULL; it runs on this thread, never from a signal handler. */
int work_run(const struct work_opts *o, work_progress_fn *progress, void *arg,
             struct work_stats *out);

#endif
