/* The scheduler (koordinator.md §4): for pods whose schedulerName is koord-scheduler, the
 * DeviceShare profile -- webhook-normalised request validation (PreFilter), NodeResourcesFit
 * on the node totals, per-card core/memory/ratio accounting from the device-allocated
 * annotations of the pods that hold a share, card choice by the topology path or the
 * LeastAllocated fallback, unhealthy cards skipped -- then the annotation written before the
 * binding. default-scheduler pods get NodeResourcesFit only. Unschedulable pods get the
 * `0/N nodes are available: ...` PodScheduled condition and a FailedScheduling event. */
#ifndef KUBESIM_SCHED_H
#define KUBESIM_SCHED_H

#include <jansson.h>

#include "tools/kubesim/kubesim.h"

/* One scheduling pass over every pending, unbound pod. */
void sched_sync(struct ks *ks);

#endif
