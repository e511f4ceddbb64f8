/* Koordinator's DeviceShare for GPUs, as koord-scheduler's deviceshare plugin runs it
 * (koordinator-sh/koordinator, pkg/scheduler/plugins/deviceshare/, v1.8): a pod's GPU request
 * validated and split per card (PreFilter), the per-card fit (Filter), the card choice by the
 * topology tree or by score (Reserve), the node score and its normalisation (Score), and the
 * per-card amounts the device-allocated annotation records. One copy, used by kubesim's scheduler
 * and by the server's placement prediction. Pure functions, no I/O. */
#ifndef GWB_DEVICESHARE_H
#define GWB_DEVICESHARE_H

#include <stddef.h>
#include <stdint.h>

#include "lib/devalloc.h"

#define DEVICESHARE_MAX_CARDS 64

enum deviceshare_strategy { DEVICESHARE_LEAST_ALLOCATED, DEVICESHARE_MOST_ALLOCATED };

/* A pod's requests of the GPU-typed resource names, summed over its containers (0: not asked).
 * Memory is in whatever unit the caller keeps card memory in (bytes for kubesim). */
struct deviceshare_pod {
	int64_t core;   /* koordinator.sh/gpu-core */
	int64_t mem;    /* koordinator.sh/gpu-memory */
	int64_t ratio;  /* koordinator.sh/gpu-memory-ratio */
	int64_t shared; /* koordinator.sh/gpu.shared */
	int64_t kgpu;   /* koordinator.sh/gpu */
	int64_t nvidia, amd, dcu; /* nvidia.com/gpu, amd.com/gpu, dcu.com/gpu: whole cards */
};

/* The request per card: count cards, each needing the amounts whose has_ bit is set. shared is set
 * for a memory-based request or one under 100 % of a card's memory ratio. */
struct deviceshare_request {
	int count;
	int shared;
	int has_core, has_mem, has_ratio;
	int64_t core, mem, ratio;
};

/* One GPU card of a node: its Device entry and what the pods holding a share of it use. An
 * unhealthy card has no resources for DeviceShare, whatever its totals say. id is carried to the
 * annotation and plays no part in the choice. */
struct deviceshare_card {
	int minor;
	int healthy;
	int has_topology; /* the Device gives the card a topology (NUMA node, PCIe root) */
	int64_t numa;
	char pcie[64];
	char id[96];
	int64_t total_core, total_mem, total_ratio;
	int64_t used_core, used_mem, used_ratio;
};

/* PreFilter: checks that the pod's set of GPU names is one Koordinator accepts (utils.go,
 * ValidateDeviceRequest) and converts it to a per-card request (devicehandler_gpu.go,
 * calcDesiredRequestsAndCountForGPU). Returns 1 with *out filled, 0 when the pod asks for no GPU
 * (*out zeroed), or -1 with msg set to "invalid resource device requests: [a b]" (the names
 * present, sorted) or "invalid resource unit koordinator.sh/gpu: <q>". */
int deviceshare_request_from_pod(const struct deviceshare_pod *pod, struct deviceshare_request *out,
				 char *msg, size_t len);

/* Filter: whether card c can hold one card's share of r now (device_cache.go's free amounts). Only
 * the names r asks for are compared, each against the card's free amount (total - used, at least
 * 0). */
int deviceshare_card_fits(const struct deviceshare_card *c, const struct deviceshare_request *r);

/* The scorer (scoring.go) over a total and what is in use of it (one card, or a node's sums): the
 * integer average over gpu-memory-ratio and gpu-memory (those with a total above 0) of
 * LeastAllocated's share left or MostAllocated's share taken after adding r's amount of that name
 * (0..100; 0 for a resource whose requested amount exceeds its total). gpu-core has no weight. */
int64_t deviceshare_score(enum deviceshare_strategy s, int64_t total_ratio, int64_t total_mem,
			  int64_t used_ratio, int64_t used_mem,
			  const struct deviceshare_request *r);

/* Whether the allocation of r on these cards takes the topology-tree path: every card has a
 * topology and r is not a multi-card shared request. Its failure reads "Insufficient GPU Devices",
 * the scored path's "Insufficient gpu devices". */
int deviceshare_topology_path(const struct deviceshare_card *cards, int n,
			      const struct deviceshare_request *r);

/* Reserve (allocator_gpu.go): chooses r->count cards among cards[0..n) (in ascending minor, n at
 * most DEVICESHARE_MAX_CARDS). The topology path walks node -> NUMA nodes -> PCIe roots, prefers
 * the deepest scope and then the one with more scopes in use on its path, and scores a single
 * shared card with the scorer's free and total swapped (an unused card scores as the strategy
 * scores it, a used one 0 under LeastAllocated and 100 under MostAllocated); the scored path takes
 * the best-scored cards that fit, lower minor first among equals. Writes the indexes into cards, in
 * ascending order, to chosen. Returns r->count, or 0 when the cards cannot hold r. */
int deviceshare_allocate(const struct deviceshare_card *cards, int n,
			 const struct deviceshare_request *r, enum deviceshare_strategy s,
			 int *chosen);

/* Score (plugin.go): the node's DeviceShare score, the scorer over the sums of its healthy cards
 * with one card's request (not multiplied by the count). 0 when n <= 0. */
int64_t deviceshare_node_score(const struct deviceshare_card *cards, int n,
			       const struct deviceshare_request *r, enum deviceshare_strategy s);

/* NormalizeScore (plugin.go): scales scores[0..n) so the highest becomes 100 (all stay 0 when none
 * is above 0), rounding down. */
void deviceshare_normalize(int64_t *scores, int n);

/* The annotation's entry for card c given r (devicehandler_gpu.go, fillGPUTotalMem): minor and
 * id, gpu-core when r asks for it, and always both memory and ratio, the one r lacks converted
 * against this card's memory total (ratio to memory in integers, memory to ratio by a truncated
 * float64). Memory is in the card's unit (bytes for an annotation). */
void deviceshare_fill(const struct deviceshare_card *c, const struct deviceshare_request *r,
		      struct devalloc_card *out);

/* Adds an allocation to the used amounts of the cards with its minors, per resource name it
 * carries. */
void deviceshare_cards_add(struct deviceshare_card *cards, int n, const struct devalloc *a);

#endif
