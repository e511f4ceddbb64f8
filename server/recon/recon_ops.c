/* Per-task Kubernetes operations: GET, POST, PATCH suspend and the release's Pod list, with
 * their answers, the per-task back-off and the waiting intents. */
#include "server/recon/recon_ops.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/kobj.h"
#include "lib/log.h"
#include "lib/strmap.h"
#include "server/recon/jobspec.h"
#include "server/store/store_recon.h"

#define BACKOFF_MIN_MS 300
#define BACKOFF_MAX_MS 10000
#define MAX_WAITERS 8

enum op_kind { OP_NONE, OP_GET, OP_POST, OP_PATCH_SUSPEND, OP_LIST_PODS };

struct waiter {
	recon_done_fn fn;
	void *arg;
};

/* Per-task bookkeeping that lives only in memory: the operation in flight, the back-off, and
 * the intents waiting for an outcome. Everything else is in SQLite or the picture. */
struct rop {
	struct recon_ops *ops;
	char id[32];
	enum op_kind op;
	long req;
	int64_t next_try_ms;
	int64_t adopted_ms; /* when a Job was last adopted from an answer (0: never) */
	struct backoff bo;  /* between failed attempts */
	int64_t wait_ms;    /* the last wait it drew, for the logs */
	int nwaiters;
	struct waiter waiters[MAX_WAITERS];
	struct rop *next, *prev; /* ops->rops, newest first */
};

/* How long the watch gets to show a Job we created before the reconciler asks for it by
 * name (the watch normally shows it within milliseconds). */
#define ADOPT_WATCH_MS 5000

/* One Pod list that answers for several tasks (labelSelector gwb.io/task in (...)). */
#define LIST_BATCH_MAX 32 /* task ids per list: the selector stays well inside a URL */
/* While the Kubernetes client is busy (more than one round of requests out or queued), the
 * releases' lists are held up to this long to share one list: under a burst, tasks end a few
 * at a time, and one list each took most of kube.qps away from the creates. */
#define LIST_HOLD_MS 1000
struct list_batch {
	struct recon_ops *ops;
	int n;
	char ids[LIST_BATCH_MAX][32];
	struct list_batch *next;
};

/* Adoptions (a create's, a GET's or a suspend's answer) are recorded in SQLite together: one
 * COMMIT with synchronous=FULL, so one fsync on the loop, for many answers. While the
 * Kubernetes client is busy they are held up to ADOPT_HOLD_MS or until ADOPT_BATCH_MAX have
 * gathered (under a burst creates are answered one at a time, and one fsync each would keep
 * the loop waiting); otherwise they are recorded at the next safe point. The hold is checked
 * where the lists' is (recon_ops_flush: every safe point, and the housekeeping tick, so a
 * hold outlasts ADOPT_HOLD_MS by up to a tick when no answer or event comes meanwhile). The task's operation stays in progress until its record is
 * committed, and its waiters (the intents it answers) fire only then. */
#define ADOPT_BATCH_MAX 32
#define ADOPT_HOLD_MS 200
struct adoption {
	struct rop *o;
	char uid[64];
	int suspended;
	int then_backoff; /* a GET's answer: wait a little before asking again */
};

struct recon_ops {
	struct recon_ctx c;
	struct adoption adoptions[ADOPT_BATCH_MAX];
	int nadoptions;
	int64_t adopt_since_ms; /* monotonic: when the oldest of them was held */
	struct rop *rops;           /* every tracked task, newest first (the walks' order) */
	struct strmap *by_id;       /* task id -> its struct rop in rops */
	struct list_batch *batches; /* in flight; freed when answered or with ops */
	int lists_held;             /* Pod lists asked for and not sent yet */
	int64_t held_since_ms;      /* monotonic: when the oldest of them was asked for */
};

/* ---- bookkeeping ---- */

/* The task's bookkeeping, found through the index (a burst tracks thousands of tasks, and
 * every answer and every decision looks one up); with create, started when there is none. */
