/* Unit tests of lib/deviceshare against Koordinator's own test cases: each case names the file
 * under koordinator-sh/koordinator/pkg/scheduler/plugins/deviceshare/ and the test (and table
 * entry) it takes its facts from; the data are written here as our own. Versions read:
 * plugin_test.go 13a7107, scoring_test.go 143b913, device_cache_test.go 054b96b,
 * devicehandler_gpu_test.go 2323a7a, utils_test.go d272b4e, device_allocator_test.go 0d5f65b. */
#include <stdio.h>
#include <string.h>

#include "lib/deviceshare.h"
#include "tests/harness/t.h"

#define GI (1024LL * 1024 * 1024)
/* The card of Koordinator's fake Device (83201216Ki of memory). */
#define FAKE_CARD_MEM (83201216LL * 1024)

#define LEAST DEVICESHARE_LEAST_ALLOCATED
#define MOST DEVICESHARE_MOST_ALLOCATED

/* A healthy card with 100 % of core and ratio and mem bytes; pcie NULL for no topology. */
static void card(struct deviceshare_card *c, int minor, int64_t mem, const char *pcie,
		 int64_t numa)
{
	memset(c, 0, sizeof *c);
	c->minor = minor;
	c->healthy = 1;
	c->total_core = 100;
	c->total_ratio = 100;
	c->total_mem = mem;
	if (pcie) {
		c->has_topology = 1;
		c->numa = numa;
		snprintf(c->pcie, sizeof c->pcie, "%s", pcie);
	}
}

static void use(struct deviceshare_card *c, int64_t core, int64_t mem, int64_t ratio)
{
	c->used_core += core;
	c->used_mem += mem;
	c->used_ratio += ratio;
}

/* The request of a pod; the case fails when the pod is refused. */
static struct deviceshare_request request(struct deviceshare_pod p)
{
	struct deviceshare_request r;
	char msg[256];
	int rc = deviceshare_request_from_pod(&p, &r, msg, sizeof msg);
	CHECKF(rc == 1, "request refused (%d): %s", rc, rc < 0 ? msg : "no GPU");
	return r;
}

/* The chosen minors as "1,2", or "none". */
static const char *allocate(const struct deviceshare_card *cards, int n,
			    struct deviceshare_request r, enum deviceshare_strategy s)
{
	static char buf[256];
	int chosen[DEVICESHARE_MAX_CARDS];
	int got = deviceshare_allocate(cards, n, &r, s, chosen);
	if (!got)
		return "none";
	size_t o = 0;
	buf[0] = '\0';
	for (int i = 0; i < got && o < sizeof buf; i++)
		o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%d", i ? "," : "",
				      cards[chosen[i]].minor);
	return buf;
}

/* Whether the pod is refused at PreFilter. */
static int refused(struct deviceshare_pod p)
{
	struct deviceshare_request r;
	char msg[256];
	return deviceshare_request_from_pod(&p, &r, msg, sizeof msg) < 0;
}

/* devicehandler_gpu_test.go, Test_calcDesiredRequestsAndCountForGPU. */
TEST(deviceshare_request_is_split_per_card)
{
	/* "multi gpu share mode": 2 shared cards, 100 % core and ratio in total. */
	struct deviceshare_request r = request((struct deviceshare_pod){ .shared = 2, .core = 100,
									 .ratio = 100 });
	CHECK_INT(r.count, 2);
	CHECK_INT(r.core, 50);
	CHECK_INT(r.ratio, 50);
	CHECK_INT(r.has_mem, 0);
	CHECK_INT(r.shared, 1);
	/* "gpu share mode". */
	r = request((struct deviceshare_pod){ .shared = 1, .core = 50, .ratio = 50 });
	CHECK_INT(r.count, 1);
	CHECK_INT(r.ratio, 50);
	CHECK_INT(r.shared, 1);
	/* "gpu memory ratio mode": 200 % of ratio is two whole cards. */
	r = request((struct deviceshare_pod){ .core = 200, .ratio = 200 });
	CHECK_INT(r.count, 2);
	CHECK_INT(r.core, 100);
	CHECK_INT(r.ratio, 100);
	CHECK_INT(r.shared, 0);
	/* "gpu memory mode": a memory request is always shared. */
	r = request((struct deviceshare_pod){ .core = 100, .mem = 1024 });
	CHECK_INT(r.count, 1);
	CHECK_INT(r.mem, 1024);
	CHECK_INT(r.core, 100);
	CHECK_INT(r.shared, 1);
}

