/* Why is a task not running? The card picture (Device CRs plus the allocations our Pods carry)
 * and the pending diagnosis that explains a Pending task with numbers: team quota vs. single-
 * card capacity vs. fragmentation vs. unhealthy devices. Pure functions of their inputs. */
#ifndef GWB_DIAGNOSE_H
#define GWB_DIAGNOSE_H

#include <jansson.h>
#include <stdint.h>

#include "lib/deviceshare.h"

#define DIAG_MAX_CARDS 64
#define DIAG_MAX_HOLDERS 32

struct diag_holder {
	char task[32];
	int64_t mem_mib, core;
};

struct diag_card {
	char node[64];
	int minor;
	char id[96];
	int healthy;
	char health_reason[96];
	int has_topology;  /* the Device gives the card a topology (NUMA node, PCIe root) */
	int64_t numa;
	char pcie[64];
	int64_t mem_total_mib, core_total;
	int64_t mem_used_mib, core_used;
	int64_t ratio_total, ratio_used; /* gpu-memory-ratio: the Device's, what allocations hold */
	int nholders;
	struct diag_holder holders[DIAG_MAX_HOLDERS];
};

struct diag_cards {
	int n;
	struct diag_card c[DIAG_MAX_CARDS];
};

/* Builds the card picture: devices is a JSON object name → Device CR, pods an object name →
 * Pod; every Pod that is not terminal and carries a device-allocated annotation counts against
 * the cards it was given (by node and minor). */
void diag_cards_build(struct diag_cards *out, const json_t *devices, const json_t *pods);

/* GET /v1/devices: every card with totals, health, allocated, free and the tasks on it. */
json_t *diag_cards_json(const struct diag_cards *cards);

struct diag_req {
	const char *task;
	int64_t mem_mib, core, count; /* per card, cards */
	int64_t team_reserved_mem, team_quota_mem, team_reserved_core, team_quota_core;
};

/* The card as DeviceShare sees it (memory in MiB). */
void diag_card_deviceshare(const struct diag_card *c, struct deviceshare_card *out);

/* The per-card request DeviceShare derives from the Pod gwb writes for req (gpu.shared = the
 * count, gpu-core and gpu-memory summed over the cards; memory in MiB). Returns 1, or -1 when
 * DeviceShare would refuse that Pod at PreFilter (out then still holds the per-card amounts). */
int diag_req_deviceshare(const struct diag_req *req, struct deviceshare_request *out);

/* The diagnosis of a Pending task: {"kind", "summary", "request", "team_quota", "cards":
 * {...numbers}, "unblock": [...]}. kind is card_capacity (no card is that large),
 * device_unhealthy (only unhealthy cards are), fragmentation (enough is free in total but not
 * on enough single cards), capacity_in_use (the cards are simply busy), or waiting (it fits
 * now; the scheduler has not placed it yet). The task's own allocation is not counted against
 * it. Returns a new reference. */
json_t *diag_pending(const struct diag_req *req, const struct diag_cards *cards);

#endif
