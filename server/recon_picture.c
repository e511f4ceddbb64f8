/* The picture: three informers feed three caches; Pods are also indexed by task, so a task's
 * view costs its own Pods, not every Pod. The caches hold references to the informers'
 * objects, not copies: an informer drops its document (the list answer, the watch line) once
 * the upsert returns and nobody changes an object after parsing it, so a reference is as good
 * as a copy and costs nothing per event. The index holds references to the same objects. */
#include "server/recon_picture.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/kobj.h"
#include "server/informer.h"
#include "server/jobspec.h"

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

struct picture {
	struct kind jobs, pods, devs;
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

static void kind_list_begin(void *arg)
{
	struct kind *k = arg;
	json_decref(k->listing);
	k->listing = json_object();
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
}

static void kind_fresh_changed(void *arg, int fresh)
{
	struct kind *k = arg;
	if (fresh)
		k->p->ops->dirty_all(k->p->arg); /* a fresh picture may prove what a stale one could not */
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
	return informer_fresh(p->jobs.inf) && informer_fresh(p->pods.inf);
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
	recon_view_init(v, job, !job && t->job_uid[0] && gone && strcmp(gone, t->job_uid) == 0);
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
