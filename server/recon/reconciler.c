/* The reconciler's core: intents and informer events mark tasks dirty; at the loop's safe
 * point each dirty task is decided from its SQLite row and the cluster picture. It owns the
 * dirty set, the safe point, the housekeeping tick and the public API; the parts live beside
 * it: the picture (recon_picture.c), the decisions (recon_decide.c), the per-task operations
 * (recon_ops.c) and the scheduler's events (recon_sched.c). */
#include "server/recon/reconciler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/kobj.h"
#include "lib/log.h"
#include "lib/strmap.h"
#include "server/queue_predict.h"
#include "server/recon/diagnose.h"
#include "server/recon/jobspec.h"
#include "server/kube/kube.h"
#include "server/kube/kubeconfig.h"
#include "server/recon/predict.h"
#include "server/recon/recon_decide.h"
#include "server/recon/recon_ops.h"
#include "server/recon/recon_picture.h"
#include "server/recon/recon_sched.h"
#include "server/store/store_recon.h"

struct reconciler {
	struct reconciler_ctx c;
	struct kube *kube;
	struct picture *pic;
	struct recon_sched *sched;
	struct recon_ops *ops;
	json_t *dirty; /* task id -> true */
	json_t *notes; /* informers' task events waiting for the safe point: [id, type, detail] */
	struct take *takes, **takes_tail; /* the intents since the last safe point */
	/* Queued tasks whose create intent came but whose move to creating was not stored (the
	 * store refused the write, or the safe point's commit failed): the move is retried at
	 * their next pass, not after the queued grace (task id -> true). */
	json_t *intent_retry;
	struct event *safe_point;
	int tick_pass; /* the next safe point is the housekeeping tick's (see store_refusing) */
	int64_t last_resync_ms;
	int64_t last_token_ms;
	int64_t intents_lost_at; /* wall ms: intents published before it will not come (0: none) */
	char ns[64];
};

/* An intent, handled at the safe point: its task read once there, a create intent's move to
 * creating written inside the safe point's transaction (one fsync for the turn's intents, not
 * one each); the intent waits for its outcome from then on. */
struct take {
	char id[sizeof ((struct task *)0)->id];
	int create; /* a create intent (otherwise a cancel's) */
	reconciler_done_fn done;
	void *arg;
	struct take *next;
};

/* ---- the dirty set ---- */

static void mark_dirty(struct reconciler *r, const char *id)
{
	if (!id)
		return;
	json_object_set_new(r->dirty, id, json_true());
	event_active(r->safe_point, EV_TIMEOUT, 0);
}

static void mark_active(struct reconciler *r)
{
	json_t *ids = NULL;
	if (store_tasks_active(r->c.store, &ids))
		return;
	size_t i;
	json_t *id;
	json_array_foreach(ids, i, id)
		json_object_set_new(r->dirty, json_string_value(id), json_true());
	json_decref(ids);
	event_active(r->safe_point, EV_TIMEOUT, 0);
}

/* 1 while the store refuses writes (a full disk, a read-only or failing filesystem). Then a
 * write that failed is retried at the housekeeping tick's pace, not at once: at once would be
 * a spin of failing transactions, and an operation's answer (a Pod list proving a release
 * the store cannot record) would start the next request as fast as the API server answers.
 * The failed writes are not lost: their tasks stay dirty and are decided again from SQLite. */
static int store_refusing(const struct reconciler *r)
{
	struct store_fault f;
	store_fault_get(r->c.store, &f);
	return f.kind != STORE_FAULT_NONE;
}

/* Decides task id again: at once, or at the next tick while the store refuses writes. */
static void retry_task(struct reconciler *r, const char *id)
{
	if (store_refusing(r))
		json_object_set_new(r->dirty, id, json_true()); /* on_cron wakes the safe point */
	else
		mark_dirty(r, id);
}

/* An informer's event for a task's history waits for the safe point, where the events of one
 * loop turn are written in one transaction (one fsync) rather than one each. */
static void note(struct reconciler *r, const char *id, const char *type, json_t *detail)
{
	json_array_append_new(r->notes, json_pack("[s, s, o?, I]", id, type, detail,
						  (json_int_t)clock_now_ms()));
	event_active(r->safe_point, EV_TIMEOUT, 0);
}