static struct rop *rop_get(struct recon_ops *ops, const char *id, int create)
{
	struct rop *o = strmap_get(ops->by_id, id);
	if (o || !create)
		return o;
	o = gwb_calloc(1, sizeof *o);
	snprintf(o->id, sizeof o->id, "%s", id);
	o->ops = ops;
	backoff_init(&o->bo, BACKOFF_MIN_MS, BACKOFF_MAX_MS,
		     (uint64_t)(uintptr_t)o ^ (uint64_t)clock_now_ms());
	o->next = ops->rops;
	if (o->next)
		o->next->prev = o;
	ops->rops = o;
	strmap_put(ops->by_id, o->id, o);
	return o;
}

static void rop_drop(struct recon_ops *ops, const char *id)
{
	struct rop *o = strmap_get(ops->by_id, id);
	if (!o || o->op != OP_NONE || o->nwaiters != 0)
		return;
	picture_forget(ops->c.pic, id); /* nothing more is decided for this task */
	strmap_del(ops->by_id, o->id);
	if (o->prev)
		o->prev->next = o->next;
	else
		ops->rops = o->next;
	if (o->next)
		o->next->prev = o->prev;
	gwb_free(o);
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
	o->wait_ms = backoff_next(&o->bo);
	o->next_try_ms = now + o->wait_ms;
}

static void note(struct recon_ops *ops, const char *id, const char *type, json_t *detail)
{
	if (store_task_note(ops->c.store, id, type, detail, clock_now_ms()))
		log_error("recon", "note_failed", "task=%s type=%s", id, type);
	json_decref(detail);
}

static void op_done_common(struct rop *o)
{
	o->op = OP_NONE;
	o->req = 0;
	o->ops->c.dirty(o->ops->c.arg, o->id);
}

/* Sends one request for o. On a send failure the task backs off. */
static void op_send(struct rop *o, enum op_kind op, const char *method, const char *path,
		 json_t *body, const char *ctype, kube_done_fn cb)
{
	o->op = op;
	o->req = kube_request(o->ops->c.kube, method, path, body, ctype,
			      o->ops->c.request_timeout_ms, cb, o);
	if (o->req < 0) {
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
	}
}

static void job_path(const struct rop *o, int named, char *path, size_t len)
{
	char name[64];
	if (named)
		snprintf(path, len, "/apis/batch/v1/namespaces/%s/jobs/%s", o->ops->c.ns,
			 task_job_name(o->id, name, sizeof name));
	else
		snprintf(path, len, "/apis/batch/v1/namespaces/%s/jobs", o->ops->c.ns);
}

/* An operation's outcome for t (loaded): the move to state with reason, unless t is final
 * or cancelling (only the release moves those), applied by the store's door. detail is
 * stolen. */
static void outcome(struct recon_ops *ops, struct task *t, enum task_state state,
		    enum task_reason reason, json_t *detail)
{
	if (!task_state_is(t->state, TASK_FINAL) && t->state != TASK_CANCELLING) {
		struct task_move m = { state, reason, TASK_EVENT_STATE, detail };
		store_task_move(ops->c.store, t, &m, clock_now_ms());
	}
	json_decref(detail);
}

/* outcome() for the task of o, read once here. */
static void outcome_of(struct rop *o, enum task_state state, enum task_reason reason,
		       json_t *detail)
{
	struct task *t = gwb_malloc(sizeof *t);
	if (store_task_load(o->ops->c.store, o->id, t) == 0)
		outcome(o->ops, t, state, reason, json_incref(detail));
	json_decref(detail);
	gwb_free(t);
}

static void start_get(struct rop *o);

/* An unknown outcome keeps the quota and the task in "unknown"; the next attempt observes
 * before it creates again. */
static void op_failed(struct rop *o, const char *what, const struct kube_result *res)
{
	struct recon_ops *ops = o->ops;
	backoff(o, clock_now_ms());
	json_t *d = json_pack("{s:s, s:s, s:I, s:s?, s:i}", "operation", what, "outcome",
			      res->outcome == KUBE_UNKNOWN ? "unknown" : "not_sent", "status",
			      (json_int_t)res->status, "reason", res->reason, "retry_in_ms",
			      (int)o->wait_ms);
	log_warn("recon", "kube_op_failed", "task=%s op=%s status=%ld reason=%s retry_ms=%lld",
		 o->id, what, res->status, log_q(res->reason), (long long)o->wait_ms);
	struct task *t = gwb_malloc(sizeof *t);
	int creating = (strcmp(what, "create_job") == 0 || strcmp(what, "get_job") == 0) &&
		       store_task_load(ops->c.store, o->id, t) == 0 && !t->job_uid[0];
	if (creating)
		/* Before a Job is known, an unreachable API or an unanswered create leaves the
		 * task's fate unknown (ARCHITECTURE: creating -> unknown, quota kept, retried). */
		outcome(ops, t, TASK_UNKNOWN,
			res->outcome == KUBE_UNKNOWN && strcmp(what, "create_job") == 0
				? TASK_REASON_CREATE_UNKNOWN
				: TASK_REASON_API_UNREACHABLE,
			d);
	else
		note(ops, o->id, "api_unreachable", d);
	gwb_free(t);
	op_done_common(o);
	waiters_fire(o, 0);
}

