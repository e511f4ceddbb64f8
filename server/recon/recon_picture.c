/* The picture: three informers feed three caches; Pods are also indexed by task, so a task's
 * view costs its own Pods, not every Pod. The caches hold references to the informers'
 * objects, not copies: an informer drops its document (the list answer, the watch line) once
 * the upsert returns and nobody changes an object after parsing it, so a reference is as good
 * as a copy and costs nothing per event. The index holds references to the same objects. The
 * cluster's identity (the uid of its kube-system namespace) is read again after every list of
 * Jobs or Pods, and the picture is fresh only once it has been: a list from a replaced cluster
 * is never taken for deletions in the old one. */
#include "server/recon/recon_picture.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "lib/kobj.h"
#include "lib/log.h"
#include "server/kube/informer.h"
#include "server/recon/jobspec.h"

struct picture;

/* One kind of object: its informer feeds map; gone() hears of objects that were deleted (an
 * event, or absence from a fresh list); mark() decides which tasks to revisit. */
struct kind {
	struct picture *p;
	struct informer *inf;
	json_t *map;     /* name -> object */
	json_t *listing; /* during a list: the names it has shown so far */
	int index_pods;  /* keep by_task current */
	void (*gone)(struct picture *p, json_t *obj);
	void (*mark)(struct picture *p, const json_t *obj);
};

/* The namespace whose uid names the cluster: the API server creates it at its first start and
 * never lets it be deleted, so its uid changes only when the cluster's store is a new one (a
 * cluster rebuilt, restored empty or replaced behind the same address). Our own namespace
 * would not do: it can be deleted and created again (and its deletion stops its Pods first,
 * which the informers observe). */
#define IDENTITY_PATH "/api/v1/namespaces/kube-system"
#define IDENTITY_TIMEOUT_MS 30000
#define IDENTITY_BACKOFF_MIN_MS 200
#define IDENTITY_BACKOFF_MAX_MS 5000

/* The identity check: IDLE (read, or unreadable) / READING (a GET in flight) / WAITING (a
 * back-off before the next GET). checked says whether the last read came after the last list
 * of Jobs and Pods and while both informers were fresh. */
struct identity {
	struct kube *k;
	struct event *timer;
	struct backoff bo;
	long req;             /* the GET in flight, 0 when none */
	int again;            /* a list came while the GET was in flight: read once more */
	int checked;
	char uid[64];         /* "" when the namespace cannot be read (no permission, say) */
	int replacements;     /* uid changes seen */
	int unreadable_said;  /* the warning that it cannot be read was logged */
	char previous[64];    /* the uid before the last change */
};

struct picture {
	struct kind jobs, pods, devs;
	struct identity id;
	json_t *by_task; /* task id -> {pod name -> Pod} (the objects of pods.map) */
	json_t *gone;    /* task id -> uid of its Job, observed deleted */
	const struct picture_ops *ops;
	void *arg;
};

/* ---- the task -> Pods index ---- */

static void index_del(struct picture *p, const char *name, const json_t *pod)
{
	const char *task = jobspec_task_of(pod);
	json_t *pods = task ? json_object_get(p->by_task, task) : NULL;
	if (!pods)
		return;
	json_object_del(pods, name);
	if (json_object_size(pods) == 0)
		json_object_del(p->by_task, task);
}

static void index_put(struct picture *p, const char *name, json_t *pod)
{
	const char *task = jobspec_task_of(pod);
	if (!task)
		return;
	json_t *pods = json_object_get(p->by_task, task);
	if (!pods) {
		pods = json_object();
		json_object_set_new(p->by_task, task, pods);
	}
	json_object_set(pods, name, pod);
}

/* ---- caches ---- */

static void kind_forget(struct kind *k, const char *name)
{
	json_t *old = json_object_get(k->map, name);
	if (old && k->index_pods)
		index_del(k->p, name, old);
	json_object_del(k->map, name);
}

static void identity_start(struct picture *p);

/* A list of Jobs or Pods may come from another cluster than the identity was read from. */
static void identity_invalidate(struct kind *k)
{
	struct picture *p = k->p;
	if (k == &p->devs)
		return;
	p->id.checked = 0;
	if (p->id.req)
		p->id.again = 1;
}

