/* The store's intent side: what the relay publishes (the new tasks above the intent cursor,
 * each its own create intent, and the outbox rows: every cancel, and the creates written
 * before migration 15), the record of each intent's outcome (written once, in the transaction
 * that acts on it), and the durable cancel request. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "queue/codec.h"
#include "server/store/store_internal.h"

/* The first outbox row at or after from that is not published, or the next id when there is
 * none (every row with a smaller one is published, and a new row gets the largest id plus
 * one: outbox rows are never deleted). With from = 0, a scan of the whole outbox. */
static int low_from(struct store *s, int64_t from, int64_t *low)
{
	sqlite3_stmt *st = store_stmt(
		s, "SELECT COALESCE((SELECT MIN(id) FROM outbox WHERE id >= ?1 AND published_at IS "
		   "NULL), (SELECT COALESCE(MAX(id), 0) + 1 FROM outbox))");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, from);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*low = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : GWB_EDB;
}

int store_outbox_low_find(struct store *s)
{
	int rc = low_from(s, 0, &s->outbox.low);
	if (rc)
		return rc;
	if ((rc = store_one_int(store_stmt(s, "SELECT create_seq FROM intent_cursor"),
				&s->outbox.ic_cursor)))
		return rc;
	int64_t outbox = 0, creates = 0;
	sqlite3_stmt *st = store_stmt(s, "SELECT count(*) FROM outbox WHERE id >= ? AND "
					 "published_at IS NULL");
	if (st)
		sqlite3_bind_int64(st, 1, s->outbox.low);
	if ((rc = store_one_int(st, &outbox)))
		return rc;
	st = store_stmt(s, "SELECT count(*) FROM tasks WHERE seq > ? AND " STORE_SQL_OWN_CREATE(""));
	if (st)
		sqlite3_bind_int64(st, 1, s->outbox.ic_cursor);
	if ((rc = store_one_int(st, &creates)))
		return rc;
	s->counters.unpub = outbox + creates;
	s->counters.unpub_pend = s->counters.unpub_sp = 0;
	s->outbox.ic_nfetched = 0;
	return 0;
}

/* Both reads give an intent's columns in this order: its id, kind, task, team, attempt and
 * time, then the task's parameters it carries. */
#define INTENT_TASK_COLS                                                                      \
	"t.job_name, t.name, t.gpu_memory_mib, t.gpu_core_percent, t.gpu_count, "            \
	"t.duration_seconds, t.qos, t.experiment"

/* Steps st, a read of that shape, into out: up to max intents, each create's id also noted in
 * ic_fetched when creates is set. The count, or GWB_EDB; st is reset. */
static int intents_read(struct store *s, sqlite3_stmt *st, struct q_intent *out, int max,
			int creates)
{
	int n = 0, rc = SQLITE_DONE;
	while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct q_intent *in = &out[n++];
		memset(in, 0, sizeof *in);
		in->version = Q_INTENT_VERSION;
		in->id = sqlite3_column_int64(st, 0);
		store_col_copy(st, 1, in->kind, sizeof in->kind);
		store_col_copy(st, 2, in->task, sizeof in->task);
		store_col_copy(st, 3, in->team, sizeof in->team);
		in->attempt = sqlite3_column_int64(st, 4);
		in->created_at = sqlite3_column_int64(st, 5);
		store_col_copy(st, 6, in->job, sizeof in->job);
		store_col_copy(st, 7, in->name, sizeof in->name);
		in->gpu_memory_mib = sqlite3_column_int64(st, 8);
		in->gpu_core_percent = sqlite3_column_int64(st, 9);
		in->gpu_count = sqlite3_column_int64(st, 10);
		in->duration_seconds = sqlite3_column_int64(st, 11);
		store_col_copy(st, 12, in->qos, sizeof in->qos);
		store_col_copy(st, 13, in->experiment, sizeof in->experiment);
		if (creates)
			s->outbox.ic_fetched[s->outbox.ic_nfetched++] = in->id;
	}
	sqlite3_reset(st);
	return n < max && rc != SQLITE_DONE ? GWB_EDB : n;
}

/* The new tasks above the cursor whose commits are durable, up to max, as create intents
 * (their seq the id); each one's seq noted in ic_fetched. A task that waited for quota is
 * none: its admission wrote its create intent to the outbox. The count, or GWB_EDB. */
