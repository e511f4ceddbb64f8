/* The reconciler: intents and informer events mark tasks dirty; at the loop's safe point each
 * dirty task is decided from its SQLite row and the cluster picture. One Kubernetes operation
 * per task is in flight at a time; failures back off per task. */
#include "server/reconciler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/devalloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "server/diagnose.h"
#include "server/informer.h"
#include "server/jobspec.h"
#include "server/kube.h"
#include "server/kubeconfig.h"
#include "server/store_recon.h"

#define BACKOFF_MIN_MS 300
#define BACKOFF_MAX_MS 10000
#define MAX_WAITERS 8

enum op_kind { OP_NONE, OP_GET, OP_POST, OP_PATCH_SUSPEND, OP_LIST_PODS };

struct waiter {
	reconciler_done_fn fn;
	void *arg;
};

/* Per-task bookkeeping that lives only in memory: the operation in flight, the back-off, and
 * the intents waiting for an outcome. Everything else is in SQLite or the picture. */
struct rop {
	struct reconciler *r;
	char id[32];
	enum op_kind op;
	long req;
	int64_t next_try_ms;
	int backoff_ms;
	int nwaiters;
	struct waiter waiters[MAX_WAITERS];
	struct rop *next;
};

struct picture {
	json_t *map;     /* name -> object */
	json_t *listing; /* during a list: what it has shown so far */
};

struct reconciler;
/* One kind of object in the picture: its informer feeds pic; gone() hears of objects that
 * were deleted (an event, or absence from a fresh list); mark() decides which tasks to revisit. */
struct kind {
	struct reconciler *r;
	struct picture *pic;
	void (*gone)(struct reconciler *r, json_t *obj);
	void (*mark)(struct reconciler *r, const json_t *obj);
};

struct reconciler {
	struct server *srv;
	struct kube *kube;
	struct informer *jobs_inf, *pods_inf, *devs_inf, *events_inf;
	struct picture jobs, pods, devs;
	struct kind jobs_kind, pods_kind, devs_kind;
	json_t *dirty; /* task id -> true */
	json_t *gone;  /* task id -> uid of its Job, observed deleted (an event, a fresh list, a 404) */
	json_t *sched_seen; /* event uid -> count already noted in a task's history */
	struct event *safe_point;
	struct rop *rops;
	int64_t last_resync_ms;
	int64_t last_token_ms;
	char ns[64];
};

/* ---- small JSON accessors ---- */

static json_t *jpath(const json_t *o, const char *a, const char *b)
{
	json_t *x = json_object_get(o, a);
	return b ? json_object_get(x, b) : x;
}

