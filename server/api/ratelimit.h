/* A request limit per bearer token: one token bucket per token, keyed by the token's SHA-256
 * (the token itself is never kept), in a fixed table. Pure bookkeeping: no I/O, time passed
 * in. */
#ifndef GWB_RATELIMIT_H
#define GWB_RATELIMIT_H

#include <stdint.h>

struct ratelimit;

/* Creates a limit of per_s requests per second sustained and burst at once (both >= 1).
 * Returns it (free with ratelimit_free). */
struct ratelimit *ratelimit_new(int64_t per_s, int64_t burst);
/* Frees it. Accepts NULL. */
void ratelimit_free(struct ratelimit *rl);
/* Takes one request from the bucket of key (32 bytes) at now_ms (a monotonic clock). Returns
 * 1 when the request may go on; 0 when the bucket is empty, with *retry_after_s the whole
 * seconds until it holds one request again (at least 1). */
int ratelimit_take(struct ratelimit *rl, const unsigned char *key, int64_t now_ms,
		   int64_t *retry_after_s);

#endif