static void notes_write(struct reconciler *r, json_t *notes)
{
	size_t i;
	json_t *n;
	json_array_foreach(notes, i, n) {
		const char *id = json_string_value(json_array_get(n, 0));
		const char *type = json_string_value(json_array_get(n, 1));
		json_t *detail = json_array_get(n, 2);
		if (store_task_note(r->c.store, id, type, json_is_null(detail) ? NULL : detail,
				    json_integer_value(json_array_get(n, 3))))
			log_error("recon", "note_failed", "task=%s type=%s", id, type);
	}
}

/* ---- what the parts tell the core ---- */

static void on_dirty(void *arg, const char *id)
{
	mark_dirty(arg, id);
}

static void on_dirty_all(void *arg)
{
	mark_active(arg);
}

static void on_note(void *arg, const char *id, const char *type, json_t *detail)
{
	note(arg, id, type, detail);
}

static void on_sched_note(void *arg, const char *id, const char *type, json_t *detail)
{
	note(arg, id, type, detail);
	mark_dirty(arg, id);
}

static const struct picture_ops picture_ops = { on_dirty, on_dirty_all, on_note };

/* ---- one task's pass ---- */

/* The pending diagnosis of a pending task, from the card picture and the team's totals. */
static int64_t due_ms(struct reconciler *r, const char *id);

/* When q could bind (RFC 3339 into the diagnosis d as predicted_bind_at): the healthy cards'
 * holders end when due (due_ms; a holder whose end is not known never frees), replayed per
 * card (server/queue_predict.c). Scheduling and start take no time. Replayed from time 0, not
 * now, so that the diagnosis does not change with every pass: a moment in the past says the
 * tasks it waits for are overdue; null, that it fits now or that no end is known. */
static void bind_predict(struct reconciler *r, const struct diag_cards *cards,
			 const struct diag_req *q, json_t *d)
{
	int64_t now = 0;
	struct qp_card *qc = gwb_calloc((size_t)(cards->n ? cards->n : 1), sizeof *qc);
	struct qp_holder *h = gwb_calloc((size_t)(cards->n ? cards->n : 1) * DIAG_MAX_HOLDERS,
					 sizeof *h);
	int n = 0;
	for (int i = 0; i < cards->n; i++) {
		const struct diag_card *c = &cards->c[i];
		if (!c->healthy)
			continue;
		struct qp_holder *ch = h + (size_t)n * DIAG_MAX_HOLDERS;
		int nh = 0;
		for (int k = 0; k < c->nholders; k++) {
			if (strcmp(c->holders[k].task, q->task) == 0)
				continue; /* its own allocation */
			int64_t due = c->holders[k].task[0] ? due_ms(r, c->holders[k].task) : 0;
			ch[nh++] = (struct qp_holder){ c->holders[k].task, c->holders[k].mem_mib,
						       c->holders[k].core, due ? 0 : -1, 1, 0,
						       due, 0 };
		}
		qc[n++] = (struct qp_card){ c->mem_total_mib, c->core_total, ch, nh };
	}
	int64_t at = queue_predict_bind(qc, n, q->mem_mib, q->core, q->count, now);
	char ts[40];
	json_object_set_new(d, "predicted_bind_at",
			    at > 0 ? json_string(clock_fmt_rfc3339(at, ts, sizeof ts)) : json_null());
	gwb_free(h);
	gwb_free(qc);
}

static void diagnose(struct reconciler *r, struct task *t)
{
	struct diag_cards *cards = gwb_malloc(sizeof *cards);
	diag_cards_build(cards, picture_devices(r->pic), picture_pods(r->pic));
	struct diag_req q = { t->id, t->gpu_memory_mib, t->gpu_core_percent, t->gpu_count, 0, 0, 0, 0 };
	store_team_totals(r->c.store, t->team, &q.team_reserved_mem, &q.team_reserved_core,
			  &q.team_quota_mem, &q.team_quota_core);
	json_t *d = diag_pending(&q, cards);
	bind_predict(r, cards, &q, d);
	char *s = jx_dump(d);
	TASK_SET_TEXT(t, pending_diagnosis, s);
	gwb_free(s);
	json_decref(d);
	gwb_free(cards);
}

/* A queued task waits for its intent from the queue; without a queue, or when the intent is
 * overdue, the reconciler takes it (queued -> creating). 0, or an error (decide again). */