static const char *jstr(const json_t *o, const char *a, const char *b)
{
	json_t *v = jpath(o, a, b);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *obj_name(const json_t *o)
{
	return jstr(o, "metadata", "name");
}

/* 1 when the object has a condition of type with status "True". */
static int cond_true(const json_t *o, const char *type)
{
	size_t i;
	json_t *c;
	json_array_foreach(jpath(o, "status", "conditions"), i, c) {
		const char *t = jstr(c, "type", NULL), *s = jstr(c, "status", NULL);
		if (t && s && strcmp(t, type) == 0 && strcmp(s, "True") == 0)
			return 1;
	}
	return 0;
}

static const json_t *condition(const json_t *o, const char *type)
{
	size_t i;
	json_t *c;
	json_array_foreach(jpath(o, "status", "conditions"), i, c) {
		const char *t = jstr(c, "type", NULL);
		if (t && strcmp(t, type) == 0)
			return c;
	}
	return NULL;
}

static int pod_terminal(const json_t *pod)
{
	const char *p = jstr(pod, "status", "phase");
	return p && (strcmp(p, "Succeeded") == 0 || strcmp(p, "Failed") == 0);
}

/* ---- per-task operations ---- */

static struct rop *rop_get(struct reconciler *r, const char *id, int create)
{
	for (struct rop *o = r->rops; o; o = o->next)
		if (strcmp(o->id, id) == 0)
			return o;
	if (!create)
		return NULL;
	struct rop *o = gwb_calloc(1, sizeof *o);
	snprintf(o->id, sizeof o->id, "%s", id);
	o->r = r;
	o->next = r->rops;
	r->rops = o;
	return o;
}

static void rop_drop(struct reconciler *r, const char *id)
{
	for (struct rop **pp = &r->rops; *pp; pp = &(*pp)->next) {
		struct rop *o = *pp;
		if (strcmp(o->id, id) == 0 && o->op == OP_NONE && o->nwaiters == 0) {
			json_object_del(r->gone, id); /* nothing more is decided for this task */
			*pp = o->next;
			gwb_free(o);
			return;
		}
	}
}

static void waiters_fire(struct rop *o, int rc)
{
	int n = o->nwaiters;
	struct waiter w[MAX_WAITERS];
	memcpy(w, o->waiters, sizeof w);
	o->nwaiters = 0;
	for (int i = 0; i < n; i++)
		w[i].fn(w[i].arg, rc);
}

static void backoff(struct rop *o, int64_t now)
{
	o->backoff_ms = o->backoff_ms ? o->backoff_ms * 2 : BACKOFF_MIN_MS;
	if (o->backoff_ms > BACKOFF_MAX_MS)
		o->backoff_ms = BACKOFF_MAX_MS;
	o->next_try_ms = now + o->backoff_ms;
}

static void mark_dirty(struct reconciler *r, const char *id)
{
	if (!id)
		return;
	json_object_set_new(r->dirty, id, json_true());
	event_active(r->safe_point, EV_TIMEOUT, 0);
}

static void note(struct reconciler *r, const char *id, const char *type, json_t *detail)
{
	if (store_task_note(r->srv->store, id, type, detail, clock_now_ms()))
		log_error("recon", "note_failed", "task=%s type=%s", id, type);
	json_decref(detail);
}

/* ---- the picture ---- */

static void pic_list_begin(struct picture *p)
{
	json_decref(p->listing);
	p->listing = json_object();
}

static void pic_upsert(struct picture *p, json_t *obj)
{
	const char *name = obj_name(obj);
	if (!name)
		return;
	json_object_set_new(p->map, name, json_deep_copy(obj));
	if (p->listing)
		json_object_set_new(p->listing, name, json_true());
}

static void task_of_into_dirty(struct reconciler *r, const json_t *obj)
{
	mark_dirty(r, jobspec_task_of(obj));
}

/* A list ended: what it did not show is gone. Returns nothing; gone objects are reported to
 * gone(), then forgotten. */
static void pic_list_end(struct reconciler *r, struct picture *p,
			 void (*gone)(struct reconciler *, json_t *))
{
	const char *name;
	json_t *v, *tmp;
	json_object_foreach_safe(p->map, tmp, name, v) {
		if (json_object_get(p->listing, name))
			continue;
		if (gone)
			gone(r, v);
		json_object_del(p->map, name);
	}
	json_decref(p->listing);
	p->listing = NULL;
}

static void pod_gone(struct reconciler *r, json_t *pod)
{
	const char *task = jobspec_task_of(pod);
	if (!task)
		return;
	note(r, task, "pod_deleted",
	     json_pack("{s:s?, s:s?, s:s?, s:s?}", "pod", obj_name(pod), "uid",
		       jstr(pod, "metadata", "uid"), "last_phase", jstr(pod, "status", "phase"),
		       "observed_at_rv", informer_rv(r->pods_inf)));
	mark_dirty(r, task);
}

static void job_gone(struct reconciler *r, json_t *job)
{
	const char *task = jobspec_task_of(job), *uid = jstr(job, "metadata", "uid");
	if (!task)
		return;
	if (uid)
		json_object_set_new(r->gone, task, json_string(uid));
	note(r, task, "job_deleted",
	     json_pack("{s:s?, s:s?, s:s?}", "job", obj_name(job), "uid", uid, "observed_at_rv",
		       informer_rv(r->jobs_inf)));
	mark_dirty(r, task);
}

static void kind_list_begin(void *arg)
{
	struct kind *k = arg;
	pic_list_begin(k->pic);
}

static void kind_upsert(void *arg, json_t *obj)
{
	struct kind *k = arg;
	pic_upsert(k->pic, obj);
	k->mark(k->r, obj);
}

static void kind_remove(void *arg, json_t *obj)
{
	struct kind *k = arg;
	const char *name = obj_name(obj);
	/* Report the last state we saw, which the DELETED event may not repeat. */
	json_t *last = name ? json_incref(json_object_get(k->pic->map, name)) : NULL;
	if (name)
		json_object_del(k->pic->map, name);
	if (k->gone)
		k->gone(k->r, last ? last : obj);
	k->mark(k->r, obj);
	json_decref(last);
}

static void kind_list_end(void *arg)
{
	struct kind *k = arg;
	pic_list_end(k->r, k->pic, k->gone);
}

static void mark_all(struct reconciler *r, const json_t *obj);
static void fresh_changed(void *arg, int fresh);

static const struct informer_ops kind_ops = { kind_list_begin, kind_upsert, kind_remove,
					      kind_list_end, fresh_changed };

/* The scheduler's own Events about our Pods (FailedScheduling, Scheduled) go into the task's
 * history once per new occurrence, so "why is my task not running?" has the scheduler's words
 * with their times. */
static void event_upsert(void *arg, json_t *ev)
{
	struct reconciler *r = arg;
	const char *reason = jstr(ev, "reason", NULL), *kind = jstr(ev, "involvedObject", "kind");
	const char *pod = jstr(ev, "involvedObject", "name"), *uid = jstr(ev, "metadata", "uid");
	if (!reason || !kind || !pod || !uid || strcmp(kind, "Pod") != 0 ||
	    (strcmp(reason, "FailedScheduling") != 0 && strcmp(reason, "Scheduled") != 0))
		return;
	/* Pod "gwb-<task id>-xxxxx": the task id sits between the prefix and the last dash. */
	const char *dash = strrchr(pod, '-');
	if (strncmp(pod, "gwb-", 4) != 0 || !dash || dash - pod - 4 <= 0 || dash - pod - 4 >= 32)
		return;
	char task[32];
	snprintf(task, sizeof task, "%.*s", (int)(dash - pod - 4), pod + 4);
	json_int_t count = json_integer_value(json_object_get(ev, "count"));
	json_t *seen = json_object_get(r->sched_seen, uid);
	if (seen && json_integer_value(seen) >= count)
		return;
	json_object_set_new(r->sched_seen, uid, json_integer(count));
	note(r, task, "scheduler_event",
	     json_pack("{s:s, s:s?, s:s?, s:s, s:I}", "reason", reason, "message",
		       jstr(ev, "message", NULL), "type", jstr(ev, "type", NULL), "pod", pod,
		       "count", count));
	mark_dirty(r, task);
}

static void event_nop(void *arg)
{
	(void)arg;
}

static void event_remove(void *arg, json_t *ev)
{
	struct reconciler *r = arg;
	const char *uid = jstr(ev, "metadata", "uid");
	if (uid)
		json_object_del(r->sched_seen, uid);
}

static void event_fresh(void *arg, int fresh)
{
	(void)arg;
	(void)fresh;
}

static const struct informer_ops event_ops = { event_nop, event_upsert, event_remove, event_nop,
					       event_fresh };

static void mark_active(struct reconciler *r)
{
	json_t *ids = NULL;
	if (store_tasks_active(r->srv->store, &ids))
		return;
	size_t i;
	json_t *id;
	json_array_foreach(ids, i, id)
		json_object_set_new(r->dirty, json_string_value(id), json_true());
	json_decref(ids);
	event_active(r->safe_point, EV_TIMEOUT, 0);
}

static void mark_all(struct reconciler *r, const json_t *obj)
{
	(void)obj;
	mark_active(r); /* a device change can change every pending diagnosis */
}

static void fresh_changed(void *arg, int fresh)
{
	struct kind *k = arg;
	if (fresh)
		mark_active(k->r); /* a fresh picture may prove what a stale one could not */
}

static int picture_fresh(const struct reconciler *r)
{
	return informer_fresh(r->jobs_inf) && informer_fresh(r->pods_inf);
}

/* ---- observation: picture -> task row ---- */

struct view {
	json_t *job;         /* borrowed from the picture, or NULL */
	int job_gone;        /* the task's recorded Job was observed deleted */
	json_t *pods;        /* new array of borrowed pods of the task */
	json_t *newest;      /* borrowed: the newest pod, or NULL */
	int all_terminal;
};

static void view_build(struct reconciler *r, const struct task_row *row, struct view *v)
{
	const char *id = row->id;
	char name[64];
	jobspec_name(id, name, sizeof name);
	json_t *job = json_object_get(r->jobs.map, name);
	v->job = job && jobspec_is_ours(job, id) ? job : NULL;
	const char *gone = jstr(r->gone, id, NULL);
	v->job_gone = !v->job && row->job_uid[0] && gone && strcmp(gone, row->job_uid) == 0;
	v->pods = json_array();
	v->newest = NULL;
	v->all_terminal = 1;
	const char *pn;
	json_t *pod;
	json_object_foreach(r->pods.map, pn, pod) {
		const char *t = jobspec_task_of(pod);
		if (!t || strcmp(t, id) != 0)
			continue;
		json_array_append(v->pods, pod);
		v->all_terminal &= pod_terminal(pod);
		const char *ts = jstr(pod, "metadata", "creationTimestamp");
		const char *best = v->newest ? jstr(v->newest, "metadata", "creationTimestamp") : NULL;
		if (!v->newest || (ts && best && strcmp(ts, best) > 0))
			v->newest = pod;
	}
}

static int pods_all_succeeded(const struct view *v)
{
	size_t i;
	json_t *p;
	json_array_foreach(v->pods, i, p) {
		const char *ph = jstr(p, "status", "phase");
		if (!ph || strcmp(ph, "Succeeded") != 0)
			return 0;
	}
	return 1;
}

static void observe_pod(struct task_row *row, const json_t *pod)
{
	snprintf(row->pod_name, sizeof row->pod_name, "%s", obj_name(pod) ? obj_name(pod) : "");
	const char *uid = jstr(pod, "metadata", "uid"), *node = jstr(pod, "spec", "nodeName");
	const char *phase = jstr(pod, "status", "phase");
	snprintf(row->pod_uid, sizeof row->pod_uid, "%s", uid ? uid : "");
	snprintf(row->pod_node, sizeof row->pod_node, "%s", node ? node : "");
	snprintf(row->pod_phase, sizeof row->pod_phase, "%s", phase ? phase : "");
	const char *alloc = jstr(jpath(pod, "metadata", "annotations"), DEVALLOC_ANNOTATION, NULL);
	snprintf(row->allocation, sizeof row->allocation, "%s", alloc ? alloc : "");
	json_t *cs = json_array_get(jpath(pod, "status", "containerStatuses"), 0);
	json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
	if (json_is_object(term)) {
		row->has_exit_code = 1;
		row->exit_code = json_integer_value(json_object_get(term, "exitCode"));
		const char *reason = jstr(term, "reason", NULL);
		if (row->exit_code == 42)
			reason = "simulated_limit_rejected"; /* the worker's ledger refused */
		snprintf(row->reason, sizeof row->reason, "%s", reason ? reason : "");
	}
	const json_t *sched = condition(pod, "PodScheduled");
	const char *st = jstr(sched, "status", NULL), *msg = jstr(sched, "message", NULL);
	if (st && strcmp(st, "False") == 0 && msg)
		snprintf(row->pending_message, sizeof row->pending_message, "%s", msg);
	else
		row->pending_message[0] = '\0';
}

static void diagnose(struct reconciler *r, struct task_row *row)
{
	if (!row->pending_message[0]) {
		row->pending_diagnosis[0] = '\0';
		return;
	}
	struct diag_cards *cards = gwb_malloc(sizeof *cards);
	diag_cards_build(cards, r->devs.map, r->pods.map);
	struct diag_req q = { row->id, row->mem_mib, row->core_pct, row->count, 0, 0, 0, 0 };
	store_team_totals(r->srv->store, row->team, &q.team_reserved_mem, &q.team_reserved_core,
			  &q.team_quota_mem, &q.team_quota_core);
	json_t *d = diag_pending(&q, cards);
	char *s = jx_dump(d);
	snprintf(row->pending_diagnosis, sizeof row->pending_diagnosis, "%s", s);
	gwb_free(s);
	json_decref(d);
	gwb_free(cards);
}

/* Computes the observed row from the view. Never moves a task out of a final state or out of
 * cancelling (only the release does that). */
static void observe(struct reconciler *r, struct task_row *row, const struct view *v)
{
	int final = store_state_is_final(row->state);
	if (v->job) {
		const char *uid = jstr(v->job, "metadata", "uid");
		snprintf(row->job_uid, sizeof row->job_uid, "%s", uid ? uid : "");
		row->job_suspended = json_is_true(jpath(v->job, "spec", "suspend"));
	}
	if (v->newest)
		observe_pod(row, v->newest);
	else if (row->pod_uid[0] && picture_fresh(r) && strcmp(row->pod_phase, "Deleted") != 0)
		snprintf(row->pod_phase, sizeof row->pod_phase, "Deleted"); /* shown, never relied on */
	if (final || row->cancel_requested || strcmp(row->state, "cancelling") == 0)
		goto diag;
	if (v->job) {
		if (cond_true(v->job, "Complete")) {
			snprintf(row->state, sizeof row->state, "succeeded");
		} else if (cond_true(v->job, "Failed")) {
			snprintf(row->state, sizeof row->state, "failed");
			if (!row->reason[0]) {
				const char *why = jstr(condition(v->job, "Failed"), "reason", NULL);
				snprintf(row->reason, sizeof row->reason, "%s", why ? why : "Failed");
			}
		} else if (v->newest && jstr(v->newest, "status", "phase") &&
			   strcmp(jstr(v->newest, "status", "phase"), "Running") == 0) {
			snprintf(row->state, sizeof row->state, "running");
		} else {
			snprintf(row->state, sizeof row->state, "pending");
		}
	} else if (v->job_gone && v->all_terminal) {
		/* The Job was deleted under us and no Pod of it runs any more. */
		snprintf(row->state, sizeof row->state, "%s",
			 json_array_size(v->pods) && pods_all_succeeded(v) ? "succeeded" : "failed");
		if (strcmp(row->state, "failed") == 0)
			snprintf(row->reason, sizeof row->reason, "job_deleted");
	}
diag:
	if (strcmp(row->state, "pending") == 0)
		diagnose(r, row);
	else
		row->pending_diagnosis[0] = '\0';
}

static int row_differs(const struct task_row *a, const struct task_row *b)
{
	return memcmp(a, b, sizeof *a) != 0;
}

/* ---- release ---- */

static json_t *job_evidence(const json_t *job)
{
	if (!job)
		return json_null();
	json_t *conds = json_array();
	static const char *const types[] = { "Complete", "Failed", "Suspended", NULL };
	for (const char *const *t = types; *t; t++)
		if (cond_true(job, *t))
			json_array_append_new(conds, json_string(*t));
	return json_pack("{s:s?, s:s?, s:s?, s:b, s:o}", "name", obj_name(job), "uid",
			 jstr(job, "metadata", "uid"), "resource_version",
			 jstr(job, "metadata", "resourceVersion"), "suspended",
			 json_is_true(jpath(job, "spec", "suspend")), "conditions", conds);
}

/* Whether the Job side lets the task end: finished, suspended with the suspension processed
 * by the Job controller (no Pod will be made any more), or observed deleted. Returns the proof
 * name and sets *final, or NULL. */
static const char *job_settled(const struct task_row *row, const struct view *v,
			       const char **final)
{
	int cancel = row->cancel_requested || strcmp(row->state, "cancelling") == 0;
	if (v->job) {
		if (cond_true(v->job, "Complete")) {
			*final = cancel ? "cancelled" : "succeeded";
			return "job_complete";
		}
		if (cond_true(v->job, "Failed")) {
			*final = cancel ? "cancelled" : "failed";
			return "job_failed";
		}
		if (cancel && json_is_true(jpath(v->job, "spec", "suspend")) &&
		    cond_true(v->job, "Suspended")) {
			*final = "cancelled";
			return "job_suspended";
		}
		return NULL;
	}
	if (v->job_gone) {
		*final = cancel ? "cancelled"
			 : store_state_is_final(row->state) ? row->state
			 : json_array_size(v->pods) && pods_all_succeeded(v) ? "succeeded"
									       : "failed";
		return "job_gone";
	}
	return NULL;
}

/* Step one of a release: the picture suggests the task's Pods stopped. Never on a stale
 * picture. Step two (on_list_pods) confirms it with an authoritative list of every Pod that
 * carries the task's label, so a lagging watch can never release early. */
static int release_candidate(const struct reconciler *r, const struct task_row *row,
			     const struct view *v)
{
	const char *final;
	return !row->released && picture_fresh(r) && v->all_terminal &&
	       job_settled(row, v, &final) != NULL;
}

static void on_list_pods(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	struct reconciler *r = o->r;
	o->op = OP_NONE;
	o->req = 0;
	json_t *items = json_object_get(res->body, "items");
	if (res->outcome != KUBE_OK || !json_is_array(items)) {
		backoff(o, clock_now_ms());
		return; /* nothing is released on an unanswered question; retried */
	}
	struct task_row row;
	if (store_task_load(r->srv->store, o->id, &row) || row.released)
		return;
	struct view v;
	view_build(r, &row, &v);
	const char *final = NULL, *why = job_settled(&row, &v, &final);
	json_t *listed = json_array();
	int running = 0;
	size_t i;
	json_t *p;
	json_array_foreach(items, i, p) {
		int term = pod_terminal(p);
		running += !term;
		json_array_append_new(
			listed, json_pack("{s:s?, s:s?, s:s?, s:b}", "name", obj_name(p), "uid",
					  jstr(p, "metadata", "uid"), "phase",
					  jstr(p, "status", "phase"), "terminating",
					  jpath(p, "metadata", "deletionTimestamp") != NULL));
	}
	if (!why || running || !picture_fresh(r)) {
		json_decref(listed);
		json_decref(v.pods);
		backoff(o, clock_now_ms());
		mark_dirty(r, o->id);
		return;
	}
	json_t *ev = json_pack("{s:s, s:o, s:o, s:s?, s:s, s:s, s:s}", "proof", why, "job",
			       job_evidence(v.job), "pods_listed", listed, "pods_list_rv",
			       jstr(res->body, "metadata", "resourceVersion"), "jobs_watch_rv",
			       informer_rv(r->jobs_inf), "pods_watch_rv", informer_rv(r->pods_inf),
			       "note",
			       "every Pod labelled with the task is listed; none is running; Pods "
			       "deleted earlier are in the pod_deleted events");
	int released = 0;
	int rc = store_task_release(r->srv->store, row.id, why, final, ev, clock_now_ms(),
				    &released);
	if (rc)
		log_error("recon", "release_failed", "task=%s error=%s", row.id, err_name(rc));
	else if (released)
		log_info("recon", "released", "task=%s proof=%s final=%s", row.id, why, final);
	json_decref(ev);
	json_decref(v.pods);
	mark_dirty(r, o->id);
}

static void start_list_pods(struct reconciler *r, struct rop *o)
{
	char sel[128], esc[256], path[512];
	snprintf(sel, sizeof sel, GWB_LABEL_TASK "=%s", o->id);
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", r->ns,
		 kube_query_escape(sel, esc, sizeof esc));
	o->op = OP_LIST_PODS;
	o->req = kube_request(r->kube, "GET", path, NULL, NULL,
			      (int)r->srv->cfg->kube_request_timeout_ms, on_list_pods, o);
	if (o->req < 0) {
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
	}
}