static void adoptions_record(struct recon_ops *ops);

/* Records that the task's Job exists (its uid) in SQLite, with the adoptions held beside it
 * (see struct adoption). The picture is left to the watch: an answer may be older than what
 * the watch already showed. then_backoff: a GET's answer (the watch will show it; wait a
 * little before asking again). */
static void adopt(struct rop *o, const json_t *job, int then_backoff)
{
	struct recon_ops *ops = o->ops;
	if (ops->nadoptions == ADOPT_BATCH_MAX)
		adoptions_record(ops);
	struct adoption *a = &ops->adoptions[ops->nadoptions++];
	a->o = o;
	const char *uid = kobj_uid(job);
	snprintf(a->uid, sizeof a->uid, "%s", uid ? uid : "");
	a->suspended = kobj_suspended(job);
	a->then_backoff = then_backoff;
	if (ops->nadoptions == 1)
		ops->adopt_since_ms = clock_mono_ms();
	o->req = 0; /* answered: nothing in flight, but o->op lasts until it is recorded */
	ops->c.dirty(ops->c.arg, o->id); /* a safe point comes, and flushes (recon_ops_flush) */
}

/* The held adoptions in one transaction (each write a savepoint of it): one fsync. The
 * outcomes of the intents they answer are written by their waiters inside it too; what the
 * waiters send (acknowledgements) leaves the loop only after this returns, so after the
 * COMMIT. */
static void adoptions_record(struct recon_ops *ops)
{
	int n = ops->nadoptions;
	if (!n)
		return;
	struct adoption held[ADOPT_BATCH_MAX];
	memcpy(held, ops->adoptions, sizeof held[0] * (size_t)n);
	ops->nadoptions = 0;
	int batch = store_batch_begin(ops->c.store) == 0;
	struct task *t = gwb_malloc(sizeof *t);
	int64_t now = clock_now_ms();
	for (int i = 0; i < n; i++) {
		struct rop *o = held[i].o;
		if (held[i].uid[0] && store_task_load(ops->c.store, o->id, t) == 0 &&
		    strcmp(t->job_uid, held[i].uid) != 0) {
			TASK_SET_TEXT(t, job_uid, held[i].uid);
			task_set_bool(t, &t->job_suspended, held[i].suspended);
			json_t *d = json_pack("{s:s}", "job_uid", held[i].uid);
			struct task_move m = task_stay(t);
			m.detail = d;
			/* Adopted: a Job of ours exists, so the task waits for its Pod. */
			if (t->state == TASK_UNKNOWN || t->state == TASK_CREATING)
				m.to = TASK_PENDING;
			if (store_task_move(ops->c.store, t, &m, now))
				log_warn("recon", "adopt_not_recorded", "task=%s", o->id);
			json_decref(d);
		}
	}
	gwb_free(t);
	for (int i = 0; i < n; i++) {
		struct rop *o = held[i].o;
		backoff_reset(&o->bo);
		o->next_try_ms = 0;
		o->adopted_ms = now;
		op_done_common(o);
		waiters_fire(o, 0);
		if (held[i].then_backoff)
			backoff(o, now);
	}
	if (batch && store_batch_commit(ops->c.store))
		log_warn("recon", "adopt_not_recorded", "tasks=%d db=%s", n,
			 log_q(store_errmsg(ops->c.store)));
}

/* ---- create ---- */