static int take_queued(struct reconciler *r, struct task *t, int64_t now)
{
	int has_queue = r->c.has_queue;
	/* An overdue intent is taken only while the API client has room, so a backlog older
	 * than the grace waits in the stream (its intents come in turn), not in the client's
	 * queue. */
	if (has_queue && kube_room(r->kube) <= 0)
		return 0;
	int arrived = json_object_get(r->intent_retry, t->id) != NULL;
	if (t->state != TASK_QUEUED)
		json_object_del(r->intent_retry, t->id);
	if (!(arrived && t->state == TASK_QUEUED) &&
	    !decide_take_queued(t, has_queue, r->c.cfg->reconcile_queued_grace_ms,
				r->intents_lost_at, now))
		return 0;
	json_t *d = json_pack("{s:s}", "intent",
			      arrived ? "create" : has_queue ? "overdue" : "no_queue");
	struct task_move m;
	int rc = 0;
	/* Forgotten at a pass that loads it moved: a batch's commit may still fail. */
	if (task_take(t, TASK_EVENT_STATE, d, &m))
		rc = store_task_move(r->c.store, t, &m, now);
	json_decref(d);
	return rc;
}

/* One intent's task, read here: a create intent moves a queued task to creating (a task that
 * moved on meanwhile is left as it is). Returns 0 (the intent waits for its outcome) or the
 * error that fails it. *row is the task as stored now, for the task's pass, or NULL. */
static int take_write(struct reconciler *r, const struct take *k, int64_t now, json_t *taken,
		      struct task **row)
{
	struct task *t = gwb_malloc(sizeof *t);
	*row = NULL;
	int rc = store_task_load(r->c.store, k->id, t);
	json_t *d = NULL;
	struct task_move m;
	int moved = 0;
	if (rc == 0 && k->create) {
		d = json_pack("{s:s}", "intent", "create");
		moved = task_take(t, TASK_EVENT_STATE, d, &m);
	}
	if (moved) {
		rc = store_task_move(r->c.store, t, &m, now);
		if (rc == GWB_EUNAVAIL)
			json_object_set_new(r->intent_retry, k->id, json_true());
		else if (rc == 0)
			json_object_set_new(taken, k->id, json_true());
	}
	json_decref(d);
	if (rc == 0)
		*row = t; /* read, or moved, just now: what the row holds */
	else
		gwb_free(t);
	return moved && (rc == GWB_EUNAVAIL || rc == GWB_ECONFLICT) ? 0 : rc;
}

/* The intents since the last safe point, each through take_write. A write the store refuses
 * (a storage fault) takes the intent all the same and the move is retried at the task's
 * passes (take_queued), so the task waits neither for the queue's redelivery nor for the
 * queued grace once writes work again; any other failure fails the intent. The ids moved go
 * into taken, for a commit that fails; the rows read go into rows (id -> struct task), for
 * the tasks' passes at this safe point (their ids in dirty). */
static void takes_write(struct reconciler *r, int64_t now, json_t *taken, struct strmap *rows,
			json_t *dirty)
{
	struct take *k = r->takes;
	r->takes = NULL;
	r->takes_tail = &r->takes;
	while (k) {
		struct take *next = k->next;
		struct task *t;
		int rc = take_write(r, k, now, taken, &t);
		if (t) {
			gwb_free(strmap_put(rows, k->id, t)); /* a second intent's row is newer */
			json_object_set_new(dirty, k->id, json_true()); /* its pass takes the row */
		}
		if (rc)
			k->done(k->arg, rc);
		else
			recon_ops_wait(r->ops, k->id, k->done, k->arg);
		gwb_free(k);
		k = next;
	}
}

/* Task id's pass: its row (t, read at this safe point; NULL: read here, and owned by the
 * pass either way) decided against the picture. */
