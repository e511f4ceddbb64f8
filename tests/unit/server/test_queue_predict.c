/* The quota replayed forward (server/queue_predict.c), on numbers alone: a running task's end,
 * an admitted one's start after the latency, a final one freeing now, the line admitted in
 * order, a head that blocks those behind it, a task the quota can never hold, and the basis. */
#include <stdio.h>
#include <string.h>

#include "server/queue_predict.h"
#include "tests/harness/t.h"

#define NOW 1000000

static struct qp_input input(const struct qp_holder *h, int nh, const struct qp_waiter *w,
			     int nw)
{
	struct qp_input in = { NOW, 2048, 100, 500, h, nh, w, nw };
	return in;
}

TEST(queue_predict_waits_for_the_first_end_that_makes_room)
{
	/* Two running tasks of 1024 MiB: one ends in 10 s, the other in 30 s. */
	const struct qp_holder h[] = {
		{ "a", 1024, 10, 60000, 1, 0, NOW - 50000, 0 },
		{ "b", 1024, 10, 60000, 1, 0, NOW - 30000, 0 },
	};
	const struct qp_waiter w[] = { { "x", 1024, 10, 20000 }, { "y", 1024, 10, 5000 } };
	struct qp_input in = input(h, 2, w, 2);
	struct qp_result r[2];
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW + 10000);
	CHECK_INT(r[0].nbasis, 1);
	CHECK_STR(r[0].basis[0], "a");
	/* y after b's end (x's own end comes later: 10 s + 0.5 s + 20 s). */
	CHECK_INT(r[1].admit_at, NOW + 30000);
	CHECK_STR(r[1].basis[0], "b");
}

TEST(queue_predict_admitted_tasks_start_after_the_latency)
{
	/* Admitted 200 ms ago, not running: starts at admitted + 500 ms, ends 4 s later. */
	const struct qp_holder h[] = { { "q", 2048, 10, 4000, 0, 0, 0, NOW - 200 } };
	const struct qp_waiter w[] = { { "x", 2048, 10, 1000 }, { "y", 2048, 10, 1000 } };
	struct qp_input in = input(h, 1, w, 2);
	struct qp_result r[2];
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW + 300 + 4000);
	/* y after x: x admitted, started after the latency, ran its second. */
	CHECK_INT(r[1].admit_at, NOW + 4300 + 500 + 1000);
	CHECK_STR(r[1].basis[0], "x");
	/* Overdue: an admission long ago starts now at the earliest. */
	const struct qp_holder late[] = { { "q", 2048, 10, 4000, 0, 0, 0, NOW - 100000 } };
	in = input(late, 1, w, 1);
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW + 4000);
}

TEST(queue_predict_final_and_overrunning_tasks_free_now)
{
	const struct qp_holder h[] = {
		{ "done", 1024, 10, 60000, 1, 1, NOW - 90000, 0 },
		{ "over", 1024, 10, 1000, 1, 0, NOW - 90000, 0 },
	};
	const struct qp_waiter w[] = { { "x", 2048, 10, 1000 } };
	struct qp_input in = input(h, 2, w, 1);
	struct qp_result r[1];
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW);
	CHECK_INT(r[0].nbasis, 2);
}

TEST(queue_predict_a_head_that_never_fits_blocks_the_line)
{
	const struct qp_waiter w[] = { { "fits", 1024, 10, 1000 },
				       { "huge", 4096, 10, 1000 },
				       { "small", 16, 1, 1000 } };
	struct qp_input in = input(NULL, 0, w, 3);
	struct qp_result r[3];
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW);
	CHECK_INT(r[0].nbasis, 0);
	CHECK_INT(r[1].admit_at, -1);
	CHECK_INT(r[2].admit_at, -1);
	/* Core counts as memory does. */
	const struct qp_waiter c[] = { { "cores", 16, 101, 1000 } };
	in = input(NULL, 0, c, 1);
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, -1);
}

TEST(queue_predict_a_task_admitted_at_once_takes_the_basis_of_the_one_before)
{
	/* a (2048) ends in 5 s; x and y of 1024 each both fit then: y's admission is x's. */
	const struct qp_holder h[] = { { "a", 2048, 10, 10000, 1, 0, NOW - 5000, 0 } };
	const struct qp_waiter w[] = { { "x", 1024, 10, 9000 }, { "y", 1024, 10, 9000 } };
	struct qp_input in = input(h, 1, w, 2);
	struct qp_result r[2];
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW + 5000);
	CHECK_INT(r[1].admit_at, NOW + 5000);
	CHECK_INT(r[1].nbasis, 1);
	CHECK_STR(r[1].basis[0], "a");
}

TEST(queue_predict_many_holders_in_any_order)
{
	/* 50 running tasks of 40 MiB in a quota of 2000, ending 1 s apart in reverse order of
	 * listing; a waiter of 400 MiB needs ten ends: the tenth earliest. */
	struct qp_holder h[50];
	char ids[50][8];
	for (int i = 0; i < 50; i++) {
		snprintf(ids[i], sizeof ids[i], "h%d", i);
		h[i] = (struct qp_holder){ ids[i], 40, 1, 100000, 1, 0,
					   NOW - 100000 + (50 - i) * 1000, 0 };
	}
	const struct qp_waiter w[] = { { "x", 400, 1, 1000 } };
	struct qp_input in = { NOW, 2000, 100, 0, h, 50, w, 1 };
	struct qp_result r[1];
	CHECK_INT(queue_predict(&in, r), 0);
	CHECK_INT(r[0].admit_at, NOW + 10000);
	CHECK_INT(r[0].nbasis, QP_BASIS_MAX);
	CHECK_STR(r[0].basis[0], "h49");
}

TEST(queue_predict_bind_takes_the_card_that_frees_first)
{
	/* Card 0 (8192) holds one task ending in 20 s; card 1 (8192) two ending in 5 s and 12 s,
	 * of 4096 each; a 6144 request binds on card 1 after both of its ends, 12 s, before card
	 * 0's 20 s; two such cards: 20 s. */
	const struct qp_holder c0[] = { { "a", 8192, 50, 0, 1, 0, NOW + 20000, 0 } };
	const struct qp_holder c1[] = { { "b", 4096, 25, 0, 1, 0, NOW + 5000, 0 },
					{ "c", 4096, 25, 0, 1, 0, NOW + 12000, 0 } };
	const struct qp_card cards[] = { { 8192, 100, c0, 1 }, { 8192, 100, c1, 2 } };
	CHECK_INT(queue_predict_bind(cards, 2, 6144, 10, 1, NOW), NOW + 12000);
	CHECK_INT(queue_predict_bind(cards, 2, 4096, 10, 1, NOW), NOW + 5000);
	CHECK_INT(queue_predict_bind(cards, 2, 6144, 10, 2, NOW), NOW + 20000);
	CHECK_INT(queue_predict_bind(cards, 2, 6144, 10, 3, NOW), -1);
	/* Larger than any card: never. A holder whose end is not known never frees. */
	CHECK_INT(queue_predict_bind(cards, 2, 9000, 10, 1, NOW), -1);
	const struct qp_holder unknown[] = { { "x", 8192, 50, -1, 1, 0, 0, 0 } };
	const struct qp_card blocked[] = { { 8192, 100, unknown, 1 } };
	CHECK_INT(queue_predict_bind(blocked, 1, 1024, 10, 1, NOW), -1);
	/* Free now: now. */
	const struct qp_card empty[] = { { 8192, 100, NULL, 0 } };
	CHECK_INT(queue_predict_bind(empty, 1, 1024, 10, 1, NOW), NOW);
}
