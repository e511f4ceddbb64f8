/* The task lifecycle table: every pair of states through task_transition_ok against the
 * lifecycle written out here as a matrix, the flags, names, and the Job name. */
#include <stdio.h>
#include <string.h>

#include "server/task.h"
#include "tests/harness/t.h"

/* The expected lifecycle, written independently of the X-macro table, row = from, column =
 * to, in the order queued creating pending running succeeded failed cancelling cancelled
 * unknown waiting. '1' legal, '.' refused; the diagonal (staying) is always legal. */
static const char *const expected[TASK_NSTATES] = {
	/*          q c p r s f C X u w */
	[TASK_QUEUED] = "11111110..",
	[TASK_CREATING] = ".11111101.",
	[TASK_PENDING] = "..1111101.",
	[TASK_RUNNING] = "..1111101.",
	[TASK_SUCCEEDED] = "....1.....",
	[TASK_FAILED] = ".....1....",
	[TASK_CANCELLING] = "......11..",
	[TASK_CANCELLED] = ".......1..",
	[TASK_UNKNOWN] = "..1111101.",
	[TASK_WAITING] = "1......1.1",
};

TEST(task_every_pair_of_states)
{
	CHECK_INT(TASK_NSTATES, 10);
	int legal = 0;
	for (int f = 0; f < TASK_NSTATES; f++) {
		CHECK_INT(strlen(expected[f]), TASK_NSTATES);
		for (int t = 0; t < TASK_NSTATES; t++) {
			int want = expected[f][t] == '1';
			int got = task_transition_ok((enum task_state)f, (enum task_state)t);
			CHECKF(got == want, "%s -> %s: %d, expected %d",
			       task_state_name((enum task_state)f),
			       task_state_name((enum task_state)t), got, want);
			legal += got && f != t;
		}
		CHECK(!task_transition_ok((enum task_state)f, TASK_NONE));
		CHECK(!task_transition_ok(TASK_NONE, (enum task_state)f));
	}
	CHECK_INT(legal, 30);
}

TEST(task_final_states_never_move_and_cancel_ends_in_cancelled)
{
	for (int f = 0; f < TASK_NSTATES; f++) {
		enum task_state s = (enum task_state)f;
		int moves = 0;
		for (int t = 0; t < TASK_NSTATES; t++)
			moves += t != f && task_transition_ok(s, (enum task_state)t);
		if (task_state_is(s, TASK_FINAL))
			CHECKF(moves == 0, "final %s moves", task_state_name(s));
		else
			CHECKF(moves > 0, "%s is a dead end", task_state_name(s));
		/* Whatever is cancellable can be cancelled (a waiting task at once); only
		 * cancelling and waiting reach cancelled. */
		CHECK_INT(task_transition_ok(s, TASK_CANCELLING),
			  (task_state_is(s, TASK_CANCELLABLE) && s != TASK_WAITING) ||
				  s == TASK_CANCELLING);
		CHECK_INT(task_transition_ok(s, TASK_CANCELLED) && s != TASK_CANCELLED,
			  s == TASK_CANCELLING || s == TASK_WAITING);
		/* Nothing goes back to queued or creating except from where it started; a
		 * waiting task is admitted to queued. */
		CHECK_INT(task_transition_ok(s, TASK_QUEUED), s == TASK_QUEUED || s == TASK_WAITING);
		CHECK_INT(task_transition_ok(s, TASK_CREATING), s == TASK_QUEUED || s == TASK_CREATING);
	}
}

