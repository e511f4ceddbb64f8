/* The quota audit: each team's stored reserved totals against the sum of its tasks'
 * unreleased reservations, and each task against the reconciler's cluster picture (only when
 * it is fresh). It reports and counts drift; only an explicit admin request repairs the team
 * totals, and never anything else. */
#include "server/api/api_audit.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/kobj.h"
#include "lib/log.h"
#include "lib/prom.h"
#include "server/api/api.h"
#include "server/recon/jobspec.h"
#include "server/recon/reconciler.h"
#include "server/store/store_audit.h"

/* GET /v1/audit shows this many of the latest repairs. */
#define AUDIT_REPAIRS_SHOWN 20

struct audit_run {
	struct api_ctx *api;
	int64_t now_ms;
	json_t *teams, *tasks;
	int64_t drift;
	/* The picture, when fresh: Jobs and Pods by name, and task id -> its Pods' count. */
	int cluster;
	const json_t *jobs, *pods;
	json_t *pods_by_task;
};

static void on_team(void *arg, const struct store_audit_team *t)
{
	struct audit_run *a = arg;
	int ok = t->stored_mem == t->computed_mem && t->stored_core == t->computed_core;
	json_array_append_new(a->teams,
			      json_pack("{s:s, s:o, s:o, s:b}", "team", t->team, "stored",
					jx_gpu_pair(t->stored_mem, t->stored_core), "computed",
					jx_gpu_pair(t->computed_mem, t->computed_core), "ok", ok));
	a->drift += !ok;
}

/* Adds one task problem; extra (stolen, may be NULL) holds more fields. */
static void problem(struct audit_run *a, const char *task, const char *what, json_t *extra)
{
	json_t *p = extra ? extra : json_object();
	json_object_set_new(p, "task", task ? json_string(task) : json_null());
	json_object_set_new(p, "problem", json_string(what));
	json_array_append_new(a->tasks, p);
	a->drift++;
}

static void on_holding(void *arg, const struct store_audit_task *t)
{
	struct audit_run *a = arg;
	json_t *what = json_pack("{s:s, s:s, s:o}", "team", t->team, "state",
				 task_state_name(t->state), "reservation",
				 jx_gpu_pair(t->mem, t->core));
	if (t->state != TASK_NONE && task_state_is(t->state, TASK_FINAL))
		return problem(a, t->id, "final_holding_quota", what);
	char job[64];
	task_job_name(t->id, job, sizeof job);
	const json_t *j = a->cluster ? json_object_get(a->jobs, job) : NULL;
	int has_job = j && jobspec_is_ours(j, t->id);
	int has_pod = a->cluster && json_object_get(a->pods_by_task, t->id) != NULL;
	/* Guarded against overflow: grace_s is at most a day (config bounds). */
	int64_t grace_ms = a->api->cfg->audit_grace_s * 1000;
	/* A task whose Job vanished with a replaced cluster holds its quota on purpose until its
	 * Pod's deadline; past the deadline and the grace, it should have been released. */
	if (task_reason_is(t->reason, TASK_REASON_CLUSTER_WAIT)) {
		if (t->pod_deadline_at && a->now_ms - t->pod_deadline_at > grace_ms)
			return problem(a, t->id, "holds_quota_past_pod_deadline", what);
	} else if (a->cluster && !has_job && !has_pod && a->now_ms - t->created_at > grace_ms) {
		return problem(a, t->id, "holds_quota_without_job", what);
	}
	json_decref(what);
}

static int is_ours(const json_t *obj)
{
	const char *m = kobj_label(obj, GWB_LABEL_MANAGED);
	return m && strcmp(m, "true") == 0;
}

/* The Jobs of ours without a task. */
static int check_jobs(struct audit_run *a)
{
	const char *name;
	json_t *job;
	struct task *t = gwb_malloc(sizeof *t);
	int rc = 0;
	json_object_foreach((json_t *)a->jobs, name, job) {
		if (!is_ours(job))
			continue;
		const char *id = jobspec_task_of(job);
		int found = id ? store_task_load(a->api->store, id, t) : GWB_ENOTFOUND;
		if (found == GWB_ENOTFOUND) {
			problem(a, id, "job_without_task", json_pack("{s:s}", "job", name));
		} else if (found) {
			rc = found;
			goto out;
		}
	}
out:
	gwb_free(t);
	return rc;
}

