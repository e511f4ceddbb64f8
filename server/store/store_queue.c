/* Waiting for quota: a team's line is its tasks in state waiting, in seq order (read through
 * tasks_state_team, whose entries are (state, team, seq)). A waiting task holds nothing and
 * has no intent; the transaction that gives quota back (a release, a cancel, a raised quota)
 * admits the line's tasks while they fit, through quota_decide, each one as a submission is
 * admitted: its reservation, its create intent (an outbox row: its seq may be behind the
 * relay's cursor), the move to queued. The cost of a release does not grow with the line:
 * each admission reads the head by the index, and best_effort looks at most QUEUE_LOOKAHEAD
 * tasks past it. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "server/queue_predict.h"
#include "server/quota.h"
#include "server/store/store_internal.h"

/* How far past its head a best_effort line looks for a task that fits. */
#define QUEUE_LOOKAHEAD 32
/* The line replayed at most this far for a prediction: a place beyond gets none. A new
 * waiting task's prediction (recorded, in the submission's transaction) reaches less far. */
#define QUEUE_REPLAY_MAX 20000
#define QUEUE_REPLAY_NEW_MAX 2000
/* The start latency assumed until one is measured. */
#define QUEUE_LATENCY_DEFAULT_MS 1000

static const double waited_bounds[] = { 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 14400 };
static const double error_bounds[] = { 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900 };

static void hists_ready(struct store *s)
{
	if (s->queue.hists_ready)
		return;
	prom_hist_init(&s->queue.waited, waited_bounds,
		       (int)(sizeof waited_bounds / sizeof waited_bounds[0]));
	prom_hist_init(&s->queue.error, error_bounds,
		       (int)(sizeof error_bounds / sizeof error_bounds[0]));
	s->queue.hists_ready = 1;
}

void store_queue_configure(struct store *s, int64_t max_skip_ms)
{
	s->queue.max_skip_ms = max_skip_ms;
}

void store_queue_on_admit(struct store *s, void (*fn)(void *arg, const char *task_id), void *arg)
{
	s->queue.on_admit = fn;
	s->queue.on_admit_arg = arg;
}

void store_queue_note_start(struct store *s, const struct task *t, int64_t now_ms)
{
	int64_t from = t->has_admitted_at ? t->admitted_at : t->created_at;
	int64_t d = now_ms - from;
	if (d < 0 || from <= 0)
		return;
	/* An exponential moving average, an eighth of each new sample. */
	int64_t *avg = &s->queue.start_latency_ms;
	*avg = *avg ? *avg + (d - *avg) / 8 : d;
}

static int64_t start_latency(const struct store *s)
{
	return s->queue.start_latency_ms ? s->queue.start_latency_ms : QUEUE_LATENCY_DEFAULT_MS;
}

/* ---- the team's numbers and settings ---- */

/* The team's quota and reservation now, inside the open transaction: its row plus what the
 * batch's submissions reserved for it and have not written yet (store_tasks.c). */
static int team_now(struct store *s, const char *team, struct team_usage *u)
{
	int rc = store_team_totals(s, team, &u->reserved_mem, &u->reserved_core, &u->quota_mem,
				   &u->quota_core);
	const struct store_team_pend *p = &s->teams.pend;
	if (rc == 0 && s->batch.open && p->read && strcmp(p->team, team) == 0) {
		u->reserved_mem += p->add_mem;
		u->reserved_core += p->add_core;
	}
	return rc;
}

/* The team's settings: *wait (default_on_quota_full is wait), *best_effort. */
static int team_settings(struct store *s, const char *team, int *wait, int *best_effort)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT default_on_quota_full = 'wait', queueing = "
					 "'best_effort' FROM teams WHERE name = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (wait)
			*wait = sqlite3_column_int(st, 0);
		if (best_effort)
			*best_effort = sqlite3_column_int(st, 1);
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}

int store_queue_team_waits(struct store *s, const char *team, int *wait)
{
	*wait = 0;
	return team_settings(s, team, wait, NULL);
}

/* ---- the line ---- */

/* One waiting task as the admission reads it. */
struct line_row {
	int64_t seq, created_at, predicted;
	char id[32], team[64];
	int64_t mem, core, count, res_mem, res_core;
};

/* Up to max of the team's waiting tasks after seq after, in line order, into rows. The count
 * or GWB_EDB. */