/* ---- Kubernetes operations ---- */

static void op_done_common(struct reconciler *r, struct rop *o)
{
	o->op = OP_NONE;
	o->req = 0;
	mark_dirty(r, o->id);
}

static void set_state(struct reconciler *r, const char *id, const char *state, const char *reason,
		      json_t *detail)
{
	struct task_row row;
	if (store_task_load(r->srv->store, id, &row) == 0 && !store_state_is_final(row.state) &&
	    strcmp(row.state, "cancelling") != 0) {
		char expected[16];
		snprintf(expected, sizeof expected, "%s", row.state);
		snprintf(row.state, sizeof row.state, "%s", state);
		if (reason)
			snprintf(row.reason, sizeof row.reason, "%s", reason);
		store_task_observe(r->srv->store, &row, expected, detail, clock_now_ms());
	}
	json_decref(detail);
}

static void start_get(struct reconciler *r, struct rop *o);

/* An unknown outcome keeps the quota and the task in "unknown"; the next attempt observes
 * before it creates again. */
static void op_failed(struct reconciler *r, struct rop *o, const char *what,
		      const struct kube_result *res)
{
	backoff(o, clock_now_ms());
	json_t *d = json_pack("{s:s, s:s, s:I, s:s?, s:i}", "operation", what, "outcome",
			      res->outcome == KUBE_UNKNOWN ? "unknown" : "not_sent", "status",
			      (json_int_t)res->status, "reason", res->reason, "retry_in_ms",
			      o->backoff_ms);
	log_warn("recon", "kube_op_failed", "task=%s op=%s status=%ld reason=%s retry_ms=%d", o->id,
		 what, res->status, log_q(res->reason), o->backoff_ms);
	struct task_row row;
	int creating = (strcmp(what, "create_job") == 0 || strcmp(what, "get_job") == 0) &&
		       store_task_load(r->srv->store, o->id, &row) == 0 && !row.job_uid[0];
	if (creating)
		/* Before a Job is known, an unreachable API or an unanswered create leaves the
		 * task's fate unknown (ARCHITECTURE: creating -> unknown, quota kept, retried). */
		set_state(r, o->id, "unknown",
			  res->outcome == KUBE_UNKNOWN && strcmp(what, "create_job") == 0
				  ? "create_outcome_unknown"
				  : "api_unreachable",
			  d);
	else
		note(r, o->id, "api_unreachable", d);
	op_done_common(r, o);
	waiters_fire(o, 0);
}

