/* Benchmark (not a test): what one usage scrape of 10,000 HAMi series costs the server's loop
 * in parsing (lib/promparse.c over the answer's text, the part of a scrape done on the loop
 * besides the per-Pod sums), best and median of a few runs. Usage: bench_usage [series]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/promparse.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count(const struct promp_sample *s, void *arg)
{
	*(double *)arg += s->value;
	return 0;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	gwb_alloc_init();
	char *end = NULL;
	long n = argc > 1 ? strtol(argv[1], &end, 10) : 10000;
	if (argc > 1 && (*end || n < 1 || n > 10000000)) {
		fprintf(stderr, "usage: bench_usage [SERIES (1..10000000)]\n");
		return 2;
	}
	size_t cap = (size_t)n * 256 + 1024, len = 0;
	char *text = gwb_malloc(cap);
	len += (size_t)snprintf(text, cap, "# HELP hami_vgpu_memory_used_bytes used\n"
					   "# TYPE hami_vgpu_memory_used_bytes gauge\n");
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, cap - len,
					"hami_vgpu_memory_used_bytes{namespace=\"gpu-workbench\","
					"pod=\"gwb-t-%08d-abcde\",container=\"worker\","
					"vdevice_index=\"0\",device_uuid=\"GPU-%04d-1111-2222-3333\"} "
					"8.05306368e+08\n",
					i, i % 64);
	double runs[9], sum = 0;
	for (int r = 0; r < 9; r++) {
		struct promp_stats st;
		double t0 = now_s();
		promp_parse(text, len, 200000, count, &sum, &st);
		runs[r] = now_s() - t0;
		if ((long)st.samples != n) {
			fprintf(stderr, "parsed %zu of %ld\n", st.samples, n);
			return 1;
		}
	}
	qsort(runs, 9, sizeof runs[0], cmp);
	printf("usage scrape parse: %ld series, %zu bytes: best %.2f ms, median %.2f ms\n", n, len,
	       runs[0] * 1000, runs[4] * 1000);
	gwb_free(text);
	return 0;
}
