/* The drain of gwb-load: after sending, follow every task the run created through the API
 * (the team's task list, page by page, at most one pass per --poll-ms) until each one ended —
 * a final state with its reservation released — or --drain-timeout passed; then read every
 * task's event history for the end-to-end figures. */
#ifndef GWB_LOAD_DRAIN_H
#define GWB_LOAD_DRAIN_H

#include <jansson.h>
#include <stdint.h>

#include "tools/gwb-load/load.h"

/* What one task's history (GET /v1/tasks/ID/events, its "events" array) tells. Times are the
 * server's, in Unix milliseconds, 0 when the event is absent. */
struct drain_figures {
	int64_t submitted_ms; /* "submitted": the task and its intent were committed */
	int64_t job_ms;       /* the Job was first recorded: a state event carrying its job_uid,
	                         or else the first move out of queued/creating/unknown to a state
	                         that needs a Job */
	int64_t bound_ms;     /* the scheduler's "Scheduled" event, or else the first "running" */
	int unknown_transitions; /* state events into "unknown" */
};

/* Reads the figures from an events array. Returns 0, or -1 when events is not an array. */
int drain_events_read(const json_t *events, struct drain_figures *f);

/* Runs the drain (when --drain) and reads the histories; results go into l->drain. */
void drain_run(struct load *l);

#endif
