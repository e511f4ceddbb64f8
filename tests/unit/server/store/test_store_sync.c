/* Durable later (server/store/store_sync.c) against a real SQLite file and the real sync thread: a
 * batch opened with store_batch_begin_later commits without being durable, its intents stay
 * out of the relay's sight until the thread's sync ends, and the relay is woken then; a
 * commit with synchronous=FULL makes every earlier one durable; the connection is back to
 * synchronous=FULL after each such batch; a commit that wrote nothing counts for nothing (it
 * neither waits nor makes earlier ones durable); stopping the thread syncs what still waits;
 * the thread syncs commits that keep coming without being asked again, and the relay never
 * sees an intent of a commit not yet durable. */
#include <poll.h>
#include <string.h>

#include "lib/err.h"
#include "lib/log.h"
#include "queue/codec.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

static struct store *open_store(const char *path)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open_ex(&s, path, 10000, 0, 1 << 20, err, sizeof err);
	CHECKF(rc == 0, "store_open_ex: %s", err);
	return s;
}

static void close_store(void *arg)
{
	store_close(arg);
}

static int woken;
static void on_outbox(void *arg)
{
	(void)arg;
	woken++;
}

static int unpublished(struct store *s)
{
	struct q_intent in[16];
	int n = store_outbox_unpublished(s, in, 16);
	CHECK(n >= 0);
	return n;
}

/* A store in the folder of the case, closed at its end, with team alpha (mem_mib of memory)
 * and the sync thread started; with watch, the outbox's hook counts wake-ups in woken. */
static struct store *synced_store(const char *file, int64_t mem_mib, int watch)
{
	struct store *s = open_store(h_path(file));
	t_defer(close_store, s);
	int created = 0;
	CHECK_INT(store_team_put(s, "alpha", mem_mib, 1000, NULL, 1, &created), 0);
	if (watch)
		store_outbox_watch(s, on_outbox, NULL);
	CHECK_INT(store_sync_start(s), 0);
	return s;
}

/* Waits for the thread's answer and hands it to the store, as the server's loop does. */
static void wait_sync(struct store *s)
{
	struct pollfd p = {store_sync_fd(s), POLLIN, 0};
	CHECK_INT(poll(&p, 1, 10000), 1);
	CHECK_INT(store_sync_done(s), 0);
}

static void submit_later(struct store *s, const char *name)
{
	struct task_req q = {"alpha", name, 16, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_batch_begin_later(s), 0);
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	CHECK_INT(store_batch_commit(s), 0);
}

TEST(store_sync_batch_durable_after_the_thread_and_intents_wait_for_it)
{
	struct store *s = synced_store("s.db", 100000, 1);
	uint64_t before = store_commit_seq(s);
	CHECK(store_durable_seq(s) == before);

	woken = 0;
	int64_t passed0, left0, passed, left;
	store_wal_syncs(s, &passed0, &left0);
	submit_later(s, "one");
	CHECK(store_commit_seq(s) == before + 1);
	CHECK(store_durable_seq(s) == before); /* committed, not yet known to be on the disk */
	CHECK_INT(store_synchronous(s), 2);    /* FULL, for every other write */
	store_wal_syncs(s, &passed, &left);    /* its COMMIT's sync was left to the thread */
	CHECK_INT(passed, passed0);
	CHECK_INT(left, left0 + 1);
	CHECK_INT(unpublished(s), 0);          /* the relay does not see its intent yet */
	int at_insert = woken;
	wait_sync(s);
	CHECK(store_durable_seq(s) == before + 1);
	CHECK_INT(woken, at_insert + 1); /* the relay is woken for it */
	CHECK_INT(unpublished(s), 1);

	struct store_sync_stats st;
	store_sync_stats(s, &st);
	CHECK_INT(st.syncs, 1);
	CHECK_INT(st.failed, 0);
	CHECK_INT(st.pending, 0);
	/* Any other commit syncs in its COMMIT, as synchronous=FULL does. */
	int created = 0;
	CHECK_INT(store_team_put(s, "beta", 16, 1, NULL, 1, &created), 0);
	store_wal_syncs(s, &passed, &left);
	CHECK_INT(passed, passed0 + 1);
	CHECK_INT(left, left0 + 1);
}