/* Records that the task's Job exists (its uid) in SQLite. The picture is left to the watch:
 * an answer may be older than what the watch already showed. */
static void adopt(struct reconciler *r, struct rop *o, const json_t *job)
{
	struct task_row row;
	const char *uid = jstr(job, "metadata", "uid");
	if (uid && store_task_load(r->srv->store, o->id, &row) == 0 &&
	    strcmp(row.job_uid, uid) != 0) {
		char expected[16];
		snprintf(expected, sizeof expected, "%s", row.state);
		snprintf(row.job_uid, sizeof row.job_uid, "%s", uid);
		row.job_suspended = json_is_true(jpath(job, "spec", "suspend"));
		if (strcmp(row.state, "unknown") == 0 || strcmp(row.state, "creating") == 0)
			snprintf(row.state, sizeof row.state, "pending");
		json_t *d = json_pack("{s:s}", "job_uid", uid);
		if (store_task_observe(r->srv->store, &row, expected, d, clock_now_ms()))
			log_warn("recon", "adopt_not_recorded", "task=%s", o->id);
		json_decref(d);
	}
	o->backoff_ms = 0;
	o->next_try_ms = 0;
	op_done_common(r, o);
	waiters_fire(o, 0);
}

static void on_post(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	struct reconciler *r = o->r;
	if (res->outcome == KUBE_OK && json_is_object(res->body)) {
		log_info("recon", "job_created", "task=%s uid=%s", o->id,
			 log_q(jstr(res->body, "metadata", "uid")));
		return adopt(r, o, res->body);
	}
	if (res->outcome == KUBE_REJECTED && res->status == 409) {
		/* AlreadyExists: ours from an earlier attempt whose answer was lost, or a cancel
		 * marker. Observe and adopt. */
		note(r, o->id, "create_conflict",
		     json_pack("{s:s}", "detail", "the Job exists already; observing it"));
		o->op = OP_NONE;
		return start_get(r, o);
	}
	if (res->outcome == KUBE_REJECTED) {
		json_t *d = json_pack("{s:I, s:s?, s:O?}", "status", (json_int_t)res->status,
				      "reason", res->reason, "answer", res->body);
		set_state(r, o->id, "failed", "job_rejected", d);
		op_done_common(r, o);
		waiters_fire(o, 0);
		return;
	}
	op_failed(r, o, "create_job", res);
}

