/* The card picture and the pending diagnosis, on the lab's numbers: two 8 GiB cards. */
#include <string.h>

#include "server/recon/diagnose.h"
#include "tests/harness/t.h"

static json_t *device(int health1)
{
	return json_pack(
		"{s:{s:{s:[{s:s, s:s, s:i, s:b, s:{s:s, s:s, s:s}}, {s:s, s:s, s:i, s:b, s:{s:s, "
		"s:s, s:s}}]}}}",
		"colima-gwb", "spec", "devices", "type", "gpu", "id", "GPU-0", "minor", 0, "health",
		1, "resources", "koordinator.sh/gpu-core", "100", "koordinator.sh/gpu-memory", "8Gi",
		"koordinator.sh/gpu-memory-ratio", "100", "type", "gpu", "id", "GPU-1", "minor", 1,
		"health", health1, "resources", "koordinator.sh/gpu-core", "100",
		"koordinator.sh/gpu-memory", "8Gi", "koordinator.sh/gpu-memory-ratio", "100");
}

static json_t *pod(const char *task, int minor, const char *mem, const char *core,
		   const char *phase)
{
	char ann[256];
	snprintf(ann, sizeof ann,
		 "{\"gpu\":[{\"minor\":%d,\"resources\":{\"koordinator.sh/gpu-core\":\"%s\","
		 "\"koordinator.sh/gpu-memory\":\"%s\",\"koordinator.sh/gpu-memory-ratio\":\"62\"}}]}",
		 minor, core, mem);
	return json_pack("{s:{s:{s:s}, s:{s:s}}, s:{s:s}, s:{s:s}}", "metadata", "labels",
			 "gwb.io/task", task, "annotations",
			 "scheduling.koordinator.sh/device-allocated", ann, "spec", "nodeName",
			 "colima-gwb", "status", "phase", phase);
}

static const char *kind_of(json_t *d)
{
	return json_string_value(json_object_get(d, "kind"));
}

TEST(diag_fragmentation_two_big_tasks_block_4096)
{
	json_t *devs = device(1);
	json_t *pods = json_pack("{s:o, s:o}", "a", pod("t-a", 0, "5Gi", "60", "Running"), "b",
				 pod("t-b", 1, "5Gi", "60", "Running"));
	struct diag_cards cards;
	diag_cards_build(&cards, devs, pods);
	CHECK_INT(cards.n, 2);
	CHECK_INT(cards.c[0].mem_used_mib, 5120);
	CHECK_INT(cards.c[1].core_used, 60);
	struct diag_req r = { "t-c", 4096, 25, 1, 0, 10240, 0, 400 };
	json_t *d = diag_pending(&r, &cards);
	CHECK_STR(kind_of(d), "fragmentation");
	json_t *c = json_object_get(d, "cards");
	CHECK_INT(json_integer_value(json_object_get(c, "total_free_mib")), 6144);
	CHECK_INT(json_integer_value(json_object_get(c, "fit_now")), 0);
	json_t *unblock = json_object_get(d, "unblock");
	CHECK_INT(json_array_size(unblock), 2);
	CHECK_STR(json_string_value(json_array_get(
			  json_object_get(json_array_get(unblock, 0), "release_tasks"), 0)),
		  "t-a");
	json_decref(d);
	/* One big task ends: the waiting one fits. */
	json_object_set_new(pods, "a", pod("t-a", 0, "5Gi", "60", "Succeeded"));
	diag_cards_build(&cards, devs, pods);
	d = diag_pending(&r, &cards);
	CHECK_STR(kind_of(d), "waiting");
	json_decref(d);
	json_t *view = diag_cards_json(&cards);
	CHECK_INT(json_array_size(view), 2);
	json_t *c1 = json_array_get(view, 1);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(c1, "free"), "gpu_memory_mib")),
		  3072);
	CHECK_STR(json_string_value(json_object_get(
			  json_array_get(json_object_get(c1, "tasks"), 0), "task")),
		  "t-b");
	json_decref(view);
	json_decref(devs);
	json_decref(pods);
}