TEST(store_sync_full_commit_makes_earlier_ones_durable)
{
	struct store *s = synced_store("f.db", 100000, 0);
	submit_later(s, "one");
	CHECK(store_durable_seq(s) < store_commit_seq(s));
	CHECK_INT(unpublished(s), 0);
	/* A commit outside such a batch syncs inside SQLite, and with it everything before. */
	struct task_req q = {"alpha", "two", 16, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_task_submit(s, &q, NULL, "fp", 10, 100000, &res), 0);
	CHECK(store_durable_seq(s) == store_commit_seq(s));
	CHECK_INT(unpublished(s), 2);
	/* The sync the first batch asked for still ends, and changes nothing. */
	uint64_t durable = store_durable_seq(s);
	wait_sync(s);
	CHECK(store_durable_seq(s) == durable);
}

TEST(store_sync_stop_syncs_what_waits)
{
	struct store *s = synced_store("t.db", 100000, 0);
	for (int i = 0; i < 5; i++)
		submit_later(s, "many");
	store_sync_stop(s);
	CHECK(store_durable_seq(s) == store_commit_seq(s));
	CHECK_INT(store_sync_fd(s), -1);
	/* Without the thread a later batch is durable when its commit returns. */
	submit_later(s, "after");
	CHECK(store_durable_seq(s) == store_commit_seq(s));
	CHECK_INT(unpublished(s), 6);
}

/* A commit that wrote nothing: SQLite writes and syncs nothing for it, so it makes nothing
 * durable (the batch before still waits for the thread), and a batch that wrote nothing has
 * nothing of its own to wait for. */
TEST(store_sync_commit_that_wrote_nothing_changes_nothing)
{
	struct store *s = synced_store("n.db", 100, 0);
	submit_later(s, "fits"); /* 16 MiB of 100 */
	uint64_t seq = store_commit_seq(s), durable = store_durable_seq(s);
	CHECK(durable < seq);
	/* A batch with synchronous=FULL (the reconciler's kind) whose one decision was refused:
	 * its COMMIT wrote nothing, synced nothing. */
	struct task_req big = { "alpha", "big", 1000, 1, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result res;
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_submit(s, &big, NULL, "fp", 10, 100000, &res), GWB_EQUOTA);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK(store_commit_seq(s) == seq);
	CHECK(store_durable_seq(s) == durable);
	CHECK_INT(unpublished(s), 0);
	/* Refused in a batch of its own: no commit of its own. */
	CHECK_INT(store_batch_begin_later(s), 0);
	CHECK_INT(store_task_submit(s, &big, NULL, "fp", 10, 100000, &res), GWB_EQUOTA);
	CHECK_INT(store_batch_commit(s), 0);
	CHECK(store_commit_seq(s) == seq);
	wait_sync(s);
	CHECK(store_durable_seq(s) == seq);
	CHECK_INT(unpublished(s), 1);
}

/* Commits made one after the other, the loop only reading the thread's answers as they come:
 * the thread syncs them all without being asked again (it goes on while commits wait), and
 * after every answer the relay sees exactly the intents of the commits known durable, never
 * one of a later commit. */
TEST(store_sync_thread_goes_on_alone_and_holds_back_only_later_commits)
{
	struct store *s = synced_store("c.db", 100000, 1);
	uint64_t base = store_commit_seq(s);
	for (int i = 0; i < 6; i++)
		submit_later(s, "chain");
	CHECK(store_commit_seq(s) == base + 6);
	int answers = 0;
	while (store_durable_seq(s) < store_commit_seq(s)) {
		CHECKF(answers < 6, "still %d commits not durable after %d answers",
		       (int)(store_commit_seq(s) - store_durable_seq(s)), answers);
		wait_sync(s);
		answers++;
		CHECK_INT(unpublished(s), (int)(store_durable_seq(s) - base));
	}
	struct store_sync_stats st;
	store_sync_stats(s, &st);
	CHECK_INT(st.commits, 6);
	CHECK(st.syncs >= 1 && st.syncs <= 6);
	CHECK_INT(st.pending, 0);
	CHECK(woken >= 1);
	/* A commit after all that wakes the thread again. */
	submit_later(s, "after");
	wait_sync(s);
	CHECK(store_durable_seq(s) == store_commit_seq(s));
	CHECK_INT(unpublished(s), 7);
}