static void start_post(struct reconciler *r, struct rop *o, const struct task_row *row)
{
	const struct gwb_config *cfg = r->srv->cfg;
	int cancel = row->cancel_requested || strcmp(row->state, "cancelling") == 0;
	struct jobspec_in in = { row->id, row->team, row->mem_mib, row->core_pct, row->count,
				 row->duration_s, row->qos, row->experiment, r->ns,
				 cfg->kube_worker_image, cfg->kube_isolation, cancel,
				 cfg->kube_job_ttl_seconds };
	json_t *job = jobspec_build(&in);
	char path[256];
	snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs", r->ns);
	o->op = OP_POST;
	o->req = kube_request(r->kube, "POST", path, job, NULL, (int)cfg->kube_request_timeout_ms,
			      on_post, o);
	json_decref(job);
	if (o->req < 0) {
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
	}
}

static void on_get(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	struct reconciler *r = o->r;
	struct task_row row;
	if (res->outcome == KUBE_OK && json_is_object(res->body)) {
		if (jobspec_is_ours(res->body, o->id)) {
			/* The watch will show it; wait a little before asking again. */
			adopt(r, o, res->body);
			backoff(o, clock_now_ms());
			return;
		}
		json_t *d = json_pack("{s:s?, s:O?}", "job_uid", jstr(res->body, "metadata", "uid"),
				      "labels", jpath(res->body, "metadata", "labels"));
		set_state(r, o->id, "unknown", "job_name_conflict", d);
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
		waiters_fire(o, 0);
		return;
	}
	if (res->status == 404) {
		o->op = OP_NONE;
		if (store_task_load(r->srv->store, o->id, &row) != 0 || row.released) {
			op_done_common(r, o);
			waiters_fire(o, 0);
			return;
		}
		if (row.job_uid[0]) {
			/* The Job we created is gone: observed, not inferred. It is never made
			 * again under the same task. */
			json_object_set_new(r->gone, o->id, json_string(row.job_uid));
			note(r, o->id, "job_absent",
			     json_pack("{s:s, s:I}", "job_uid", row.job_uid, "status", 404));
			op_done_common(r, o);
			waiters_fire(o, 0);
			return;
		}
		if (!store_state_is_final(row.state))
			return start_post(r, o, &row);
		op_done_common(r, o);
		waiters_fire(o, 0);
		return;
	}
	op_failed(r, o, "get_job", res);
}