TEST(diag_card_capacity_for_9_gib_on_8_gib_cards)
{
	json_t *devs = device(1);
	json_t *pods = json_object();
	struct diag_cards cards;
	diag_cards_build(&cards, devs, pods);
	struct diag_req r = { "t-x", 9216, 50, 1, 9216, 10240, 50, 400 };
	json_t *d = diag_pending(&r, &cards);
	CHECK_STR(kind_of(d), "card_capacity");
	CHECK(strstr(json_string_value(json_object_get(d, "summary")), "8192 MiB") != NULL);
	CHECK(json_is_true(json_object_get(json_object_get(d, "team_quota"), "ok")));
	json_decref(d);
	json_decref(devs);
	json_decref(pods);
}

TEST(diag_unhealthy_card_and_busy_cards)
{
	json_t *devs = device(0);
	json_t *pods = json_pack("{s:o}", "a", pod("t-a", 0, "5Gi", "60", "Running"));
	struct diag_cards cards;
	diag_cards_build(&cards, devs, pods);
	CHECK_INT(cards.c[1].healthy, 0);
	struct diag_req r = { "t-c", 4096, 25, 1, 0, 0, 0, 0 };
	json_t *d = diag_pending(&r, &cards);
	/* Card 1 would fit but is unhealthy; card 0 is big enough but busy. */
	CHECK_STR(kind_of(d), "device_unhealthy");
	json_decref(d);
	/* Nothing would fit even with every card healthy: simply busy. */
	struct diag_req big = { "t-e", 7000, 25, 1, 0, 0, 0, 0 };
	json_t *pods2 = json_pack("{s:o, s:o}", "a", pod("t-a", 0, "5Gi", "60", "Running"), "b",
				  pod("t-b", 1, "5Gi", "60", "Running"));
	diag_cards_build(&cards, devs, pods2);
	d = diag_pending(&big, &cards);
	CHECK_STR(kind_of(d), "capacity_in_use");
	json_decref(pods2);
	diag_cards_build(&cards, devs, pods);
	json_decref(d);
	struct diag_req two = { "t-d", 1024, 10, 2, 0, 0, 0, 0 };
	d = diag_pending(&two, &cards);
	CHECK_STR(kind_of(d), "device_unhealthy");
	json_decref(d);
	json_decref(devs);
	json_decref(pods);
}

/* Each kind says in one plain sentence which card, why, and what would change it. */
TEST(diag_summaries_name_the_card_the_reason_and_the_way_out)
{
	json_t *devs = device(0);
	json_t *pods = json_pack("{s:o}", "a", pod("t-a", 0, "5Gi", "60", "Running"));
	struct diag_cards cards;
	diag_cards_build(&cards, devs, pods);
	snprintf(cards.c[1].health_reason, sizeof cards.c[1].health_reason, "XidError 79");
	struct diag_req r = { "t-c", 4096, 25, 1, 0, 0, 0, 0 };
	json_t *d = diag_pending(&r, &cards);
	const char *s = json_string_value(json_object_get(d, "summary"));
	t_log("device_unhealthy: %s", s);
	CHECK(strstr(s, "card 1 on colima-gwb could hold 4096 MiB / 25% but is unhealthy (XidError 79)"));
	CHECK(strstr(s, "healthy again"));
	json_decref(d);
	json_decref(devs);
	json_decref(pods);

	devs = device(1);
	pods = json_pack("{s:o, s:o}", "a", pod("t-a", 0, "5Gi", "60", "Running"), "b",
			 pod("t-b", 1, "5Gi", "60", "Running"));
	diag_cards_build(&cards, devs, pods);
	d = diag_pending(&r, &cards);
	s = json_string_value(json_object_get(d, "summary"));
	t_log("fragmentation: %s", s);
	CHECK(strstr(s, "6144 MiB are free in total"));
	CHECK(strstr(s, "card 0 on colima-gwb has 3072 MiB / 40% free"));
	CHECK(strstr(s, "it runs when t-a on card 0 on colima-gwb ends (or is cancelled)"));
	json_decref(d);
	json_decref(devs);
	json_decref(pods);
}
