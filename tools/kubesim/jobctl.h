/* The Job controller and the garbage collector (kube-api.md §1.7, §3): pods named
 * `<job>-<5 chars>` with the job labels, owner reference and tracking finalizer; suspend and
 * resume; backoffLimit with exponential back-off; podFailurePolicy (FailJob, Ignore, Count on
 * exit codes and pod conditions); FailureTarget/Failed and SuccessCriteriaMet/Complete
 * conditions; ttlSecondsAfterFinished; and the propagation policies of Job and namespace
 * deletion (Background, Foreground, Orphan). Level-triggered but driven by a dirty set: a
 * pass reconciles the Jobs that changed or whose pods changed (learnt from the store's change
 * fan-out), and once a second every Job with timed work (back-off, deadline, TTL, missing
 * pods). */
#ifndef KUBESIM_JOBCTL_H
#define KUBESIM_JOBCTL_H

#include <jansson.h>

#include "tools/kubesim/kubesim.h"

struct jobctl;

/* Never NULL. */
struct jobctl *jobctl_new(struct ks *ks);
/* Accepts NULL. */
void jobctl_free(struct jobctl *jc);
/* One reconcile pass over the dirty Jobs (all Jobs with timed work when the last such pass is
 * a second old), the pods of deleted or missing owners, and deleted namespaces. */
void jobctl_sync(struct jobctl *jc);
/* Marks every Job for the next pass (an informer's resync; also how a benchmark times a pass
 * over all Jobs). */
void jobctl_resync(struct jobctl *jc);
/* Pass figures for the control endpoint (new reference): the last pass and the last timed
 * pass, each with its duration in microseconds and the Jobs it synced, and the longest pass. */
json_t *jobctl_stats(const struct jobctl *jc);

#endif
