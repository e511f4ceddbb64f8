/* Job controller and garbage collector. Each pass computes, per Job, the status it should have
 * from its pods and writes it only when it differs; pod creations and deletions are the side
 * effects. Accounting follows the tracking-finalizer scheme: a terminal pod that still carries
 * batch.kubernetes.io/job-tracking is counted once, then the finalizer is removed. */
#include "tools/kubesim/jobctl.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "tools/kubesim/events.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

#define TRACKING "batch.kubernetes.io/job-tracking"
#define COMPONENT "job-controller"
/* Replacement back-off cap (kube-api.md §3.2). */
#define BACKOFF_MAX_MS (6 * 60 * 1000)
#define MAX_PODS_PER_JOB 256
/* Timed work (back-off over, deadline reached, TTL expired) is seen within this. */
#define TIMED_PASS_MS 1000

struct failmark {
	char uid[40];
	char key[520]; /* "ns/name" of the Job, to tell when it is gone */
	int64_t at_ms;
	struct failmark *next;
};

struct pass_stats {
	int64_t us;
	size_t jobs;
};

struct jobctl {
	struct ks *ks;
	struct failmark *fails; /* last counted failure per Job uid, for the back-off */
	json_t *dirty;          /* Job keys "ns/name" -> null: to sync in the next pass */
	json_t *owners;         /* Job uid -> "ns/name": check that it exists, else collect pods */
	json_t *timed;          /* Job keys with timed work, kept from the Jobs' changes */
	int sub;
	int64_t last_timed_ms;
	struct pass_stats last, last_timed;
	int64_t max_us;
	uint64_t passes;
};

static int64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The controlling Job reference of obj: its uid and name, or 0. */
static int controller_job(const json_t *obj, const char **uid, const char **name)
{
	size_t i;
	json_t *ref;
	json_array_foreach(obj_path(obj, "metadata.ownerReferences"), i, ref)
	{
		const char *kind = obj_str(ref, "kind");
		if (!obj_true(ref, "controller") || !kind || strcmp(kind, "Job"))
			continue;
		*uid = obj_str(ref, "uid");
		*name = obj_str(ref, "name");
		return *uid && *name;
	}
	return 0;
}

static void mark(json_t *set, const char *ns, const char *name, json_t *val)
{
	char key[520];
	snprintf(key, sizeof key, "%s/%s", ns, name);
	json_object_set_new(set, key, val ? val : json_null());
}

/* A pod's change makes its controlling Job dirty, and its owner a candidate for collection. */
static void mark_pod_owner(struct jobctl *jc, const json_t *pod)
{
	const char *uid, *name;
	if (!pod || !controller_job(pod, &uid, &name))
		return;
	mark(jc->dirty, obj_ns(pod), name, NULL);
	char key[520];
	snprintf(key, sizeof key, "%s/%s", obj_ns(pod), name);
	json_object_set_new(jc->owners, uid, json_string(key));
}

static int has_timed_work(struct jobctl *jc, const json_t *job);

/* Store fan-out: only records what changed; the pass does the work. */
static void on_change(const struct store_event *ev, void *arg)
{
	struct jobctl *jc = arg;
	if (ev->res == RES_JOBS) {
		mark(jc->dirty, obj_ns(ev->obj), obj_name(ev->obj), NULL);
		char key[520];
		snprintf(key, sizeof key, "%s/%s", obj_ns(ev->obj), obj_name(ev->obj));
		if (ev->type != STORE_DELETED && has_timed_work(jc, ev->obj))
			json_object_set_new(jc->timed, key, json_null());
		else
			json_object_del(jc->timed, key);
		if (ev->type == STORE_DELETED && obj_uid(ev->obj))
			json_object_set_new(jc->owners, obj_uid(ev->obj), json_string(key));
	} else if (ev->res == RES_PODS) {
		mark_pod_owner(jc, ev->obj);
		mark_pod_owner(jc, ev->prev); /* an owner change concerns the old Job too */
	}
}

struct jobctl *jobctl_new(struct ks *ks)
{
	struct jobctl *jc = gwb_calloc(1, sizeof *jc);
	jc->ks = ks;
	jc->dirty = json_object();
	jc->owners = json_object();
	jc->timed = json_object();
	jc->sub = store_subscribe(ks->store, on_change, jc);
	return jc;
}

