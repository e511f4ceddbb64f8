/* The placement prediction on hand-made card pictures: the lab's two 8 GiB cards, unhealthy
 * cards, cards without topology, two PCIe roots and two nodes, under both scoring strategies. */
#include <stdio.h>
#include <string.h>

#include "server/recon/predict.h"
#include "tests/harness/t.h"

/* Adds a card: node, minor, PCIe root ("" for no topology), used MiB and core. */
static void card(struct diag_cards *cs, const char *node, int minor, const char *pcie,
		 int64_t used_mib, int64_t used_core, int healthy)
{
	struct diag_card *c = &cs->c[cs->n++];
	memset(c, 0, sizeof *c);
	snprintf(c->node, sizeof c->node, "%s", node);
	c->minor = minor;
	c->healthy = healthy;
	c->mem_total_mib = 8192;
	c->core_total = 100;
	c->mem_used_mib = used_mib;
	c->core_used = used_core;
	if (pcie[0]) {
		c->has_topology = 1;
		snprintf(c->pcie, sizeof c->pcie, "%s", pcie);
	}
	if (used_mib) {
		c->nholders = 1;
		snprintf(c->holders[0].task, sizeof c->holders[0].task, "t-holder%d", minor);
		c->holders[0].mem_mib = used_mib;
		c->holders[0].core = used_core;
	}
}

static void lab_cards(struct diag_cards *cs, int64_t used0, int64_t used1)
{
	memset(cs, 0, sizeof *cs);
	card(cs, "colima-gwb", 0, "pci0000:00", used0, used0 ? 25 : 0, 1);
	card(cs, "colima-gwb", 1, "pci0000:00", used1, used1 ? 25 : 0, 1);
}

/* The predicted minors as "node:0,1", or "pending". */
static const char *place(const struct diag_cards *cs, int64_t mem, int64_t core, int64_t count,
			 enum predict_strategy s)
{
	static char buf[128];
	struct diag_req r = { "t-new", mem, core, count, 0, 10240, 0, 400 };
	struct predict_result res;
	predict_place(cs, &r, s, &res);
	if (!res.bind)
		return "pending";
	int n = snprintf(buf, sizeof buf, "%s:", res.node);
	for (int i = 0; i < res.nminors; i++)
		n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%d", i ? "," : "", res.minors[i]);
	return buf;
}

#define LEAST PREDICT_LEAST_ALLOCATED
#define MOST PREDICT_MOST_ALLOCATED

TEST(predict_empty_cards_take_the_lowest_minor)
{
	struct diag_cards cs;
	lab_cards(&cs, 0, 0);
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "colima-gwb:0");
	CHECK_STR(place(&cs, 1024, 25, 1, MOST), "colima-gwb:0");
}

TEST(predict_least_allocated_prefers_an_unused_card)
{
	struct diag_cards cs;
	lab_cards(&cs, 1024, 0);
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "colima-gwb:1");
	lab_cards(&cs, 0, 1024);
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "colima-gwb:0");
}

TEST(predict_most_allocated_prefers_a_used_card)
{
	struct diag_cards cs;
	lab_cards(&cs, 0, 1024);
	CHECK_STR(place(&cs, 1024, 25, 1, MOST), "colima-gwb:1");
	/* The used card is too full: the empty one. */
	lab_cards(&cs, 0, 7680);
	CHECK_STR(place(&cs, 1024, 25, 1, MOST), "colima-gwb:0");
}

TEST(predict_topology_quirk_both_used_takes_the_lowest_minor_that_fits)
{
	/* Every partially used card scores the same on the topology path, whatever is free. */
	struct diag_cards cs;
	lab_cards(&cs, 5120, 1024);
	CHECK_STR(place(&cs, 2048, 25, 1, LEAST), "colima-gwb:0");
	CHECK_STR(place(&cs, 4096, 25, 1, LEAST), "colima-gwb:1");
}

TEST(predict_core_is_checked_per_card)
{
	struct diag_cards cs;
	lab_cards(&cs, 1024, 0);
	cs.c[0].core_used = 90;
	cs.c[1].mem_used_mib = 1024;
	cs.c[1].core_used = 10;
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "colima-gwb:1");
	/* No core asked: core is not checked. */
	cs.c[1].core_used = 100;
	CHECK_STR(place(&cs, 1024, 0, 1, LEAST), "colima-gwb:0");
}

TEST(predict_fragmentation_is_pending_with_its_diagnosis)
{
	struct diag_cards cs;
	lab_cards(&cs, 5120, 5120);
	CHECK_STR(place(&cs, 4096, 25, 1, LEAST), "pending");
	struct diag_req r = { "t-new", 4096, 25, 1, 0, 10240, 0, 400 };
	json_t *p = predict_placement_json(&cs, &r, LEAST);
	CHECK_STR(json_string_value(json_object_get(p, "outcome")), "pending");
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "diagnosis"), "kind")),
		  "fragmentation");
	CHECK_INT(json_array_size(json_object_get(p, "unblock")), 2);
	json_decref(p);
}