static void on_post(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	if (res->outcome == KUBE_OK && json_is_object(res->body)) {
		log_info("recon", "job_created", "task=%s uid=%s", o->id,
			 log_q(kobj_uid(res->body)));
		return adopt(o, res->body, 0);
	}
	if (res->outcome == KUBE_REJECTED && res->status == 409) {
		/* AlreadyExists: ours from an earlier attempt whose answer was lost, or a cancel
		 * marker. Observe and adopt. */
		note(o->ops, o->id, "create_conflict",
		     json_pack("{s:s}", "detail", "the Job exists already; observing it"));
		o->op = OP_NONE;
		return start_get(o);
	}
	if (res->outcome == KUBE_REJECTED) {
		json_t *d = json_pack("{s:I, s:s?, s:O?}", "status", (json_int_t)res->status,
				      "reason", res->reason, "answer", res->body);
		outcome_of(o, TASK_FAILED, TASK_REASON_JOB_REJECTED, d);
		op_done_common(o);
		waiters_fire(o, 0);
		return;
	}
	op_failed(o, "create_job", res);
}

static void start_post(struct rop *o, const struct task *t)
{
	const struct recon_ctx *c = &o->ops->c;
	struct jobspec_in in = { t->id, t->team, t->gpu_memory_mib, t->gpu_core_percent,
				 t->gpu_count, t->duration_seconds, t->qos, t->experiment, c->ns,
				 c->image, c->isolation, task_cancel_requested(t),
				 c->job_ttl_seconds, t->workload };
	json_t *job = jobspec_build(&in);
	if (!job) { /* its stored workload cannot be read: nothing to create */
		outcome_of(o, TASK_FAILED, TASK_REASON_JOB_REJECTED,
			   json_pack("{s:s}", "detail", "the task's workload cannot be read"));
		op_done_common(o);
		waiters_fire(o, 0);
		return;
	}
	char path[256];
	job_path(o, 0, path, sizeof path);
	op_send(o, OP_POST, "POST", path, job, NULL, on_post);
	json_decref(job);
}

/* ---- observe ---- */

static void on_get_absent(struct rop *o)
{
	struct recon_ops *ops = o->ops;
	struct task *t = gwb_malloc(sizeof *t);
	o->op = OP_NONE;
	if (store_task_load(ops->c.store, o->id, t) != 0 || t->released) {
		op_done_common(o);
		waiters_fire(o, 0);
	} else if (t->job_uid[0]) {
		/* The Job we created is gone: observed, not inferred. It is never made again
		 * under the same task. */
		picture_job_gone(ops->c.pic, o->id, t->job_uid);
		note(ops, o->id, "job_absent",
		     json_pack("{s:s, s:I}", "job_uid", t->job_uid, "status", 404));
		op_done_common(o);
		waiters_fire(o, 0);
	} else if (!task_state_is(t->state, TASK_FINAL)) {
		start_post(o, t);
	} else {
		op_done_common(o);
		waiters_fire(o, 0);
	}
	gwb_free(t);
}

static void on_get(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	if (res->outcome == KUBE_OK && json_is_object(res->body)) {
		if (jobspec_is_ours(res->body, o->id)) {
			/* The watch will show it; wait a little before asking again. */
			return adopt(o, res->body, 1);
		}
		json_t *d = json_pack("{s:s?, s:O?}", "job_uid", kobj_uid(res->body), "labels",
				      kobj_path(res->body, "metadata", "labels"));
		outcome_of(o, TASK_UNKNOWN, TASK_REASON_JOB_NAME_CONFLICT, d);
		o->op = OP_NONE;
		backoff(o, clock_now_ms());
		waiters_fire(o, 0);
		return;
	}
	if (res->status == 404)
		return on_get_absent(o);
	op_failed(o, "get_job", res);
}

static void start_get(struct rop *o)
{
	char path[256];
	job_path(o, 1, path, sizeof path);
	op_send(o, OP_GET, "GET", path, NULL, NULL, on_get);
}

/* ---- cancel ---- */

static void on_patch(void *arg, const struct kube_result *res)
{
	struct rop *o = arg;
	if (res->outcome == KUBE_OK && json_is_object(res->body)) {
		log_info("recon", "job_suspend_requested", "task=%s", o->id);
		note(o->ops, o->id, "job_suspend_requested", NULL);
		return adopt(o, res->body, 0);
	}
	if (res->status == 404) {
		o->op = OP_NONE;
		return start_get(o); /* gone since we looked: the GET records it */
	}
	op_failed(o, "suspend_job", res);
}

