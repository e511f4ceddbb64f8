/* The per-token request limit's buckets, with the time passed in: the burst, the refill rate,
 * Retry-After's whole seconds, one bucket per key, and a full table reusing the idlest
 * bucket. */
#include <string.h>

#include "server/api/ratelimit.h"
#include "tests/harness/t.h"

static void key_of(unsigned char *k, int n)
{
	memset(k, 0, 32);
	memcpy(k, &n, sizeof n);
	k[31] = (unsigned char)n;
}

TEST(ratelimit_burst_then_refill_at_the_rate)
{
	struct ratelimit *rl = ratelimit_new(2, 3); /* 2 per second, 3 at once */
	unsigned char k[32];
	key_of(k, 1);
	int64_t wait = 0;
	for (int i = 0; i < 3; i++)
		CHECK_INT(ratelimit_take(rl, k, 1000, &wait), 1);
	CHECK_INT(ratelimit_take(rl, k, 1000, &wait), 0);
	CHECK_INT(wait, 1); /* 500 ms to the next request: rounded up to a whole second */
	CHECK_INT(ratelimit_take(rl, k, 1499, &wait), 0);
	CHECK_INT(ratelimit_take(rl, k, 1500, &wait), 1);
	CHECK_INT(ratelimit_take(rl, k, 1500, &wait), 0);
	/* A long quiet time refills up to the burst, never past it. */
	for (int i = 0; i < 3; i++)
		CHECK_INT(ratelimit_take(rl, k, 100000, &wait), 1);
	CHECK_INT(ratelimit_take(rl, k, 100000, &wait), 0);
	ratelimit_free(rl);
	ratelimit_free(NULL);
}

TEST(ratelimit_slow_rate_says_how_many_seconds)
{
	struct ratelimit *rl = ratelimit_new(1, 1);
	unsigned char k[32];
	key_of(k, 7);
	int64_t wait = 0;
	CHECK_INT(ratelimit_take(rl, k, 0, &wait), 1);
	CHECK_INT(ratelimit_take(rl, k, 1, &wait), 0);
	CHECK_INT(wait, 1);
	ratelimit_free(rl);
}

TEST(ratelimit_one_bucket_per_key_and_a_full_table_reuses_the_idlest)
{
	struct ratelimit *rl = ratelimit_new(1, 1);
	unsigned char a[32], b[32];
	key_of(a, 1);
	key_of(b, 2);
	int64_t wait = 0;
	CHECK_INT(ratelimit_take(rl, a, 0, &wait), 1);
	CHECK_INT(ratelimit_take(rl, a, 0, &wait), 0);
	CHECK_INT(ratelimit_take(rl, b, 0, &wait), 1); /* b's own bucket */
	/* Many keys on the same probe run (same first four bytes): the table never fails, and
	 * a key whose bucket was reused starts full again (more lenient, never stricter). */
	for (int i = 0; i < 100; i++) {
		unsigned char k[32];
		key_of(k, 1);
		k[30] = (unsigned char)(i + 1);
		CHECK_INT(ratelimit_take(rl, k, 10 + i, &wait), 1);
	}
	CHECK_INT(ratelimit_take(rl, a, 200, &wait), 1);
	ratelimit_free(rl);
}
