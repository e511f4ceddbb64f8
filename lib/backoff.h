/* Exponential back-off with jitter and a cap, for anything that retries a peer (a Redis
 * connection, a watch, a Kubernetes request): the first wait, doubling after each failure up to
 * the cap, each wait drawn from its upper half so that peers that failed together do not retry
 * together. The caller keeps one struct per retrying thing and owns its timer. */
#ifndef GWB_BACKOFF_H
#define GWB_BACKOFF_H

#include <stdint.h>

struct backoff {
	int64_t first_ms; /* the first wait's ceiling */
	int64_t max_ms;   /* no wait is longer */
	int64_t ceil_ms;  /* the next wait's ceiling; 0 before the first failure */
	uint64_t rng;     /* jitter state (xorshift64*); never 0 */
	int failures;     /* since the last backoff_reset */
};

/* Sets b up with its first wait and its cap (first_ms >= 1, max_ms >= first_ms; values outside
 * are raised to those bounds) and seeds the jitter from seed (any value; 0 is replaced). */
void backoff_init(struct backoff *b, int64_t first_ms, int64_t max_ms, uint64_t seed);

/* Records one failure and returns how long to wait before the next try: a value in
 * [ceil / 2, ceil], where ceil is first_ms after the first failure, then doubles, and never
 * exceeds max_ms. Never returns less than 1. */
int64_t backoff_next(struct backoff *b);

/* A success: the next failure waits about first_ms again. */
void backoff_reset(struct backoff *b);

/* Failures since the last reset. */
int backoff_failures(const struct backoff *b);

#endif