/* utils_test.go, TestValidateDeviceRequest (the GPU entries) and TestConvertDeviceRequest. */
TEST(deviceshare_request_combinations)
{
	CHECK(refused((struct deviceshare_pod){ .core = 101 })); /* "invalid gpu request 1" */
	CHECK(refused((struct deviceshare_pod){ .nvidia = 2, .kgpu = 200, .core = 200,
						.mem = 32 * GI, .ratio = 200 })); /* "... 2" */
	CHECK(refused((struct deviceshare_pod){ .kgpu = 101 })); /* "invalid gpu request 3" */
	CHECK(refused((struct deviceshare_pod){ .core = 100, .ratio = 101 })); /* "... 4" */
	CHECK(refused((struct deviceshare_pod){ .ratio = 101, .shared = 1 })); /* "... 8" */
	CHECK(refused((struct deviceshare_pod){ .ratio = 101, .shared = 2 })); /* "... 9" */
	CHECK(refused((struct deviceshare_pod){ .core = 101, .mem = 64 * GI, .shared = 1 }));
	CHECK(refused((struct deviceshare_pod){ .core = 101, .mem = 64 * GI, .shared = 2 }));
	CHECK(!refused((struct deviceshare_pod){ .dcu = 2 }));  /* "valid hygon duc request 2" */
	CHECK(!refused((struct deviceshare_pod){ .kgpu = 200 })); /* "valid gpu request 2" */
	CHECK(!refused((struct deviceshare_pod){ .core = 200, .mem = 64 * GI })); /* "... 3" */
	CHECK(!refused((struct deviceshare_pod){ .ratio = 200 }));                 /* "... 5" */
	CHECK(!refused((struct deviceshare_pod){ .mem = 64 * GI }));               /* "... 7" */
	CHECK(!refused((struct deviceshare_pod){ .ratio = 100, .shared = 2 }));    /* "... 13" */
	/* "invalid gpu request 14" and "15" expect no error. */
	CHECK(!refused((struct deviceshare_pod){ .core = 100, .mem = 64 * GI, .shared = 1 }));
	CHECK(!refused((struct deviceshare_pod){ .core = 100, .mem = 64 * GI, .shared = 2 }));
	/* TestConvertDeviceRequest "nvidiaGPU": 2 whole cards are 200 % of core and ratio. */
	struct deviceshare_request r = request((struct deviceshare_pod){ .nvidia = 2 });
	CHECK_INT(r.count, 2);
	CHECK_INT(r.core, 100);
	CHECK_INT(r.ratio, 100);
	CHECK_INT(r.shared, 0);
	/* A pod without GPU names is not DeviceShare's ("skip zero requests" in plugin_test.go's
	 * Test_Plugin_PreFilter). */
	struct deviceshare_pod none = { .kgpu = 0 };
	char msg[128];
	CHECK_INT(deviceshare_request_from_pod(&none, &r, msg, sizeof msg), 0);
}

TEST(deviceshare_refusal_messages)
{
	struct deviceshare_pod p = { .core = 50, .shared = 1 };
	struct deviceshare_request r;
	char msg[256];
	CHECK_INT(deviceshare_request_from_pod(&p, &r, msg, sizeof msg), -1);
	CHECK_STR(msg, "invalid resource device requests: [koordinator.sh/gpu-core "
		       "koordinator.sh/gpu.shared]");
	p = (struct deviceshare_pod){ .kgpu = 150 };
	CHECK_INT(deviceshare_request_from_pod(&p, &r, msg, sizeof msg), -1);
	CHECK_STR(msg, "invalid resource unit koordinator.sh/gpu: 150");
}