static void start_patch_suspend(struct rop *o)
{
	char path[256];
	job_path(o, 1, path, sizeof path);
	json_t *patch = json_pack("{s:{s:b}}", "spec", "suspend", 1);
	op_send(o, OP_PATCH_SUSPEND, "PATCH", path, patch, "application/merge-patch+json", on_patch);
	json_decref(patch);
}

/* ---- release ---- */

static json_t *job_evidence(const json_t *job)
{
	if (!job)
		return json_null();
	json_t *conds = json_array();
	static const char *const types[] = { "Complete", "Failed", "Suspended", NULL };
	for (const char *const *t = types; *t; t++)
		if (kobj_condition_true(job, *t))
			json_array_append_new(conds, json_string(*t));
	return json_pack("{s:s?, s:s?, s:s?, s:b, s:o}", "name", kobj_name(job), "uid",
			 kobj_uid(job), "resource_version", kobj_rv(job), "suspended",
			 kobj_suspended(job), "conditions", conds);
}

static json_t *pods_listed(const json_t *items)
{
	json_t *listed = json_array();
	size_t i;
	json_t *p;
	json_array_foreach(items, i, p)
		json_array_append_new(listed, json_pack("{s:s?, s:s?, s:s?, s:b}", "name",
							kobj_name(p), "uid", kobj_uid(p), "phase",
							kobj_phase(p), "terminating",
							kobj_deleting(p)));
	return listed;
}

/* Releases with the evidence: the proof, the Job as the picture has it, every listed Pod. */
static void release(struct rop *o, const struct task *t, const struct recon_view *v,
		    const json_t *list, enum task_proof why, const struct task_move *m)
{
	struct recon_ops *ops = o->ops;
	json_t *ev = json_pack("{s:s, s:o, s:o, s:s?, s:s, s:s, s:s}", "proof",
			       task_proof_name(why), "job", job_evidence(v->job), "pods_listed",
			       pods_listed(json_object_get(list, "items")), "pods_list_rv",
			       kobj_rv(list), "jobs_watch_rv", picture_jobs_rv(ops->c.pic),
			       "pods_watch_rv", picture_pods_rv(ops->c.pic), "note",
			       "every Pod labelled with the task is listed; none is running; Pods "
			       "deleted earlier are in the pod_deleted events");
	int released = 0;
	int rc = store_task_release(ops->c.store, t->id, why, m->to, m->reason, ev, clock_now_ms(),
				    &released);
	if (rc)
		log_error("recon", "release_failed", "task=%s error=%s", t->id, err_name(rc));
	else if (released)
		log_info("recon", "released", "task=%s proof=%s final=%s", t->id,
			 task_proof_name(why), task_state_name(m->to));
	json_decref(ev);
}

/* The answer of a Pod list for o's task: list is {"metadata", "items"} holding every Pod with
 * the task's label (NULL when the question went unanswered). */
static void list_answered(struct rop *o, const json_t *list)
{
	struct recon_ops *ops = o->ops;
	o->op = OP_NONE;
	o->req = 0;
	json_t *items = json_object_get(list, "items");
	if (!json_is_array(items)) {
		backoff(o, clock_now_ms());
		return; /* nothing is released on an unanswered question; retried */
	}
	struct task *t = gwb_malloc(sizeof *t);
	if (store_task_load(ops->c.store, o->id, t) || t->released) {
		gwb_free(t);
		return;
	}
	/* The Pods' watch may lag this list: the task takes its Pod's end from the list. */
	decide_observe_listed(t, items);
	if (t->changed) {
		struct task_move m = task_stay(t);
		store_task_move(ops->c.store, t, &m, clock_now_ms());
	}
	struct recon_view v;
	picture_view(ops->c.pic, t, &v);
	struct task_move m;
	enum task_proof why = decide_release(t, &v, items, picture_fresh(ops->c.pic), &m);
	if (why != TASK_PROOF_NONE)
		release(o, t, &v, list, why, &m);
	else
		backoff(o, clock_now_ms());
	recon_view_clear(&v);
	gwb_free(t);
	ops->c.dirty(ops->c.arg, o->id);
}

