/* Unit tests of lib/promparse.c: names and labels (escapes, spaces, trailing commas), values
 * (exponents, NaN, ±Inf), timestamps, comments, malformed lines counted and skipped, the
 * bounds, and what lib/prom.c writes read back. */
#include <event2/buffer.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/prom.h"
#include "lib/promparse.h"
#include "tests/harness/t.h"

/* The samples of one parse, kept. */
static struct promp_sample got[16];
static int ngot;

static int keep(const struct promp_sample *s, void *arg)
{
	(void)arg;
	CHECK(ngot < 16);
	got[ngot++] = *s;
	return 0;
}

static struct promp_stats parse(const char *text)
{
	struct promp_stats st;
	ngot = 0;
	CHECK_INT(promp_parse(text, strlen(text), 1000, keep, NULL, &st), 0);
	return st;
}

TEST(promparse_hami_lines_with_labels_and_comments)
{
	struct promp_stats st = parse(
		"# HELP hami_vgpu_memory_used_bytes vGPU device memory used\n"
		"# TYPE hami_vgpu_memory_used_bytes gauge\n"
		"hami_vgpu_memory_used_bytes{namespace=\"gpu-workbench\",pod=\"gwb-t-1-abcde\","
		"container=\"worker\",vdevice_index=\"0\",device_uuid=\"GPU-0aa\"} 8.05306368e+08\n"
		"\n"
		"hami_container_device_utilization_ratio{ namespace = \"ns\" , pod=\"p\", } 0.25 1700000000123\r\n");
	CHECK_INT((long long)st.lines, 5);
	CHECK_INT((long long)st.samples, 2);
	CHECK_INT((long long)st.bad_lines, 0);
	CHECK_STR(got[0].name, "hami_vgpu_memory_used_bytes");
	CHECK_INT(got[0].nlabels, 5);
	CHECK_STR(promp_label(&got[0], "pod"), "gwb-t-1-abcde");
	CHECK_STR(promp_label(&got[0], "device_uuid"), "GPU-0aa");
	CHECK(promp_label(&got[0], "node") == NULL);
	CHECK(got[0].value == 805306368.0);
	CHECK(!got[0].has_ts);
	CHECK_STR(promp_label(&got[1], "namespace"), "ns");
	CHECK(got[1].value == 0.25);
	CHECK(got[1].has_ts);
	CHECK_INT(got[1].ts_ms, 1700000000123LL);
}

TEST(promparse_escapes_values_and_no_labels)
{
	parse("m{a=\"x\\\"y\\\\z\\nw\",b=\"\\q\"} -Inf\n"
	      "m2 NaN\n"
	      "m3{} +Inf\n"
	      "m4 1E-3 -5\n"
	      "ns:m5 42\n");
	CHECK_INT(ngot, 5);
	CHECK_STR(promp_label(&got[0], "a"), "x\"y\\z\nw");
	CHECK_STR(promp_label(&got[0], "b"), "\\q");
	CHECK(isinf(got[0].value) && got[0].value < 0);
	CHECK(isnan(got[1].value));
	CHECK_INT(got[2].nlabels, 0);
	CHECK(isinf(got[2].value) && got[2].value > 0);
	CHECK(got[3].value == 0.001);
	CHECK_INT(got[3].ts_ms, -5);
	CHECK_STR(got[4].name, "ns:m5");
}