static int creates_read(struct store *s, struct q_intent *out, int max)
{
	s->outbox.ic_nfetched = 0;
	if (max <= 0)
		return 0;
	sqlite3_stmt *st = store_stmt(
		s, "SELECT t.seq, 'create', t.id, t.team, 1, t.created_at, " INTENT_TASK_COLS
		   " FROM tasks t WHERE t.seq > ? AND t.seq < ? AND " STORE_SQL_OWN_CREATE("t.")
		   " ORDER BY t.seq LIMIT ?");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, s->outbox.ic_cursor);
	sqlite3_bind_int64(st, 2, store_create_gate(s));
	sqlite3_bind_int(st, 3, max);
	if (s->outbox.ic_cap < max) {
		s->outbox.ic_fetched =
		    gwb_realloc(s->outbox.ic_fetched, sizeof *s->outbox.ic_fetched * (size_t)max);
		s->outbox.ic_cap = max;
	}
	int n = intents_read(s, st, out, max, 1);
	if (n < 0)
		s->outbox.ic_nfetched = 0;
	return n;
}

int store_outbox_unpublished(struct store *s, struct q_intent *out, int max)
{
	/* The outbox rows first (cancels are few, and never wait behind a backlog of creates),
	 * then the new tasks. From the first unpublished row on, by id (its primary key): the
	 * rows the relay has not published, and after a partial failure the few it published
	 * past one it could not, which the condition skips. */
	sqlite3_stmt *st = store_stmt(
		s, "SELECT o.id, o.kind, o.task_id, o.team, o.attempt, o.created_at, "
		   INTENT_TASK_COLS " FROM outbox o JOIN tasks t ON "
		   STORE_SQL_TASK_IS("t.", "o.task_id") " WHERE o.id >= ? AND o.id < ? AND "
		   "o.published_at IS NULL ORDER BY o.id LIMIT ?");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, s->outbox.low);
	/* Rows of commits not yet durable wait (server/store/store_sync.c). */
	sqlite3_bind_int64(st, 2, store_outbox_gate(s));
	sqlite3_bind_int(st, 3, max);
	int n = intents_read(s, st, out, max, 0);
	if (n < 0)
		return n;
	int c = creates_read(s, out + n, max - n);
	return c < 0 ? c : n + c;
}