/* plugin_test.go, Test_Plugin_Filter: 16Gi cards without topology. */
TEST(deviceshare_filter_per_card)
{
	struct deviceshare_card c[2];
	/* "insufficient device resource 1": a node without cards. */
	CHECK_STR(allocate(c, 0, request((struct deviceshare_pod){ .core = 100, .ratio = 100 }),
			   LEAST),
		  "none");
	/* "insufficient device resource 2": a quarter in use, a whole card asked. */
	card(&c[0], 0, 16 * GI, NULL, 0);
	use(&c[0], 25, 4 * GI, 25);
	struct deviceshare_request whole = request((struct deviceshare_pod){ .core = 100,
									     .ratio = 100 });
	CHECK(!deviceshare_card_fits(&c[0], &whole));
	CHECK_STR(allocate(c, 1, whole, LEAST), "none");
	/* "sufficient device resource 4": three quarters of card 0 in use, card 1 free. */
	card(&c[0], 0, 16 * GI, NULL, 0);
	use(&c[0], 75, 12 * GI, 75);
	card(&c[1], 1, 16 * GI, NULL, 0);
	CHECK_STR(allocate(c, 2, whole, LEAST), "1");
	/* "sufficient device resource 5": the whole ratio only. */
	CHECK_STR(allocate(c, 2, request((struct deviceshare_pod){ .ratio = 100 }), LEAST), "1");
	/* "sufficient device resource 6": a whole card's memory only; card 0 has 4Gi free. */
	struct deviceshare_request mem = request((struct deviceshare_pod){ .mem = 16 * GI });
	CHECK(!deviceshare_card_fits(&c[0], &mem));
	CHECK(deviceshare_card_fits(&c[1], &mem));
	CHECK_STR(allocate(c, 2, mem, LEAST), "1");
}

/* plugin_test.go, Test_Plugin_Reserve: a 16Gi card without topology. */
TEST(deviceshare_reserve_whole_cards)
{
	struct deviceshare_card c[1];
	struct deviceshare_request two = request((struct deviceshare_pod){ .core = 200,
									   .ratio = 200 });
	/* "insufficient device resource 2": two cards asked, one (busy) card. */
	card(&c[0], 0, 16 * GI, NULL, 0);
	use(&c[0], 75, 12 * GI, 75);
	CHECK_STR(allocate(c, 1, two, LEAST), "none");
	/* "insufficient device resource 3": two cards asked, one free card. */
	card(&c[0], 0, 16 * GI, NULL, 0);
	CHECK_STR(allocate(c, 1, two, LEAST), "none");
	/* "sufficient device resource 1": the whole free card, its memory filled from the ratio. */
	struct deviceshare_request one = request((struct deviceshare_pod){ .core = 100,
									   .ratio = 100 });
	CHECK_STR(allocate(c, 1, one, LEAST), "0");
	struct devalloc_card a;
	deviceshare_fill(&c[0], &one, &a);
	CHECK_INT(a.minor, 0);
	CHECK_INT(a.core, 100);
	CHECK_INT(a.ratio, 100);
	CHECK_INT(a.mem_bytes, 16 * GI);
}

/* devicehandler_gpu_test.go, Test_fillGPUTotalMem; utils_test.go, Test_memoryRatioToBytes and
 * Test_memoryBytesToRatio. */
TEST(deviceshare_fill_converts_against_the_card)
{
	struct deviceshare_card c;
	card(&c, 0, 32 * GI, NULL, 0);
	struct devalloc_card a;
	/* "ratio to mem". */
	struct deviceshare_request r = request((struct deviceshare_pod){ .core = 50, .ratio = 50 });
	deviceshare_fill(&c, &r, &a);
	CHECK(a.has_core && a.has_mem && a.has_ratio);
	CHECK_INT(a.core, 50);
	CHECK_INT(a.ratio, 50);
	CHECK_INT(a.mem_bytes, 16 * GI);
	/* "mem to ratio". */
	r = request((struct deviceshare_pod){ .core = 50, .mem = 16 * GI });
	deviceshare_fill(&c, &r, &a);
	CHECK_INT(a.ratio, 50);
	CHECK_INT(a.mem_bytes, 16 * GI);
	/* 50 % of 64Gi is 32Gi, and back. */
	card(&c, 0, 64 * GI, NULL, 0);
	r = request((struct deviceshare_pod){ .ratio = 50 });
	deviceshare_fill(&c, &r, &a);
	CHECK_INT(a.mem_bytes, 32 * GI);
	CHECK_INT(a.has_core, 0);
	r = request((struct deviceshare_pod){ .mem = 32 * GI });
	deviceshare_fill(&c, &r, &a);
	CHECK_INT(a.ratio, 50);
}