void jobctl_free(struct jobctl *jc)
{
	if (!jc)
		return;
	while (jc->fails) {
		struct failmark *f = jc->fails;
		jc->fails = f->next;
		gwb_free(f);
	}
	store_unsubscribe(jc->ks->store, jc->sub);
	json_decref(jc->dirty);
	json_decref(jc->owners);
	json_decref(jc->timed);
	gwb_free(jc);
}

static struct failmark *failmark(struct jobctl *jc, const json_t *job, int create)
{
	const char *uid = obj_uid(job);
	for (struct failmark *f = jc->fails; f; f = f->next)
		if (!strcmp(f->uid, uid))
			return f;
	if (!create)
		return NULL;
	struct failmark *f = gwb_calloc(1, sizeof *f);
	snprintf(f->uid, sizeof f->uid, "%s", uid);
	snprintf(f->key, sizeof f->key, "%s/%s", obj_ns(job), obj_name(job));
	f->next = jc->fails;
	jc->fails = f;
	return f;
}

/* ---- pod helpers ---- */

struct podkey {
	char ns[256], name[256];
};

/* Pods of ns whose controller reference is the Job uid (from the owner index), at most
 * MAX_PODS_PER_JOB. *out is a gwb_malloc'd array sized to the answer (the caller frees it). */
static size_t owned_pods(struct ks *ks, const char *ns, const char *uid, struct podkey **out)
{
	json_t **pods = NULL;
	size_t n = store_list_index(ks->store, RES_PODS, STORE_IDX_OWNER, uid, ns, &pods);
	size_t k = 0;
	*out = gwb_malloc((n ? n : 1) * sizeof **out);
	for (size_t i = 0; i < n && k < MAX_PODS_PER_JOB; i++) {
		const char *owner = obj_controller_uid(pods[i], "Job");
		if (!owner || strcmp(owner, uid))
			continue;
		snprintf((*out)[k].ns, sizeof (*out)[k].ns, "%s", obj_ns(pods[i]));
		snprintf((*out)[k].name, sizeof (*out)[k].name, "%s", obj_name(pods[i]));
		k++;
	}
	gwb_free(pods);
	return k;
}

static json_t *get_pod(struct ks *ks, const struct podkey *k)
{
	return store_get(ks->store, RES_PODS, k->ns, k->name);
}

static void strip_finalizer(struct ks *ks, const json_t *pod)
{
	if (!pod)
		return;
	json_t *nw = json_deep_copy(pod);
	if (obj_remove_finalizer(nw, TRACKING))
		registry_commit(ks->registry, RES_PODS, nw);
	else
		json_decref(nw);
}

/* Deletes an active pod the way the controller does: tracking finalizer off first, so the
 * deletion is not counted as a failure. Terminal pods are kept, as a real controller keeps
 * them. */
static void delete_pod(struct ks *ks, const json_t *job, const struct podkey *k)
{
	json_t *pod = get_pod(ks, k);
	if (!pod || obj_deleting(pod) || obj_pod_terminal(pod))
		return;
	strip_finalizer(ks, pod);
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	if (registry_delete(ks->registry, res_get(RES_PODS), k->ns, k->name, &o, &out, &gone,
			    &e) == 0 &&
	    job) {
		char msg[400];
		snprintf(msg, sizeof msg, "Deleted pod: %s", k->name);
		events_record(ks, job, "Normal", "SuccessfulDelete", msg, COMPONENT);
	}
	json_decref(out);
	kerr_clear(&e);
}

