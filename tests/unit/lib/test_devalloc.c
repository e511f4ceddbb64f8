/* Unit tests of lib/devalloc: the reference's annotation examples (koordinator.md §3.3)
 * parse to the right budget and re-encode byte for byte; malformed annotations are refused. */
#include <string.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "tests/harness/t.h"

/* §3.3 (a): 1024Mi and 25 % of minor 0 on an 80Gi card. */
static const char ex_a[] =
    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"25\","
    "\"koordinator.sh/gpu-memory\":\"1Gi\",\"koordinator.sh/gpu-memory-ratio\":\"1\"},"
    "\"id\":\"GPU-11111111-2222-3333-4444-555555555555\"}]}";
/* §3.3 (a'). */
static const char ex_a2[] =
    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"25\","
    "\"koordinator.sh/gpu-memory\":\"20Gi\",\"koordinator.sh/gpu-memory-ratio\":\"25\"},"
    "\"id\":\"GPU-1111\xe2\x80\xa6\"}]}";
/* §3.3 (b): two cards, half of each. */
static const char ex_b[] =
    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"50\","
    "\"koordinator.sh/gpu-memory\":\"40Gi\",\"koordinator.sh/gpu-memory-ratio\":\"50\"},"
    "\"id\":\"GPU-aaaa\xe2\x80\xa6\"},{\"minor\":1,\"resources\":{\"koordinator.sh/gpu-core\":"
    "\"50\",\"koordinator.sh/gpu-memory\":\"40Gi\",\"koordinator.sh/gpu-memory-ratio\":\"50\"},"
    "\"id\":\"GPU-bbbb\xe2\x80\xa6\"}]}";
/* §3.3 (c): two whole cards. */
static const char ex_c[] =
    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"100\","
    "\"koordinator.sh/gpu-memory\":\"80Gi\",\"koordinator.sh/gpu-memory-ratio\":\"100\"},"
    "\"id\":\"GPU-aaaa\xe2\x80\xa6\"},{\"minor\":1,\"resources\":{\"koordinator.sh/gpu-core\":"
    "\"100\",\"koordinator.sh/gpu-memory\":\"80Gi\",\"koordinator.sh/gpu-memory-ratio\":"
    "\"100\"},\"id\":\"GPU-bbbb\xe2\x80\xa6\"}]}";
/* §3.3, the website's live HAMi result: no id. */
static const char ex_hami[] =
    "{\"gpu\":[{\"minor\":1,\"resources\":{\"koordinator.sh/gpu-core\":\"50\","
    "\"koordinator.sh/gpu-memory\":\"11520Mi\",\"koordinator.sh/gpu-memory-ratio\":\"50\"}}]}";

static void parse_ok(const char *s, struct devalloc *a)
{
	char err[256];
	int rc = devalloc_parse(s, strlen(s), a, err, sizeof err);
	CHECKF(rc == 0, "devalloc_parse failed: %s", err);
}

static void round_trip(const char *s)
{
	struct devalloc a;
	parse_ok(s, &a);
	char *out = devalloc_format(&a);
	CHECK_STR(out, s);
	gwb_free(out);
}

TEST(devalloc_reference_examples_round_trip)
{
	round_trip(ex_a);
	round_trip(ex_a2);
	round_trip(ex_b);
	round_trip(ex_c);
	round_trip(ex_hami);
}

TEST(devalloc_parses_example_a)
{
	struct devalloc a;
	parse_ok(ex_a, &a);
	CHECK_INT(a.ncards, 1);
	CHECK_INT(a.cards[0].minor, 0);
	CHECK(a.cards[0].has_core && a.cards[0].has_mem && a.cards[0].has_ratio);
	CHECK_INT(a.cards[0].core, 25);
	CHECK_INT(a.cards[0].mem_bytes, 1073741824LL);
	CHECK_INT(a.cards[0].ratio, 1);
	CHECK_STR(a.cards[0].id, "GPU-11111111-2222-3333-4444-555555555555");
}

TEST(devalloc_parses_two_cards)
{
	struct devalloc a;
	parse_ok(ex_b, &a);
	CHECK_INT(a.ncards, 2);
	CHECK_INT(a.cards[1].minor, 1);
	CHECK_INT(a.cards[1].mem_bytes, 40LL << 30);
	CHECK_INT(a.cards[1].core, 50);
	parse_ok(ex_hami, &a);
	CHECK_INT(a.cards[0].mem_bytes, 11520LL << 20);
	CHECK_STR(a.cards[0].id, "");
}

TEST(devalloc_memory_forms_canonicalise)
{
	const char *forms[] = {"1Gi", "1024Mi", "1073741824", "1048576Ki", NULL};
	for (int i = 0; forms[i]; i++) {
		char in[256];
		snprintf(in, sizeof in,
		         "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"25\","
		         "\"koordinator.sh/gpu-memory\":\"%s\",\"koordinator.sh/gpu-memory-ratio\":"
		         "\"1\"},\"id\":\"GPU-11111111-2222-3333-4444-555555555555\"}]}",
		         forms[i]);
		struct devalloc a;
		parse_ok(in, &a);
		CHECK_INT(a.cards[0].mem_bytes, 1073741824LL);
		char *out = devalloc_format(&a);
		CHECK_STR(out, ex_a);
		gwb_free(out);
	}
}