/* scoring_test.go, TestScore: one or two 16Gi cards, LeastAllocated unless named. */
TEST(deviceshare_node_score_sums_the_healthy_cards)
{
	struct deviceshare_card c[2];
	struct deviceshare_request half = request((struct deviceshare_pod){ .core = 50,
									    .ratio = 50 });
	struct deviceshare_request whole = request((struct deviceshare_pod){ .core = 100,
									     .ratio = 100 });
	card(&c[0], 0, 16 * GI, NULL, 0);
	CHECK_INT(deviceshare_node_score(c, 1, &whole, LEAST), 50); /* "completely idle node" */
	card(&c[1], 1, 16 * GI, NULL, 0);
	/* "multiple GPU devices and completely idle". */
	CHECK_INT(deviceshare_node_score(c, 2, &half, LEAST), 87);
	/* "remaining device resources 1" and "2": a quarter of the card in use. */
	use(&c[0], 25, 4 * GI, 25);
	CHECK_INT(deviceshare_node_score(c, 1, &half, LEAST), 50);
	struct deviceshare_request by_mem = request((struct deviceshare_pod){ .core = 50,
									      .mem = 8 * GI });
	CHECK_INT(deviceshare_node_score(c, 1, &by_mem, LEAST), 50);
	/* "remaining device resources with MostAllocated strategy 1" and "2". */
	CHECK_INT(deviceshare_node_score(c, 1, &half, MOST), 50);
	CHECK_INT(deviceshare_node_score(c, 1, &by_mem, MOST), 50);
	/* "empty node info": no cards, no score. */
	CHECK_INT(deviceshare_node_score(c, 0, &half, LEAST), 0);
}

/* scoring_test.go, TestScoreExtension. */
TEST(deviceshare_normalize_scores)
{
	int64_t zero[1] = { 0 }, one[1] = { 10 }, two[2] = { 200, 10 };
	deviceshare_normalize(zero, 1); /* "node score 0" */
	CHECK_INT(zero[0], 0);
	deviceshare_normalize(one, 1); /* "only one node has score" */
	CHECK_INT(one[0], 100);
	deviceshare_normalize(two, 2); /* "node score exceeded maxScore" */
	CHECK_INT(two[0], 100);
	CHECK_INT(two[1], 5);
}

/* device_cache_test.go, Test_nodeDevice_allocateGPUWithLeastAllocatedScorer and
 * Test_nodeDevice_allocateGPUWithMostAllocatedScorer: four 8Gi cards (minors 1-4), two of them
 * half used; two cards of half each spread to the free pair or pack onto the used pair. */
TEST(deviceshare_strategy_chooses_the_cards)
{
	struct deviceshare_card c[4];
	struct deviceshare_request two_halves = request((struct deviceshare_pod){
		.shared = 2, .core = 100, .ratio = 100 });
	for (int i = 0; i < 4; i++)
		card(&c[i], i + 1, 8 * GI, NULL, 0);
	use(&c[0], 50, 4 * GI, 50);
	use(&c[1], 50, 4 * GI, 50);
	CHECK_STR(allocate(c, 4, two_halves, LEAST), "3,4");
	for (int i = 0; i < 4; i++)
		card(&c[i], i + 1, 8 * GI, NULL, 0);
	use(&c[2], 50, 4 * GI, 50);
	use(&c[3], 50, 4 * GI, 50);
	CHECK_STR(allocate(c, 4, two_halves, MOST), "3,4");
}

/* plugin_test.go, Test_Plugin_Filter, "pod stuck when use multi gpu": four shared cards of 160G
 * (decimal) of memory in total on nine free 80Gi cards fit, 40G on each of the first four. */
