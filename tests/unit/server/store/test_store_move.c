/* The one door of a task's state (store_task_move, store_move.c) against a real SQLite file: a
 * move the lifecycle refuses writes nothing, a legal one writes the row, its event and the
 * counters, a final state never moves, a decider that saw an older state is refused; and the
 * pure parts the deciders build moves from (task_take, task_flags, the reason, proof and event
 * tables, the SQL list of final states). */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
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

static void close_store(void *arg)
{
	store_close(arg);
}

/* A fresh store with team alpha and one queued task, loaded into t. */
static struct store *one_task(const char *name, struct task *t)
{
	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, h_path(name), 10000, err, sizeof err) == 0, "store_open: %s", err);
	t_defer(close_store, s);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 400, NULL, 1000, &created), 0);
	struct task_req q = { "alpha", "t", 1024, 25, 1, 60, "LS", "normal", NULL, STORE_ON_FULL_DEFAULT };
	struct submit_result r;
	CHECK_INT(store_task_submit(s, &q, NULL, "x", 1000, 1000, &r), 0);
	CHECK_INT(store_task_load(s, r.task_id, t), 0);
	CHECK_INT(t->state, TASK_QUEUED);
	return s;
}

struct events {
	int n;
	char last[256]; /* "type from to detail" of the newest */
};

static void event_one(void *arg, const struct task_event *ev)
{
	struct events *e = arg;
	e->n++;
	snprintf(e->last, sizeof e->last, "%s %s %s %s", ev->type, ev->from ? ev->from : "-",
		 ev->to ? ev->to : "-", ev->detail ? ev->detail : "-");
}

static struct events events_of(struct store *s, const char *id)
{
	struct events e = { 0, "" };
	CHECK_INT(store_task_events(s, id, event_one, &e), 0);
	return e;
}

TEST(task_move_illegal_is_refused_and_writes_nothing)
{
	struct task *t = gwb_malloc(sizeof *t);
	struct store *s = one_task("illegal.db", t);
	int64_t before[TASK_NSTATES], after[TASK_NSTATES];
	store_task_counts(s, before);
	struct events e0 = events_of(s, t->id);
	/* queued -> cancelled skips cancelling and the release. */
	struct task_move m = { TASK_CANCELLED, TASK_REASON_CANCELLED, TASK_EVENT_STATE, NULL };
	TASK_SET_TEXT(t, pod_name, "should-not-be-stored");
	CHECK_INT(store_task_move(s, t, &m, 2000), GWB_ESTATE);
	CHECK_INT(t->state, TASK_QUEUED);
	CHECK_INT(t->loaded_state, TASK_QUEUED);
	store_task_counts(s, after);
	for (int i = 0; i < TASK_NSTATES; i++)
		CHECK_INT(after[i], before[i]);
	CHECK_INT(store_task_transitions(s, TASK_QUEUED, TASK_CANCELLED), 0);
	struct events e1 = events_of(s, t->id);
	CHECK_INT(e1.n, e0.n);
	char id[32];
	snprintf(id, sizeof id, "%s", t->id);
	CHECK_INT(store_task_load(s, id, t), 0);
	CHECK_INT(t->state, TASK_QUEUED);
	CHECK_STR(t->reason, "");
	CHECK_STR(t->pod_name, "");
	CHECK_INT(t->updated_at, 1000);
	gwb_free(t);
}

