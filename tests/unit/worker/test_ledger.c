/* Unit tests of worker/ledger: the simulated bookkeeping fits the normal working set and
 * refuses exactly the chunk that would pass the budget. */
#include <stdint.h>

#include "lib/err.h"
#include "tests/harness/t.h"
#include "worker/ledger.h"

#define MiB (1024LL * 1024)

TEST(ledger_normal_fits)
{
	struct ledger l;
	struct ledger_result r;
	ledger_init(&l, 1024 * MiB);
	int64_t ws = ledger_working_set(1024 * MiB, "normal");
	CHECK(ws > 0 && ws <= 1024 * MiB);
	CHECK_INT(ledger_fill(&l, ws, LEDGER_CHUNK, &r), 0);
	CHECK_INT(r.refused, 0);
	CHECK_INT(r.used, ws);
	CHECK_INT(r.chunks, 12);
}

TEST(ledger_overlimit_refuses_the_chunk_past_the_budget)
{
	struct ledger l;
	struct ledger_result r;
	ledger_init(&l, 1024 * MiB);
	int64_t ws = ledger_working_set(1024 * MiB, "overlimit");
	CHECK_INT(ws, 1152 * MiB);
	CHECK_INT(ledger_fill(&l, ws, LEDGER_CHUNK, &r), GWB_EQUOTA);
	CHECK_INT(r.refused, 1);
	CHECK_INT(r.requested, 64 * MiB);
	CHECK_INT(r.used, 1024 * MiB);
	CHECK_INT(r.budget, 1024 * MiB);
	CHECK_INT(r.chunks, 16);
	CHECK_INT(r.working_set, 1152 * MiB);
}

TEST(ledger_odd_budget_and_partial_chunks)
{
	struct ledger l;
	struct ledger_result r;
	/* 100 MiB + 1 byte: the second 64 MiB chunk would reach 128 MiB and is refused. */
	ledger_init(&l, 100 * MiB + 1);
	CHECK_INT(ledger_fill(&l, ledger_working_set(l.budget, "overlimit"), LEDGER_CHUNK, &r),
	          GWB_EQUOTA);
	CHECK_INT(r.used, 64 * MiB);
	CHECK_INT(r.requested, 64 * MiB);
	/* A working set that is not a chunk multiple books its tail. */
	ledger_init(&l, 1000);
	CHECK_INT(ledger_fill(&l, 1000, 300, &r), 0);
	CHECK_INT(r.chunks, 4);
	CHECK_INT(r.used, 1000);
	CHECK_INT(ledger_reserve(&l, 1), GWB_EQUOTA);
	CHECK_INT(l.used, 1000);
}

TEST(ledger_rejects_nonsense)
{
	struct ledger l;
	struct ledger_result r;
	ledger_init(&l, 10);
	CHECK_INT(ledger_reserve(&l, 0), GWB_EINVAL);
	CHECK_INT(ledger_reserve(&l, -5), GWB_EINVAL);
	CHECK_INT(ledger_reserve(&l, INT64_MAX), GWB_EQUOTA);
	CHECK_INT(ledger_fill(&l, 5, 0, &r), GWB_EINVAL);
	CHECK_INT(ledger_working_set(INT64_MAX - 1, "overlimit"), INT64_MAX);
	ledger_init(&l, -1);
	CHECK_INT(l.budget, 0);
}
