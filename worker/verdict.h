/* The worker's verdict: a small JSON document of what it saw and did (its isolation verdict,
 * budget, ledger, how it ended, the work done), written at exit to the file the kubelet turns
 * into the container's termination message (terminationMessagePath), so the control plane
 * learns it from the Pod without reading the log. */
#ifndef GWB_WORKER_VERDICT_H
#define GWB_WORKER_VERDICT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "worker/budget.h"
#include "worker/ledger.h"
#include "worker/work.h"

/* What a kubelet keeps of a termination message: the document stays below it. */
#define VERDICT_MAX 4096
/* Bytes of the isolation reason kept (the rest is in the log's isolation event). */
#define VERDICT_REASON_MAX 512

struct verdict {
	json_t *isolation;           /* the probe's event (borrowed), or NULL */
	const struct budget *budget; /* NULL: no usable budget */
	int has_ledger;
	struct ledger_result ledger;
	int has_work;
	int duty_percent; /* the duty cycle asked */
	struct work_stats work;
	const char *exit_reason; /* "done", "simulated_limit_rejected", "budget_invalid", ... */
	int exit_code;
};

/* A new document of v (caller owns): worker, exit_reason, exit_code, isolation (verdict,
 * reason, annotation_present, memory_limit_bytes, sm_limit_percent, ld_preload_vgpu,
 * library_mapped, over_limit_test, enforced), budget, ledger (peak_bytes, ...) and work
 * (achieved_duty_percent, ...); the parts not known are null. Its compact text is below
 * VERDICT_MAX bytes. */
json_t *verdict_json(const struct verdict *v);

/* Writes the compact document of v to path (truncating it). Returns 0, or -1 (errno set) when
 * the file cannot be written: outside a container /dev/termination-log usually cannot. */
int verdict_write(const struct verdict *v, const char *path);

#endif