TEST(task_move_legal_writes_row_event_and_counters)
{
	struct task *t = gwb_malloc(sizeof *t);
	struct store *s = one_task("legal.db", t);
	int64_t before[TASK_NSTATES], after[TASK_NSTATES];
	store_task_counts(s, before);
	json_t *d = json_pack("{s:s}", "intent", "create");
	struct task_move m;
	CHECK_INT(task_take(t, TASK_EVENT_STATE, d, &m), 1);
	CHECK_INT(m.to, TASK_CREATING);
	CHECK_INT(store_task_move(s, t, &m, 2000), 0);
	json_decref(d);
	CHECK_INT(t->state, TASK_CREATING);
	CHECK_INT(t->loaded_state, TASK_CREATING);
	CHECK_INT(t->changed, 0);
	store_task_counts(s, after);
	CHECK_INT(after[TASK_QUEUED], before[TASK_QUEUED] - 1);
	CHECK_INT(after[TASK_CREATING], before[TASK_CREATING] + 1);
	CHECK_INT(store_task_transitions(s, TASK_QUEUED, TASK_CREATING), 1);
	struct events e = events_of(s, t->id);
	CHECK_STR(e.last, "state queued creating {\"intent\":\"create\"}");
	/* The move's reason and the decider's observed fields are written with the state. */
	struct task_move f = { TASK_UNKNOWN, TASK_REASON_CREATE_UNKNOWN, TASK_EVENT_STATE, NULL };
	TASK_SET_TEXT(t, pod_node, "node-1");
	CHECK_INT(store_task_move(s, t, &f, 3000), 0);
	char id[32];
	snprintf(id, sizeof id, "%s", t->id);
	task_clear(t);
	CHECK_INT(store_task_load(s, id, t), 0);
	CHECK_INT(t->state, TASK_UNKNOWN);
	CHECK_STR(t->reason, "create_outcome_unknown");
	CHECK_STR(t->pod_node, "node-1");
	CHECK_INT(t->updated_at, 3000);
	/* A move that stays writes the fields, with neither an event nor a count. */
	struct events e1 = events_of(s, id);
	struct task_move stay = task_stay(t);
	TASK_SET_TEXT(t, pod_phase, "Pending");
	CHECK_INT(store_task_move(s, t, &stay, 4000), 0);
	CHECK_INT(events_of(s, id).n, e1.n);
	store_task_counts(s, before);
	CHECK_INT(before[TASK_UNKNOWN], after[TASK_UNKNOWN] + 1);
	CHECK_INT(store_task_load(s, id, t), 0);
	CHECK_STR(t->pod_phase, "Pending");
	/* The cancel enters cancelling through the door: its time and its event. */
	enum task_state st;
	int changed;
	CHECK_INT(store_task_cancel(s, id, 5000, &st, &changed), 0);
	CHECK_INT(changed, 1);
	CHECK_INT(store_task_load(s, id, t), 0);
	CHECK_INT(t->state, TASK_CANCELLING);
	CHECK(t->has_cancel_requested_at && t->cancel_requested_at == 5000);
	CHECK_STR(events_of(s, id).last, "cancel_requested unknown cancelling -");
	gwb_free(t);
}

TEST(task_move_from_a_final_state_never_happens)
{
	struct task *t = gwb_malloc(sizeof *t);
	struct store *s = one_task("final.db", t);
	struct task_move m = { TASK_FAILED, TASK_REASON_JOB_REJECTED, TASK_EVENT_STATE, NULL };
	CHECK_INT(store_task_move(s, t, &m, 2000), 0);
	CHECK_INT(t->state, TASK_FAILED);
	int64_t before[TASK_NSTATES], after[TASK_NSTATES];
	store_task_counts(s, before);
	int n = events_of(s, t->id).n;
	for (int to = 0; to < TASK_NSTATES; to++) {
		if (to == TASK_FAILED)
			continue;
		struct task_move x = { (enum task_state)to, TASK_REASON_KEEP, TASK_EVENT_STATE, NULL };
		CHECKF(store_task_move(s, t, &x, 3000) == GWB_ESTATE, "failed -> %s",
		       task_state_name((enum task_state)to));
		CHECK_INT(t->state, TASK_FAILED);
	}
	enum task_state st;
	int changed;
	CHECK_INT(store_task_cancel(s, t->id, 3000, &st, &changed), 0);
	CHECK_INT(changed, 0);
	CHECK_INT(st, TASK_FAILED);
	struct task_move take;
	CHECK_INT(task_take(t, TASK_EVENT_STATE, NULL, &take), 0);
	store_task_counts(s, after);
	for (int i = 0; i < TASK_NSTATES; i++)
		CHECK_INT(after[i], before[i]);
	CHECK_INT(events_of(s, t->id).n, n);
	char id[32];
	snprintf(id, sizeof id, "%s", t->id);
	CHECK_INT(store_task_load(s, id, t), 0);
	CHECK_INT(t->state, TASK_FAILED);
	CHECK_STR(t->reason, "job_rejected");
	gwb_free(t);
}

