/* The store against a real SQLite file: the cross-process quota race, idempotency, migrations,
 * key expiry and listing, team tokens remembered until one changes, task ids across a fork. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
#include "server/store/store_recon.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN; /* migrations log at info on every fresh file */
}

static struct store *open_store(const char *path)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open(&s, path, 10000, err, sizeof err);
	CHECKF(rc == 0, "store_open: %s", err);
	return s;
}

static void close_store(void *arg)
{
	store_close(arg);
}

static struct task_req req_of(const char *team, int64_t mem, int64_t core)
{
	struct task_req q = { team, "t", mem, core, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	return q;
}

static json_t *team_field(struct store *s, const char *team, const char *obj, const char *key)
{
	json_t *t = store_team_json(s, team);
	CHECK(t != NULL);
	json_t *v = json_incref(json_object_get(json_object_get(t, obj), key));
	json_decref(t);
	return v;
}

static int64_t team_int(struct store *s, const char *team, const char *obj, const char *key)
{
	json_t *v = team_field(s, team, obj, key);
	int64_t x = json_integer_value(v);
	json_decref(v);
	return x;
}

/* Collects the listed tasks' ids. */
static void list_ids(void *arg, const struct task *t)
{
	json_array_append_new(arg, json_string(t->id));
}

TEST_T(store_race_30_processes_quota_for_exactly_two, 120)
{
	const char *db = h_path("race.db");
	struct store *s = open_store(db);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 2048, 50, NULL, clock_now_ms(), &created), 0);
	store_close(s);

	enum { N = 30 };
	int gate[2];
	CHECK(pipe(gate) == 0);
	pid_t pids[N];
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(gate[1]);
			char b;
			/* Every submitter opens its own connection, then waits at the gate. */
			struct store *cs = NULL;
			char err[256];
			if (store_open(&cs, db, 30000, err, sizeof err))
				_exit(10);
			if (read(gate[0], &b, 1) < 0)
				_exit(11);
			struct task_req q = req_of("alpha", 1024, 25);
			struct submit_result res;
			char key[32];
			snprintf(key, sizeof key, "key-%d", i);
			int rc = store_task_submit(cs, &q, key, "fp", clock_now_ms(), 86400000, &res);
			store_close(cs);
			_exit(rc == 0 ? 0 : rc == GWB_EQUOTA ? 3 : 12);
		}
	}
	close(gate[0]);
	close(gate[1]); /* opens the gate for all at once */
	int accepted = 0, refused = 0, other = 0;
	for (int i = 0; i < N; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 100;
		if (code == 0)
			accepted++;
		else if (code == 3)
			refused++;
		else
			other++;
	}
	CHECK_INT(other, 0);
	CHECK_INT(accepted, 2);
	CHECK_INT(refused, 28);
	s = open_store(db);
	t_defer(close_store, s);
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_memory_mib"), 2048);
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_core_percent"), 50);
	json_t *tasks = json_array();
	int64_t next;
	CHECK_INT(store_task_list(s, "alpha", NULL, 0, 100, list_ids, tasks, &next), 0);
	CHECK_INT(json_array_size(tasks), 2);
	json_decref(tasks);
	CHECK_INT(store_check(s), 0);
}

static void list_seqs(void *arg, const struct task *t)
{
	json_array_append_new(arg, json_integer(t->seq));
}

/* A team's listing, newest first, page by page, whatever state each task is in: the newest
 * of each state are merged (store_task_list), so no task is skipped or listed twice, and
 * another team's never appear; with a state, only those. */