static void reconcile_task(struct reconciler *r, const char *id, struct task *t, int64_t now)
{
	struct recon_view v = { 0 };
	int rc = 0;
	if (!t) {
		t = gwb_malloc(sizeof *t);
		rc = store_task_load(r->c.store, id, t);
	}
	if (rc) {
		recon_ops_settle(r->ops, id, rc, 1);
		goto out;
	}
	if (!recon_ops_idle(r->ops, id))
		goto out; /* the operation's answer marks the task dirty again */
	if (t->state == TASK_WAITING) {
		/* Waiting for its team's quota: no Job until its line admits it. */
		recon_ops_settle(r->ops, id, 0, 1);
		goto out;
	}
	if (take_queued(r, t, now)) {
		retry_task(r, id);
		goto out;
	}
	picture_view(r->pic, t, &v);
	int fresh = picture_fresh(r->pic);
	struct task_move m;
	if (decide_observe(t, &v, fresh, &m))
		diagnose(r, t);
	if (t->changed && store_task_move(r->c.store, t, &m, now) == GWB_ECONFLICT) {
		mark_dirty(r, id); /* changed under us (a cancel): decide again */
		goto out;
	}
	if (recon_ops_due(r->ops, id, now)) {
		if (!r->tick_pass && store_refusing(r))
			retry_task(r, id); /* one operation per task and tick until writes work */
		else
			recon_ops_start(r->ops, t, decide_action(t, &v, fresh));
	}
	/* Done once nothing is left to look after: final and released. */
	recon_ops_settle(r->ops, id, 0, !(task_flags(t->state, t->released) & TASK_ACTIVE));
out:
	recon_view_clear(&v);
	gwb_free(t);
}

static void on_safe_point(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct reconciler *r = arg;
	json_t *dirty = r->dirty, *notes = r->notes;
	r->dirty = json_object();
	r->notes = json_array();
	int64_t now = clock_now_ms();
	/* One transaction for the whole pass (each write a savepoint of it): one fsync per safe
	 * point, not per event. Requests started meanwhile leave the loop after the COMMIT, as
	 * answers only come later. Without the batch (another process holds the lock) each
	 * write tries on its own, as before. */
	int batch = store_batch_begin(r->c.store) == 0;
	json_t *taken = json_object();
	struct strmap *rows = strmap_new();
	notes_write(r, notes);
	takes_write(r, now, taken, rows, dirty);
	const char *id;
	json_t *v;
	json_object_foreach(dirty, id, v)
		reconcile_task(r, id, strmap_del(rows, id), now);
	strmap_free(rows); /* empty: every row's task is in dirty */
	if (batch && store_batch_commit(r->c.store)) {
		/* Nothing of the pass is stored: its tasks and events wait for the next one
		 * (the housekeeping tick retries). */
		log_warn("recon", "safe_point_commit_failed", "tasks=%zu notes=%zu db=%s",
			 json_object_size(dirty), json_array_size(notes),
			 log_q(store_errmsg(r->c.store)));
		json_object_update(r->dirty, dirty);
		json_object_update(r->intent_retry, taken); /* their moves were not stored */
		json_array_extend(notes, r->notes);
		json_decref(r->notes);
		r->notes = json_incref(notes);
	}
	r->tick_pass = 0;
	json_decref(taken);
	json_decref(notes);
	json_decref(dirty);
	recon_ops_flush(r->ops);
}

static void on_cron(void *arg, int64_t now)
{
	struct reconciler *r = arg;
	r->tick_pass = 1;
	if (json_object_size(r->dirty) || json_array_size(r->notes))
		event_active(r->safe_point, EV_TIMEOUT, 0); /* after a failed safe point */
	if (now - r->last_resync_ms >= r->c.cfg->reconcile_resync_ms) {
		r->last_resync_ms = now;
		mark_active(r);
	}
	recon_ops_each_due(r->ops, now, on_dirty, r);
	recon_ops_flush(r->ops); /* Pod lists held for company */
	/* Bound service-account tokens rotate; client-go re-reads them every minute. */
	if (now - r->last_token_ms >= 60000) {
		r->last_token_ms = now;
		kube_refresh_token(r->kube);
	}
}

static const char *health(void *arg, json_t *detail, int *ready)
{
	struct reconciler *r = arg;
	(void)ready; /* submissions are accepted while the cluster is away */
	json_t *inf = json_object(), *ev = json_object();
	picture_describe(r->pic, inf);
	recon_sched_describe(r->sched, ev);
	json_object_set_new(inf, "events", ev);
	json_object_set_new(detail, "server", json_string(kube_server(r->kube)));
	json_object_set_new(detail, "namespace", json_string(r->ns));
	json_object_set_new(detail, "informers", inf);
	json_t *cluster = json_object();
	picture_describe_cluster(r->pic, cluster);
	json_object_set_new(detail, "cluster", cluster);
	json_t *api = json_object();
	kube_describe(r->kube, api);
	json_object_set_new(detail, "api", api);
	if (!kube_reachable(r->kube))
		return "unreachable";
	return picture_fresh(r->pic) ? "ok" : "stale";
}