static int create_pod(struct ks *ks, const json_t *job)
{
	json_t *tmpl = obj_path(job, "spec.template");
	char gen[300];
	snprintf(gen, sizeof gen, "%s-", obj_name(job));
	json_t *meta = json_pack("{s:s, s:s}", "generateName", gen, "namespace", obj_ns(job));
	json_t *labels = obj_path(tmpl, "metadata.labels");
	json_t *ann = obj_path(tmpl, "metadata.annotations");
	if (labels)
		json_object_set_new(meta, "labels", json_deep_copy(labels));
	if (ann)
		json_object_set_new(meta, "annotations", json_deep_copy(ann));
	json_object_set_new(meta, "ownerReferences",
			    json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion", "batch/v1",
				      "kind", "Job", "name", obj_name(job), "uid", obj_uid(job),
				      "controller", 1, "blockOwnerDeletion", 1));
	json_object_set_new(meta, "finalizers", json_pack("[s]", TRACKING));
	json_t *pod = json_pack("{s:s, s:s, s:o, s:O}", "apiVersion", "v1", "kind", "Pod",
				"metadata", meta, "spec", obj_path(tmpl, "spec"));
	struct kerr e = { 0 };
	json_t *out = NULL;
	int rc = registry_create(ks->registry, res_get(RES_PODS), obj_ns(job), pod, 0, &out, &e);
	char msg[1200];
	if (rc == 0) {
		snprintf(msg, sizeof msg, "Created pod: %s", obj_name(out));
		events_record(ks, job, "Normal", "SuccessfulCreate", msg, COMPONENT);
		log_info("jobctl", "pod_created", "job=%s/%s pod=%s", obj_ns(job), obj_name(job),
			 obj_name(out));
	} else {
		snprintf(msg, sizeof msg, "Error creating: %s", e.message);
		events_record(ks, job, "Warning", "FailedCreate", msg, COMPONENT);
		log_warn("jobctl", "pod_create_failed", "job=%s/%s err=%s", obj_ns(job),
			 obj_name(job), log_q(e.message));
	}
	json_decref(out);
	kerr_clear(&e);
	return rc;
}

/* ---- pod failure policy ---- */

static int code_in(const json_t *values, int64_t code)
{
	size_t i;
	json_t *v;
	json_array_foreach((json_t *)values, i, v) if (json_integer_value(v) == code) return 1;
	return 0;
}

/* First matching rule's action for a failed pod ("FailJob", "Ignore", "Count", ...), or NULL;
 * msg gets the FailJob message. */
static const char *match_policy(const json_t *job, const json_t *pod, char *msg, size_t len)
{
	size_t i;
	json_t *rule;
	json_array_foreach(obj_path(job, "spec.podFailurePolicy.rules"), i, rule)
	{
		const char *action = obj_str(rule, "action");
		json_t *oec = json_object_get(rule, "onExitCodes");
		if (json_is_object(oec)) {
			const char *cname = obj_str(oec, "containerName");
			const char *op = obj_str(oec, "operator");
			json_t *vals = json_object_get(oec, "values");
			const char *lists[] = { "status.initContainerStatuses",
						"status.containerStatuses" };
			for (int l = 0; l < 2; l++) {
				size_t j;
				json_t *cs;
				json_array_foreach(obj_path(pod, lists[l]), j, cs)
				{
					json_t *term = obj_path(cs, "state.terminated");
					if (!term)
						continue;
					int64_t code = obj_int(term, "exitCode", 0);
					const char *n = obj_str(cs, "name");
					if (code == 0 || (cname && n && strcmp(cname, n)))
						continue;
					int in = code_in(vals, code);
					if ((op && !strcmp(op, "NotIn")) ? !in : in) {
						snprintf(msg, len,
							 "Container %s for pod %s/%s failed with exit "
							 "code %" PRId64 " matching %s rule at index %zu",
							 n ? n : "", obj_ns(pod), obj_name(pod), code,
							 action ? action : "", i);
						return action;
					}
				}
			}
		}
		size_t j;
		json_t *pc;
		json_array_foreach(json_object_get(rule, "onPodConditions"), j, pc)
		{
			const char *type = obj_str(pc, "type");
			const char *want = obj_str(pc, "status");
			json_t *c = type ? obj_condition(pod, type) : NULL;
			const char *have = obj_str(c, "status");
			if (c && have && !strcmp(have, want ? want : "True")) {
				snprintf(msg, len,
					 "Pod %s/%s has condition %s matching %s rule at index %zu",
					 obj_ns(pod), obj_name(pod), type, action ? action : "", i);
				return action;
			}
		}
	}
	return NULL;
}

/* ---- one Job ---- */

static void set_counter(json_t *st, const char *key, int64_t v)
{
	if (v)
		json_object_set_new(st, key, json_integer(v));
	else
		json_object_del(st, key);
}


/* One Job's pass: what it found and what it will write. */
struct jobsync {
	struct jobctl *jc;
	struct ks *ks;
	const json_t *job;
	json_t *nw; /* the Job's new state */
	struct podkey *keys;
	size_t np;
	int64_t now;
	int64_t succeeded, failed, active, terminating, ready;
	char target_reason[64], target_msg[600]; /* a failure decided in this pass */
};

static int tracked(const json_t *pod)
{
	size_t j;
	json_t *f;
	json_array_foreach(obj_path(pod, "metadata.finalizers"), j, f)
	{
		if (json_is_string(f) && !strcmp(json_string_value(f), TRACKING))
			return 1;
	}
	return 0;
}