static void kind_list_begin(void *arg)
{
	struct kind *k = arg;
	json_decref(k->listing);
	k->listing = json_object();
	identity_invalidate(k);
}

static void kind_upsert(void *arg, json_t *obj)
{
	struct kind *k = arg;
	const char *name = kobj_name(obj);
	if (name) {
		json_t *old = json_object_get(k->map, name);
		if (old && k->index_pods)
			index_del(k->p, name, old);
		json_object_set(k->map, name, obj);
		if (k->index_pods)
			index_put(k->p, name, obj);
		if (k->listing)
			json_object_set_new(k->listing, name, json_true());
	}
	k->mark(k->p, obj);
}

static void kind_remove(void *arg, json_t *obj)
{
	struct kind *k = arg;
	const char *name = kobj_name(obj);
	/* Report the last state we saw, which the DELETED event may not repeat. */
	json_t *last = name ? json_incref(json_object_get(k->map, name)) : NULL;
	if (name)
		kind_forget(k, name);
	if (k->gone)
		k->gone(k->p, last ? last : obj);
	k->mark(k->p, obj);
	json_decref(last);
}

/* A list ended: what it did not show is gone; gone objects are reported, then forgotten. */
static void kind_list_end(void *arg)
{
	struct kind *k = arg;
	const char *name;
	json_t *v, *tmp;
	json_object_foreach_safe(k->map, tmp, name, v) {
		if (json_object_get(k->listing, name))
			continue;
		if (k->gone)
			k->gone(k->p, v);
		kind_forget(k, name);
	}
	json_decref(k->listing);
	k->listing = NULL;
	/* A list that did not follow a stale spell (fresh_changed will not fire): read the
	 * identity for it here. */
	struct picture *p = k->p;
	if (k != &p->devs && informer_fresh(p->jobs.inf) && informer_fresh(p->pods.inf))
		identity_start(p);
}

static void kind_fresh_changed(void *arg, int fresh)
{
	struct kind *k = arg;
	if (k == &k->p->devs) {
		if (fresh)
			k->p->ops->dirty_all(k->p->arg);
		return;
	}
	/* Stale: requests may reach another cluster before the lists do. Fresh again: read the
	 * identity, then tell every task (a fresh picture may prove what a stale one could
	 * not). */
	identity_invalidate(k);
	if (fresh && informer_fresh(k->p->jobs.inf) && informer_fresh(k->p->pods.inf))
		identity_start(k->p);
}

static const struct informer_ops kind_ops = { kind_list_begin, kind_upsert, kind_remove,
					      kind_list_end, kind_fresh_changed };

/* ---- what each kind reports ---- */

static void mark_task(struct picture *p, const json_t *obj)
{
	const char *task = jobspec_task_of(obj);
	if (task)
		p->ops->dirty(p->arg, task);
}

static void mark_all(struct picture *p, const json_t *obj)
{
	(void)obj;
	p->ops->dirty_all(p->arg); /* a device change can change every pending diagnosis */
}

static void pod_gone(struct picture *p, json_t *pod)
{
	const char *task = jobspec_task_of(pod);
	if (!task)
		return;
	p->ops->note(p->arg, task, "pod_deleted",
		     json_pack("{s:s?, s:s?, s:s?, s:s?}", "pod", kobj_name(pod), "uid",
			       kobj_uid(pod), "last_phase", kobj_phase(pod), "observed_at_rv",
			       informer_rv(p->pods.inf)));
	p->ops->dirty(p->arg, task);
}

static void job_gone(struct picture *p, json_t *job)
{
	const char *task = jobspec_task_of(job), *uid = kobj_uid(job);
	if (!task)
		return;
	if (uid)
		json_object_set_new(p->gone, task, json_string(uid));
	p->ops->note(p->arg, task, "job_deleted",
		     json_pack("{s:s?, s:s?, s:s?}", "job", kobj_name(job), "uid", uid,
			       "observed_at_rv", informer_rv(p->jobs.inf)));
	p->ops->dirty(p->arg, task);
}

/* ---- the cluster's identity ---- */

static void identity_retry(struct picture *p, const char *why)
{
	int64_t wait_ms = backoff_next(&p->id.bo);
	log_warn("recon", "cluster_identity_retry", "wait_ms=%lld reason=%s", (long long)wait_ms,
		 log_q(why));
	struct timeval tv = { (time_t)(wait_ms / 1000), (suseconds_t)((wait_ms % 1000) * 1000) };
	evtimer_add(p->id.timer, &tv);
}

