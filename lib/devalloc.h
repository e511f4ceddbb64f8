/* The `scheduling.koordinator.sh/device-allocated` Pod annotation: which GPU cards the
 * scheduler gave a Pod and how much of each (koordinator.md §3.1-3.3). This module owns its
 * parsing, its byte-exact encoding as koord-scheduler writes it, and its API view. */
#ifndef GWB_DEVALLOC_H
#define GWB_DEVALLOC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define DEVALLOC_ANNOTATION "scheduling.koordinator.sh/device-allocated"
#define DEVALLOC_RES_CORE   "koordinator.sh/gpu-core"
#define DEVALLOC_RES_MEM    "koordinator.sh/gpu-memory"
#define DEVALLOC_RES_RATIO  "koordinator.sh/gpu-memory-ratio"

/* One card of the allocation. core is percent of the card's compute, mem_bytes device memory
 * in bytes, ratio percent of the card's memory; each is meaningful only when its has_ bit is
 * set. id is the device UUID, "" when the annotation carries none. */
struct devalloc_card {
	int minor;
	int64_t core;
	int64_t mem_bytes;
	int64_t ratio;
	char id[96];
	unsigned has_core : 1, has_mem : 1, has_ratio : 1;
};

#define DEVALLOC_MAX_CARDS 16

struct devalloc {
	int ncards;
	struct devalloc_card cards[DEVALLOC_MAX_CARDS];
};

/* Parses the annotation JSON. Only the "gpu" list is read: other device types, unknown card
 * fields ("extension") and unknown resource names are ignored; a missing "gpu" key gives
 * ncards == 0. Each card needs an integer "minor" (0..2^31-1) and a "resources" object whose
 * known entries are quantity strings (non-negative; memory in bytes after rounding up).
 * Returns 0 with *out filled, or GWB_EINVAL with a one-line reason in err (may be NULL). */
int devalloc_parse(const char *json, size_t len, struct devalloc *out, char *err, size_t errlen);

/* Encodes a the way koord-scheduler does (json.Marshal of map[type][]DeviceAllocation): key
 * "gpu", per card "minor", "resources" (names sorted, canonical quantity strings, memory in
 * BinarySI form, each present only when its has_ bit is set), then "id" only when non-empty;
 * compact, with Go's escaping of <, > and &. Returns a gwb_malloc'd string the caller frees
 * with gwb_free. Never NULL. */
char *devalloc_format(const struct devalloc *a);

/* Returns a new jansson object (caller owns the reference) for API answers:
 * {"cards":[{"minor","gpu_memory_mib","gpu_memory_bytes","gpu_core_percent","gpu_memory_ratio",
 * "id"}]}. A field the annotation lacks is null; gpu_memory_mib is bytes / 2^20 rounded down. */
json_t *devalloc_to_json(const struct devalloc *a);

#endif