/* The Pods of ours without a task, and the running Pods of released tasks. Fills
 * a->pods_by_task on the way. */
static int check_pods(struct audit_run *a)
{
	const char *name;
	json_t *pod;
	struct task *t = gwb_malloc(sizeof *t);
	int rc = 0;
	json_object_foreach((json_t *)a->pods, name, pod) {
		if (!is_ours(pod))
			continue;
		const char *id = jobspec_task_of(pod);
		if (id)
			json_object_set_new(a->pods_by_task, id, json_true());
		int found = id ? store_task_load(a->api->store, id, t) : GWB_ENOTFOUND;
		if (found == GWB_ENOTFOUND) {
			problem(a, id, "pod_without_task", json_pack("{s:s}", "pod", name));
			continue;
		}
		if (found) {
			rc = found;
			goto out;
		}
		const char *phase = kobj_pstr(pod, "status", "phase");
		int stopped = phase && (strcmp(phase, "Succeeded") == 0 ||
					strcmp(phase, "Failed") == 0);
		if (t->released && !stopped)
			problem(a, id, "released_pod_running",
				json_pack("{s:s, s:s, s:s, s:s?}", "team", t->team, "state",
					  task_state_name(t->state), "pod", name, "phase", phase));
	}
out:
	gwb_free(t);
	return rc;
}

static void on_repair_record(void *arg, const struct store_team_event *ev)
{
	char at[40];
	clock_fmt_rfc3339_ms(ev->ts_ms, at, sizeof at);
	json_t *detail = ev->detail ? json_loads(ev->detail, 0, NULL) : NULL;
	json_array_append_new(arg, json_pack("{s:s, s:s, s:s, s:o}", "team", ev->team, "type",
					     ev->type, "at", at, "detail",
					     detail ? detail : json_null()));
}

/* Describes the cluster side of the audit into a new object. */
static json_t *cluster_note(const struct audit_run *a, int has_recon)
{
	const char *note = !has_recon ? "no cluster is configured: tasks were checked against "
					"the store only"
			   : a->cluster ? "tasks were checked against a fresh picture"
					: "the cluster picture is not fresh: tasks were checked "
					  "against the store only";
	return json_pack("{s:b, s:b, s:I, s:s}", "checked", a->cluster, "fresh", a->cluster,
			 "grace_s", (json_int_t)a->api->cfg->audit_grace_s, "note", note);
}

/* Computes the audit now. Returns the answer (a new reference) and sets *drift, or NULL when
 * the store cannot be read. Reads the picture's objects without returning to the loop. */
static json_t *audit_compute(struct api_ctx *api, int64_t now_ms, int64_t *drift)
{
	struct audit_run a = { api, now_ms, json_array(), json_array(), 0, 0, NULL, NULL,
			       json_object() };
	json_t *out = NULL, *repairs = json_array();
	if (api->recon)
		a.cluster = reconciler_objects(api->recon, &a.jobs, &a.pods);
	if (store_audit_teams(api->store, on_team, &a))
		goto out;
	if (a.cluster && (check_pods(&a) || check_jobs(&a)))
		goto out;
	if (store_audit_holding(api->store, on_holding, &a))
		goto out;
	if (store_team_events(api->store, NULL, AUDIT_REPAIRS_SHOWN, on_repair_record, repairs))
		goto out;
	char at[40];
	clock_fmt_rfc3339_ms(now_ms, at, sizeof at);
	out = json_pack("{s:s, s:I, s:O, s:O, s:o, s:O}", "checked_at", at, "drift",
			(json_int_t)a.drift, "teams", a.teams, "tasks", a.tasks, "cluster",
			cluster_note(&a, api->recon != NULL), "repairs", repairs);
	*drift = a.drift;
	api->audit.drift = a.drift;
	api->audit.at_ms = now_ms;
out:
	json_decref(a.teams);
	json_decref(a.tasks);
	json_decref(a.pods_by_task);
	json_decref(repairs);
	return out;
}

void api_audit_get(struct req *r)
{
	if (!r->is_admin)
		return http_reply_error(r, 403, "forbidden", "only the administrator audits",
					NULL);
	int64_t drift = 0;
	json_t *a = audit_compute(r->api, clock_now_ms(), &drift);
	if (!a)
		return http_reply_error(r, 500, "internal", "the audit could not read the store",
					NULL);
	http_reply_json(r, 200, a);
}

