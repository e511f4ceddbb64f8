/* The koord-manager Pod webhooks kubesim applies on Pod CREATE (koordinator.md §2.3, §6.2):
 * ClusterColocationProfile mutation (QoS label, priority class, koordinator priority, labels,
 * annotations, scheduler name, patch), the batch-resource rewrite for koord-batch pods with
 * the extended-resource-spec annotation, the colocation validation, and DeviceResourceSpec
 * (koordinator.sh/gpu -> core + ratio; gpu.shared added when missing). */
#ifndef KUBESIM_COLOCATION_H
#define KUBESIM_COLOCATION_H

#include <jansson.h>

#include "tools/kubesim/kerr.h"
#include "tools/kubesim/kubesim.h"

/* Mutates and validates a new pod in place. Returns 0, or a negative error with e filled
 * (the webhook's denial). */
int colocation_admit_pod(struct ks *ks, json_t *pod, struct kerr *e);

#endif