TEST(task_flags_and_names)
{
	static const char *const names[] = { "queued",	   "creating",	 "pending",
					     "running",	   "succeeded",	 "failed",
					     "cancelling", "cancelled",	 "unknown",
					     "waiting" };
	for (int i = 0; i < TASK_NSTATES; i++) {
		CHECK_STR(task_state_name((enum task_state)i), names[i]);
		CHECK_INT(task_state_parse(names[i]), i);
		enum task_state s = (enum task_state)i;
		int final = i == TASK_SUCCEEDED || i == TASK_FAILED || i == TASK_CANCELLED;
		int waiting = i == TASK_WAITING;
		CHECK_INT(task_state_is(s, TASK_FINAL), final);
		CHECK_INT(task_state_is(s, TASK_ACTIVE), !final && !waiting);
		CHECK_INT(task_state_is(s, TASK_HOLDS_QUOTA), !final && !waiting);
		CHECK_INT(task_state_is(s, TASK_CANCELLABLE), !final && i != TASK_CANCELLING);
	}
	CHECK_INT(task_state_parse("Running"), TASK_NONE);
	CHECK_INT(task_state_parse(""), TASK_NONE);
	CHECK_INT(task_state_parse(NULL), TASK_NONE);
	CHECK_STR(task_state_name(TASK_NONE), "?");
	CHECK_INT(task_state_flags(TASK_NONE), 0);
}

TEST(task_state_lists_for_sql)
{
	char buf[256];
	CHECK_STR(task_states_json(TASK_FINAL, 0, buf, sizeof buf),
		  "[\"succeeded\",\"failed\",\"cancelled\"]");
	CHECK_STR(task_states_json(TASK_ACTIVE, 0, buf, sizeof buf),
		  "[\"queued\",\"creating\",\"pending\",\"running\",\"cancelling\",\"unknown\"]");
	CHECK_STR(task_states_json(TASK_ACTIVE, TASK_CANCELLABLE, buf, sizeof buf),
		  "[\"cancelling\"]");
	char tiny[8];
	task_states_json(TASK_FINAL, 0, tiny, sizeof tiny);
	CHECK(strlen(tiny) < sizeof tiny);
}

TEST(task_job_name_and_back)
{
	char name[64], id[32];
	CHECK_STR(task_job_name("t-abc123", name, sizeof name), "gwb-t-abc123");
	/* Cut short as snprintf would cut it. */
	for (size_t len = 1; len <= 14; len++) {
		char cut[16], want[16];
		snprintf(want, len, "gwb-%s", "t-abc123");
		CHECK_STR(task_job_name("t-abc123", cut, len), want);
	}
	CHECK_INT(task_of_name(name, 0, id, sizeof id), 0);
	CHECK_STR(id, "t-abc123");
	CHECK_INT(task_of_name("gwb-t-abc123-x7k2p", 1, id, sizeof id), 0);
	CHECK_STR(id, "t-abc123");
	CHECK_INT(task_of_name("other-t-abc", 0, id, sizeof id), -1);
	CHECK_INT(task_of_name("gwb-", 0, id, sizeof id), -1);
	CHECK_INT(task_of_name("gwb-nodash", 1, id, sizeof id), -1);
	CHECK_INT(task_of_name(NULL, 0, id, sizeof id), -1);
}

#define EMPTY_TEXT(t, f) CHECK_STR((t)->f, "");
#define EMPTY_INT(t, f) CHECK_INT((t)->f, 0);
#define EMPTY_BOOL(t, f) CHECK_INT((t)->f, 0);
#define EMPTY_OPT(t, f) CHECK_INT((t)->f, 0); CHECK_INT((t)->has_##f, 0);
#define EMPTY_STATE(t, f) CHECK_INT((t)->f, TASK_NONE);

TEST(task_clear_empties_every_column_of_a_dirty_task)
{
	static struct task t;
	memset(&t, 0xa5, sizeof t);
	task_clear(&t);
#define EMPTY(kind, f, tbl, col, size, role) EMPTY_##kind(&t, f)
	TASK_COLUMNS(EMPTY)
#undef EMPTY
	CHECK_INT(t.loaded_state, TASK_NONE);
	CHECK_INT(t.changed, 0);
	/* A setter sees the cleared text as "": setting "" again changes nothing. */
	TASK_SET_TEXT(&t, pending_diagnosis, "");
	CHECK_INT(t.changed, 0);
	TASK_SET_TEXT(&t, pending_diagnosis, "x");
	CHECK_INT(t.changed, 1);
	CHECK_STR(t.pending_diagnosis, "x");
}