/* Counts each newly terminal pod once (through its tracking finalizer). */
static void js_account(struct jobsync *js)
{
	for (size_t i = 0; i < js->np; i++) {
		json_t *pod = get_pod(js->ks, &js->keys[i]);
		if (!pod || !obj_pod_terminal(pod) || !tracked(pod))
			continue;
		if (!strcmp(obj_str(pod, "status.phase"), "Succeeded")) {
			js->succeeded++;
		} else {
			char msg[600];
			const char *action = match_policy(js->job, pod, msg, sizeof msg);
			if (!action || strcmp(action, "Ignore") != 0) {
				js->failed++;
				failmark(js->jc, js->job, 1)->at_ms = js->now;
				if (action && !strcmp(action, "FailJob") && !js->target_reason[0]) {
					snprintf(js->target_reason, sizeof js->target_reason,
						 "PodFailurePolicy");
					snprintf(js->target_msg, sizeof js->target_msg, "%s", msg);
				}
			}
		}
		strip_finalizer(js->ks, pod);
	}
}

static void js_count_live(struct jobsync *js)
{
	for (size_t i = 0; i < js->np; i++) {
		json_t *pod = get_pod(js->ks, &js->keys[i]);
		if (!pod || obj_pod_terminal(pod))
			continue;
		if (obj_deleting(pod)) {
			js->terminating++;
		} else {
			js->active++;
			js->ready += obj_condition_true(pod, "Ready");
		}
	}
}

static void js_delete_active(struct jobsync *js)
{
	for (size_t i = 0; i < js->np; i++)
		delete_pod(js->ks, js->job, &js->keys[i]);
}

/* Decides FailureTarget (pod failure policy, backoff limit, deadline). Returns 1 when the
 * Job is (now) failing. */
static int js_failure_target(struct jobsync *js)
{
	if (obj_condition_true(js->nw, "FailureTarget"))
		return 1;
	int64_t ads = obj_int(js->job, "spec.activeDeadlineSeconds", -1), start;
	if (js->target_reason[0]) {
		/* FailJob matched above */
	} else if (js->failed > obj_int(js->job, "spec.backoffLimit", 6)) {
		snprintf(js->target_reason, sizeof js->target_reason, "BackoffLimitExceeded");
		snprintf(js->target_msg, sizeof js->target_msg,
			 "Job has reached the specified backoff limit");
	} else if (ads >= 0 && !obj_true(js->job, "spec.suspend") &&
		   obj_time_ms(js->job, "status.startTime", &start) == 0 &&
		   js->now - start >= ads * 1000) {
		snprintf(js->target_reason, sizeof js->target_reason, "DeadlineExceeded");
		snprintf(js->target_msg, sizeof js->target_msg,
			 "Job was active longer than specified deadline");
	} else {
		return 0;
	}
	obj_set_condition(js->nw, "FailureTarget", "True", js->target_reason, js->target_msg, 1);
	log_info("jobctl", "failure_target", "job=%s/%s reason=%s", obj_ns(js->job),
		 obj_name(js->job), js->target_reason);
	return 1;
}

/* A failing Job: its pods are terminated, then Failed (the 1.31+ sequencing). */
static void js_fail(struct jobsync *js)
{
	js_delete_active(js);
	js->active = 0;
	for (size_t i = 0; i < js->np; i++) {
		json_t *pod = get_pod(js->ks, &js->keys[i]);
		if (pod && !obj_pod_terminal(pod))
			return;
	}
	json_t *ft = obj_condition(js->nw, "FailureTarget");
	char reason[64], msg[600];
	snprintf(reason, sizeof reason, "%s",
		 obj_str(ft, "reason") ? obj_str(ft, "reason") : "Failed");
	snprintf(msg, sizeof msg, "%s", obj_str(ft, "message") ? obj_str(ft, "message") : "");
	obj_set_condition(js->nw, "Failed", "True", reason, msg, 1);
	events_record(js->ks, js->job, "Warning", reason, msg, COMPONENT);
}

