/* The run's checks against the server's own state, outside the send loop: a quota sample on
 * demand, the team's reservation against the sum of its active tasks at the end, and the dead
 * letters (from /metrics, else from Redis, else "not available"). */
#ifndef GWB_LOAD_VERIFY_H
#define GWB_LOAD_VERIFY_H

#include "tools/gwb-load/load.h"

/* Reads every team once (GET /v1/teams/T) and records the sample. Returns 0, or -1 with err
 * naming the team and the answer when one cannot be read (an unknown team, a refused token). */
int verify_teams_sample(struct load *l, char *err, size_t errlen);

/* For each team: its reserved totals, then every one of its tasks (all pages) summing the
 * reservations not yet released, then its totals again; exact when the totals did not move
 * and equal the sum. Tries a few times while they move. Results in l->teams[].end_*. */
void verify_quota_end(struct load *l);

/* Reads the dead-letter count into l->dead.before (first call) or l->dead.after. */
void verify_dead_letters(struct load *l, int after);

/* The Prometheus sample value of metric (summed over its label sets) in text, or -1 when it
 * is absent. */
long verify_metric_sum(const char *text, const char *metric);

#endif