static void start_get(struct reconciler *r, struct rop *o)
{
	char path[256], name[64];
	snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", r->ns,
		 jobspec_name(o->id, name, sizeof name));
	o->op = OP_GET;
	o->req = kube_request(r->kube, "GET", path, NULL, NULL,
			      (int)r->srv->cfg->kube_request_timeout_ms, on_get, o);
	if (o->req < 0) {
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
	}
}

static void on_patch(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	struct reconciler *r = o->r;
	if (res->outcome == KUBE_OK && json_is_object(res->body)) {
		log_info("recon", "job_suspend_requested", "task=%s", o->id);
		note(r, o->id, "job_suspend_requested", NULL);
		return adopt(r, o, res->body);
	}
	if (res->status == 404) {
		o->op = OP_NONE;
		return start_get(r, o); /* gone since we looked: the GET records it */
	}
	op_failed(r, o, "suspend_job", res);
}

static void start_patch_suspend(struct reconciler *r, struct rop *o)
{
	char path[256], name[64];
	snprintf(path, sizeof path, "/apis/batch/v1/namespaces/%s/jobs/%s", r->ns,
		 jobspec_name(o->id, name, sizeof name));
	json_t *patch = json_pack("{s:{s:b}}", "spec", "suspend", 1);
	o->op = OP_PATCH_SUSPEND;
	o->req = kube_request(r->kube, "PATCH", path, patch, "application/merge-patch+json",
			      (int)r->srv->cfg->kube_request_timeout_ms, on_patch, o);
	json_decref(patch);
	if (o->req < 0) {
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
	}
}

