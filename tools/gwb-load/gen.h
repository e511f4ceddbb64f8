/* The send phase of gwb-load: the operation mix (submit, replay, cancel) in an open loop
 * (requests started on a schedule, latency counted from the scheduled start) or a closed loop
 * (each connection sends when its answer came), every answer checked. */
#ifndef GWB_LOAD_GEN_H
#define GWB_LOAD_GEN_H

#include "tools/gwb-load/load.h"

/* Sends until --count requests were sent or --duration passed, and returns once every answer
 * came. Figures go into l->ops and the counters of l; accepted tasks into l->tasks. */
void gen_run(struct load *l);

/* The submission body of task seq for team (compact JSON with sorted keys, so a replay sends
 * the same bytes). Caller frees with gwb_free. */
char *gen_submit_body(const struct load *l, uint32_t seq, int team);

#endif
