/* A log-bucket latency histogram in the manner of HdrHistogram: constant memory (about 10 KiB),
 * values up to 2^40 with about 3% relative precision, exact count, minimum and maximum. The
 * unit is the caller's (gwb-load records microseconds). */
#ifndef GWB_LOAD_HIST_H
#define GWB_LOAD_HIST_H

#include <stdint.h>

/* 64 exact values, then 32 sub-buckets per power of two from 2^6 to 2^40. */
#define HIST_SUB       32
#define HIST_BUCKETS   (2 * HIST_SUB + 35 * HIST_SUB)
#define HIST_VALUE_MAX ((int64_t)1 << 40)

struct hist {
	uint64_t count;
	int64_t min, max;
	uint64_t b[HIST_BUCKETS];
};

/* Empties h. */
void hist_init(struct hist *h);
/* Records one value; negative values count as 0, values above HIST_VALUE_MAX as that. */
void hist_add(struct hist *h, int64_t v);
/* The value at percentile p (0 < p <= 100): the highest value of the bucket that holds the
 * ceil(p% * count)-th smallest recorded value, never above the recorded maximum. 0 when the
 * histogram is empty. */
int64_t hist_percentile(const struct hist *h, double p);
/* Adds every value recorded in src to dst. */
void hist_merge(struct hist *dst, const struct hist *src);

#endif