/* ---- the decision ---- */

/* A queued task waits for its intent from the queue. Without a queue, or when the intent is
 * overdue (lost with a Redis that restarted without persistence), the reconciler takes it;
 * an overdue one only while the API client has room, so a backlog older than the grace
 * waits in the stream (its intents come in turn), not in the client's queue. */
static int queued_is_ours(struct reconciler *r, const struct task_row *row, int64_t now)
{
	if (!r->srv->intents)
		return 1;
	return now - row->created_ms >= r->srv->cfg->reconcile_queued_grace_ms &&
	       kube_room(r->kube) > 0;
}

/* Picks the next Kubernetes operation for the task, if any. */
static void act(struct reconciler *r, struct rop *o, const struct task_row *row,
		const struct view *v)
{
	int cancel = row->cancel_requested || strcmp(row->state, "cancelling") == 0;
	int final = store_state_is_final(row->state);
	if (release_candidate(r, row, v))
		return start_list_pods(r, o);
	if (row->released || v->job_gone)
		return;
	if (cancel && v->job && !json_is_true(jpath(v->job, "spec", "suspend")))
		return start_patch_suspend(r, o);
	if (v->job)
		return;
	/* No Job in the picture: observe before creating (or, with a uid recorded, find out
	 * whether it is gone). A cancelled task gets the suspended marker. */
	if (row->job_uid[0] || cancel || (!final && strcmp(row->state, "queued") != 0))
		start_get(r, o);
}

static void reconcile_task(struct reconciler *r, const char *id, int64_t now)
{
	struct task_row row, seen;
	int rc = store_task_load(r->srv->store, id, &row);
	struct rop *o = rop_get(r, id, 1);
	if (rc) {
		waiters_fire(o, rc);
		rop_drop(r, id);
		return;
	}
	if (o->op != OP_NONE)
		return; /* the operation's answer marks the task dirty again */
	if (strcmp(row.state, "queued") == 0 && !row.cancel_requested && queued_is_ours(r, &row, now)) {
		char expected[16] = "queued";
		snprintf(row.state, sizeof row.state, "creating");
		json_t *d = json_pack("{s:s}", "intent", r->srv->intents ? "overdue" : "no_queue");
		rc = store_task_observe(r->srv->store, &row, expected, d, now);
		json_decref(d);
		if (rc)
			return mark_dirty(r, id);
	}
	struct view v;
	view_build(r, &row, &v);
	seen = row;
	observe(r, &row, &v);
	if (row_differs(&row, &seen)) {
		rc = store_task_observe(r->srv->store, &row, seen.state, NULL, now);
		if (rc == GWB_ECONFLICT) {
			json_decref(v.pods);
			return mark_dirty(r, id); /* changed under us (a cancel): decide again */
		}
	}
	if (now >= o->next_try_ms)
		act(r, o, &row, &v);
	json_decref(v.pods);
	if (o->op == OP_NONE)
		waiters_fire(o, 0);
	if (o->op == OP_NONE && o->nwaiters == 0 && store_state_is_final(row.state) && row.released)
		rop_drop(r, id);
}

static void on_safe_point(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct reconciler *r = arg;
	json_t *dirty = r->dirty;
	r->dirty = json_object();
	int64_t now = clock_now_ms();
	const char *id;
	json_t *v;
	json_object_foreach(dirty, id, v)
		reconcile_task(r, id, now);
	json_decref(dirty);
}

static void on_cron(void *arg, int64_t now)
{
	struct reconciler *r = arg;
	if (now - r->last_resync_ms >= r->srv->cfg->reconcile_resync_ms) {
		r->last_resync_ms = now;
		mark_active(r);
	}
	for (struct rop *o = r->rops; o; o = o->next)
		if (o->op == OP_NONE && o->next_try_ms && o->next_try_ms <= now)
			mark_dirty(r, o->id);
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
	json_t *j = json_object(), *p = json_object(), *d = json_object();
	informer_describe(r->jobs_inf, j);
	informer_describe(r->pods_inf, p);
	informer_describe(r->devs_inf, d);
	json_object_set_new(detail, "server", json_string(kube_server(r->kube)));
	json_object_set_new(detail, "namespace", json_string(r->ns));
	json_object_set_new(detail, "informers",
			    json_pack("{s:o, s:o, s:o}", "jobs", j, "pods", p, "devices", d));
	json_t *api = json_object();
	kube_describe(r->kube, api);
	json_object_set_new(detail, "api", api);
	if (!kube_reachable(r->kube))
		return "unreachable";
	return picture_fresh(r) ? "ok" : "stale";
}

/* ---- public ---- */

