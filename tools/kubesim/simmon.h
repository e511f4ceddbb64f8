/* kubesim's simulated GPU monitor: GET /sim/metrics/hami answers HAMi vGPU monitor's series
 * (hami_vgpu_memory_used_bytes, hami_vgpu_memory_limit_bytes,
 * hami_container_device_utilization_ratio; labels namespace, pod, container, vdevice_index,
 * device_uuid) for the running containers of gwb's worker, built from what each worker's log
 * says of its simulated ledger (ledger_booked's used bytes) and its achieved duty (the last
 * progress event's cpu_share_percent), every series also labelled simulated="true": nothing
 * here measures a GPU. */
#ifndef KUBESIM_SIMMON_H
#define KUBESIM_SIMMON_H

#include "tools/kubesim/http.h"

/* Answers h when its path is the monitor's: 1, else 0 (not handled). */
int simmon_handle(struct hreq *h);

#endif