static int line_read(struct store *s, const char *team, int64_t after, int max,
		     struct line_row *rows)
{
	sqlite3_stmt *st = store_stmt(
		s, "SELECT seq, id, created_at, gpu_memory_mib, gpu_core_percent, gpu_count, "
		   "reserved_gpu_memory_mib, reserved_gpu_core_percent, predicted_admit_at FROM "
		   "tasks WHERE state = 'waiting' AND team = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	sqlite3_bind_int64(st, 2, after);
	sqlite3_bind_int(st, 3, max);
	int n = 0, rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < max) {
		struct line_row *w = &rows[n++];
		w->seq = sqlite3_column_int64(st, 0);
		store_col_copy(st, 1, w->id, sizeof w->id);
		snprintf(w->team, sizeof w->team, "%s", team);
		w->created_at = sqlite3_column_int64(st, 2);
		w->mem = sqlite3_column_int64(st, 3);
		w->core = sqlite3_column_int64(st, 4);
		w->count = sqlite3_column_int64(st, 5);
		w->res_mem = sqlite3_column_int64(st, 6);
		w->res_core = sqlite3_column_int64(st, 7);
		w->predicted = sqlite3_column_type(st, 8) == SQLITE_NULL
				       ? -1
				       : sqlite3_column_int64(st, 8);
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? n : GWB_EDB;
}

static int fits(struct store *s, const struct line_row *w, int *ok)
{
	struct team_usage u;
	int rc = team_now(s, w->team, &u);
	if (rc)
		return rc;
	struct quota_ask ask = { w->mem, w->core, w->count };
	*ok = quota_decide(&u, &ask).admitted;
	return 0;
}

/* The admitted event's detail: how long w waited, what it now holds, what was predicted. */
static json_t *admitted_detail(const struct line_row *w, int64_t now_ms)
{
	json_t *d = json_pack("{s:I, s:I, s:I}", "waited_ms", (json_int_t)(now_ms - w->created_at),
			      "gpu_memory_mib", (json_int_t)w->res_mem, "gpu_core_percent",
			      (json_int_t)w->res_core);
	char at[40];
	if (w->predicted >= 0)
		json_object_set_new(d, "predicted_admit_at",
				    json_string(clock_fmt_rfc3339_ms(w->predicted, at, sizeof at)));
	return d;
}

/* w's create intent: an outbox row, its id drawn above every seq and outbox id like a
 * cancel's (w's own seq may be behind the relay's cursor). */
static int create_intent(struct store *s, const struct line_row *w, int64_t now_ms)
{
	int64_t intent;
	if (!s->batch.open)
		s->ids.next_seq = 0; /* read again: a transaction of its own */
	int rc = store_intent_id_new(s, &intent);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO outbox (id, task_id, team, kind, attempt, "
					 "created_at) VALUES (?1, ?2, ?3, 'create', 1, ?4)");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, intent);
	store_bind_text(st, 2, w->id);
	store_bind_text(st, 3, w->team);
	sqlite3_bind_int64(st, 4, now_ms);
	return store_step_done(s, st);
}

/* After an admission: its histograms, its log line, who is told. */
static void admitted(struct store *s, const struct line_row *w, int64_t now_ms)
{
	hists_ready(s);
	prom_hist_observe(&s->queue.waited, (double)(now_ms - w->created_at) / 1000.0);
	if (w->predicted >= 0) {
		int64_t e = now_ms - w->predicted;
		prom_hist_observe(&s->queue.error, (double)(e < 0 ? -e : e) / 1000.0);
	}
	log_info("store", "task_admitted", "task=%s team=%s waited_ms=%lld", w->id, log_q(w->team),
		 (long long)(now_ms - w->created_at));
	if (s->queue.on_admit)
		s->queue.on_admit(s->queue.on_admit_arg, w->id);
}

/* The admission of w, as a submission's: the move to queued through the door (event
 * admitted), its time, the team's reservation, its create intent. */
static int admit_one(struct store *s, const struct line_row *w, int64_t now_ms)
{
	struct task *t = gwb_malloc(sizeof *t);
	int rc = store_task_load(s, w->id, t);
	if (rc == 0) {
		json_t *detail = admitted_detail(w, now_ms);
		struct task_move m = { TASK_QUEUED, TASK_REASON_KEEP, TASK_EVENT_ADMITTED, detail };
		rc = store_move_write(s, t, &m, now_ms);
		json_decref(detail);
	}
	gwb_free(t);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "UPDATE tasks SET admitted_at = ?1 WHERE seq = ?2");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, now_ms);
	sqlite3_bind_int64(st, 2, w->seq);
	if ((rc = store_step_done(s, st)) ||
	    (rc = store_team_reserve(s, w->team, w->res_mem, w->res_core, now_ms)) ||
	    (rc = create_intent(s, w, now_ms)))
		return rc;
	admitted(s, w, now_ms);
	return 0;
}

