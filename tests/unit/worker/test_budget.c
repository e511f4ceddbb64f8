/* Unit tests of worker/budget: the budget from downward-API files in the reference's formats
 * (one card, two cards, memory as 1Gi, 1024Mi and bytes) and every way it can be unusable. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/podinfo.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"
#include "worker/budget.h"

/* Builds a downward-API file as the kubelet would, around one annotation value. */
static char *file_with(const char *json)
{
	const char *keys[] = {"koordinator.sh/gpu-isolation-provider",
	                      "scheduling.koordinator.sh/device-allocated"};
	const char *vals[] = {"HAMi-core", json};
	return podinfo_format(keys, vals, 2);
}

static const char one_card_fmt[] =
    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"25\","
    "\"koordinator.sh/gpu-memory\":\"%s\",\"koordinator.sh/gpu-memory-ratio\":\"1\"},"
    "\"id\":\"GPU-11111111-2222-3333-4444-555555555555\"}]}";

static int load(const char *json, struct budget *b, struct budget_err *e)
{
	char *text = file_with(json);
	int rc = budget_from_text(text, strlen(text), b, e);
	gwb_free(text);
	return rc;
}

TEST(budget_one_card_in_every_memory_form)
{
	const char *forms[] = {"1Gi", "1024Mi", "1073741824", NULL};
	for (int i = 0; forms[i]; i++) {
		char json[512];
		snprintf(json, sizeof json, one_card_fmt, forms[i]);
		struct budget b;
		struct budget_err e;
		int rc = load(json, &b, &e);
		CHECKF(rc == 0, "%s: %s", forms[i], e.reason);
		CHECK_INT(b.mem_bytes, 1073741824LL);
		CHECK_INT(b.core_percent, 25);
		CHECK_INT(budget_duty_percent(&b), 25);
		CHECK_INT(b.alloc.ncards, 1);
	}
}

TEST(budget_two_cards_sum)
{
	const char *json =
	    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"50\","
	    "\"koordinator.sh/gpu-memory\":\"40Gi\",\"koordinator.sh/gpu-memory-ratio\":\"50\"}},"
	    "{\"minor\":1,\"resources\":{\"koordinator.sh/gpu-core\":\"50\","
	    "\"koordinator.sh/gpu-memory\":\"40Gi\",\"koordinator.sh/gpu-memory-ratio\":\"50\"}}]}";
	struct budget b;
	struct budget_err e;
	CHECKF(load(json, &b, &e) == 0, "%s", e.reason);
	CHECK_INT(b.mem_bytes, 80LL << 30);
	CHECK_INT(b.core_percent, 100);
	CHECK_INT(budget_duty_percent(&b), 100);
	json_t *j = budget_to_json(&b);
	char *s = jx_dump(j);
	CHECKF(strstr(s, "\"gpu_memory_bytes\":85899345920") && strstr(s, "\"minor\":1"), "%s", s);
	gwb_free(s);
	json_decref(j);
}

TEST(budget_without_core_is_unthrottled)
{
	const char *json = "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-memory\":"
	                   "\"2Gi\",\"koordinator.sh/gpu-memory-ratio\":\"2\"}}]}";
	struct budget b;
	struct budget_err e;
	CHECKF(load(json, &b, &e) == 0, "%s", e.reason);
	CHECK(!b.has_core);
	CHECK_INT(budget_duty_percent(&b), 100);
}

static void check_problem(const char *text, const char *problem, int want_rc)
{
	struct budget b;
	struct budget_err e;
	int rc = budget_from_text(text, strlen(text), &b, &e);
	CHECKF(rc == want_rc, "rc %d for %s", rc, text);
	CHECK_STR(e.problem, problem);
	CHECK(e.reason[0] != '\0');
	CHECK_INT(b.mem_bytes, 0);
}

static void check_json_problem(const char *json, const char *problem)
{
	char *text = file_with(json);
	check_problem(text, problem, GWB_EINVAL);
	gwb_free(text);
}

TEST(budget_names_what_is_wrong)
{
	check_problem("a=\"b\"", "annotation_missing", GWB_ENOTFOUND);
	check_problem("", "annotation_missing", GWB_ENOTFOUND);
	check_problem("scheduling.koordinator.sh/device-allocated={\"gpu\":[]}", "file_malformed",
	              GWB_EINVAL);
	check_json_problem("{\"gpu\":", "annotation_malformed");
	check_json_problem("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-memory\":"
	                   "\"1GB\"}}]}",
	                   "annotation_malformed");
	check_json_problem("{\"gpu\":[]}", "no_gpu");
	check_json_problem("{\"rdma\":[{\"minor\":0,\"resources\":{}}]}", "no_gpu");
	check_json_problem("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":"
	                   "\"25\"}}]}",
	                   "no_memory");
	check_json_problem("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-memory\":"
	                   "\"0\"}}]}",
	                   "no_memory");
	check_json_problem("{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-memory\":"
	                   "\"1Gi\",\"koordinator.sh/gpu-core\":\"150\"}}]}",
	                   "bad_core");
}

TEST(budget_load_reads_files)
{
	struct budget b;
	struct budget_err e;
	CHECK_INT(budget_load(h_path("absent"), &b, &e), GWB_ENOTFOUND);
	CHECK_STR(e.problem, "file_missing");
	CHECK(strstr(e.reason, "absent") != NULL);
	char json[512];
	snprintf(json, sizeof json, one_card_fmt, "1Gi");
	char *text = file_with(json);
	FILE *f = fopen(h_path("annotations"), "w");
	CHECK(f != NULL);
	fputs(text, f);
	fclose(f);
	gwb_free(text);
	CHECKF(budget_load(h_path("annotations"), &b, &e) == 0, "%s", e.reason);
	CHECK_INT(b.mem_bytes, 1073741824LL);
	/* A directory is there but cannot be read as a file. */
	CHECK(budget_load(h_tmpdir(), &b, &e) != 0);
	/* Bigger than any object's annotations can be. */
	f = fopen(h_path("big"), "w");
	for (int i = 0; i < BUDGET_FILE_MAX / 8 + 8; i++)
		fputs("a=\"bbb\"\n", f);
	fclose(f);
	CHECK_INT(budget_load(h_path("big"), &b, &e), GWB_EINVAL);
	CHECK_STR(e.problem, "file_too_large");
}
