/* The log-bucket histogram: bucket index from the position of the highest set bit and the five
 * bits below it, so each bucket spans at most 1/32 of its values. */
#include "tools/gwb-load/hist.h"

#include <math.h>
#include <string.h>

static int bucket_of(int64_t v)
{
	if (v < 2 * HIST_SUB)
		return (int)v;
	int msb = 63 - __builtin_clzll((unsigned long long)v);
	int shift = msb - 5; /* keeps the top six bits: 32..63 */
	int top = (int)(v >> shift);
	return 2 * HIST_SUB + (shift - 1) * HIST_SUB + (top - HIST_SUB);
}

/* The highest value that falls into bucket i. */
static int64_t bucket_high(int i)
{
	if (i < 2 * HIST_SUB)
		return i;
	int shift = (i - 2 * HIST_SUB) / HIST_SUB + 1;
	int64_t top = HIST_SUB + (i - 2 * HIST_SUB) % HIST_SUB;
	return ((top + 1) << shift) - 1;
}

void hist_init(struct hist *h)
{
	memset(h, 0, sizeof *h);
}

void hist_add(struct hist *h, int64_t v)
{
	if (v < 0)
		v = 0;
	if (v > HIST_VALUE_MAX)
		v = HIST_VALUE_MAX;
	int i = bucket_of(v);
	if (i >= HIST_BUCKETS)
		i = HIST_BUCKETS - 1;
	h->b[i]++;
	if (h->count == 0 || v < h->min)
		h->min = v;
	if (h->count == 0 || v > h->max)
		h->max = v;
	h->count++;
}

int64_t hist_percentile(const struct hist *h, double p)
{
	if (h->count == 0)
		return 0;
	if (p > 100)
		p = 100;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (int i = 0; i < HIST_BUCKETS; i++) {
		seen += h->b[i];
		if (seen >= rank) {
			int64_t v = bucket_high(i);
			if (v > h->max)
				v = h->max;
			if (v < h->min)
				v = h->min;
			return v;
		}
	}
	return h->max;
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	if (src->count == 0)
		return;
	for (int i = 0; i < HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
	if (dst->count == 0 || src->min < dst->min)
		dst->min = src->min;
	if (dst->count == 0 || src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
}