static void js_suspend(struct jobsync *js)
{
	for (size_t i = 0; i < js->np; i++) {
		json_t *pod = get_pod(js->ks, &js->keys[i]);
		if (pod && !obj_pod_terminal(pod) && !obj_deleting(pod)) {
			delete_pod(js->ks, js->job, &js->keys[i]);
			js->terminating++;
		}
	}
	js->active = 0;
	if (!obj_condition_true(js->job, "Suspended")) {
		obj_set_condition(js->nw, "Suspended", "True", "JobSuspended", "Job suspended", 1);
		events_record(js->ks, js->job, "Normal", "Suspended", "Job suspended", COMPONENT);
	}
}

/* Back-off before a replacement after failures: base * 2^(failed-1), capped. */
static int js_backoff_over(struct jobsync *js)
{
	struct failmark *fm = failmark(js->jc, js->job, 0);
	if (js->failed <= 0 || !fm)
		return 1;
	int64_t delay = js->ks->cfg.job_backoff_ms;
	for (int64_t f = 1; f < js->failed && delay < BACKOFF_MAX_MS; f++)
		delay *= 2;
	if (delay > BACKOFF_MAX_MS)
		delay = BACKOFF_MAX_MS;
	return js->now - fm->at_ms >= delay;
}

static void js_run(struct jobsync *js)
{
	char nowbuf[32];
	if (obj_condition_true(js->job, "Suspended")) {
		obj_set_condition(js->nw, "Suspended", "False", "JobResumed", "Job resumed", 1);
		events_record(js->ks, js->job, "Normal", "Resumed", "Job resumed", COMPONENT);
		obj_set_str(js->nw, "status.startTime", obj_now(nowbuf, sizeof nowbuf));
	}
	if (!obj_str(js->nw, "status.startTime"))
		obj_set_str(js->nw, "status.startTime", obj_now(nowbuf, sizeof nowbuf));
	int64_t completions = obj_int(js->job, "spec.completions", 1);
	if (js->succeeded >= completions) {
		obj_set_condition(js->nw, "SuccessCriteriaMet", "True", "CompletionsReached",
				  "Reached expected number of succeeded pods", 1);
		js_delete_active(js);
		if (js->active == 0 && js->terminating == 0) {
			obj_set_condition(js->nw, "Complete", "True", "CompletionsReached",
					  "Reached expected number of succeeded pods", 1);
			obj_set_str(js->nw, "status.completionTime", obj_now(nowbuf, sizeof nowbuf));
			events_record(js->ks, js->job, "Normal", "Completed", "Job completed",
				      COMPONENT);
		}
		js->active = 0;
		return;
	}
	int64_t want = completions - js->succeeded;
	int64_t parallelism = obj_int(js->job, "spec.parallelism", 1);
	if (want > parallelism)
		want = parallelism;
	/* podReplacementPolicy Failed: terminating pods still count until they are gone. */
	const char *prp = obj_str(js->job, "spec.podReplacementPolicy");
	int64_t have = js->active + (prp && !strcmp(prp, "Failed") ? js->terminating : 0);
	if (want > have && js_backoff_over(js))
		for (int64_t c = 0; c < want - have; c++)
			if (create_pod(js->ks, js->job) == 0)
				js->active++;
}

/* A copy of the Job for a pass that writes status only: status and the metadata object are
 * copies (the store stamps metadata.resourceVersion into what it is given); spec and the rest
 * are shared with the stored Job, which nobody changes in place, so a pass copies only what
 * it may write. */
static json_t *copy_for_status(const json_t *job)
{
	json_t *nw = json_copy((json_t *)job);
	json_object_set_new(nw, "metadata", json_copy(json_object_get(job, "metadata")));
	json_t *st = json_object_get(job, "status");
	json_object_set_new(nw, "status", st ? json_deep_copy(st) : json_object());
	return nw;
}

static void sync_job(struct jobctl *jc, const json_t *job)
{
	struct jobsync js = { .jc = jc, .ks = jc->ks, .job = job, .now = clock_now_ms() };
	js.np = owned_pods(js.ks, obj_ns(job), obj_uid(job), &js.keys);
	js.nw = copy_for_status(job);
	js.succeeded = obj_int(job, "status.succeeded", 0);
	js.failed = obj_int(job, "status.failed", 0);
	js_account(&js);
	js_count_live(&js);
	if (obj_condition_true(job, "Complete") || obj_condition_true(job, "Failed")) {
		js_delete_active(&js);
		js.active = 0;
	} else if (js_failure_target(&js)) {
		js_fail(&js);
	} else if (obj_true(job, "spec.suspend")) {
		js_suspend(&js);
	} else {
		js_run(&js);
	}
	json_t *st = obj_child(js.nw, "status");
	set_counter(st, "succeeded", js.succeeded);
	set_counter(st, "failed", js.failed);
	set_counter(st, "active", js.active);
	json_object_set_new(st, "ready", json_integer(js.ready > js.active ? js.active : js.ready));
	json_object_set_new(st, "terminating", json_integer(js.terminating));
	if (!json_object_get(st, "uncountedTerminatedPods"))
		json_object_set_new(st, "uncountedTerminatedPods", json_object());
	gwb_free(js.keys);
	if (json_equal(json_object_get(js.nw, "status"), json_object_get(job, "status")))
		json_decref(js.nw);
	else
		registry_commit(js.ks->registry, RES_JOBS, js.nw);
}