TEST(store_task_list_of_a_team_across_states_in_pages)
{
	struct store *s = open_store(h_path("list.db"));
	t_defer(close_store, s);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 1 << 20, 100000, NULL, 1, &created), 0);
	CHECK_INT(store_team_put(s, "beta", 1 << 20, 100000, NULL, 1, &created), 0);
	enum { N = 23 };
	static const char *const states[] = { "queued", "running", "succeeded", "failed",
					      "pending" };
	int64_t want[N];
	struct submit_result r;
	for (int i = 0; i < N; i++) {
		struct task_req q = req_of(i % 4 == 3 ? "beta" : "alpha", 16, 1);
		CHECK_INT(store_task_submit(s, &q, NULL, "fp", 1000 + i, 100000, &r), 0);
		struct task *t = gwb_malloc(sizeof *t);
		CHECK_INT(store_task_load(s, r.task_id, t), 0);
		want[i] = t->seq;
		gwb_free(t);
		char sql[160];
		snprintf(sql, sizeof sql, "UPDATE tasks SET state = '%s' WHERE seq = %lld",
			 states[(i * 7) % 5], (long long)want[i]);
		CHECK(sqlite3_exec(s->db, sql, NULL, NULL, NULL) == SQLITE_OK);
	}
	json_t *got = json_array();
	int64_t cursor = 0, next = 0;
	int pages = 0;
	do {
		size_t before = json_array_size(got);
		CHECK_INT(store_task_list(s, "alpha", NULL, cursor, 4, list_seqs, got, &next), 0);
		CHECK(json_array_size(got) - before <= 4);
		cursor = next;
		CHECK(++pages < 20);
	} while (next);
	int k = 0;
	for (int i = N - 1; i >= 0; i--) {
		if (i % 4 == 3)
			continue;
		CHECKF((size_t)k < json_array_size(got) &&
			       json_integer_value(json_array_get(got, (size_t)k)) == want[i],
		       "position %d: want seq %lld", k, (long long)want[i]);
		k++;
	}
	CHECK_INT(json_array_size(got), k);
	CHECK_INT(pages, (k + 3) / 4);
	json_decref(got);
	got = json_array();
	CHECK_INT(store_task_list(s, "alpha", "running", 0, 100, list_seqs, got, &next), 0);
	k = 0;
	for (int i = N - 1; i >= 0; i--)
		if (i % 4 != 3 && (i * 7) % 5 == 1)
			CHECK(json_integer_value(json_array_get(got, (size_t)k++)) == want[i]);
	CHECK_INT(json_array_size(got), k);
	json_decref(got);
}

TEST(store_idempotency_replay_conflict_and_scope)
{
	struct store *s = open_store(h_path("idem.db"));
	t_defer(close_store, s);
	int created;
	int64_t now = clock_now_ms();
	CHECK_INT(store_team_put(s, "alpha", 10240, 400, NULL, now, &created), 0);
	CHECK_INT(created, 1);
	CHECK_INT(store_team_put(s, "beta", 10240, 400, NULL, now, &created), 0);
	struct task_req q = req_of("alpha", 1024, 25);
	struct submit_result a, b;
	CHECK_INT(store_task_submit(s, &q, "k", "fp1", now, 1000, &a), 0);
	CHECK_INT(a.replayed, 0);
	CHECK_INT(store_task_submit(s, &q, "k", "fp1", now, 1000, &b), 0);
	CHECK_INT(b.replayed, 1);
	CHECK_STR(b.task_id, a.task_id);
	CHECK_INT(store_task_submit(s, &q, "k", "fp2", now, 1000, &b), GWB_ECONFLICT);
	CHECK_STR(b.task_id, a.task_id);
	struct task_req qb = req_of("beta", 1024, 25);
	CHECK_INT(store_task_submit(s, &qb, "k", "fp1", now, 1000, &b), 0);
	CHECK_INT(b.replayed, 0);
	CHECK(strcmp(b.task_id, a.task_id) != 0);
	/* A replay reserves nothing more. */
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_memory_mib"), 1024);
	/* Past its time-to-live the key is free again: a new task. */
	CHECK_INT(store_task_submit(s, &q, "k", "fp2", now + 2000, 1000, &b), 0);
	CHECK_INT(b.replayed, 0);
	int purged = -1;
	CHECK_INT(store_idem_purge(s, now + 1500, &purged), 0);
	CHECK_INT(purged, 1); /* beta's key; alpha's was replaced at now + 2000 */
}

