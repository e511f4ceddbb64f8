/* The simulated memory ledger: bookkeeping of the working set against the memory budget, in
 * chunks, refusing the chunk that would pass the budget the way a limited GPU allocator
 * would. It allocates nothing: no device memory, and no host memory of that size either. */
#ifndef GWB_WORKER_LEDGER_H
#define GWB_WORKER_LEDGER_H

#include <stdint.h>

/* One booking step. Large enough to keep the count of steps small, small enough that a
 * refusal lands close to the budget. */
#define LEDGER_CHUNK (64LL * 1024 * 1024)
/* How far past the budget the overlimit experiment asks. */
#define LEDGER_OVERLIMIT_EXTRA (128LL * 1024 * 1024)

struct ledger {
	int64_t budget; /* bytes that may be booked */
	int64_t used;   /* bytes booked so far */
	int64_t chunks; /* bookings made */
};

/* What ledger_fill did. When refused, requested is the chunk that was turned down and used
 * what was booked before it. */
struct ledger_result {
	int refused;
	int64_t working_set, requested, used, budget, chunks;
};

/* Starts an empty ledger with budget bytes (>= 0). */
void ledger_init(struct ledger *l, int64_t budget);

/* Books n (> 0) bytes. Returns 0, or GWB_EQUOTA when used + n would pass the budget (nothing
 * is booked then), or GWB_EINVAL for n <= 0. */
int ledger_reserve(struct ledger *l, int64_t n);

/* The working set of an experiment: "overlimit" asks budget + LEDGER_OVERLIMIT_EXTRA; anything
 * else ("normal") asks three quarters of the budget, which always fits. */
int64_t ledger_working_set(int64_t budget, const char *experiment);

/* Books working_set in chunks of at most chunk bytes, stopping at the first refusal. Returns
 * 0 when all of it was booked, GWB_EQUOTA when a chunk was refused (*r says which), or
 * GWB_EINVAL for chunk <= 0. */
int ledger_fill(struct ledger *l, int64_t working_set, int64_t chunk, struct ledger_result *r);

#endif
