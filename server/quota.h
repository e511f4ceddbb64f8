/* The quota rule: whether a team's quota holds a task on top of what the team's unreleased
 * tasks reserve, decided from numbers alone, for the submission (server/store/store_tasks.c)
 * and its dry run (server/api/api_tasks.c). Pure code: no SQLite, no I/O. */
#ifndef GWB_QUOTA_H
#define GWB_QUOTA_H

#include <stdint.h>

/* A team's quota and its reservation: the four numbers of its row in the teams table. */
struct team_usage {
	int64_t quota_mem, quota_core;       /* GPU memory (MiB) and GPU core (percent) */
	int64_t reserved_mem, reserved_core; /* held by the team's unreleased tasks */
};

/* What a task asks: per card, and how many cards. */
struct quota_ask {
	int64_t gpu_memory_mib;
	int64_t gpu_core_percent;
	int64_t gpu_count;
};

/* The limits a task would pass (flags: both may be). */
#define QUOTA_OVER_MEMORY 0x1u
#define QUOTA_OVER_CORE 0x2u

struct quota_verdict {
	int admitted;              /* 1: the quota holds it (a quota filled exactly holds it) */
	unsigned over;             /* QUOTA_OVER_* of each limit it would pass; 0 if admitted */
	int64_t req_mem, req_core; /* the totals asked: per card times gpu_count */
};

/* Decides whether team's quota holds ask on top of its reservation: admitted when the
 * reservation plus the totals asked stays within the quota, memory and core alike. */
struct quota_verdict quota_decide(const struct team_usage *team, const struct quota_ask *ask);

#endif