TEST(store_quota_both_dimensions_and_lowering)
{
	struct store *s = open_store(h_path("quota.db"));
	t_defer(close_store, s);
	int created;
	int64_t now = clock_now_ms();
	CHECK_INT(store_team_put(s, "alpha", 10240, 50, NULL, now, &created), 0);
	struct task_req q = req_of("alpha", 1024, 30);
	struct submit_result r;
	CHECK_INT(store_task_submit(s, &q, NULL, "x", now, 1000, &r), 0);
	/* Memory fits, core does not: refused, with the numbers. */
	CHECK_INT(store_task_submit(s, &q, NULL, "x", now, 1000, &r), GWB_EQUOTA);
	CHECK_INT(r.req_core, 30);
	CHECK_INT(r.reserved_core, 30);
	CHECK_INT(r.quota_core, 50);
	/* gpu_count multiplies both dimensions. */
	struct task_req q2 = req_of("alpha", 4096, 10);
	q2.gpu_count = 2;
	CHECK_INT(store_task_submit(s, &q2, NULL, "x", now, 1000, &r), 0);
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_memory_mib"), 1024 + 8192);
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_core_percent"), 50);
	/* A quota lowered below the reservation is allowed and blocks new work. */
	CHECK_INT(store_team_put(s, "alpha", 1024, 10, NULL, now, &created), 0);
	CHECK_INT(created, 0);
	CHECK_INT(team_int(s, "alpha", "available", "gpu_memory_mib"), 0);
	struct task_req tiny = req_of("alpha", 1, 1);
	CHECK_INT(store_task_submit(s, &tiny, NULL, "x", now, 1000, &r), GWB_EQUOTA);
	struct task_req nobody = req_of("nobody", 1, 1);
	CHECK_INT(store_task_submit(s, &nobody, NULL, "x", now, 1000, &r), GWB_ENOTFOUND);
}

TEST(store_migrations_are_numbered_and_reopen_cleanly)
{
	const char *db = h_path("mig.db");
	struct store *s = open_store(db);
	CHECK_INT(store_schema_version(s), store_schema_latest());
	store_close(s);
	s = open_store(db);
	CHECK_INT(store_schema_version(s), store_schema_latest());
	store_close(s);
}

/* A task id is "t-" and its seq in 12 base32 characters, DNS-safe (it names a Job), sorting
 * as the seqs do; the seq comes back from it, and no other text gives one. */
TEST(store_task_ids_encode_their_seq)
{
	const int64_t seqs[] = { 0, 1, 31, 32, 1000, INT64_C(1) << 40, STORE_TASK_SEQ_END - 1 };
	char prev[16] = "";
	for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
		char id[16];
		store_task_id_encode(seqs[i], id);
		CHECK_INT(strlen(id), 14);
		CHECK(id[0] == 't' && id[1] == '-');
		for (int k = 2; k < 14; k++)
			CHECKF((id[k] >= 'a' && id[k] <= 'z') || (id[k] >= '2' && id[k] <= '7'),
			       "bad id %s", id);
		CHECKF(strcmp(prev, id) < 0, "%s sorts before %s", id, prev);
		CHECK_INT(store_task_id_seq(id), seqs[i]);
		memcpy(prev, id, sizeof id);
	}
	CHECK_STR(prev, "t-zzzzzzzzzzzz");
	const char *bad[] = { NULL,
			      "",
			      "t-",
			      "t-22222222222",
			      "t-2222222222222",
			      "u-222222222222",
			      "t-22222222222A",
			      "t-22222222222_",
			      "t-222222222221",
			      "T-222222222222" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		CHECKF(store_task_id_seq(bad[i]) == -1, "%s", bad[i] ? bad[i] : "NULL");
}

TEST(store_token_lookup_and_uniqueness)
{
	struct store *s = open_store(h_path("tok.db"));
	t_defer(close_store, s);
	unsigned char h1[32], h2[32];
	memset(h1, 1, 32);
	memset(h2, 2, 32);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 1, 1, h1, 1, &created), 0);
	CHECK_INT(store_team_put(s, "beta", 1, 1, h1, 1, &created), GWB_EEXISTS);
	CHECK_INT(store_team_put(s, "beta", 1, 1, h2, 1, &created), 0);
	char team[64];
	CHECK_INT(store_team_by_token(s, h1, team, sizeof team), 0);
	CHECK_STR(team, "alpha");
	unsigned char h3[32];
	memset(h3, 3, 32);
	CHECK_INT(store_team_by_token(s, h3, team, sizeof team), GWB_ENOTFOUND);
	/* A quota change without a token keeps the old token. */
	CHECK_INT(store_team_put(s, "alpha", 5, 5, NULL, 2, &created), 0);
	CHECK_INT(store_team_by_token(s, h1, team, sizeof team), 0);
}