void reconciler_intent(struct reconciler *r, const char *kind, const char *task_id,
		       reconciler_done_fn done, void *arg)
{
	struct task_row row;
	int rc = store_task_load(r->srv->store, task_id, &row);
	if (rc) {
		done(arg, rc);
		return;
	}
	int64_t now = clock_now_ms();
	if (strcmp(row.state, "queued") == 0 && strcmp(kind, "create") == 0) {
		char expected[16] = "queued";
		snprintf(row.state, sizeof row.state, "creating");
		json_t *d = json_pack("{s:s}", "intent", kind);
		rc = store_task_observe(r->srv->store, &row, expected, d, now);
		json_decref(d);
		if (rc && rc != GWB_ECONFLICT) {
			done(arg, rc);
			return;
		}
	}
	struct rop *o = rop_get(r, task_id, 1);
	o->next_try_ms = 0; /* an intent is a reason to try now */
	o->backoff_ms = 0;
	if (o->nwaiters == MAX_WAITERS) {
		done(arg, 0); /* the task is recorded; more waiters add nothing */
	} else {
		o->waiters[o->nwaiters].fn = done;
		o->waiters[o->nwaiters].arg = arg;
		o->nwaiters++;
	}
	mark_dirty(r, task_id);
}

int reconciler_fresh(const struct reconciler *r)
{
	return picture_fresh(r);
}

int reconciler_reachable(const struct reconciler *r)
{
	return kube_reachable(r->kube);
}

struct kube *reconciler_kube(struct reconciler *r)
{
	return r->kube;
}

void reconciler_kick(struct reconciler *r, const char *task_id)
{
	if (r)
		mark_dirty(r, task_id);
}

json_t *reconciler_devices_json(struct reconciler *r)
{
	struct diag_cards *cards = gwb_malloc(sizeof *cards);
	diag_cards_build(cards, r->devs.map, r->pods.map);
	json_t *out = json_pack("{s:o, s:b, s:s}", "cards", diag_cards_json(cards), "fresh",
				informer_fresh(r->devs_inf) && informer_fresh(r->pods_inf), "note",
				"allocated comes from the scheduler's device-allocated annotations "
				"of gwb Pods; it is a budget, not a measurement");
	gwb_free(cards);
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

int reconciler_new(struct reconciler **out, struct server *srv, char *err, size_t errlen)
{
	*out = NULL;
	struct kube_auth auth;
	int rc = find_api(srv->cfg, &auth, err, errlen);
	if (rc)
		return rc;
	struct reconciler *r = gwb_calloc(1, sizeof *r);
	r->srv = srv;
	snprintf(r->ns, sizeof r->ns, "%s", srv->cfg->kube_namespace);
	rc = kube_new(&r->kube, srv->base, &auth, err, errlen);
	log_info("recon", "api_server", "server=%s source=%s", log_q(auth.server),
		 log_q(auth.source));
	kube_auth_free(&auth);
	if (rc) {
		gwb_free(r);
		return rc;
	}
	r->jobs.map = json_object();
	r->pods.map = json_object();
	r->devs.map = json_object();
	r->dirty = json_object();
	r->gone = json_object();
	r->sched_seen = json_object();
	r->safe_point = event_new(srv->base, -1, 0, on_safe_point, r);
	char jobs[256], pods[256];
	snprintf(jobs, sizeof jobs, "/apis/batch/v1/namespaces/%s/jobs", r->ns);
	snprintf(pods, sizeof pods, "/api/v1/namespaces/%s/pods", r->ns);
	int wt = (int)srv->cfg->kube_watch_timeout_seconds, idle = (int)srv->cfg->kube_watch_idle_seconds;
	r->jobs_kind = (struct kind){ r, &r->jobs, job_gone, task_of_into_dirty };
	r->pods_kind = (struct kind){ r, &r->pods, pod_gone, task_of_into_dirty };
	r->devs_kind = (struct kind){ r, &r->devs, NULL, mark_all };
	r->jobs_inf = informer_new(r->kube, srv->base, "jobs", jobs, GWB_LABEL_MANAGED "=true", wt,
				   idle, &kind_ops, &r->jobs_kind);
	r->pods_inf = informer_new(r->kube, srv->base, "pods", pods, GWB_LABEL_MANAGED "=true", wt,
				   idle, &kind_ops, &r->pods_kind);
	r->devs_inf = informer_new(r->kube, srv->base, "devices",
				   "/apis/scheduling.koordinator.sh/v1alpha1/devices", NULL, wt, idle,
				   &kind_ops, &r->devs_kind);
	char events[256];
	snprintf(events, sizeof events, "/api/v1/namespaces/%s/events", r->ns);
	r->events_inf = informer_new(r->kube, srv->base, "events", events, NULL, wt, idle,
				     &event_ops, r);
	informer_start(r->events_inf);
	informer_start(r->jobs_inf);
	informer_start(r->pods_inf);
	informer_start(r->devs_inf);
	server_cron_add(srv, on_cron, r);
	server_health_add(srv, "kube", health, r);
	*out = r;
	return 0;
}

void reconciler_free(struct reconciler *r)
{
	if (!r)
		return;
	informer_free(r->jobs_inf);
	informer_free(r->pods_inf);
	informer_free(r->devs_inf);
	informer_free(r->events_inf);
	kube_free(r->kube);
	while (r->rops) {
		struct rop *o = r->rops;
		r->rops = o->next;
		gwb_free(o);
	}
	json_decref(r->jobs.map);
	json_decref(r->pods.map);
	json_decref(r->devs.map);
	json_decref(r->jobs.listing);
	json_decref(r->pods.listing);
	json_decref(r->devs.listing);
	json_decref(r->dirty);
	json_decref(r->gone);
	json_decref(r->sched_seen);
	event_free(r->safe_point);
	gwb_free(r);
}