/* ttlSecondsAfterFinished: delete a finished Job (cascading) once its time is up. */
static void ttl_check(struct ks *ks, const json_t *job)
{
	json_t *ttl = obj_path(job, "spec.ttlSecondsAfterFinished");
	if (!json_is_integer(ttl) || obj_deleting(job))
		return;
	const char *type = obj_condition_true(job, "Complete") ? "Complete"
			   : obj_condition_true(job, "Failed") ? "Failed" : NULL;
	if (!type)
		return;
	int64_t at;
	if (obj_time_ms(obj_condition(job, type), "lastTransitionTime", &at) < 0)
		return;
	if (clock_now_ms() < at + (int64_t)json_integer_value(ttl) * 1000)
		return;
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	o.propagation = "Background";
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	char ns[256], name[256];
	snprintf(ns, sizeof ns, "%s", obj_ns(job));
	snprintf(name, sizeof name, "%s", obj_name(job));
	registry_delete(ks->registry, res_get(RES_JOBS), ns, name, &o, &out, &gone, &e);
	json_decref(out);
	kerr_clear(&e);
}

/* ---- garbage collection ---- */

static int has_finalizer(const json_t *o, const char *name)
{
	size_t i;
	json_t *f;
	json_array_foreach(obj_path(o, "metadata.finalizers"), i, f)
	{
		if (json_is_string(f) && !strcmp(json_string_value(f), name))
			return 1;
	}
	return 0;
}

static void remove_job_finalizer(struct ks *ks, const json_t *job, const char *name)
{
	json_t *nw = json_deep_copy(job);
	obj_remove_finalizer(nw, name);
	registry_commit(ks->registry, RES_JOBS, nw);
}

/* A Job being deleted with the orphan or foregroundDeletion finalizer. */
static void gc_deleting_job(struct jobctl *jc, const json_t *job)
{
	struct ks *ks = jc->ks;
	struct podkey *keys = NULL;
	size_t np = owned_pods(ks, obj_ns(job), obj_uid(job), &keys);
	if (has_finalizer(job, "orphan")) {
		for (size_t i = 0; i < np; i++) {
			json_t *pod = get_pod(ks, &keys[i]);
			if (!pod)
				continue;
			json_t *nw = json_deep_copy(pod);
			json_object_del(obj_path(nw, "metadata"), "ownerReferences");
			obj_remove_finalizer(nw, TRACKING);
			registry_commit(ks->registry, RES_PODS, nw);
		}
		remove_job_finalizer(ks, job, "orphan");
		log_info("jobctl", "job_orphaned_pods", "job=%s/%s pods=%zu", obj_ns(job),
			 obj_name(job), np);
	} else if (has_finalizer(job, "foregroundDeletion")) {
		for (size_t i = 0; i < np; i++)
			delete_pod(ks, NULL, &keys[i]);
		if (np == 0)
			remove_job_finalizer(ks, job, "foregroundDeletion");
	}
	gwb_free(keys);
}

/* Pods whose controlling Job no longer exists: Background propagation deletes them; the
 * tracking finalizer is stripped from every such pod. Only owners named by a change since the
 * last pass are checked (a deleted Job, a pod created or re-owned). */