static void batch_unlink(struct recon_ops *ops, struct list_batch *b)
{
	for (struct list_batch **pp = &ops->batches; *pp; pp = &(*pp)->next)
		if (*pp == b) {
			*pp = b->next;
			return;
		}
}

/* One list answers each task of the batch: its own Pods, picked by their task label, at the
 * list's resourceVersion. A list is one consistent snapshot, so it proves as much for each
 * task as a list of that task's Pods alone would. */
static void on_list_batch(void *arg, const struct kube_result *res)
{
	struct list_batch *b = arg;
	struct recon_ops *ops = b->ops;
	batch_unlink(ops, b);
	json_t *items = json_object_get(res->body, "items");
	int ok = res->outcome == KUBE_OK && json_is_array(items);
	/* The list's releases in one transaction (each a savepoint of it): one fsync per list,
	 * not one per task. Without a batch (another process holds the lock) each write stands
	 * alone, as before. Answers only mark tasks dirty, so nothing is told before the
	 * COMMIT; when it fails, nothing of the list is stored and the tasks, decided again from
	 * SQLite, ask for another list. */
	int batch = ok && store_batch_begin(ops->c.store) == 0;
	for (int i = 0; i < b->n; i++) {
		struct rop *o = rop_get(ops, b->ids[i], 0);
		if (!o || o->op != OP_LIST_PODS)
			continue;
		if (!ok) {
			list_answered(o, NULL);
			continue;
		}
		json_t *mine = json_array();
		size_t k;
		json_t *p;
		json_array_foreach(items, k, p) {
			const char *task = kobj_str(kobj_path(p, "metadata", "labels"), GWB_LABEL_TASK);
			if (task && strcmp(task, b->ids[i]) == 0)
				json_array_append(mine, p);
		}
		json_t *list = json_pack("{s:{s:s?}, s:o}", "metadata", "resourceVersion",
					 kobj_rv(res->body), "items", mine);
		list_answered(o, list);
		json_decref(list);
	}
	if (batch && store_batch_commit(ops->c.store))
		log_warn("recon", "list_commit_failed", "tasks=%d db=%s (no release of it stored)",
			 b->n, log_q(store_errmsg(ops->c.store)));
	gwb_free(b);
}

/* Step one of a release asks for a Pod list; the lists asked for go out together at
 * recon_ops_flush. */
static void start_list_pods(struct rop *o)
{
	o->op = OP_LIST_PODS;
	o->req = 0; /* waiting for the flush */
	if (!o->ops->lists_held++)
		o->ops->held_since_ms = clock_mono_ms();
}

/* Sends one list for the batch; on a send failure each of its tasks backs off. */
static void batch_send(struct recon_ops *ops, struct list_batch *b)
{
	char sel[LIST_BATCH_MAX * 34 + 64];
	size_t n = (size_t)snprintf(sel, sizeof sel, GWB_LABEL_TASK " in (");
	for (int i = 0; i < b->n; i++)
		n += (size_t)snprintf(sel + n, sizeof sel - n, "%s%s", i ? "," : "", b->ids[i]);
	snprintf(sel + n, sizeof sel - n, ")");
	char esc[3 * sizeof sel], path[sizeof esc + 128];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods?labelSelector=%s", ops->c.ns,
		 kube_query_escape(sel, esc, sizeof esc));
	long req = kube_request(ops->c.kube, "GET", path, NULL, NULL, ops->c.request_timeout_ms,
				on_list_batch, b);
	if (req < 0) {
		for (int i = 0; i < b->n; i++) {
			struct rop *o = rop_get(ops, b->ids[i], 0);
			if (o) {
				o->op = OP_NONE;
				backoff(o, clock_now_ms());
			}
		}
		gwb_free(b);
		return;
	}
	b->next = ops->batches;
	ops->batches = b;
	for (int i = 0; i < b->n; i++) {
		struct rop *o = rop_get(ops, b->ids[i], 0);
		if (o)
			o->req = req;
	}
}

/* ---- public ---- */

struct recon_ops *recon_ops_new(const struct recon_ctx *ctx)
{
	struct recon_ops *ops = gwb_calloc(1, sizeof *ops);
	ops->c = *ctx;
	ops->by_id = strmap_new();
	return ops;
}