static void on_repaired(void *arg, const struct store_audit_team *t)
{
	json_array_append_new(arg, json_pack("{s:s, s:o, s:o}", "team", t->team, "before",
					     jx_gpu_pair(t->stored_mem, t->stored_core), "after",
					     jx_gpu_pair(t->computed_mem, t->computed_core)));
}

void api_audit_repair(struct req *r)
{
	if (!r->is_admin)
		return http_reply_error(r, 403, "forbidden", "only the administrator repairs",
					NULL);
	json_t *changed = json_array();
	int n = 0;
	int64_t now = clock_now_ms();
	int rc = store_audit_repair(r->api->store, now, on_repaired, changed, &n);
	if (rc) { /* busy, a storage fault (503 with Retry-After), or 500 */
		json_decref(changed);
		return http_reply_store_error(r, rc, "the repair could not be written");
	}
	size_t i;
	json_t *c;
	json_array_foreach(changed, i, c)
		log_warn("audit", "team_totals_repaired",
			 "team=%s stored_mem_mib=%lld stored_core_pct=%lld mem_mib=%lld "
			 "core_pct=%lld",
			 json_string_value(json_object_get(c, "team")),
			 (long long)json_integer_value(json_object_get(
				 json_object_get(c, "before"), "gpu_memory_mib")),
			 (long long)json_integer_value(json_object_get(
				 json_object_get(c, "before"), "gpu_core_percent")),
			 (long long)json_integer_value(json_object_get(
				 json_object_get(c, "after"), "gpu_memory_mib")),
			 (long long)json_integer_value(json_object_get(
				 json_object_get(c, "after"), "gpu_core_percent")));
	char at[40];
	clock_fmt_rfc3339_ms(now, at, sizeof at);
	http_reply_json(r, 200, json_pack("{s:s, s:i, s:o}", "repaired_at", at, "teams_changed",
					  n, "changes", changed));
}

/* Logs each drift of an audit answer at warn level. */
static void log_drift(const json_t *a)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(a, "teams"), i, t) {
		if (json_is_true(json_object_get(t, "ok")))
			continue;
		const json_t *s = json_object_get(t, "stored"), *c = json_object_get(t, "computed");
		log_warn("audit", "team_drift",
			 "team=%s stored_mem_mib=%lld computed_mem_mib=%lld stored_core_pct=%lld "
			 "computed_core_pct=%lld",
			 json_string_value(json_object_get(t, "team")),
			 (long long)json_integer_value(json_object_get(s, "gpu_memory_mib")),
			 (long long)json_integer_value(json_object_get(c, "gpu_memory_mib")),
			 (long long)json_integer_value(json_object_get(s, "gpu_core_percent")),
			 (long long)json_integer_value(json_object_get(c, "gpu_core_percent")));
	}
	json_array_foreach(json_object_get(a, "tasks"), i, t) {
		const char *task = json_string_value(json_object_get(t, "task"));
		const char *obj = json_string_value(json_object_get(t, "pod"));
		if (!obj)
			obj = json_string_value(json_object_get(t, "job"));
		/* Ids and object names come from labels and names outside our control. */
		log_warn("audit", "task_drift", "task=%s problem=%s object=%s",
			 log_q(task ? task : "-"),
			 json_string_value(json_object_get(t, "problem")), log_q(obj ? obj : "-"));
	}
}

void api_audit_cron(void *arg, int64_t now_ms)
{
	struct api_ctx *api = arg;
	if (api->audit.cron_ms && now_ms - api->audit.cron_ms < api->cfg->audit_interval_s * 1000)
		return;
	api->audit.cron_ms = now_ms;
	int64_t drift = 0;
	json_t *a = audit_compute(api, now_ms, &drift);
	if (!a) {
		log_warn("audit", "failed", "error=%s", log_q(store_errmsg(api->store)));
		return;
	}
	if (drift)
		log_drift(a);
	log_info("audit", "done", "drift=%lld cluster_checked=%d", (long long)drift,
		 json_is_true(json_object_get(json_object_get(a, "cluster"), "checked")));
	json_decref(a);
}

void api_audit_metrics(const struct api_ctx *api, struct evbuffer *out)
{
	if (!api->audit.at_ms)
		return;
	prom_gauge(out, "gwb_audit_drift", NULL, api->audit.drift);
}