/* The head may be passed (best_effort) while it has waited at most queue.max_skip_seconds. */
static int head_passable(const struct store *s, const struct line_row *head, int64_t now_ms)
{
	return now_ms - head->created_at <= s->queue.max_skip_ms;
}

int store_queue_admit(struct store *s, const char *team, int64_t now_ms)
{
	int best_effort = 0;
	int rc = team_settings(s, team, NULL, &best_effort);
	if (rc)
		return rc == GWB_ENOTFOUND ? 0 : rc;
	struct line_row *rows = gwb_malloc(sizeof *rows * QUEUE_LOOKAHEAD);
	for (;;) {
		int n = line_read(s, team, 0, best_effort ? QUEUE_LOOKAHEAD : 1, rows);
		if (n <= 0) {
			rc = n;
			break;
		}
		int ok = 0;
		if ((rc = fits(s, &rows[0], &ok)))
			break;
		if (ok) {
			if ((rc = admit_one(s, &rows[0], now_ms)))
				break;
			continue; /* the next head */
		}
		/* The head waits; best_effort lets the ones behind it that fit go first, while the
		 * head has not waited too long. */
		if (best_effort && head_passable(s, &rows[0], now_ms))
			for (int i = 1; i < n && !rc; i++)
				if (!(rc = fits(s, &rows[i], &ok)) && ok)
					rc = admit_one(s, &rows[i], now_ms);
		break;
	}
	gwb_free(rows);
	return rc;
}

int store_queue_blocks(struct store *s, const char *team, int64_t now_ms, int *blocks)
{
	*blocks = 0;
	struct line_row head;
	int n = line_read(s, team, 0, 1, &head);
	if (n <= 0)
		return n;
	int best_effort = 0;
	int rc = team_settings(s, team, NULL, &best_effort);
	if (rc)
		return rc;
	*blocks = !best_effort || !head_passable(s, &head, now_ms);
	return 0;
}

int store_queue_cancel(struct store *s, struct task *t, const struct task_move *m,
		       int64_t now_ms)
{
	int rc = store_move_write(s, t, m, now_ms);
	if (rc)
		return rc;
	/* Nothing was held: released at once, so nothing awaits a release. */
	sqlite3_stmt *st = store_stmt(s, "UPDATE tasks SET released = 1, released_at = ?1, "
					 "release_reason = ?2 WHERE seq = ?3");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, now_ms);
	store_bind_text(st, 2, task_proof_name(TASK_PROOF_NEVER_ADMITTED));
	sqlite3_bind_int64(st, 3, t->seq);
	if ((rc = store_step_done(s, st)))
		return rc;
	t->released = 1;
	t->has_released_at = 1;
	t->released_at = now_ms;
	snprintf(t->release_reason, sizeof t->release_reason, "%s",
		 task_proof_name(TASK_PROOF_NEVER_ADMITTED));
	/* The line behind it may move (it may have been the head). */
	return store_queue_admit(s, t->team, now_ms);
}

/* ---- the replay: places and predictions ---- */

/* What the replay reads: the team's holders and its line, their ids kept here. */
struct replay {
	struct qp_holder *h;
	char (*hid)[32];
	int nh, caph;
	struct qp_waiter *w;
	struct store_queue_entry *e;
	char (*wid)[32];
	char (*wname)[160];
	int nw, capw;
};

static void replay_free(struct replay *r)
{
	gwb_free(r->h);
	gwb_free(r->hid);
	gwb_free(r->w);
	gwb_free(r->e);
	gwb_free(r->wid);
	gwb_free(r->wname);
}

/* The team's tasks holding quota: the states that hold it, and the final ones not released,
 * each half through its index; a running one with the time it last became running. */