static void gc_pods(struct jobctl *jc)
{
	struct ks *ks = jc->ks;
	json_t *owners = jc->owners;
	jc->owners = json_object();
	const char *uid;
	json_t *v;
	json_object_foreach(owners, uid, v)
	{
		const char *key = json_string_value(v);
		const char *slash = key ? strchr(key, '/') : NULL;
		if (!slash)
			continue;
		char ns[256], name[256];
		snprintf(ns, sizeof ns, "%.*s", (int)(slash - key), key);
		snprintf(name, sizeof name, "%s", slash + 1);
		json_t *job = store_get(ks->store, RES_JOBS, ns, name);
		if (job && obj_uid(job) && !strcmp(obj_uid(job), uid))
			continue;
		struct podkey *dead = NULL;
		size_t nd = owned_pods(ks, ns, uid, &dead);
		for (size_t i = 0; i < nd; i++) {
			json_t *pod = get_pod(ks, &dead[i]);
			if (!pod)
				continue;
			strip_finalizer(ks, pod);
			pod = get_pod(ks, &dead[i]);
			if (pod && !obj_deleting(pod)) {
				struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
				struct kerr e = { 0 };
				json_t *out = NULL;
				int gone = 0;
				registry_delete(ks->registry, res_get(RES_PODS), dead[i].ns,
						dead[i].name, &o, &out, &gone, &e);
				json_decref(out);
				kerr_clear(&e);
				log_info("jobctl", "gc_pod", "pod=%s/%s", dead[i].ns, dead[i].name);
			}
		}
		gwb_free(dead);
	}
	json_decref(owners);
}

/* Namespaces being deleted: remove their content, then the namespace. */
static void gc_namespaces(struct ks *ks)
{
	json_t **nss = NULL;
	size_t n = store_list(ks->store, RES_NAMESPACES, NULL, &nss);
	char (*names)[256] = gwb_calloc(n ? n : 1, sizeof *names);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (obj_deleting(nss[i]))
			snprintf(names[k++], 256, "%s", obj_name(nss[i]));
	gwb_free(nss);
	for (size_t i = 0; i < k; i++) {
		size_t left = 0;
		const enum res_id kinds[] = { RES_JOBS, RES_PODS, RES_EVENTS };
		for (size_t r = 0; r < 3; r++) {
			json_t **objs = NULL;
			size_t no = store_list(ks->store, kinds[r], names[i], &objs);
			struct podkey *keys = gwb_calloc(no ? no : 1, sizeof *keys);
			for (size_t j = 0; j < no; j++) {
				snprintf(keys[j].ns, 256, "%s", obj_ns(objs[j]));
				snprintf(keys[j].name, 256, "%s", obj_name(objs[j]));
			}
			gwb_free(objs);
			left += no;
			for (size_t j = 0; j < no; j++) {
				json_t *o = store_get(ks->store, kinds[r], keys[j].ns, keys[j].name);
				if (!o || obj_deleting(o))
					continue;
				struct registry_delete_opts opt = REGISTRY_DELETE_OPTS_INIT;
				opt.propagation = "Background";
				struct kerr e = { 0 };
				json_t *out = NULL;
				int gone = 0;
				registry_delete(ks->registry, res_get(kinds[r]), keys[j].ns,
						keys[j].name, &opt, &out, &gone, &e);
				json_decref(out);
				kerr_clear(&e);
			}
			gwb_free(keys);
		}
		if (left == 0) {
			json_t *ns = store_get(ks->store, RES_NAMESPACES, NULL, names[i]);
			if (ns) {
				/* What the namespace controller's finalize call does. */
				json_t *nw = json_deep_copy(ns);
				json_object_set_new(obj_child(nw, "spec"), "finalizers", json_array());
				registry_commit(ks->registry, RES_NAMESPACES, nw);
			}
		}
	}
	gwb_free(names);
}

/* A Job with work that comes due without any change of its own or of its pods: a TTL after
 * it finished, a deadline, a back-off after a failure, pods it still lacks (a create that
 * failed is tried again), or its deletion. */