TEST(task_move_of_a_decider_that_saw_an_older_state_is_refused)
{
	struct task *t = gwb_malloc(sizeof *t), *old = gwb_malloc(sizeof *old);
	struct store *s = one_task("stale.db", t);
	memcpy(old, t, sizeof *old);
	struct task_move m;
	CHECK_INT(task_take(t, TASK_EVENT_STATE, NULL, &m), 1);
	CHECK_INT(store_task_move(s, t, &m, 2000), 0);
	int n = events_of(s, t->id).n;
	struct task_move c = { TASK_CANCELLING, TASK_REASON_KEEP, TASK_EVENT_CANCEL, NULL };
	CHECK_INT(store_task_move(s, old, &c, 3000), GWB_ECONFLICT);
	CHECK_INT(old->state, TASK_QUEUED);
	CHECK_INT(events_of(s, t->id).n, n);
	CHECK_INT(store_task_load(s, t->id, old), 0);
	CHECK_INT(old->state, TASK_CREATING);
	gwb_free(old);
	gwb_free(t);
}

TEST(task_move_tables_and_the_release)
{
	/* The texts are stored and shown: they stay as they were. */
	CHECK_STR(task_reason_name(TASK_REASON_CLUSTER_WAIT),
		  "cluster_replaced_waiting_for_pod_deadline");
	CHECK_STR(task_reason_name(TASK_REASON_POD_TERMINATING), "waiting_for_pod_to_stop");
	CHECK_STR(task_reason_name(TASK_REASON_NONE), "");
	CHECK(task_reason_name(TASK_REASON_KEEP) == NULL);
	CHECK(task_reason_is("job_deleted", TASK_REASON_JOB_DELETED));
	CHECK(!task_reason_is(NULL, TASK_REASON_JOB_DELETED));
	CHECK_STR(task_proof_name(TASK_PROOF_POD_DEADLINE_PASSED), "pod_deadline_passed");
	CHECK_STR(task_event_name(TASK_EVENT_INTENT), "intent_received");
	/* Migration 11's index condition, built from the table. */
	CHECK_STR(STORE_SQL_FINAL,
		  "(state = 'succeeded' OR state = 'failed' OR state = 'cancelled')");
	/* A final task is looked after and holds its quota until its release, then neither; a
	 * waiting one never is, nor holds anything. */
	for (int i = 0; i < TASK_NSTATES; i++) {
		enum task_state s = (enum task_state)i;
		int final = task_state_is(s, TASK_FINAL), waiting = s == TASK_WAITING;
		CHECK_INT(task_state_is(s, TASK_AWAITS_RELEASE), final);
		CHECK_INT(!!(task_flags(s, 0) & TASK_ACTIVE), !waiting);
		CHECK_INT(!!(task_flags(s, 0) & TASK_HOLDS_QUOTA), !waiting);
		CHECK_INT(!!(task_flags(s, 1) & TASK_ACTIVE), !final && !waiting);
		CHECK_INT(!!(task_flags(s, 1) & TASK_HOLDS_QUOTA), !final && !waiting);
	}
	CHECK_INT(task_flags(TASK_NONE, 0), 0);
	/* The routes to creating and to cancelling, from the states the table allows. */
	static struct task t; /* some 12 KB */
	task_clear(&t);
	for (int i = 0; i < TASK_NSTATES; i++) {
		t.state = (enum task_state)i;
		struct task_move m = { TASK_NONE, TASK_REASON_NONE, TASK_EVENT_STATE, NULL };
		CHECK_INT(task_take(&t, TASK_EVENT_INTENT, NULL, &m), i == TASK_QUEUED);
		if (i == TASK_QUEUED)
			CHECK(m.to == TASK_CREATING && m.event == TASK_EVENT_INTENT &&
			      m.reason == TASK_REASON_KEEP);
		else
			CHECK_INT(m.to, TASK_NONE);
		int cancellable = task_state_is(t.state, TASK_CANCELLABLE);
		CHECK_INT(task_cancel(&t, &m), cancellable);
		if (cancellable)
			CHECK(m.to == (i == TASK_WAITING ? TASK_CANCELLED : TASK_CANCELLING) &&
			      m.event == TASK_EVENT_CANCEL && task_transition_ok(t.state, m.to));
	}
}
