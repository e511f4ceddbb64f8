/* Unit tests of lib/podinfo: the kubelet's downward-API `key="quoted"` format, read and
 * written, with Go's quoting rules and malformed files refused. */
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/podinfo.h"
#include "tests/harness/t.h"

/* What the kubelet writes for a Pod with the §3.3 (a) allocation and two more annotations:
 * sorted keys, the JSON's quotes escaped, no final newline. */
static const char file_a[] =
    "koordinator.sh/gpu-isolation-provider=\"HAMi-core\"\n"
    "kubernetes.io/config.seen=\"2026-05-01T10:00:00.000000000Z\"\n"
    "scheduling.koordinator.sh/device-allocated=\"{\\\"gpu\\\":[{\\\"minor\\\":0,"
    "\\\"resources\\\":{\\\"koordinator.sh/gpu-core\\\":\\\"25\\\","
    "\\\"koordinator.sh/gpu-memory\\\":\\\"1Gi\\\","
    "\\\"koordinator.sh/gpu-memory-ratio\\\":\\\"1\\\"}}]}\"";

static const char json_a[] =
    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"25\","
    "\"koordinator.sh/gpu-memory\":\"1Gi\",\"koordinator.sh/gpu-memory-ratio\":\"1\"}}]}";

static char *get_ok(const char *text, const char *key)
{
	char *v = NULL;
	int rc = podinfo_get(text, strlen(text), key, &v);
	CHECKF(rc == 0, "podinfo_get(%s) gave %d", key, rc);
	return v;
}

TEST(podinfo_reads_escaped_json)
{
	char *v = get_ok(file_a, "scheduling.koordinator.sh/device-allocated");
	CHECK_STR(v, json_a);
	gwb_free(v);
	v = get_ok(file_a, "koordinator.sh/gpu-isolation-provider");
	CHECK_STR(v, "HAMi-core");
	gwb_free(v);
	char *missing = (char *)1;
	CHECK_INT(podinfo_get(file_a, strlen(file_a), "nope", &missing), GWB_ENOTFOUND);
	CHECK(missing == NULL);
	/* A prefix of a key is not the key. */
	CHECK_INT(podinfo_get(file_a, strlen(file_a), "koordinator.sh/gpu", &missing),
	          GWB_ENOTFOUND);
}

TEST(podinfo_formats_like_the_kubelet)
{
	const char *keys[] = {"scheduling.koordinator.sh/device-allocated",
	                      "koordinator.sh/gpu-isolation-provider", "kubernetes.io/config.seen"};
	const char *vals[] = {json_a, "HAMi-core", "2026-05-01T10:00:00.000000000Z"};
	char *s = podinfo_format(keys, vals, 3);
	CHECK_STR(s, file_a);
	gwb_free(s);
	s = podinfo_format(NULL, NULL, 0);
	CHECK_STR(s, "");
	gwb_free(s);
}

TEST(podinfo_quotes_like_go)
{
	const char *keys[] = {"k"};
	struct {
		const char *in, *out;
	} cases[] = {
	    {"a\"b\\c", "k=\"a\\\"b\\\\c\""},
	    {"line1\nline2\ttab\r", "k=\"line1\\nline2\\ttab\\r\""},
	    {"\a\b\f\v", "k=\"\\a\\b\\f\\v\""},
	    {"\x01\x1f\x7f", "k=\"\\x01\\x1f\\x7f\""},
	    {"caf\xc3\xa9 \xe4\xb8\xad", "k=\"caf\xc3\xa9 \xe4\xb8\xad\""},
	    {"\xff\xc3", "k=\"\\xff\\xc3\""},
	    {"nb\xc2\xa0sp", "k=\"nb\\u00a0sp\""},
	    {"c1\xc2\x85", "k=\"c1\\u0085\""},
	    {"ls\xe2\x80\xa8", "k=\"ls\\u2028\""},
	    {"pua\xf3\xb0\x80\x80", "k=\"pua\\U000f0000\""},
	    {"", "k=\"\""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *vals[] = {cases[i].in};
		char *s = podinfo_format(keys, vals, 1);
		CHECK_STR(s, cases[i].out);
		/* And back. */
		char *v = get_ok(s, "k");
		if (i != 5) /* invalid UTF-8 comes back byte for byte too */
			CHECK_STR(v, cases[i].in);
		else
			CHECK(memcmp(v, "\xff\xc3", 3) == 0);
		gwb_free(v);
		gwb_free(s);
	}
}

TEST(podinfo_unquotes_every_go_escape)
{
	const char *text = "k=\"\\101\\x42\\u0043\\U0001F600\\'\"";
	char *v = NULL;
	/* \' is not valid inside double quotes in Go. */
	CHECK_INT(podinfo_get(text, strlen(text), "k", &v), GWB_EINVAL);
	text = "k=\"\\101\\x42\\u0043\\U0001F600\"";
	v = get_ok(text, "k");
	CHECK_STR(v, "ABC\xf0\x9f\x98\x80");
	gwb_free(v);
	/* Tolerated: a final newline, empty lines. */
	v = get_ok("a=\"1\"\n\nk=\"2\"\n", "k");
	CHECK_STR(v, "2");
	gwb_free(v);
}

static void check_bad(const char *text)
{
	char *v = (char *)1;
	int rc = podinfo_get(text, strlen(text), "k", &v);
	CHECKF(rc == GWB_EINVAL, "podinfo_get(%s) gave %d", text, rc);
	CHECK(v == NULL);
}

TEST(podinfo_rejects_malformed)
{
	check_bad("k=2");
	check_bad("k=\"2");
	check_bad("k='2'");
	check_bad("k");
	check_bad("=\"x\"");
	check_bad("k=\"a\"b\"");
	check_bad("k=\"a\\\"");
	check_bad("k=\"\\q\"");
	check_bad("k=\"\\x4\"");
	check_bad("k=\"\\400\"");
	check_bad("k=\"\\12\"");
	check_bad("k=\"\\ud800\"");
	check_bad("k=\"\\U00110000\"");
	check_bad("k=\"\\x00\"");
	check_bad("k=\"1\"\nk=\"2\"");
	/* A malformed line elsewhere spoils the file. */
	check_bad("a=broken\nk=\"1\"");
	check_bad("k=\"1\"\nz=\"open");
	check_bad("k=\"\"\"");
}
