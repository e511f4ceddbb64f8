/* The Job controller and the garbage collector (kube-api.md §1.7, §3): pods named
 * `<job>-<5 chars>` with the job labels, owner reference and tracking finalizer; suspend and
 * resume; backoffLimit with exponential back-off; podFailurePolicy (FailJob, Ignore, Count on
 * exit codes and pod conditions); FailureTarget/Failed and SuccessCriteriaMet/Complete
 * conditions; ttlSecondsAfterFinished; and the propagation policies of Job and namespace
 * deletion (Background, Foreground, Orphan). Level-triggered: each pass reconciles all Jobs. */
#ifndef KUBESIM_JOBCTL_H
#define KUBESIM_JOBCTL_H

#include "tools/kubesim/kubesim.h"

struct jobctl;

/* Never NULL. */
struct jobctl *jobctl_new(struct ks *ks);
/* Accepts NULL. */
void jobctl_free(struct jobctl *jc);
/* One reconcile pass over every Job, orphaned pod and deleted owner. */
void jobctl_sync(struct jobctl *jc);

#endif
