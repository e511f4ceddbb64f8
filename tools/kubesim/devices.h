/* The nodes and their devices: creates each Node (and, unless disabled, its Device as koordlet
 * publishes it), keeps Node allocatable/capacity in step with the Device as koord-manager's
 * GPUDeviceResource plugin does (koordinator.md §1.5, incl. koordinator.sh/gpu.shared), and
 * flips card health on request. */
#ifndef KUBESIM_DEVICES_H
#define KUBESIM_DEVICES_H

#include <jansson.h>

#include "tools/kubesim/kubesim.h"

/* Creates the default namespaces, the Nodes (--nodes of them), the priority classes, the
 * first node's NodeSLO and NodeMetric and (when configured) every node's Device with the same
 * cards. Returns 0 or a negative error. */
int devices_bootstrap(struct ks *ks);
/* A new Device document for node with the configured cards (caller owns it). */
json_t *devices_default_device(const struct ks *ks, const char *node);
/* Recomputes the Node's GPU resources and labels from its Device. */
void devices_sync(struct ks *ks);
/* Sets the health of card `minor` on node's Device (with the koordlet XID condition when
 * unhealthy, none when healthy). Returns 0, or GWB_ENOTFOUND. */
int devices_set_health(struct ks *ks, const char *node, int minor, int healthy, int xid);

#endif
