/* Unit tests of lib/backoff.c: waits grow by doubling within their jitter band, stop at the
 * cap, start over after a reset, differ between seeds, and bad bounds are raised. */
#include "lib/backoff.h"
#include "tests/harness/t.h"

/* The ceilings the server's and the queue's copies used: first, doubling, capped. */
static int64_t ceiling(int64_t first, int64_t max, int n)
{
	int64_t c = first;
	for (int i = 1; i < n && c < max; i++)
		c = c * 2 > max ? max : c * 2;
	return c;
}

TEST(backoff_doubles_within_the_jitter_band_up_to_the_cap)
{
	static const int64_t bounds[][2] = { { 100, 5000 }, { 200, 5000 }, { 300, 10000 },
					     { 1, 1 },      { 7, 1000 } };
	for (size_t k = 0; k < sizeof bounds / sizeof bounds[0]; k++) {
		for (uint64_t seed = 0; seed < 50; seed++) {
			struct backoff b;
			backoff_init(&b, bounds[k][0], bounds[k][1], seed);
			for (int n = 1; n <= 40; n++) {
				int64_t w = backoff_next(&b);
				int64_t c = ceiling(bounds[k][0], bounds[k][1], n);
				int64_t lo = c / 2 < 1 ? 1 : c / 2;
				CHECKF(w >= lo && w <= c, "first %lld max %lld try %d: %lld not in [%lld, %lld]",
				       (long long)bounds[k][0], (long long)bounds[k][1], n,
				       (long long)w, (long long)lo, (long long)c);
				CHECK_INT(backoff_failures(&b), n);
			}
		}
	}
}

TEST(backoff_reset_starts_over)
{
	struct backoff b;
	backoff_init(&b, 100, 5000, 42);
	for (int i = 0; i < 10; i++)
		backoff_next(&b);
	CHECK(backoff_next(&b) >= 2500);
	backoff_reset(&b);
	CHECK_INT(backoff_failures(&b), 0);
	int64_t w = backoff_next(&b);
	CHECK(w >= 50 && w <= 100);
}

TEST(backoff_jitter_differs_between_seeds)
{
	/* Two peers that fail together at the cap should not retry together every time. */
	int same = 0;
	for (uint64_t seed = 1; seed <= 20; seed++) {
		struct backoff a, b;
		backoff_init(&a, 1000, 60000, seed);
		backoff_init(&b, 1000, 60000, seed + 1000);
		int64_t sa = 0, sb = 0;
		for (int i = 0; i < 12; i++) {
			sa += backoff_next(&a);
			sb += backoff_next(&b);
		}
		same += sa == sb;
	}
	CHECK(same < 20);
	/* The same seed gives the same waits (a test can replay them). */
	struct backoff a, b;
	backoff_init(&a, 100, 5000, 7);
	backoff_init(&b, 100, 5000, 7);
	for (int i = 0; i < 20; i++)
		CHECK_INT(backoff_next(&a), backoff_next(&b));
}

TEST(backoff_bad_bounds_are_raised)
{
	struct backoff b;
	backoff_init(&b, 0, -5, 0);
	for (int i = 0; i < 5; i++)
		CHECK_INT(backoff_next(&b), 1);
	backoff_init(&b, 500, 100, 3); /* a cap below the first wait becomes the first wait */
	for (int i = 0; i < 5; i++) {
		int64_t w = backoff_next(&b);
		CHECK(w >= 250 && w <= 500);
	}
	backoff_init(&b, 1, INT64_MAX, 9); /* no overflow when doubling near the top */
	for (int i = 0; i < 100; i++)
		CHECK(backoff_next(&b) >= 1);
}