TEST(predict_card_capacity_and_unhealthy_cards)
{
	struct diag_cards cs;
	lab_cards(&cs, 0, 0);
	CHECK_STR(place(&cs, 9216, 25, 1, LEAST), "pending");
	cs.c[0].healthy = 0;
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "colima-gwb:1");
	cs.c[1].healthy = 0;
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "pending");
	struct diag_req r = { "t-new", 1024, 25, 1, 0, 10240, 0, 400 };
	json_t *p = predict_placement_json(&cs, &r, LEAST);
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "diagnosis"), "kind")),
		  "device_unhealthy");
	json_decref(p);
}

TEST(predict_bind_json_names_node_and_cards)
{
	struct diag_cards cs;
	lab_cards(&cs, 1024, 0);
	struct diag_req r = { "t-new", 1024, 25, 1, 0, 10240, 0, 400 };
	json_t *p = predict_placement_json(&cs, &r, LEAST);
	CHECK_STR(json_string_value(json_object_get(p, "outcome")), "bind");
	CHECK_STR(json_string_value(json_object_get(p, "node")), "colima-gwb");
	CHECK_INT(json_integer_value(json_array_get(json_object_get(p, "cards"), 0)), 1);
	CHECK(json_is_null(json_object_get(p, "diagnosis")));
	json_decref(p);
}

TEST(predict_multi_card_shared_uses_the_scored_fallback)
{
	struct diag_cards cs;
	lab_cards(&cs, 0, 0);
	CHECK_STR(place(&cs, 1024, 25, 2, LEAST), "colima-gwb:0,1");
	lab_cards(&cs, 7680, 0);
	CHECK_STR(place(&cs, 1024, 25, 2, LEAST), "pending");
}

TEST(predict_without_topology_scores_by_free_memory)
{
	struct diag_cards cs;
	memset(&cs, 0, sizeof cs);
	card(&cs, "n", 0, "", 2048, 10, 1);
	card(&cs, "n", 1, "", 1024, 10, 1);
	card(&cs, "n", 2, "", 4096, 10, 1);
	CHECK_STR(place(&cs, 1024, 10, 1, LEAST), "n:1");
	CHECK_STR(place(&cs, 1024, 10, 1, MOST), "n:2");
}

TEST(predict_topology_binpacks_into_the_pcie_root_in_use)
{
	struct diag_cards cs;
	memset(&cs, 0, sizeof cs);
	card(&cs, "n", 0, "pci0000:00", 0, 0, 1);
	card(&cs, "n", 1, "pci0000:00", 0, 0, 1);
	card(&cs, "n", 2, "pci0000:80", 1024, 10, 1);
	card(&cs, "n", 3, "pci0000:80", 0, 0, 1);
	/* The root with a card in use wins; inside it, LeastAllocated takes the unused card. */
	CHECK_STR(place(&cs, 1024, 10, 1, LEAST), "n:3");
	CHECK_STR(place(&cs, 1024, 10, 1, MOST), "n:2");
	/* A request too big for the root in use goes to the other root. */
	cs.c[3].mem_used_mib = 7168;
	CHECK_STR(place(&cs, 7680, 10, 1, LEAST), "n:0");
}

TEST(predict_nodes_by_node_score_and_ties_listed)
{
	struct diag_cards cs;
	memset(&cs, 0, sizeof cs);
	card(&cs, "a", 0, "p", 4096, 25, 1);
	card(&cs, "a", 1, "p", 0, 0, 1);
	card(&cs, "b", 0, "p", 0, 0, 1);
	card(&cs, "b", 1, "p", 0, 0, 1);
	CHECK_STR(place(&cs, 1024, 25, 1, LEAST), "b:0");
	CHECK_STR(place(&cs, 1024, 25, 1, MOST), "a:0");
	cs.c[0].mem_used_mib = 0;
	struct diag_req r = { "t-new", 1024, 25, 1, 0, 10240, 0, 400 };
	struct predict_result res;
	predict_place(&cs, &r, LEAST, &res);
	CHECK_STR(res.node, "a");
	CHECK_INT(res.ntied, 1);
	CHECK_STR(res.tied[0], "b");
}

TEST(predict_strategy_names)
{
	enum predict_strategy s;
	CHECK_INT(predict_strategy_parse("MostAllocated", &s), 0);
	CHECK_INT(s, MOST);
	CHECK_STR(predict_strategy_name(s), "MostAllocated");
	CHECK_INT(predict_strategy_parse("binpack", &s), -1);
}
