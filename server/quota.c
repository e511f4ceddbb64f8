/* The quota rule (see quota.h): one decision from a team's numbers and a task's request. */
#include "server/quota.h"

struct quota_verdict quota_decide(const struct team_usage *team, const struct quota_ask *ask)
{
	struct quota_verdict v;
	v.req_mem = ask->gpu_memory_mib * ask->gpu_count;
	v.req_core = ask->gpu_core_percent * ask->gpu_count;
	v.over = 0;
	if (team->reserved_mem + v.req_mem > team->quota_mem)
		v.over |= QUOTA_OVER_MEMORY;
	if (team->reserved_core + v.req_core > team->quota_core)
		v.over |= QUOTA_OVER_CORE;
	v.admitted = v.over == 0;
	return v;
}