TEST(promparse_bad_lines_are_counted_and_skipped)
{
	static const char *const bad[] = {
		"m",                  /* no value */
		"m{a=\"x\" 1",        /* unclosed */
		"m{a=x} 1",           /* unquoted */
		"m{a:b=\"x\"} 1",     /* a colon in a label name */
		"m{a=\"x\"b=\"y\"} 1", /* no comma */
		"9m 1",               /* a name starting with a digit */
		"m 0x10",             /* hexadecimal */
		"m infinity",
		"m 1 2 3",            /* too many fields */
		"m 1 1.5",            /* a timestamp that is not an integer */
		"m{a=\"x\\",          /* an escape at the end */
		"m nan(1)",
		"m 1e",
	};
	char text[1024] = "";
	size_t len = 0;
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		len += (size_t)snprintf(text + len, sizeof text - len, "%s\n", bad[i]);
	snprintf(text + len, sizeof text - len, "good 1\n");
	struct promp_stats st = parse(text);
	CHECK_INT((long long)st.bad_lines, (long long)(sizeof bad / sizeof bad[0]));
	CHECK_INT(ngot, 1);
	CHECK_STR(got[0].name, "good");
	/* A NUL inside a line makes it bad, not the end of the text. */
	const char nul[] = "a 1\nb\0 2\nc 3\n";
	ngot = 0;
	CHECK_INT(promp_parse(nul, sizeof nul - 1, 100, keep, NULL, &st), 0);
	CHECK_INT(ngot, 2);
	CHECK_INT((long long)st.bad_lines, 1);
}

TEST(promparse_bounds)
{
	char text[4096];
	/* A label value of PROMP_VALUE_MAX bytes does not fit; one byte less does. */
	for (int fits = 0; fits < 2; fits++) {
		int n = PROMP_VALUE_MAX - fits;
		int o = snprintf(text, sizeof text, "m{a=\"");
		memset(text + o, 'v', (size_t)n);
		snprintf(text + o + n, sizeof text - (size_t)(o + n), "\"} 1\n");
		struct promp_stats st = parse(text);
		CHECK_INT((long long)st.samples, fits);
	}
	/* Labels: PROMP_LABELS_MAX fit, one more does not. */
	for (int extra = 0; extra < 2; extra++) {
		int o = snprintf(text, sizeof text, "m{");
		for (int i = 0; i < PROMP_LABELS_MAX + extra; i++)
			o += snprintf(text + o, sizeof text - (size_t)o, "l%d=\"%d\",", i, i);
		snprintf(text + o, sizeof text - (size_t)o, "} 1\n");
		struct promp_stats st = parse(text);
		CHECK_INT((long long)st.samples, 1 - extra);
	}
	/* max_samples stops the parse and says so. */
	struct promp_stats st;
	ngot = 0;
	const char *many = "a 1\nb 2\nc 3\n";
	CHECK_INT(promp_parse(many, strlen(many), 2, keep, NULL, &st), 0);
	CHECK_INT(ngot, 2);
	CHECK(st.truncated);
}

static int stop_at_second(const struct promp_sample *s, void *arg)
{
	(void)s;
	return ++*(int *)arg == 2 ? 7 : 0;
}

TEST(promparse_callback_stops_the_parse)
{
	int n = 0;
	const char *t = "a 1\nb 2\nc 3\n";
	CHECK_INT(promp_parse(t, strlen(t), 100, stop_at_second, &n, NULL), 7);
	CHECK_INT(n, 2);
}

TEST(promparse_reads_what_prom_writes)
{
	struct evbuffer *b = evbuffer_new();
	struct prom_label l[] = { { "pod", "a\"b\\c\nd" }, { "device_uuid", "GPU-1" } };
	prom_family(b, "gwb_x", PROM_GAUGE, "help with \\ and\nnewline");
	prom_sample_real(b, "gwb_x", l, 2, 0.5);
	prom_sample_real(b, "gwb_x", l, 1, NAN);
	prom_sample_int(b, "gwb_y", NULL, 0, -12);
	size_t n = evbuffer_get_length(b);
	char text[1024];
	CHECK(n < sizeof text);
	evbuffer_remove(b, text, n);
	text[n] = '\0';
	evbuffer_free(b);
	struct promp_stats st = parse(text);
	CHECK_INT((long long)st.bad_lines, 0);
	CHECK_INT(ngot, 3);
	CHECK_STR(promp_label(&got[0], "pod"), "a\"b\\c\nd");
	CHECK(got[0].value == 0.5);
	CHECK(isnan(got[1].value));
	CHECK(got[2].value == -12);
}