TEST(devalloc_optional_parts)
{
	/* Other device types, unknown fields and unknown resources are ignored; missing
	 * resources stay absent in the output. */
	const char *in = "{\"rdma\":[{\"minor\":3,\"resources\":{}}],\"gpu\":[{\"minor\":2,"
	                 "\"resources\":{\"koordinator.sh/gpu-memory-ratio\":\"30\",\"x/y\":\"1\"},"
	                 "\"extension\":{\"vfs\":[{\"minor\":1}]}}]}";
	struct devalloc a;
	parse_ok(in, &a);
	CHECK_INT(a.ncards, 1);
	CHECK(!a.cards[0].has_core && !a.cards[0].has_mem && a.cards[0].has_ratio);
	char *out = devalloc_format(&a);
	CHECK_STR(out, "{\"gpu\":[{\"minor\":2,\"resources\":{\"koordinator.sh/gpu-memory-ratio\":"
	               "\"30\"}}]}");
	gwb_free(out);
	parse_ok("{}", &a);
	CHECK_INT(a.ncards, 0);
	out = devalloc_format(&a);
	CHECK_STR(out, "{\"gpu\":[]}");
	gwb_free(out);
}

TEST(devalloc_format_escapes_like_go)
{
	struct devalloc a = {.ncards = 1};
	a.cards[0].minor = 0;
	snprintf(a.cards[0].id, sizeof a.cards[0].id, "a<b>&\"c\xe2\x80\xa8");
	char *out = devalloc_format(&a);
	CHECK_STR(out, "{\"gpu\":[{\"minor\":0,\"resources\":{},\"id\":"
	               "\"a\\u003cb\\u003e\\u0026\\\"c\\u2028\"}]}");
	gwb_free(out);
}

static void check_bad(const char *in, const char *reason_part)
{
	struct devalloc a;
	char err[256];
	a.ncards = 5;
	int rc = devalloc_parse(in, strlen(in), &a, err, sizeof err);
	CHECKF(rc == GWB_EINVAL, "devalloc_parse(%s) gave %d", in, rc);
	CHECK_INT(a.ncards, 0);
	CHECKF(strstr(err, reason_part) != NULL, "reason \"%s\" lacks \"%s\"", err, reason_part);
}

TEST(devalloc_rejects_malformed)
{
	check_bad("", "malformed JSON");
	check_bad("{\"gpu\":[", "malformed JSON");
	check_bad("[]", "must be a JSON object");
	check_bad("{\"gpu\":{}}", "must be a list");
	check_bad("{\"gpu\":[1]}", "gpu[0] must be an object");
	check_bad("{\"gpu\":[{\"resources\":{}}]}", "gpu[0].minor is missing");
	check_bad("{\"gpu\":[{\"minor\":-1,\"resources\":{}}]}", "gpu[0].minor");
	check_bad("{\"gpu\":[{\"minor\":\"0\",\"resources\":{}}]}", "gpu[0].minor");
	check_bad("{\"gpu\":[{\"minor\":0}]}", "gpu[0].resources must be an object");
	check_bad("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-memory\":1024}}]}",
	          "must be a quantity string");
	check_bad("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-memory\":\"1GB\"}}]}",
	          "not a valid quantity");
	check_bad("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"-5\"}}]}",
	          "gpu[0].resources.koordinator.sh/gpu-core");
	check_bad("{\"gpu\":[{\"minor\":0,\"resources\":{},\"id\":7}]}", "gpu[0].id");
	check_bad("{\"gpu\":[],\"gpu\":[]}", "malformed JSON"); /* duplicate key */
	check_bad("{\"gpu\":[{\"minor\":0,\"resources\":{}},{\"minor\":1}]}", "gpu[1].resources");
	char many[2048] = "{\"gpu\":[";
	for (int i = 0; i < DEVALLOC_MAX_CARDS + 1; i++) {
		size_t l = strlen(many);
		snprintf(many + l, sizeof many - l, "%s{\"minor\":%d,\"resources\":{}}",
		         i ? "," : "", i);
	}
	size_t l = strlen(many);
	snprintf(many + l, sizeof many - l, "]}");
	check_bad(many, "at most 16");
}

TEST(devalloc_to_json_view)
{
	struct devalloc a;
	parse_ok(ex_a, &a);
	json_t *j = devalloc_to_json(&a);
	char *s = jx_dump(j);
	CHECK_STR(s, "{\"cards\":[{\"gpu_core_percent\":25,\"gpu_memory_bytes\":1073741824,"
	             "\"gpu_memory_mib\":1024,\"gpu_memory_ratio\":1,\"id\":"
	             "\"GPU-11111111-2222-3333-4444-555555555555\",\"minor\":0}]}");
	gwb_free(s);
	json_decref(j);
	parse_ok("{\"gpu\":[{\"minor\":4,\"resources\":{}}]}", &a);
	j = devalloc_to_json(&a);
	s = jx_dump(j);
	CHECK_STR(s,
	          "{\"cards\":[{\"gpu_core_percent\":null,\"gpu_memory_bytes\":null,"
	          "\"gpu_memory_mib\":null,\"gpu_memory_ratio\":null,\"id\":null,\"minor\":4}]}");
	gwb_free(s);
	json_decref(j);
}
