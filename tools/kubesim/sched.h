/* The scheduler (koordinator.md §4): for pods whose schedulerName is koord-scheduler, the
 * DeviceShare profile -- webhook-normalised request validation (PreFilter), NodeResourcesFit
 * on the node totals, per-card core/memory/ratio accounting from the device-allocated
 * annotations of the pods that hold a share, card choice by the topology path or the
 * score-strategy fallback, unhealthy cards skipped -- then the annotation written before the
 * binding. default-scheduler pods get NodeResourcesFit only. Unschedulable pods get the
 * `0/N nodes are available: ...` PodScheduled condition and a FailedScheduling event. */
#ifndef KUBESIM_SCHED_H
#define KUBESIM_SCHED_H

#include <jansson.h>

#include "tools/kubesim/kubesim.h"

struct sched;

/* The scheduler's queue state (subscribed to the store's changes). Never NULL. */
struct sched *sched_new(struct ks *ks);
/* Accepts NULL. */
void sched_free(struct sched *sc);
/* One scheduling pass (ks->sched must exist): the unbound pods created or changed since the
 * last pass, or every unbound pod when a bound pod ended or went or a Node or Device changed.
 * Nodes are scored (DeviceShare with the configured strategy, plus NodeResourcesFit) and the
 * best one taken. */
void sched_sync(struct ks *ks);

#endif