/* ---- public ---- */

void reconciler_intent(struct reconciler *r, const char *kind, const char *task_id,
		       reconciler_done_fn done, void *arg)
{
	struct take *k = gwb_calloc(1, sizeof *k);
	snprintf(k->id, sizeof k->id, "%s", task_id);
	k->create = strcmp(kind, "create") == 0;
	k->done = done;
	k->arg = arg;
	*r->takes_tail = k;
	r->takes_tail = &k->next;
	mark_dirty(r, task_id);
}

void reconciler_intents_lost(struct reconciler *r, int64_t now_ms)
{
	r->intents_lost_at = now_ms;
	mark_active(r);
}

int reconciler_fresh(const struct reconciler *r)
{
	return picture_fresh(r->pic);
}

int reconciler_objects(const struct reconciler *r, const json_t **jobs, const json_t **pods)
{
	*jobs = picture_jobs(r->pic);
	*pods = picture_pods(r->pic);
	return picture_fresh(r->pic);
}

struct kube *reconciler_kube(struct reconciler *r)
{
	return r->kube;
}

int reconciler_reachable(const struct reconciler *r)
{
	return kube_reachable(r->kube);
}

void reconciler_kick(struct reconciler *r, const char *task_id)
{
	if (r)
		mark_dirty(r, task_id);
}

json_t *reconciler_devices_json(struct reconciler *r)
{
	struct diag_cards *cards = gwb_malloc(sizeof *cards);
	diag_cards_build(cards, picture_devices(r->pic), picture_pods(r->pic));
	json_t *out = json_pack("{s:o, s:b, s:s}", "cards", diag_cards_json(cards), "fresh",
				picture_cards_fresh(r->pic), "note",
				"allocated comes from the scheduler's device-allocated annotations "
				"of gwb Pods; it is a budget, not a measurement");
	gwb_free(cards);
	return out;
}

/* When task id is due to end: its newest Pod's container start (or the Pod's start) plus the
 * task's duration, in wall-clock ms; 0 when not known. */
static int64_t due_ms(struct reconciler *r, const char *id)
{
	struct task *t = gwb_malloc(sizeof *t);
	int64_t due = 0;
	if (store_task_load(r->c.store, id, t) == 0) {
		struct recon_view v;
		picture_view(r->pic, t, &v);
		const json_t *pod = v.newest;
		json_t *cs = json_array_get(kobj_path(pod, "status", "containerStatuses"), 0);
		const char *started = kobj_str(kobj_path(cs, "state", "running"), "startedAt");
		if (!started)
			started = kobj_pstr(pod, "status", "startTime");
		int64_t at;
		if (started && clock_parse_rfc3339(started, &at) == 0)
			due = at + t->duration_seconds * 1000;
		recon_view_clear(&v);
	}
	gwb_free(t);
	return due;
}

json_t *reconciler_predict(struct reconciler *r, const struct diag_req *req, const char *strategy,
			   int *fresh)
{
	enum predict_strategy s = PREDICT_LEAST_ALLOCATED;
	predict_strategy_parse(strategy, &s);
	struct diag_cards *cards = gwb_malloc(sizeof *cards);
	diag_cards_build(cards, picture_devices(r->pic), picture_pods(r->pic));
	json_t *out = predict_placement_json(cards, req, s);
	if (json_is_object(json_object_get(out, "diagnosis")))
		bind_predict(r, cards, req, json_object_get(out, "diagnosis"));
	gwb_free(cards);
	*fresh = picture_cards_fresh(r->pic);
	/* Each option's tasks, with when each is due to end. */
	size_t i;
	json_t *opt;
	int64_t now = clock_now_ms();
	json_array_foreach(json_object_get(out, "unblock"), i, opt) {
		json_t *tasks = json_array();
		size_t k;
		json_t *id;
		json_array_foreach(json_object_get(opt, "release_tasks"), k, id) {
			int64_t due = due_ms(r, json_string_value(id));
			char ts[40];
			json_array_append_new(
				tasks, json_pack("{s:O, s:o, s:o}", "task", id, "due_at",
						 due ? json_string(clock_fmt_rfc3339(due, ts, sizeof ts))
						     : json_null(),
						 "due_in_seconds",
						 due ? json_integer(due > now ? (due - now + 999) / 1000 : 0)
						     : json_null()));
		}
		json_object_set_new(opt, "tasks", tasks);
	}
	return out;
}

