/* Core v1 Events as the controllers of a real cluster record them (kube-api.md §1.6): one
 * object per (involved object, reason, message), repeated occurrences counted on it, and a cap
 * on the number kept (the oldest are removed). */
#ifndef KUBESIM_EVENTS_H
#define KUBESIM_EVENTS_H

#include <jansson.h>

#include "tools/kubesim/kubesim.h"

/* Records an event about involved (borrowed; a stored object). type is "Normal" or
 * "Warning"; component the reporting controller (job-controller, koord-scheduler, kubelet).
 * The event lives in the involved object's namespace ("default" for cluster-scoped ones). */
void events_record(struct ks *ks, const json_t *involved, const char *type, const char *reason,
		   const char *message, const char *component);

#endif