static int holders_read(struct store *s, const char *team, struct replay *r)
{
#define HOLDER_COLS                                                                           \
	"id, state, reserved_gpu_memory_mib, reserved_gpu_core_percent, duration_seconds, "  \
	"COALESCE(admitted_at, created_at), (SELECT e.ts FROM task_events e WHERE e.task_id = " \
	"tasks.id AND e.to_state = 'running' ORDER BY e.id DESC LIMIT 1)"
	sqlite3_stmt *st = store_stmt(
		s, "SELECT " HOLDER_COLS " FROM tasks WHERE team = ?1 AND state IN (SELECT value "
		   "FROM json_each(?2)) AND released = 0 UNION ALL SELECT " HOLDER_COLS
		   " FROM tasks INDEXED BY tasks_final_unreleased WHERE team = ?1 AND "
		   STORE_SQL_FINAL " AND released = 0");
#undef HOLDER_COLS
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	store_bind_states(st, 2, TASK_HOLDS_QUOTA, TASK_FINAL);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (r->nh == r->caph) {
			r->caph = r->caph ? 2 * r->caph : 16;
			r->h = gwb_realloc(r->h, sizeof *r->h * (size_t)r->caph);
			r->hid = gwb_realloc(r->hid, sizeof *r->hid * (size_t)r->caph);
		}
		struct qp_holder *h = &r->h[r->nh];
		store_col_copy(st, 0, r->hid[r->nh], sizeof r->hid[0]);
		enum task_state state = task_state_parse(store_col_text(st, 1));
		memset(h, 0, sizeof *h);
		h->mem = sqlite3_column_int64(st, 2);
		h->core = sqlite3_column_int64(st, 3);
		h->duration_ms = sqlite3_column_int64(st, 4) * 1000;
		h->admitted_at = sqlite3_column_int64(st, 5);
		h->started = state == TASK_RUNNING && sqlite3_column_type(st, 6) != SQLITE_NULL;
		h->started_at = sqlite3_column_int64(st, 6);
		/* A final task only awaits its release; a cancelled one stops now. */
		h->ended = task_state_is(state, TASK_FINAL) || state == TASK_CANCELLING;
		r->nh++;
	}
	sqlite3_reset(st);
	for (int i = 0; i < r->nh; i++)
		r->h[i].id = r->hid[i];
	return rc == SQLITE_DONE ? 0 : GWB_EDB;
}

/* The team's line from the head, until limit tasks from from_seq on are read (or the line
 * ends, or reach more are read). *first: the index of the page's first. */
static int line_replay_read(struct store *s, const char *team, int64_t from_seq, int limit,
			    int reach, struct replay *r, int *first)
{
	sqlite3_stmt *st = store_stmt(
		s, "SELECT seq, id, name, created_at, reserved_gpu_memory_mib, "
		   "reserved_gpu_core_percent, duration_seconds FROM tasks WHERE state = 'waiting' "
		   "AND team = ?1 ORDER BY seq LIMIT ?2");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	sqlite3_bind_int(st, 2, reach + limit);
	*first = -1;
	int rc = SQLITE_DONE, in_page = 0;
	while (in_page < limit && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (r->nw == r->capw) {
			r->capw = r->capw ? 2 * r->capw : 64;
			r->w = gwb_realloc(r->w, sizeof *r->w * (size_t)r->capw);
			r->e = gwb_realloc(r->e, sizeof *r->e * (size_t)r->capw);
			r->wid = gwb_realloc(r->wid, sizeof *r->wid * (size_t)r->capw);
			r->wname = gwb_realloc(r->wname, sizeof *r->wname * (size_t)r->capw);
		}
		int i = r->nw++;
		struct store_queue_entry *e = &r->e[i];
		memset(e, 0, sizeof *e);
		e->seq = sqlite3_column_int64(st, 0);
		store_col_copy(st, 1, r->wid[i], sizeof r->wid[0]);
		store_col_copy(st, 2, r->wname[i], sizeof r->wname[0]);
		e->created_at = sqlite3_column_int64(st, 3);
		e->gpu_memory_mib = sqlite3_column_int64(st, 4);
		e->gpu_core_percent = sqlite3_column_int64(st, 5);
		e->duration_seconds = sqlite3_column_int64(st, 6);
		e->position = i + 1;
		if (e->seq >= from_seq) {
			if (*first < 0)
				*first = i;
			in_page++;
		}
	}
	if (in_page == limit)
		rc = sqlite3_step(st); /* a row more: a next page */
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : GWB_EDB;
}

/* A task not submitted yet, put at the end of the line (the dry run's). */
struct extra_waiter {
	int64_t mem, core, duration_seconds;
};