TEST(deviceshare_multi_card_shared_memory)
{
	struct deviceshare_card c[9];
	for (int i = 0; i < 9; i++)
		card(&c[i], i, 80 * GI, NULL, 0);
	struct deviceshare_request r = request((struct deviceshare_pod){
		.shared = 4, .mem = 160LL * 1000 * 1000 * 1000 });
	CHECK_INT(r.mem, 40LL * 1000 * 1000 * 1000);
	CHECK(!deviceshare_topology_path(c, 9, &r));
	CHECK_STR(allocate(c, 9, r, LEAST), "0,1,2,3");
}

/* device_allocator_test.go's fake Device: eight cards, two NUMA nodes of two PCIe roots of two
 * cards each (minor i on NUMA i/4, PCIe root i/2). */
static void fake_device(struct deviceshare_card *c)
{
	static const char *const roots[] = { "0", "1", "2", "3" };
	for (int i = 0; i < 8; i++)
		card(&c[i], i, FAKE_CARD_MEM, roots[i / 2], i / 4);
}

/* device_allocator_test.go, TestAutopilotAllocator: the GPU part of the cases (they also ask
 * for RDMA VFs, which are not modelled) with whole cards. */
TEST(deviceshare_topology_tree_for_whole_cards)
{
	struct deviceshare_card c[8];
	fake_device(c);
	CHECK(deviceshare_topology_path(c, 8, &(struct deviceshare_request){ .count = 2 }));
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 2 }), LEAST), "0,1");
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 3 }), LEAST),
		  "0,1,2");
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 4 }), LEAST),
		  "0,1,2,3");
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 6 }), LEAST),
		  "0,1,2,3,4,5");
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 8 }), LEAST),
		  "0,1,2,3,4,5,6,7");
	/* "... with assigned devices": card 0 is taken whole; the tree keeps to its NUMA node. */
	use(&c[0], 100, FAKE_CARD_MEM, 100);
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 2 }), LEAST), "2,3");
	CHECK_STR(allocate(c, 8, request((struct deviceshare_pod){ .nvidia = 3 }), LEAST),
		  "1,2,3");
}

/* Our own case, from the rule rather than a Koordinator test: a card marked unhealthy has no
 * resources (device_cache.go, buildDeviceResources); the request goes to the healthy card, and
 * to none when every card is unhealthy. */
TEST(deviceshare_unhealthy_cards_hold_nothing)
{
	struct deviceshare_card c[2];
	card(&c[0], 0, 16 * GI, NULL, 0);
	card(&c[1], 1, 16 * GI, NULL, 0);
	c[0].healthy = 0;
	struct deviceshare_request r = request((struct deviceshare_pod){ .shared = 1, .mem = GI });
	CHECK_STR(allocate(c, 2, r, MOST), "1");
	CHECK_INT(deviceshare_node_score(c, 2, &r, LEAST),
		  deviceshare_node_score(&c[1], 1, &r, LEAST));
	c[1].healthy = 0;
	CHECK_STR(allocate(c, 2, r, LEAST), "none");
}

/* The used amounts come from the allocations the pods carry, per name (device_cache.go,
 * updateCacheUsed, as in device_cache_test.go's Test_nodeDevice_getUsed). */
TEST(deviceshare_cards_add_counts_each_name)
{
	struct deviceshare_card c[2];
	card(&c[0], 0, 8 * GI, NULL, 0);
	card(&c[1], 1, 8 * GI, NULL, 0);
	struct devalloc a = { 0 };
	a.ncards = 1;
	a.cards[0].minor = 1;
	a.cards[0].core = 100;
	a.cards[0].mem_bytes = 8 * GI;
	a.cards[0].ratio = 100;
	a.cards[0].has_core = a.cards[0].has_mem = a.cards[0].has_ratio = 1;
	deviceshare_cards_add(c, 2, &a);
	CHECK_INT(c[1].used_core, 100);
	CHECK_INT(c[1].used_mem, 8 * GI);
	CHECK_INT(c[1].used_ratio, 100);
	CHECK_INT(c[0].used_mem, 0);
	/* A full card fits nothing more. */
	CHECK(!deviceshare_card_fits(&c[1], &(struct deviceshare_request){ .count = 1,
									   .has_mem = 1,
									   .mem = 1 }));
}