static int find_api(const struct gwb_config *cfg, struct kube_auth *auth, char *err,
		    size_t errlen)
{
	memset(auth, 0, sizeof *auth);
	if (cfg->kube_server[0]) {
		snprintf(auth->server, sizeof auth->server, "%s", cfg->kube_server);
		snprintf(auth->source, sizeof auth->source, "kube.server setting");
		return 0;
	}
	char path[1024] = "";
	const char *home = getenv("HOME");
	if (cfg->kubeconfig[0])
		snprintf(path, sizeof path, "%s", cfg->kubeconfig);
	else if (home)
		snprintf(path, sizeof path, "%s/.kube/config", home);
	if (path[0] && access(strchr(path, ':') ? "/" : path, R_OK) == 0)
		return kubeconfig_load(path, auth, err, errlen);
	int rc = kubeconfig_in_cluster("/var/run/secrets/kubernetes.io/serviceaccount", auth, err,
				       errlen);
	return rc == GWB_ENOTFOUND ? 1 : rc;
}

int reconciler_new(struct reconciler **out, const struct reconciler_ctx *ctx, char *err,
		   size_t errlen)
{
	*out = NULL;
	struct kube_auth auth;
	const struct gwb_config *cfg = ctx->cfg;
	int rc = find_api(cfg, &auth, err, errlen);
	if (rc)
		return rc;
	struct reconciler *r = gwb_calloc(1, sizeof *r);
	r->c = *ctx;
	snprintf(r->ns, sizeof r->ns, "%s", cfg->kube_namespace);
	rc = kube_new(&r->kube, ctx->base, &auth, err, errlen);
	log_info("recon", "api_server", "server=%s source=%s", log_q(auth.server),
		 log_q(auth.source));
	kube_auth_free(&auth);
	if (rc) {
		gwb_free(r);
		return rc;
	}
	r->dirty = json_object();
	r->notes = json_array();
	r->intent_retry = json_object();
	r->takes_tail = &r->takes;
	r->safe_point = event_new(ctx->base, -1, 0, on_safe_point, r);
	int wt = (int)cfg->kube_watch_timeout_seconds, idle = (int)cfg->kube_watch_idle_seconds;
	jobspec_set_deadline_margin(cfg->kube_pod_deadline_margin_seconds);
	r->pic = picture_new(r->kube, ctx->base, r->ns, wt, idle, &picture_ops, r);
	r->sched = recon_sched_new(r->kube, ctx->base, r->ns, wt, idle, on_sched_note, r);
	struct recon_ctx octx = { ctx->store,
				 r->kube,
				 r->pic,
				 r->ns,
				 cfg->kube_worker_image,
				 cfg->kube_isolation,
				 cfg->kube_job_ttl_seconds,
				 (int)cfg->kube_request_timeout_ms,
				 on_dirty,
				 r };
	r->ops = recon_ops_new(&octx);
	recon_sched_start(r->sched);
	picture_start(r->pic);
	ctx->hooks.cron_add(ctx->hooks.host, on_cron, r);
	ctx->hooks.health_add(ctx->hooks.host, "kube", health, r);
	*out = r;
	return 0;
}

void reconciler_free(struct reconciler *r)
{
	if (!r)
		return;
	picture_free(r->pic);
	recon_sched_free(r->sched);
	kube_free(r->kube); /* requests in flight end here, without their callbacks */
	recon_ops_free(r->ops);
	while (r->takes) {
		/* Like the operations' waiters: dropped, not fired (the intents are redelivered). */
		struct take *k = r->takes;
		r->takes = k->next;
		gwb_free(k);
	}
	notes_write(r, r->notes); /* the informers' last events, each in its own transaction */
	json_decref(r->notes);
	json_decref(r->dirty);
	json_decref(r->intent_retry);
	event_free(r->safe_point);
	gwb_free(r);
}
