/* Exponential back-off: a doubling ceiling with a cap, and "equal jitter" below it. */
#include "lib/backoff.h"

void backoff_init(struct backoff *b, int64_t first_ms, int64_t max_ms, uint64_t seed)
{
	b->first_ms = first_ms < 1 ? 1 : first_ms;
	b->max_ms = max_ms < b->first_ms ? b->first_ms : max_ms;
	b->ceil_ms = 0;
	/* Any non-zero state works for xorshift; mix the seed so that nearby seeds diverge. */
	b->rng = (seed ^ 0x9e3779b97f4a7c15ull) | 1;
	b->failures = 0;
}

static uint64_t rng_next(struct backoff *b)
{
	uint64_t x = b->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	b->rng = x;
	return x * 0x2545f4914f6cdd1dull;
}

int64_t backoff_next(struct backoff *b)
{
	if (b->ceil_ms == 0)
		b->ceil_ms = b->first_ms;
	else if (b->ceil_ms > b->max_ms / 2) /* doubling would pass the cap (and cannot overflow) */
		b->ceil_ms = b->max_ms;
	else
		b->ceil_ms *= 2;
	if (b->failures < INT32_MAX)
		b->failures++;
	/* Half is fixed so that the wait still grows; the other half is random. */
	int64_t half = b->ceil_ms / 2;
	int64_t wait = half + (int64_t)(rng_next(b) % (uint64_t)(b->ceil_ms - half + 1));
	return wait < 1 ? 1 : wait;
}

void backoff_reset(struct backoff *b)
{
	b->ceil_ms = 0;
	b->failures = 0;
}

int backoff_failures(const struct backoff *b)
{
	return b->failures;
}