static void on_identity(void *arg, const struct kube_result *res)
{
	struct picture *p = arg;
	p->id.req = 0;
	if (p->id.again) {
		p->id.again = 0;
		return identity_start(p);
	}
	const char *uid = res->outcome == KUBE_OK ? kobj_uid(res->body) : NULL;
	if (uid) {
		if (p->id.uid[0] && strcmp(p->id.uid, uid) != 0) {
			p->id.replacements++;
			snprintf(p->id.previous, sizeof p->id.previous, "%s", p->id.uid);
			log_warn("recon", "cluster_replaced",
				 "old_uid=%s new_uid=%s note=%s", log_q(p->id.uid), log_q(uid),
				 log_q("Jobs recorded on the old cluster hold their quota until their "
				       "Pods' deadline"));
		}
		snprintf(p->id.uid, sizeof p->id.uid, "%s", uid);
		p->id.unreadable_said = 0;
	} else if (res->outcome == KUBE_REJECTED) {
		/* Not allowed to read it (or no such namespace): no replacement can be
		 * recognised, and a vanished Job counts as deleted, as it did before. */
		if (!p->id.unreadable_said)
			log_warn("recon", "cluster_identity_unreadable",
				 "status=%ld path=%s note=%s", res->status, IDENTITY_PATH,
				 log_q("a replaced cluster cannot be recognised: grant get on "
				       "namespaces/kube-system"));
		p->id.unreadable_said = 1;
		p->id.uid[0] = '\0';
	} else {
		return identity_retry(p, res->reason ? res->reason : "no answer");
	}
	backoff_reset(&p->id.bo);
	/* Only valid while both informers are still fresh (neither relisted meanwhile). */
	p->id.checked = informer_fresh(p->jobs.inf) && informer_fresh(p->pods.inf);
	if (p->id.checked)
		p->ops->dirty_all(p->arg);
}

static void identity_start(struct picture *p)
{
	if (p->id.req) {
		p->id.again = 1;
		return;
	}
	evtimer_del(p->id.timer);
	p->id.req = kube_request(p->id.k, "GET", IDENTITY_PATH, NULL, NULL, IDENTITY_TIMEOUT_MS,
				 on_identity, p);
	if (p->id.req < 0) {
		p->id.req = 0;
		identity_retry(p, "cannot start the request");
	}
}

static void on_identity_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct picture *p = arg;
	if (informer_fresh(p->jobs.inf) && informer_fresh(p->pods.inf))
		identity_start(p);
}

/* ---- public ---- */

static void kind_init(struct picture *p, struct kind *k, int index_pods,
		      void (*gone)(struct picture *, json_t *),
		      void (*mark)(struct picture *, const json_t *))
{
	k->p = p;
	k->map = json_object();
	k->index_pods = index_pods;
	k->gone = gone;
	k->mark = mark;
}

struct picture *picture_new(struct kube *k, struct event_base *base, const char *ns,
			    int watch_timeout_s, int idle_s, const struct picture_ops *ops,
			    void *arg)
{
	struct picture *p = gwb_calloc(1, sizeof *p);
	p->ops = ops;
	p->arg = arg;
	p->by_task = json_object();
	p->gone = json_object();
	p->id.k = k;
	p->id.timer = evtimer_new(base, on_identity_timer, p);
	backoff_init(&p->id.bo, IDENTITY_BACKOFF_MIN_MS, IDENTITY_BACKOFF_MAX_MS,
		     (uint64_t)(uintptr_t)p ^ (uint64_t)clock_now_ms());
	kind_init(p, &p->jobs, 0, job_gone, mark_task);
	kind_init(p, &p->pods, 1, pod_gone, mark_task);
	kind_init(p, &p->devs, 0, NULL, mark_all);
	char jobs[256], pods[256];
	snprintf(jobs, sizeof jobs, "/apis/batch/v1/namespaces/%s/jobs", ns);
	snprintf(pods, sizeof pods, "/api/v1/namespaces/%s/pods", ns);
	p->jobs.inf = informer_new(k, base, "jobs", jobs, GWB_LABEL_MANAGED "=true",
				   watch_timeout_s, idle_s, &kind_ops, &p->jobs);
	p->pods.inf = informer_new(k, base, "pods", pods, GWB_LABEL_MANAGED "=true",
				   watch_timeout_s, idle_s, &kind_ops, &p->pods);
	p->devs.inf = informer_new(k, base, "devices",
				   "/apis/scheduling.koordinator.sh/v1alpha1/devices", NULL,
				   watch_timeout_s, idle_s, &kind_ops, &p->devs);
	return p;
}