void recon_ops_flush(struct recon_ops *ops)
{
	int busy = kube_room(ops->c.kube) < kube_window(ops->c.kube) / 2;
	if (ops->nadoptions &&
	    (!busy || clock_mono_ms() - ops->adopt_since_ms >= ADOPT_HOLD_MS))
		adoptions_record(ops);
	if (!ops->lists_held)
		return; /* most safe points ask for none: no walk over every operation */
	if (busy && ops->lists_held < LIST_BATCH_MAX &&
	    clock_mono_ms() - ops->held_since_ms < LIST_HOLD_MS)
		return; /* a later flush (a safe point, the housekeeping tick) sends them */
	ops->lists_held = 0;
	struct list_batch *b = NULL;
	for (struct rop *o = ops->rops; o; o = o->next) {
		if (o->op != OP_LIST_PODS || o->req != 0)
			continue;
		if (!b) {
			b = gwb_calloc(1, sizeof *b);
			b->ops = ops;
		}
		snprintf(b->ids[b->n++], sizeof b->ids[0], "%s", o->id);
		o->req = -1; /* taken into this batch */
		if (b->n == LIST_BATCH_MAX) {
			batch_send(ops, b);
			b = NULL;
		}
	}
	if (b)
		batch_send(ops, b);
}

void recon_ops_free(struct recon_ops *ops)
{
	if (!ops)
		return;
	while (ops->batches) {
		struct list_batch *b = ops->batches;
		ops->batches = b->next;
		gwb_free(b);
	}
	/* Adoptions still held (at most ADOPT_BATCH_MAX answers) are dropped with their
	 * waiters, as a kill -9 would drop them: the intents are redelivered after the restart,
	 * the create finds the Job (409) and its GET adopts it then. */
	while (ops->rops) {
		struct rop *o = ops->rops;
		ops->rops = o->next;
		gwb_free(o);
	}
	strmap_free(ops->by_id);
	gwb_free(ops);
}

int recon_ops_idle(struct recon_ops *ops, const char *id)
{
	return rop_get(ops, id, 1)->op == OP_NONE;
}

int recon_ops_due(struct recon_ops *ops, const char *id, int64_t now_ms)
{
	return now_ms >= rop_get(ops, id, 1)->next_try_ms;
}

void recon_ops_start(struct recon_ops *ops, const struct task *t, enum recon_action a)
{
	struct rop *o = rop_get(ops, t->id, 1);
	switch (a) {
	case RECON_GET:
		/* A Job adopted a moment ago and not yet in the picture is the watch lagging
		 * behind our own create: give the watch its time before asking by name (the
		 * watch's event, or the periodic resync, brings the task back). */
		if (o->adopted_ms && clock_now_ms() - o->adopted_ms < ADOPT_WATCH_MS)
			return;
		return start_get(o);
	case RECON_CREATE:
		return start_post(o, t);
	case RECON_SUSPEND:
		return start_patch_suspend(o);
	case RECON_LIST_PODS:
		return start_list_pods(o);
	case RECON_NONE:
		return;
	}
}

void recon_ops_wait(struct recon_ops *ops, const char *id, recon_done_fn fn, void *arg)
{
	struct rop *o = rop_get(ops, id, 1);
	o->next_try_ms = 0; /* an intent is a reason to try now */
	backoff_reset(&o->bo);
	if (o->nwaiters == MAX_WAITERS) {
		fn(arg, 0); /* the task is recorded; more waiters add nothing */
		return;
	}
	o->waiters[o->nwaiters].fn = fn;
	o->waiters[o->nwaiters].arg = arg;
	o->nwaiters++;
}

void recon_ops_settle(struct recon_ops *ops, const char *id, int rc, int done)
{
	struct rop *o = rop_get(ops, id, 0);
	if (!o)
		return;
	if (rc || o->op == OP_NONE)
		waiters_fire(o, rc);
	if (done)
		rop_drop(ops, id);
}

void recon_ops_each_due(struct recon_ops *ops, int64_t now_ms,
			void (*fn)(void *arg, const char *id), void *arg)
{
	for (struct rop *o = ops->rops; o; o = o->next)
		if (o->op == OP_NONE && o->next_try_ms && o->next_try_ms <= now_ms)
			fn(arg, o->id);
}
