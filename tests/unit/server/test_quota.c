/* The quota rule (server/quota.c): each limit alone, both, the boundary (a quota filled
 * exactly holds the task) and one over it, the request counted per card, and a reservation
 * already past a lowered quota. */
#include "server/quota.h"
#include "tests/harness/t.h"

/* A team with quota 1000 MiB / 100 % and reservation rm / rc. */
static struct team_usage team(int64_t rm, int64_t rc)
{
	struct team_usage u = { 1000, 100, rm, rc };
	return u;
}

static struct quota_verdict decide(struct team_usage u, int64_t mem, int64_t core, int64_t n)
{
	struct quota_ask ask = { mem, core, n };
	return quota_decide(&u, &ask);
}

TEST(quota_admits_what_fits_with_room_left)
{
	struct quota_verdict v = decide(team(200, 10), 300, 20, 1);
	CHECK_INT(v.admitted, 1);
	CHECK_INT(v.over, 0);
	CHECK_INT(v.req_mem, 300);
	CHECK_INT(v.req_core, 20);
}

TEST(quota_exactly_full_fits)
{
	/* Memory filled exactly, core filled exactly, then both at once. */
	struct quota_verdict v = decide(team(400, 10), 600, 20, 1);
	CHECK_INT(v.admitted, 1);
	CHECK_INT(v.over, 0);
	v = decide(team(100, 70), 100, 30, 1);
	CHECK_INT(v.admitted, 1);
	CHECK_INT(v.over, 0);
	v = decide(team(0, 0), 1000, 100, 1);
	CHECK_INT(v.admitted, 1);
	CHECK_INT(v.over, 0);
	v = decide(team(1000, 100), 0, 0, 1); /* a full quota still holds nothing more */
	CHECK_INT(v.admitted, 1);
}

TEST(quota_memory_over_by_one_is_refused)
{
	struct quota_verdict v = decide(team(400, 10), 601, 20, 1);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY);
	CHECK_INT(v.req_mem, 601);
	v = decide(team(1000, 0), 1, 1, 1); /* memory full, core free */
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY);
}

TEST(quota_core_over_by_one_is_refused)
{
	struct quota_verdict v = decide(team(100, 70), 100, 31, 1);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_CORE);
	CHECK_INT(v.req_core, 31);
	v = decide(team(0, 100), 1, 1, 1); /* core full, memory free */
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_CORE);
}

TEST(quota_both_limits_over_names_both)
{
	struct quota_verdict v = decide(team(500, 50), 501, 51, 1);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY | QUOTA_OVER_CORE);
}

TEST(quota_counts_the_request_per_card)
{
	/* 4 cards of 250 MiB / 25 % fill the quota exactly; a fifth card passes both limits. */
	struct quota_verdict v = decide(team(0, 0), 250, 25, 4);
	CHECK_INT(v.admitted, 1);
	CHECK_INT(v.req_mem, 1000);
	CHECK_INT(v.req_core, 100);
	v = decide(team(0, 0), 250, 25, 5);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY | QUOTA_OVER_CORE);
	CHECK_INT(v.req_mem, 1250);
	CHECK_INT(v.req_core, 125);
	/* Over by one card's share only in memory. */
	v = decide(team(1, 0), 250, 25, 4);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY);
}

TEST(quota_zero_or_lowered_quota_refuses)
{
	struct team_usage none = { 0, 0, 0, 0 };
	struct quota_verdict v = decide(none, 1, 1, 1);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY | QUOTA_OVER_CORE);
	/* A quota lowered below what is already reserved refuses the smallest task. */
	struct team_usage lowered = { 100, 10, 300, 40 };
	v = decide(lowered, 1, 1, 1);
	CHECK_INT(v.admitted, 0);
	CHECK_INT(v.over, QUOTA_OVER_MEMORY | QUOTA_OVER_CORE);
}