/* The store guards the lifecycle: an observation or a release that would make an illegal
 * move is refused with GWB_ESTATE and writes nothing; legal moves go through. */
TEST(store_refuses_illegal_transitions)
{
	struct store *s = open_store(h_path("life.db"));
	t_defer(close_store, s);
	int created;
	int64_t now = clock_now_ms();
	CHECK_INT(store_team_put(s, "alpha", 10240, 400, NULL, now, &created), 0);
	struct task_req q = req_of("alpha", 1024, 25);
	struct submit_result r;
	CHECK_INT(store_task_submit(s, &q, NULL, "x", now, 1000, &r), 0);
	struct task *t = gwb_malloc(sizeof *t);
	CHECK_INT(store_task_load(s, r.task_id, t), 0);
	CHECK_INT(t->state, TASK_QUEUED);
	/* queued -> cancelled skips cancelling and the release: refused, nothing written. */
	struct task_move m = task_stay(t);
	m.to = TASK_CANCELLED;
	TASK_SET_TEXT(t, reason, "should not be stored");
	CHECK_INT(store_task_move(s, t, &m, now), GWB_ESTATE);
	CHECK_INT(store_task_load(s, r.task_id, t), 0);
	CHECK_INT(t->state, TASK_QUEUED);
	CHECK_STR(t->reason, "");
	/* queued -> creating -> pending is the lifecycle. */
	m.to = TASK_CREATING;
	CHECK_INT(store_task_move(s, t, &m, now), 0);
	m.to = TASK_PENDING;
	TASK_SET_TEXT(t, job_uid, "u-1");
	CHECK_INT(store_task_move(s, t, &m, now), 0);
	CHECK_INT(t->changed, 0);
	CHECK_INT(store_task_load(s, r.task_id, t), 0);
	CHECK_INT(t->state, TASK_PENDING);
	CHECK_STR(t->job_uid, "u-1");
	/* pending -> queued goes backwards: refused. */
	m.to = TASK_QUEUED;
	CHECK_INT(store_task_move(s, t, &m, now), GWB_ESTATE);
	/* A release into cancelled from pending (no cancel asked) is refused whole: the
	 * reservation stays held. */
	int released = 0;
	json_t *ev = json_pack("{s:s}", "proof", "test");
	CHECK_INT(store_task_release(s, r.task_id, TASK_PROOF_JOB_GONE, TASK_CANCELLED,
				     TASK_REASON_KEEP, ev, now, &released),
		  GWB_ESTATE);
	CHECK_INT(released, 0);
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_memory_mib"), 1024);
	CHECK_INT(store_task_release(s, r.task_id, TASK_PROOF_JOB_GONE, TASK_FAILED,
				     TASK_REASON_KEEP, ev, now, &released),
		  0);
	json_decref(ev);
	CHECK_INT(released, 1);
	CHECK_INT(team_int(s, "alpha", "reserved", "gpu_memory_mib"), 0);
	/* A final task does not move, not even by a cancel. */
	enum task_state st;
	int changed;
	CHECK_INT(store_task_cancel(s, r.task_id, now, &st, &changed), 0);
	CHECK_INT(changed, 0);
	CHECK_INT(st, TASK_FAILED);
	gwb_free(t);
}

/* Tokens found are remembered, and a token change forgets them: the old token stops working
 * and the new one works from the next lookup on, whichever team held what before. A change
 * written by another connection is seen once the remembered entry is a second old. */