void picture_start(struct picture *p)
{
	informer_start(p->jobs.inf);
	informer_start(p->pods.inf);
	informer_start(p->devs.inf);
}

void picture_free(struct picture *p)
{
	if (!p)
		return;
	struct kind *kinds[] = { &p->jobs, &p->pods, &p->devs };
	for (int i = 0; i < 3; i++)
		informer_free(kinds[i]->inf);
	if (p->id.req)
		kube_cancel(p->id.k, p->id.req);
	event_free(p->id.timer);
	for (int i = 0; i < 3; i++) {
		json_decref(kinds[i]->map);
		json_decref(kinds[i]->listing);
	}
	json_decref(p->by_task);
	json_decref(p->gone);
	gwb_free(p);
}

int picture_fresh(const struct picture *p)
{
	return informer_fresh(p->jobs.inf) && informer_fresh(p->pods.inf) && p->id.checked;
}

int picture_cards_fresh(const struct picture *p)
{
	return informer_fresh(p->devs.inf) && informer_fresh(p->pods.inf);
}

void picture_view(const struct picture *p, const struct task *t, struct recon_view *v)
{
	char name[64];
	task_job_name(t->id, name, sizeof name);
	json_t *job = json_object_get(p->jobs.map, name);
	if (job && !jobspec_is_ours(job, t->id))
		job = NULL;
	const char *gone = kobj_str(p->gone, t->id);
	/* A Job is called gone only on a picture whose cluster is known: before its identity
	 * is read again, the absence may be that of a replaced cluster. */
	recon_view_init(v, job, p->id.checked && !job && t->job_uid[0] && gone &&
					strcmp(gone, t->job_uid) == 0);
	v->cluster_uid = p->id.checked ? p->id.uid : NULL;
	v->now_ms = clock_now_ms();
	v->pod_deadline_s = jobspec_pod_deadline_s(t->duration_seconds);
	const char *pn;
	json_t *pod;
	json_object_foreach(json_object_get(p->by_task, t->id), pn, pod)
		recon_view_add_pod(v, pod);
}

void picture_job_gone(struct picture *p, const char *task_id, const char *uid)
{
	json_object_set_new(p->gone, task_id, json_string(uid));
}

void picture_forget(struct picture *p, const char *task_id)
{
	json_object_del(p->gone, task_id);
}

const json_t *picture_devices(const struct picture *p)
{
	return p->devs.map;
}

const json_t *picture_pods(const struct picture *p)
{
	return p->pods.map;
}

const json_t *picture_jobs(const struct picture *p)
{
	return p->jobs.map;
}

const char *picture_jobs_rv(const struct picture *p)
{
	return informer_rv(p->jobs.inf);
}

const char *picture_pods_rv(const struct picture *p)
{
	return informer_rv(p->pods.inf);
}

void picture_describe(const struct picture *p, json_t *o)
{
	json_t *j = json_object(), *q = json_object(), *d = json_object();
	informer_describe(p->jobs.inf, j);
	informer_describe(p->pods.inf, q);
	informer_describe(p->devs.inf, d);
	json_object_set_new(o, "jobs", j);
	json_object_set_new(o, "pods", q);
	json_object_set_new(o, "devices", d);
}

void picture_describe_cluster(const struct picture *p, json_t *o)
{
	json_object_set_new(o, "identity", json_string(IDENTITY_PATH));
	json_object_set_new(o, "uid", p->id.uid[0] ? json_string(p->id.uid) : json_null());
	json_object_set_new(o, "checked", json_boolean(p->id.checked));
	json_object_set_new(o, "replacements", json_integer(p->id.replacements));
	json_object_set_new(o, "previous_uid",
			    p->id.previous[0] ? json_string(p->id.previous) : json_null());
}
