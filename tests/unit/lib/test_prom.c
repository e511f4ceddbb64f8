/* Unit tests of lib/prom.c: HELP and TYPE lines, label escaping, counters and gauges, the
 * histogram's bucket choice, cumulative buckets, +Inf, _sum and _count, non-finite values. */
#include <event2/buffer.h>
#include <math.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/prom.h"
#include "tests/harness/t.h"

/* The buffer's text as a NUL-terminated string (static; overwritten by the next call), and
 * the buffer emptied. */
static const char *text(struct evbuffer *b)
{
	static char s[4096];
	size_t n = evbuffer_get_length(b);
	CHECK(n < sizeof s);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	return s;
}

static struct evbuffer *buf(void)
{
	struct evbuffer *b = evbuffer_new();
	t_defer((void (*)(void *))evbuffer_free, b);
	return b;
}

TEST(prom_counter_and_gauge_write_type_and_one_sample)
{
	struct evbuffer *b = buf();
	prom_counter(b, "gwb_x_total", NULL, 42);
	CHECK_STR(text(b), "# TYPE gwb_x_total counter\ngwb_x_total 42\n");
	prom_gauge(b, "gwb_y", NULL, -3);
	CHECK_STR(text(b), "# TYPE gwb_y gauge\ngwb_y -3\n");
	prom_gauge(b, "gwb_big", NULL, INT64_MAX);
	CHECK_STR(text(b), "# TYPE gwb_big gauge\ngwb_big 9223372036854775807\n");
	prom_counter_real(b, "gwb_s_total", NULL, 1.25);
	CHECK_STR(text(b), "# TYPE gwb_s_total counter\ngwb_s_total 1.250000\n");
}

TEST(prom_help_line_comes_before_type_and_is_escaped)
{
	struct evbuffer *b = buf();
	prom_gauge(b, "gwb_g", "a \\ back\nslash \"quoted\"", 1);
	/* HELP escapes backslash and newline only; quotes stay as they are. */
	CHECK_STR(text(b),
		  "# HELP gwb_g a \\\\ back\\nslash \"quoted\"\n# TYPE gwb_g gauge\ngwb_g 1\n");
	prom_family(b, "gwb_h", PROM_HISTOGRAM, "");
	CHECK_STR(text(b), "# HELP gwb_h \n# TYPE gwb_h histogram\n");
}

TEST(prom_label_values_are_escaped)
{
	struct evbuffer *b = buf();
	struct prom_label l[3] = { { "a", "plain" }, { "b", "q\"b\\s\nn" }, { "c", "" } };
	prom_sample_int(b, "gwb_l", l, 3, 7);
	CHECK_STR(text(b), "gwb_l{a=\"plain\",b=\"q\\\"b\\\\s\\nn\",c=\"\"} 7\n");
	prom_sample_int(b, "gwb_l", l, 1, 0);
	CHECK_STR(text(b), "gwb_l{a=\"plain\"} 0\n");
	prom_sample_int(b, "gwb_l", NULL, 0, 0);
	CHECK_STR(text(b), "gwb_l 0\n");
	struct prom_label none = { "a", NULL };
	prom_sample_int(b, "gwb_l", &none, 1, 1);
	CHECK_STR(text(b), "gwb_l{a=\"\"} 1\n");
}

TEST(prom_real_samples_use_six_decimals_and_prometheus_infinities)
{
	struct evbuffer *b = buf();
	struct prom_label on = { "on", "loop" };
	prom_sample_real(b, "gwb_r", &on, 1, 0.0000004);
	CHECK_STR(text(b), "gwb_r{on=\"loop\"} 0.000000\n");
	prom_sample_real(b, "gwb_r", NULL, 0, 12.3456789);
	CHECK_STR(text(b), "gwb_r 12.345679\n");
	prom_sample_real(b, "gwb_r", NULL, 0, INFINITY);
	CHECK_STR(text(b), "gwb_r +Inf\n");
	prom_sample_real(b, "gwb_r", NULL, 0, -INFINITY);
	CHECK_STR(text(b), "gwb_r -Inf\n");
	prom_sample_real(b, "gwb_r", NULL, 0, NAN);
	CHECK_STR(text(b), "gwb_r NaN\n");
}

TEST(prom_hist_counts_a_value_in_the_first_bound_at_or_above_it)
{
	static const double bounds[] = { 1, 2, 4 };
	struct prom_hist h;
	prom_hist_init(&h, bounds, 3);
	prom_hist_observe(&h, 0.5); /* le=1 */
	prom_hist_observe(&h, 1);   /* a bound is inclusive: le=1 */
	prom_hist_observe(&h, 1.5); /* le=2 */
	prom_hist_observe(&h, 4);   /* le=4 */
	prom_hist_observe(&h, 9);   /* +Inf */
	CHECK_INT(h.counts[0], 2);
	CHECK_INT(h.counts[1], 1);
	CHECK_INT(h.counts[2], 1);
	CHECK_INT(h.counts[3], 1);
	CHECK_INT(h.count, 5);
	CHECK(fabs(h.sum - 16.0) < 1e-9);
}

TEST(prom_hist_writes_cumulative_buckets_inf_sum_and_count)
{
	static const double bounds[] = { 0.005, 0.5, 2.5 };
	struct prom_hist h;
	prom_hist_init(&h, bounds, 3);
	prom_hist_observe(&h, 0.001);
	prom_hist_observe(&h, 0.2);
	prom_hist_observe(&h, 0.3);
	prom_hist_observe(&h, 100);
	struct evbuffer *b = buf();
	prom_hist_write(b, "gwb_d_seconds", NULL, &h);
	CHECK_STR(text(b), "# TYPE gwb_d_seconds histogram\n"
			   "gwb_d_seconds_bucket{le=\"0.005\"} 1\n"
			   "gwb_d_seconds_bucket{le=\"0.5\"} 3\n"
			   "gwb_d_seconds_bucket{le=\"2.5\"} 3\n"
			   "gwb_d_seconds_bucket{le=\"+Inf\"} 4\n"
			   "gwb_d_seconds_sum 100.501000\n"
			   "gwb_d_seconds_count 4\n");
}

TEST(prom_hist_empty_and_with_no_bounds)
{
	static const double bounds[] = { 1, 120 };
	struct prom_hist h;
	prom_hist_init(&h, bounds, 2);
	struct evbuffer *b = buf();
	prom_hist_write(b, "gwb_e", "empty", &h);
	CHECK_STR(text(b), "# HELP gwb_e empty\n# TYPE gwb_e histogram\n"
			   "gwb_e_bucket{le=\"1\"} 0\ngwb_e_bucket{le=\"120\"} 0\n"
			   "gwb_e_bucket{le=\"+Inf\"} 0\ngwb_e_sum 0.000000\ngwb_e_count 0\n");
	prom_hist_init(&h, NULL, 0);
	prom_hist_observe(&h, 3);
	prom_hist_write(b, "gwb_n", NULL, &h);
	CHECK_STR(text(b), "# TYPE gwb_n histogram\ngwb_n_bucket{le=\"+Inf\"} 1\n"
			   "gwb_n_sum 3.000000\ngwb_n_count 1\n");
}

TEST(prom_hist_init_caps_the_bounds_and_clears_the_counts)
{
	static const double many[20] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
	struct prom_hist h;
	memset(&h, 0x5a, sizeof h);
	prom_hist_init(&h, many, 20);
	CHECK_INT(h.nbounds, PROM_HIST_MAX - 1);
	CHECK_INT(h.count, 0);
	prom_hist_observe(&h, 1000);
	CHECK_INT(h.counts[PROM_HIST_MAX - 1], 1);
}
