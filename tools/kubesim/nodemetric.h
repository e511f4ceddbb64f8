/* NodeMetric reporting as koordlet does (koordinator.md §6.6): node CPU and memory usage from
 * this host's /proc, and per-pod usage of the running worker processes, written to the
 * NodeMetric status on a timer. */
#ifndef KUBESIM_NODEMETRIC_H
#define KUBESIM_NODEMETRIC_H

#include "tools/kubesim/kubesim.h"

struct nodemetric;

/* Starts the report timer (first report at once). Never NULL. */
struct nodemetric *nodemetric_new(struct ks *ks);
/* Accepts NULL. */
void nodemetric_free(struct nodemetric *nm);

#endif