/* Appends x to the line read: the page is x alone. */
static void extra_append(struct replay *r, const struct extra_waiter *x, int *first)
{
	if (r->nw == r->capw) {
		r->capw = r->capw ? 2 * r->capw : 64;
		r->w = gwb_realloc(r->w, sizeof *r->w * (size_t)r->capw);
		r->e = gwb_realloc(r->e, sizeof *r->e * (size_t)r->capw);
		r->wid = gwb_realloc(r->wid, sizeof *r->wid * (size_t)r->capw);
		r->wname = gwb_realloc(r->wname, sizeof *r->wname * (size_t)r->capw);
	}
	int i = r->nw++;
	memset(&r->e[i], 0, sizeof r->e[i]);
	snprintf(r->wid[i], sizeof r->wid[0], "(dry run)");
	r->wname[i][0] = '\0';
	r->e[i].seq = INT64_MAX;
	r->e[i].gpu_memory_mib = x->mem;
	r->e[i].gpu_core_percent = x->core;
	r->e[i].duration_seconds = x->duration_seconds;
	r->e[i].position = i + 1;
	*first = i;
}

static int replay_list(struct store *s, const char *team, int64_t from_seq, int limit,
		       int reach, const struct extra_waiter *extra, int64_t now_ms,
		       store_queue_fn fn, void *arg, int64_t *next);

int store_queue_list(struct store *s, const char *team, int64_t from_seq, int limit,
		     int64_t now_ms, store_queue_fn fn, void *arg, int64_t *next)
{
	return replay_list(s, team, from_seq, limit, QUEUE_REPLAY_MAX, NULL, now_ms, fn, arg,
			   next);
}

int store_queue_dry_run(struct store *s, const struct task_req *req, int fits, int64_t now_ms,
			int *waits, store_queue_fn fn, void *arg)
{
	*waits = 0;
	int wait = req->on_quota_full == STORE_ON_FULL_WAIT, rc = 0;
	if (req->on_quota_full == STORE_ON_FULL_DEFAULT &&
	    (rc = store_queue_team_waits(s, req->team, &wait)))
		return rc;
	if (!wait)
		return 0;
	int blocks = !fits;
	if (fits && (rc = store_queue_blocks(s, req->team, now_ms, &blocks)))
		return rc;
	if (!blocks)
		return 0;
	*waits = 1;
	struct extra_waiter x = { req->gpu_memory_mib * req->gpu_count,
				  req->gpu_core_percent * req->gpu_count, req->duration_seconds };
	int64_t next;
	/* The whole line read (as far as the replay reaches), x after it. */
	return replay_list(s, req->team, INT64_MAX, 1, QUEUE_REPLAY_MAX, &x, now_ms, fn, arg,
			   &next);
}

static int replay_list(struct store *s, const char *team, int64_t from_seq, int limit,
		       int reach, const struct extra_waiter *extra, int64_t now_ms,
		       store_queue_fn fn, void *arg, int64_t *next)
{
	*next = 0;
	struct team_usage u;
	int rc = team_now(s, team, &u);
	if (rc)
		return rc;
	struct replay r;
	memset(&r, 0, sizeof r);
	int first = -1, more = 0;
	if ((rc = holders_read(s, team, &r)) ||
	    (more = rc = line_replay_read(s, team, from_seq, limit, reach, &r, &first)) < 0)
		goto out;
	rc = 0;
	if (extra) {
		more = 0;
		if (r.nw >= reach)
			goto out; /* beyond the replay's reach */
		extra_append(&r, extra, &first);
	}
	for (int i = 0; i < r.nw; i++)
		r.w[i] = (struct qp_waiter){ r.wid[i], r.e[i].gpu_memory_mib, r.e[i].gpu_core_percent,
					     r.e[i].duration_seconds * 1000 };
	struct qp_input in = { now_ms,	 u.quota_mem, u.quota_core, start_latency(s),
			       r.h,	 r.nh,	      r.w,	    r.nw };
	struct qp_result *res = gwb_malloc(sizeof *res * (size_t)(r.nw ? r.nw : 1));
	if (queue_predict(&in, res) < 0) {
		gwb_free(res);
		rc = GWB_EDB;
		goto out;
	}
	int64_t ahead_mem = 0, ahead_core = 0;
	for (int i = 0; i < r.nw; i++) {
		struct store_queue_entry *e = &r.e[i];
		e->id = r.wid[i];
		e->name = r.wname[i];
		e->ahead_tasks = i;
		e->ahead_mem = ahead_mem;
		e->ahead_core = ahead_core;
		e->predicted_admit_at = res[i].admit_at;
		e->nbasis = res[i].nbasis;
		for (int k = 0; k < res[i].nbasis && k < 8; k++)
			e->basis[k] = res[i].basis[k];
		ahead_mem += e->gpu_memory_mib;
		ahead_core += e->gpu_core_percent;
		if (first >= 0 && i >= first)
			fn(arg, e);
	}
	gwb_free(res);
	if (more && r.nw > 0)
		*next = r.e[r.nw - 1].seq + 1;
out:
	replay_free(&r);
	return rc;
}