/* Whether id is one of the creates the last read handed out (ic_fetched is in seq order). */
static int fetched_create(const struct store *s, int64_t id)
{
	int lo = 0, hi = s->outbox.ic_nfetched;
	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;
		if (s->outbox.ic_fetched[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->outbox.ic_nfetched && s->outbox.ic_fetched[lo] == id;
}

/* How many of the last read's creates, from the first on, are among ids (the relay's
 * published ones, in the order it was given them: its creates in seq order): the cursor moves
 * over those. A create published past one that was not is published again with it, and the
 * consumer knows it by its id. */
static int creates_done(const struct store *s, const int64_t *ids, int n)
{
	int k = 0;
	for (int i = 0; i < n && k < s->outbox.ic_nfetched; i++) {
		if (ids[i] == s->outbox.ic_fetched[k])
			k++;
		else if (fetched_create(s, ids[i]))
			break; /* ic_fetched[k] was not published */
	}
	return k;
}

int store_outbox_published(struct store *s, const int64_t *ids, const char (*stream_ids)[48],
			   int n, int64_t now_ms)
{
	int rc = store_begin(s);
	if (rc)
		return rc;
	int done = creates_done(s, ids, n);
	if (done) {
		sqlite3_stmt *st = store_stmt(s, "UPDATE intent_cursor SET create_seq = ?");
		if (!st) {
			store_rollback(s);
			return GWB_EDB;
		}
		sqlite3_bind_int64(st, 1, s->outbox.ic_fetched[done - 1]);
		if ((rc = store_step_done(s, st))) {
			store_rollback(s);
			return rc;
		}
		s->counters.unpub_pend -= done;
	}
	for (int i = 0; i < n; i++) {
		if (fetched_create(s, ids[i]))
			continue; /* a new task's create: the cursor's */
		sqlite3_stmt *st = store_stmt(s, "UPDATE outbox SET published_at = ?, stream_id = ? "
						 "WHERE id = ? AND published_at IS NULL");
		if (!st) {
			rc = GWB_EDB;
			break;
		}
		sqlite3_bind_int64(st, 1, now_ms);
		store_bind_text(st, 2, stream_ids[i]);
		sqlite3_bind_int64(st, 3, ids[i]);
		if ((rc = store_step_done(s, st)))
			break;
		/* 0 when it was published already */
		s->counters.unpub_pend -= sqlite3_changes(s->db);
	}
	if (rc) {
		store_rollback(s);
		return rc;
	}
	if ((rc = store_commit(s)))
		return rc;
	if (done) {
		s->outbox.ic_cursor = s->outbox.ic_fetched[done - 1];
		s->outbox.ic_nfetched -= done;
		memmove(s->outbox.ic_fetched, s->outbox.ic_fetched + done,
			sizeof *s->outbox.ic_fetched * (size_t)s->outbox.ic_nfetched);
	}
	/* Committed: the first unpublished row moves on past those published. Read from the
	 * file after the commit, so a row is never passed over that is not published there. A
	 * failed read leaves it where it was, which only makes the next reads longer. */
	int64_t low;
	if (low_from(s, s->outbox.low, &low) == 0)
		s->outbox.low = low;
	return 0;
}

int store_outbox_unpublished_count(struct store *s, int64_t *n)
{
	/* From memory: /metrics and /readyz would otherwise count, on the loop, every intent a
	 * long Redis outage left unpublished. */
	*n = s->counters.unpub;
	return 0;
}

/* ---- the insert watcher ---- */

/* The connection's update hook (installed at open): notes the outbox rows and the new tasks
 * (each a create intent) the open transaction writes, for the durability gate, and tells the
 * watcher; and that the teams table was written, for a batch's team totals (store_tasks.c). */
static void on_update(void *arg, int op, const char *dbname, const char *table, sqlite3_int64 row)
{
	(void)dbname;
	struct store *s = arg;
	if (strcmp(table, "teams") == 0) {
		s->teams.pend.stale = 1; /* a batch's team row is read again (store_tasks.c) */
		return;
	}
	if (op != SQLITE_INSERT)
		return;
	if (strcmp(table, "tasks") == 0)
		s->gate.tk_txn_min = store_min_id(s->gate.tk_txn_min, row);
	else if (strcmp(table, "outbox") == 0)
		s->gate.ob_txn_min = store_min_id(s->gate.ob_txn_min, row);
	else
		return;
	s->counters.unpub_pend++; /* a new intent is not published */
	if (s->outbox.fn)
		s->outbox.fn(s->outbox.arg);
}

void store_outbox_hook(struct store *s)
{
	sqlite3_update_hook(s->db, on_update, s);
}

void store_outbox_watch(struct store *s, store_outbox_fn fn, void *arg)
{
	s->outbox.fn = fn;
	s->outbox.arg = arg;
}

/* ---- intent outcomes ---- */

int store_intent_outcome_exists(struct store *s, int64_t intent_id)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT 1 FROM intent_outcomes WHERE intent_id = ?");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, intent_id);
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : GWB_EDB;
}

/* Inserts the outcome row. 1 when inserted, 0 when the intent already had one, or an error. */
static int outcome_insert(struct store *s, const struct intent_rx *rx, const char *outcome,
			  int64_t now_ms)
{
	sqlite3_stmt *st = store_stmt(
		s, "INSERT OR IGNORE INTO intent_outcomes (intent_id, task_id, kind, stream_id, "
		   "consumer, deliveries, outcome, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, rx->intent_id);
	store_bind_text(st, 2, rx->task);
	store_bind_text(st, 3, rx->kind);
	store_bind_text(st, 4, rx->stream_id);
	store_bind_text(st, 5, rx->consumer);
	sqlite3_bind_int64(st, 6, rx->deliveries);
	store_bind_text(st, 7, outcome);
	sqlite3_bind_int64(st, 8, now_ms);
	int rc = store_step_done(s, st);
	if (rc)
		return rc;
	return sqlite3_changes(s->db) > 0;
}

int store_intent_outcome_add(struct store *s, const struct intent_rx *rx, const char *outcome,
			     int64_t now_ms)
{
	int rc = outcome_insert(s, rx, outcome, now_ms);
	return rc < 0 ? rc : 0;
}

int store_intent_failure_add(struct store *s, const struct intent_rx *rx, const char *error,
			     int64_t now_ms, int64_t *failures)
{
	/* One statement: atomic on its own, so no transaction of ours is needed around it. */
	sqlite3_stmt *st = store_stmt(
		s, "INSERT INTO intent_failures (intent_id, task_id, failures, last_error, "
		   "updated_at) VALUES (?1, ?2, 1, ?3, ?4) ON CONFLICT (intent_id) DO UPDATE SET "
		   "failures = failures + 1, last_error = ?3, updated_at = ?4 RETURNING failures");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, rx->intent_id);
	store_bind_text(st, 2, rx->task);
	store_bind_text(st, 3, error);
	sqlite3_bind_int64(st, 4, now_ms);
	int rc = sqlite3_step(st);
	int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return rc == SQLITE_BUSY ? GWB_EBUSY : GWB_EDB;
	*failures = n;
	return 0;
}

/* One intent inside the caller's transaction, t the room for its task's row. Returns 0
 * (recorded), 1 (already recorded), GWB_ENOTFOUND, or a database error. */
static int receive_one(struct store *s, const struct intent_rx *rx, struct task *t,
		       int64_t now_ms)
{
	int rc = store_task_load(s, rx->task, t);
	if (rc)
		return rc;
	rc = outcome_insert(s, rx, "received", now_ms);
	if (rc <= 0)
		return rc < 0 ? rc : 1;
	/* The intent's id as text: a create's is its task's seq, up to 2^60, past what a
	 * JavaScript number (the page's) holds exactly, 2^53. */
	char intent[24];
	snprintf(intent, sizeof intent, "%lld", (long long)rx->intent_id);
	json_t *detail = json_pack("{s:s, s:s, s:s?, s:s?, s:I}", "intent", intent, "kind",
				   rx->kind, "stream_id", rx->stream_id, "consumer", rx->consumer,
				   "deliveries", (json_int_t)rx->deliveries);
	/* A create intent moves a queued task on, its event the move's; anything else (a
	 * cancel, a task cancelled before its create intent arrived) only leaves its trace. */
	struct task_move m;
	if (strcmp(rx->kind, "create") == 0 && task_take(t, TASK_EVENT_INTENT, detail, &m))
		rc = store_move_write(s, t, &m, now_ms);
	else
		rc = store_event_add(s, rx->task, now_ms, task_event_name(TASK_EVENT_INTENT), NULL,
				     NULL, detail);
	json_decref(detail);
	return rc;
}

int store_intents_receive(struct store *s, const struct intent_rx *rx, int n, int64_t now_ms,
			  int *results)
{
	int rc = store_begin(s);
	if (rc)
		return rc;
	struct task *t = gwb_malloc(sizeof *t);
	for (int i = 0; i < n; i++) {
		results[i] = receive_one(s, &rx[i], t, now_ms);
		if (results[i] < 0 && results[i] != GWB_ENOTFOUND) {
			rc = results[i];
			store_rollback(s);
			gwb_free(t);
			return rc;
		}
	}
	gwb_free(t);
	return store_commit(s);
}

/* ---- cancel ---- */

/* The cancel's writes for t, read in the open transaction: its outbox row (the cancel
 * intent), then its move m through the door. */
static int cancel_writes(struct store *s, struct task *t, const struct task_move *m,
			 int64_t now_ms)
{
	/* Its id drawn above every task seq and outbox id: no create intent has it. */
	int64_t intent;
	if (!s->batch.open)
		s->ids.next_seq = 0; /* read again: a transaction of its own */
	int rc = store_intent_id_new(s, &intent);
	if (rc)
		return rc;
	/* The attempt counts the cancels before this one: the row goes in before the move's
	 * cancel_requested event. */
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO outbox (id, task_id, team, kind, attempt, "
					 "created_at) SELECT ?3, id, team, 'cancel', 1 + "
					 STORE_SQL_CANCELS_BEFORE ", ?2 FROM tasks WHERE "
					 STORE_SQL_TASK_IS("", "?1"));
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, t->id);
	sqlite3_bind_int64(st, 2, now_ms);
	sqlite3_bind_int64(st, 3, intent);
	if ((rc = store_step_done(s, st)))
		return rc;
	return store_move_write(s, t, m, now_ms);
}

int store_task_cancel(struct store *s, const char *id, int64_t now_ms, enum task_state *state,
		      int *changed)
{
	*changed = 0;
	int rc = store_unit_begin(s);
	if (rc)
		return rc;
	struct task *t = gwb_malloc(sizeof *t);
	if ((rc = store_task_load(s, id, t)))
		goto out;
	*state = t->state;
	struct task_move m;
	if (!task_cancel(t, &m)) {
		rc = 0;
		goto out; /* nothing to write: the read-only unit is closed with nothing in it */
	}
	/* A waiting task has no Job and no intent: cancelled at once, with no cancel intent. */
	rc = t->state == TASK_WAITING ? store_queue_cancel(s, t, &m, now_ms)
				      : cancel_writes(s, t, &m, now_ms);
	if (rc)
		goto out;
	*changed = 1;
out:
	gwb_free(t);
	rc = store_unit_end(s, rc);
	if (rc) {
		*changed = 0;
		return rc;
	}
	if (*changed)
		*state = *state == TASK_WAITING ? TASK_CANCELLED : TASK_CANCELLING;
	return 0;
}