TEST(store_token_remembered_until_a_token_changes)
{
	const char *db = h_path("tokc.db");
	struct store *s = open_store(db);
	t_defer(close_store, s);
	unsigned char h1[32], h2[32], h3[32];
	memset(h1, 1, 32);
	memset(h2, 2, 32);
	memset(h3, 3, 32);
	h3[0] = 1; /* the same slot as h1: a collision only evicts */
	int created;
	char team[64];
	CHECK_INT(store_team_put(s, "alpha", 1, 1, h1, 1, &created), 0);
	CHECK_INT(store_team_put(s, "beta", 1, 1, h2, 1, &created), 0);
	for (int i = 0; i < 3; i++) {
		CHECK_INT(store_team_by_token(s, h1, team, sizeof team), 0);
		CHECK_STR(team, "alpha");
		CHECK_INT(store_team_by_token(s, h2, team, sizeof team), 0);
		CHECK_STR(team, "beta");
		CHECK_INT(store_team_by_token(s, h3, team, sizeof team), GWB_ENOTFOUND);
	}
	/* alpha takes h3: h1 is nobody's now. */
	CHECK_INT(store_team_put(s, "alpha", 1, 1, h3, 2, &created), 0);
	CHECK_INT(store_team_by_token(s, h1, team, sizeof team), GWB_ENOTFOUND);
	CHECK_INT(store_team_by_token(s, h3, team, sizeof team), 0);
	CHECK_STR(team, "alpha");
	/* beta takes h1, alpha's old token. */
	CHECK_INT(store_team_by_token(s, h2, team, sizeof team), 0);
	CHECK_INT(store_team_put(s, "beta", 1, 1, h1, 3, &created), 0);
	CHECK_INT(store_team_by_token(s, h2, team, sizeof team), GWB_ENOTFOUND);
	CHECK_INT(store_team_by_token(s, h1, team, sizeof team), 0);
	CHECK_STR(team, "beta");
	/* A refused change forgets too, and changes nothing. */
	CHECK_INT(store_team_put(s, "alpha", 1, 1, h1, 4, &created), GWB_EEXISTS);
	CHECK_INT(store_team_by_token(s, h3, team, sizeof team), 0);
	CHECK_STR(team, "alpha");
	/* Another connection gives beta h2 again: seen within a second. */
	struct store *other = open_store(db);
	t_defer(close_store, other);
	CHECK_INT(store_team_by_token(s, h1, team, sizeof team), 0);
	CHECK_INT(store_team_put(other, "beta", 1, 1, h2, 5, &created), 0);
	int64_t t0 = clock_mono_ms();
	while (store_team_by_token(s, h1, team, sizeof team) == 0 && clock_mono_ms() < t0 + 3000)
		usleep(20 * 1000);
	int64_t took = clock_mono_ms() - t0;
	t_log("the other connection's change was seen after %lld ms", (long long)took);
	CHECK(took <= 1000 + 500); /* the second, and a slow machine's slack */
	CHECK_INT(store_team_by_token(s, h1, team, sizeof team), GWB_ENOTFOUND);
	CHECK_INT(store_team_by_token(s, h2, team, sizeof team), 0);
	CHECK_STR(team, "beta");
}

/* A new seq's low 20 bits are random, from a pool filled 64 words at a time; a forked process
 * refills its own, so a parent and its child never hand out the same random parts. Each draw
 * is a second after the one before, so that none is merely the last one plus one; the store
 * knows its next seq already (read before the fork), so the child runs no SQL. */
static void random_parts(struct store *s, int64_t out[8])
{
	for (int i = 0; i < 8; i++) {
		int64_t seq = 0;
		CHECK_INT(store_task_seq_new(s, 1000 * (i + 2), &seq), 0);
		CHECK_INT(seq >> 20, 1000 * (i + 2));
		out[i] = seq & 0xfffff;
	}
}

TEST(store_task_ids_differ_across_fork)
{
	struct store *s = open_store(h_path("fork.db"));
	t_defer(close_store, s);
	int64_t mine[8], theirs[8], first = 0;
	CHECK_INT(store_batch_begin(s), 0);
	CHECK_INT(store_task_seq_new(s, 1000, &first), 0); /* the pool is filled now */
	store_batch_rollback(s);
	int fds[2];
	CHECK(pipe(fds) == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		random_parts(s, theirs);
		_exit(write(fds[1], theirs, sizeof theirs) == (ssize_t)sizeof theirs ? 0 : 1);
	}
	close(fds[1]);
	random_parts(s, mine);
	CHECK(read(fds[0], theirs, sizeof theirs) == (ssize_t)sizeof theirs);
	close(fds[0]);
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	int same = 0;
	for (int i = 0; i < 8; i++)
		same += mine[i] == theirs[i];
	CHECKF(same < 8, "the child repeated the parent's random parts (%lld...)",
	       (long long)mine[0]);
}