static int has_timed_work(struct jobctl *jc, const json_t *job)
{
	if (obj_deleting(job))
		return 1;
	if (obj_condition_true(job, "Complete") || obj_condition_true(job, "Failed"))
		return json_is_integer(obj_path(job, "spec.ttlSecondsAfterFinished"));
	if (obj_true(job, "spec.suspend"))
		return 0;
	if (json_is_integer(obj_path(job, "spec.activeDeadlineSeconds")) || failmark(jc, job, 0))
		return 1;
	int64_t completions = obj_int(job, "spec.completions", 1);
	int64_t want = completions - obj_int(job, "status.succeeded", 0);
	int64_t parallelism = obj_int(job, "spec.parallelism", 1);
	if (want > parallelism)
		want = parallelism;
	return obj_int(job, "status.active", 0) < want;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Forgets back-off marks of Jobs that are gone. */
static void forget_failmarks(struct jobctl *jc)
{
	for (struct failmark **pp = &jc->fails; *pp;) {
		struct failmark *f = *pp;
		const char *slash = strchr(f->key, '/');
		char ns[256];
		snprintf(ns, sizeof ns, "%.*s", slash ? (int)(slash - f->key) : 0, f->key);
		json_t *job = store_get(jc->ks->store, RES_JOBS, ns, slash ? slash + 1 : f->key);
		if (job && !strcmp(obj_uid(job), f->uid)) {
			pp = &f->next;
		} else {
			*pp = f->next;
			gwb_free(f);
		}
	}
}

void jobctl_sync(struct jobctl *jc)
{
	struct ks *ks = jc->ks;
	int64_t t0 = mono_us();
	int timed = clock_mono_ms() - jc->last_timed_ms >= TIMED_PASS_MS;
	if (timed) {
		const char *key;
		json_t *v;
		/* false: due by the clock only, nothing of the Job or its pods changed. */
		json_object_foreach(jc->timed, key, v)
			if (!json_object_get(jc->dirty, key))
				json_object_set_new(jc->dirty, key, json_false());
		jc->last_timed_ms = clock_mono_ms();
	}
	/* Take the dirty set: this pass's own writes mark Jobs for the next pass. */
	json_t *dirty = jc->dirty;
	jc->dirty = json_object();
	size_t n = json_object_size(dirty);
	struct podkey *keys = gwb_calloc(n ? n : 1, sizeof *keys);
	char *clock_only = gwb_calloc(n ? n : 1, 1);
	const char **names = gwb_calloc(n ? n : 1, sizeof *names);
	size_t k = 0;
	const char *key;
	json_t *v;
	json_object_foreach(dirty, key, v)
		names[k++] = key;
	qsort(names, k, sizeof *names, cmp_key);
	for (size_t i = 0; i < k; i++) {
		clock_only[i] = json_is_false(json_object_get(dirty, names[i]));
		const char *slash = strchr(names[i], '/');
		snprintf(keys[i].ns, 256, "%.*s", slash ? (int)(slash - names[i]) : 0, names[i]);
		snprintf(keys[i].name, 256, "%s", slash ? slash + 1 : names[i]);
	}
	gwb_free(names);
	json_decref(dirty);
	for (size_t i = 0; i < n; i++) {
		json_t *job = store_get(ks->store, RES_JOBS, keys[i].ns, keys[i].name);
		if (!job)
			continue;
		if (obj_deleting(job)) {
			gc_deleting_job(jc, job);
			continue;
		}
		/* A finished Job's only work that comes due by the clock is its TTL; a change of
		 * the Job or of a pod of it marks it for a full sync. */
		if (clock_only[i] &&
		    (obj_condition_true(job, "Complete") || obj_condition_true(job, "Failed"))) {
			ttl_check(ks, job);
			continue;
		}
		sync_job(jc, job);
		job = store_get(ks->store, RES_JOBS, keys[i].ns, keys[i].name);
		if (job)
			ttl_check(ks, job);
	}
	gwb_free(keys);
	gwb_free(clock_only);
	gc_pods(jc);
	gc_namespaces(ks);
	if (timed)
		forget_failmarks(jc);
	int64_t us = mono_us() - t0;
	jc->last = (struct pass_stats){ us, n };
	if (timed)
		jc->last_timed = jc->last;
	if (us > jc->max_us)
		jc->max_us = us;
	jc->passes++;
}

void jobctl_resync(struct jobctl *jc)
{
	json_t **jobs = NULL;
	size_t n = store_list(jc->ks->store, RES_JOBS, NULL, &jobs);
	for (size_t i = 0; i < n; i++)
		mark(jc->dirty, obj_ns(jobs[i]), obj_name(jobs[i]), NULL);
	gwb_free(jobs);
}

json_t *jobctl_stats(const struct jobctl *jc)
{
	return json_pack("{s:I, s:{s:I, s:I}, s:{s:I, s:I}, s:I}", "passes",
			 (json_int_t)jc->passes, "last", "us", (json_int_t)jc->last.us, "jobs",
			 (json_int_t)jc->last.jobs, "last_timed", "us",
			 (json_int_t)jc->last_timed.us, "jobs", (json_int_t)jc->last_timed.jobs,
			 "max_us", (json_int_t)jc->max_us);
}
