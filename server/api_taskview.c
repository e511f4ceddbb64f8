/* The API's JSON view of a task: the store returns rows (struct task), this file shapes them
 * as API.md shows a task, parsing the allocation annotation and the stored diagnosis. */
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/devalloc.h"
#include "lib/jsonx.h"
#include "server/http.h"

/* The store keeps "" and NULL apart from nothing: an empty text column is shown as null. */
static json_t *text(const char *v)
{
	return v[0] ? json_string(v) : json_null();
}

static json_t *time_of(int has, int64_t ms)
{
	if (!has)
		return json_null();
	char buf[40];
	return json_string(clock_fmt_rfc3339_ms(ms, buf, sizeof buf));
}

static json_t *allocation_json(const char *raw)
{
	if (!raw[0])
		return json_null();
	struct devalloc a;
	char err[160];
	json_t *o = json_object();
	json_object_set_new(o, "annotation", json_string(raw));
	if (devalloc_parse(raw, strlen(raw), &a, err, sizeof err) == 0) {
		json_t *parsed = devalloc_to_json(&a);
		json_object_set(o, "cards", json_object_get(parsed, "cards"));
		json_decref(parsed);
	} else {
		json_object_set_new(o, "parse_error", json_string(err));
	}
	return o;
}

static json_t *pending_json(const struct task *t)
{
	if (!t->pending_message[0] && !t->pending_diagnosis[0])
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "scheduler_message", text(t->pending_message));
	json_t *d = t->pending_diagnosis[0] ? json_loads(t->pending_diagnosis, 0, NULL) : NULL;
	json_object_set_new(o, "diagnosis", d ? d : json_null());
	return o;
}

/* A sentence for the reasons that need one: what the task waits for, or why it ended so. */
static json_t *reason_detail(const struct task *t)
{
	char buf[512], at[40];
	if (!strcmp(t->reason, TASK_REASON_CLUSTER_WAIT) ||
	    (!strcmp(t->reason, TASK_REASON_CLUSTER_REPLACED) && t->has_pod_deadline_at)) {
		clock_fmt_rfc3339(t->has_pod_deadline_at ? t->pod_deadline_at : 0, at, sizeof at);
		if (!strcmp(t->reason, TASK_REASON_CLUSTER_WAIT))
			snprintf(buf, sizeof buf,
				 "The Kubernetes cluster was replaced (the uid of its kube-system "
				 "namespace changed) and this task's Job vanished with the old one. Its "
				 "Pod may still run on a node of the old cluster until its "
				 "activeDeadlineSeconds stops it, at %s at the latest, so the task keeps "
				 "its quota until then; it then ends failed (cluster_replaced), and is "
				 "not run again.",
				 at);
		else
			snprintf(buf, sizeof buf,
				 "The Kubernetes cluster was replaced (the uid of its kube-system "
				 "namespace changed) and this task's Job vanished with the old one. Its "
				 "Pod could have run on a node of the old cluster until %s, when its "
				 "activeDeadlineSeconds stopped it at the latest; the task kept its "
				 "quota until then. How the Pod ended is not known.",
				 at);
		return json_string(buf);
	}
	return json_null();
}

json_t *api_task_view(const struct task *t)
{
	json_t *req = json_pack("{s:I, s:I, s:I, s:I, s:o, s:o}", "gpu_memory_mib",
				(json_int_t)t->gpu_memory_mib, "gpu_core_percent",
				(json_int_t)t->gpu_core_percent, "gpu_count",
				(json_int_t)t->gpu_count, "duration_seconds",
				(json_int_t)t->duration_seconds, "qos", text(t->qos), "experiment",
				text(t->experiment));
	json_t *resv = json_pack("{s:I, s:I, s:b, s:o, s:o}", "gpu_memory_mib",
				 (json_int_t)t->reserved_mem_mib, "gpu_core_percent",
				 (json_int_t)t->reserved_core_percent, "released", t->released,
				 "released_at", time_of(t->has_released_at, t->released_at),
				 "release_reason", text(t->release_reason));
	json_t *job = json_pack("{s:o, s:o, s:b, s:o}", "name", text(t->job_name), "uid",
				text(t->job_uid), "suspended", t->job_suspended, "cluster_uid",
				text(t->cluster_uid));
	/* The reason column says why the task is where it is; under "pod" it shows only once a
	 * Pod was seen (its container's reason, or the verdict drawn from its exit code). */
	int has_pod = t->pod_name[0] != '\0';
	/* A Pod being deleted keeps its phase (Running) until it stops: kubectl shows it
	 * Terminating, and so does terminating here. */
	int terminating = t->pod_deleted_at[0] && strcmp(t->pod_phase, "Succeeded") != 0 &&
			  strcmp(t->pod_phase, "Failed") != 0 && strcmp(t->pod_phase, "Deleted") != 0;
	json_t *pod = json_pack("{s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o, s:o}", "name",
				text(t->pod_name), "uid", text(t->pod_uid), "node",
				text(t->pod_node), "phase", text(t->pod_phase), "terminating",
				terminating, "deletion_timestamp", text(t->pod_deleted_at),
				"exit_code",
				t->has_exit_code ? json_integer(t->exit_code) : json_null(),
				"reason", has_pod ? text(t->reason) : json_null(), "deadline_at",
				time_of(t->has_pod_deadline_at, t->pod_deadline_at));
	/* No collector is configured: usage is a measurement, and nothing measures it. */
	json_t *usage = json_pack("{s:s, s:s}", "status", "unknown", "reason",
				  "no usage collector is configured; quota and allocation are "
				  "budgets, not measurements");
	return json_pack("{s:o, s:o, s:o, s:s, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
			 "s:o, s:o}",
			 "id", text(t->id), "team", text(t->team), "name", text(t->name), "state",
			 task_state_name(t->state), "reason", text(t->reason), "reason_detail",
			 reason_detail(t), "request", req,
			 "idempotency_key", text(t->idempotency_key), "reservation", resv, "job",
			 job, "pod", pod, "allocation", allocation_json(t->allocation), "pending",
			 pending_json(t), "usage", usage, "created_at", time_of(1, t->created_at),
			 "updated_at", time_of(1, t->updated_at));
}

static json_t *str_or_null(const char *v)
{
	return v ? json_string(v) : json_null();
}

json_t *api_task_event_view(const struct task_event *ev)
{
	json_t *detail = ev->detail ? json_loads(ev->detail, 0, NULL) : NULL;
	return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "seq", (json_int_t)ev->seq, "ts",
			 time_of(1, ev->ts_ms), "type", str_or_null(ev->type), "from",
			 str_or_null(ev->from), "to", str_or_null(ev->to), "detail",
			 detail ? detail : json_null());
}

json_t *api_task_detail(struct store *s, const char *id)
{
	struct task *t = gwb_malloc(sizeof *t);
	json_t *out = NULL;
	if (store_task_load(s, id, t) == 0) {
		out = api_task_view(t);
		json_object_set_new(out, "cancel_requested_at",
				    time_of(t->has_cancel_requested_at, t->cancel_requested_at));
	}
	gwb_free(t);
	return out;
}