/* Keeps the prediction of the entry the list gives. */
static void predicted_one(void *arg, const struct store_queue_entry *e)
{
	*(int64_t *)arg = e->predicted_admit_at;
}

int store_queue_predict_new(struct store *s, struct task *t, int64_t now_ms)
{
	int64_t at = -1, next;
	int rc = replay_list(s, t->team, t->seq, 1, QUEUE_REPLAY_NEW_MAX, NULL, now_ms,
			     predicted_one, &at, &next);
	if (rc || at < 0)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "UPDATE tasks SET predicted_admit_at = ?1 WHERE seq = ?2");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, at);
	sqlite3_bind_int64(st, 2, t->seq);
	if ((rc = store_step_done(s, st)))
		return rc;
	t->has_predicted_admit_at = 1;
	t->predicted_admit_at = at;
	return 0;
}

/* ---- the team's settings and the metrics ---- */

int store_team_queue_put(struct store *s, const char *team, const char *on_full,
			 const char *queueing, int64_t now_ms)
{
	if ((on_full && strcmp(on_full, "refuse") && strcmp(on_full, "wait")) ||
	    (queueing && strcmp(queueing, "strict") && strcmp(queueing, "best_effort")))
		return GWB_EINVAL;
	int rc = store_begin(s);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "UPDATE teams SET default_on_quota_full = COALESCE(?1, "
					 "default_on_quota_full), queueing = COALESCE(?2, queueing), "
					 "updated_at = ?3 WHERE name = ?4");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	store_bind_text(st, 1, on_full);
	store_bind_text(st, 2, queueing);
	sqlite3_bind_int64(st, 3, now_ms);
	store_bind_text(st, 4, team);
	if ((rc = store_step_done(s, st)))
		goto out;
	if (sqlite3_changes(s->db) == 0) {
		rc = GWB_ENOTFOUND;
		goto out;
	}
	if ((rc = store_queue_admit(s, team, now_ms)))
		goto out;
	return store_commit(s);
out:
	store_rollback(s);
	return rc;
}

int store_team_queue_kick(struct store *s, const char *team, int64_t now_ms)
{
	int rc = store_begin(s);
	if (rc)
		return rc;
	if ((rc = store_queue_admit(s, team, now_ms))) {
		store_rollback(s);
		return rc;
	}
	return store_commit(s);
}

void store_team_queue_json(struct store *s, const char *team, json_t *obj)
{
	sqlite3_stmt *st = store_stmt(
		s, "SELECT default_on_quota_full, queueing, (SELECT count(*) FROM tasks WHERE state "
		   "= 'waiting' AND team = ?1) FROM teams WHERE name = ?1");
	if (!obj || !st)
		return;
	store_bind_text(st, 1, team);
	if (sqlite3_step(st) == SQLITE_ROW) {
		json_object_set_new(obj, "default_on_quota_full",
				    json_string(store_col_text(st, 0)));
		json_object_set_new(obj, "queueing", json_string(store_col_text(st, 1)));
		json_object_set_new(obj, "waiting_tasks", json_integer(sqlite3_column_int64(st, 2)));
	}
	sqlite3_reset(st);
}

int store_queue_waiting_counts(struct store *s, void (*fn)(void *arg, const char *team, int64_t n),
			       void *arg)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT team, count(*) FROM tasks WHERE state = "
					 "'waiting' GROUP BY team ORDER BY team");
	if (!st)
		return GWB_EDB;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		fn(arg, store_col_text(st, 0), sqlite3_column_int64(st, 1));
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : GWB_EDB;
}

void store_queue_metrics_write(struct store *s, struct evbuffer *out)
{
	hists_ready(s);
	prom_hist_write(out, "gwb_queue_wait_seconds",
			"time from a waiting submission to its admission", &s->queue.waited);
	prom_hist_write(out, "gwb_queue_prediction_error_seconds",
			"distance between a waiting task's predicted admission (made when it began "
			"to wait) and its actual one", &s->queue.error);
}
