/* Job construction for one fractional-GPU task. */
#include "server/recon/jobspec.h"

#include <stdio.h>
#include <string.h>

#include "lib/kobj.h"
#include "lib/quantity.h"
#include "server/task.h"

static int64_t deadline_margin_s = JOBSPEC_DEADLINE_MARGIN_DEFAULT_S;

void jobspec_set_deadline_margin(int64_t seconds)
{
	deadline_margin_s = seconds > 0 ? seconds : JOBSPEC_DEADLINE_MARGIN_DEFAULT_S;
}

int64_t jobspec_pod_deadline_s(int64_t duration_seconds)
{
	return (duration_seconds > 0 ? duration_seconds : 0) + deadline_margin_s;
}

static json_t *labels(const struct jobspec_in *in, int pod)
{
	json_t *l = json_pack("{s:s, s:s, s:s}", GWB_LABEL_TASK, in->task_id, GWB_LABEL_TEAM,
			      in->team, GWB_LABEL_MANAGED, "true");
	if (pod) {
		json_object_set_new(l, "koordinator.sh/qosClass", json_string(in->qos));
		if (in->isolation && in->isolation[0])
			json_object_set_new(l, "koordinator.sh/gpu-isolation-provider",
					    json_string(in->isolation));
	}
	return l;
}

/* requests == limits, as Kubernetes demands for extended resources. gpu-core and gpu-memory are
 * totals over the cards; gpu.shared is the card count, always written by us (§2.3). cpu and
 * memory: the workload's (filled in from the team's policy at submission), else what the
 * simulated worker needs. */
static json_t *resources(const struct jobspec_in *in, const json_t *wl)
{
	char mem[32], core[32], shared[32], cpu[32];
	quantity_format_binary(in->gpu_memory_mib * in->gpu_count * 1024 * 1024, mem, sizeof mem);
	snprintf(core, sizeof core, "%lld", (long long)(in->gpu_core_percent * in->gpu_count));
	snprintf(shared, sizeof shared, "%lld", (long long)in->gpu_count);
	/* The simulated worker burns CPU in proportion to its core share: ask for that much. */
	snprintf(cpu, sizeof cpu, "%lldm", (long long)(in->gpu_core_percent * 10));
	const char *wcpu = kobj_str(wl, "cpu"), *wmem = kobj_str(wl, "memory");
	json_t *r = json_pack("{s:s, s:s, s:s, s:s, s:s}", "cpu", wcpu ? wcpu : cpu, "memory",
			      wmem ? wmem : "256Mi", "koordinator.sh/gpu.shared", shared,
			      "koordinator.sh/gpu-core", core, "koordinator.sh/gpu-memory", mem);
	return json_pack("{s:O, s:o}", "requests", r, "limits", r);
}

/* The Pod's part of the "restricted" profile: a non-root user by default (an image built as
 * root still starts), the runtime's seccomp profile. */
static json_t *pod_security(void)
{
	return json_pack("{s:b, s:i, s:i, s:i, s:{s:s}}", "runAsNonRoot", 1, "runAsUser",
			 JOBSPEC_RUN_AS_USER, "runAsGroup", JOBSPEC_RUN_AS_USER, "fsGroup",
			 JOBSPEC_RUN_AS_USER, "seccompProfile", "type", "RuntimeDefault");
}

/* What every container of ours is held to: the "restricted" profile's container part. */
static json_t *container_security(void)
{
	return json_pack("{s:b, s:b, s:{s:[s]}, s:{s:s}}", "allowPrivilegeEscalation", 0,
			 "runAsNonRoot", 1, "capabilities", "drop", "ALL", "seccompProfile", "type",
			 "RuntimeDefault");
}

/* The env gwb sets in every container: which task it is, how long it may run, where the
 * downward API writes the Pod's annotations (the card the scheduler gave it). */
static json_t *gwb_env(const struct jobspec_in *in)
{
	char duration[32];
	snprintf(duration, sizeof duration, "%lld", (long long)in->duration_seconds);
	return json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "name", "GWB_DURATION_SECONDS",
			 "value", duration, "name", "GWB_ANNOTATIONS_FILE", "value",
			 "/etc/podinfo/annotations", "name", "GWB_TASK_ID", "value", in->task_id);
}

static json_t *container_common(const struct jobspec_in *in, const char *image, json_t *env,
				const json_t *wl)
{
	return json_pack("{s:s, s:s, s:o, s:o, s:[{s:s, s:s, s:b}], s:o, s:s}", "name",
			 GWB_WORKER_CONTAINER, "image", image, "env", env, "resources",
			 resources(in, wl), "volumeMounts", "name", "podinfo", "mountPath",
			 "/etc/podinfo", "readOnly", 1, "securityContext", container_security(),
			 "terminationMessagePolicy", "FallbackToLogsOnError");
}

static json_t *worker_container(const struct jobspec_in *in)
{
	json_t *env = json_array();
	json_array_append_new(env, json_pack("{s:s, s:s}", "name", "GWB_EXPERIMENT", "value",
					     in->experiment));
	json_t *ours = gwb_env(in);
	json_array_extend(env, ours);
	json_decref(ours);
	json_t *c = container_common(in, in->image, env, NULL);
	json_object_set_new(c, "command", json_pack("[s]", "gwb-worker"));
	return c;
}

/* The team's container: its image, command, args, env (its own, then gwb's) and working
 * directory. */
static json_t *workload_container(const struct jobspec_in *in, const json_t *wl)
{
	json_t *env = json_array();
	const char *name;
	json_t *v;
	json_object_foreach(json_object_get(wl, "env"), name, v)
		json_array_append_new(env, json_pack("{s:s, s:O}", "name", name, "value", v));
	json_t *ours = gwb_env(in);
	json_array_extend(env, ours);
	json_decref(ours);
	json_t *c = container_common(in, kobj_str(wl, "image"), env, wl);
	static const char *const copied[][2] = { { "command", "command" }, { "args", "args" },
						 { "working_dir", "workingDir" } };
	for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
		json_t *x = json_object_get(wl, copied[i][0]);
		if (x)
			json_object_set(c, copied[i][1], x);
	}
	return c;
}

json_t *jobspec_build(const struct jobspec_in *in)
{
	char name[64];
	task_job_name(in->task_id, name, sizeof name);
	json_t *wl = in->workload && in->workload[0] ? json_loads(in->workload, 0, NULL) : NULL;
	if (in->workload && in->workload[0] && !json_is_object(wl)) {
		json_decref(wl);
		return NULL; /* a stored workload that is not one: no Job rather than the worker */
	}
	json_t *podspec = json_pack(
		"{s:s, s:s, s:i, s:[o], s:[{s:s, s:{s:[{s:s, s:{s:s}}]}}], s:b, s:o}",
		"schedulerName", "koord-scheduler", "restartPolicy", "Never",
		"terminationGracePeriodSeconds", 10, "containers",
		wl ? workload_container(in, wl) : worker_container(in), "volumes", "name",
		"podinfo", "downwardAPI", "items", "path", "annotations", "fieldRef", "fieldPath",
		"metadata.annotations", "automountServiceAccountToken", 0, "securityContext",
		pod_security());
	if (strcmp(in->qos, "BE") == 0)
		json_object_set_new(podspec, "priorityClassName", json_string("koord-batch"));
	/* A bound on the Pod's life that its node enforces alone: if the cluster's control plane
	 * goes (replaced, its objects lost), the server knows when the Pod has stopped at the
	 * latest, and holds the task's quota until then (ARCHITECTURE.md). */
	json_object_set_new(podspec, "activeDeadlineSeconds",
			    json_integer(jobspec_pod_deadline_s(in->duration_seconds)));
	json_t *job = json_pack("{s:s, s:s, s:{s:s, s:s, s:o}, s:{s:i, s:b, s:{s:{s:o}, s:o}}}",
				"apiVersion", "batch/v1", "kind", "Job", "metadata", "name", name,
				"namespace", in->namespace_, "labels", labels(in, 0), "spec",
				"backoffLimit", 0, "suspend", in->suspend, "template", "metadata",
				"labels", labels(in, 1), "spec", podspec);
	/* backoffLimit 0: a task runs once. The worker's exit 42 (the ledger refused an
	 * allocation) and exit 2 (no budget) fail the Job at once, whatever the retry budget;
	 * a workload's exit codes mean what its program says, nothing to gwb. */
	if (!wl)
		json_object_set_new(json_object_get(job, "spec"), "podFailurePolicy",
				    json_pack("{s:[{s:s, s:{s:s, s:s, s:[i, i]}}]}", "rules",
					      "action", "FailJob", "onExitCodes", "containerName",
					      GWB_WORKER_CONTAINER, "operator", "In", "values", 42,
					      2));
	json_decref(wl);
	/* Finished Jobs (and their Pods, by garbage collection) go after a while, so neither the
	 * cluster nor our picture of it grows without end; by then the release is long done. */
	if (in->ttl_seconds > 0)
		json_object_set_new(json_object_get(job, "spec"), "ttlSecondsAfterFinished",
				    json_integer(in->ttl_seconds));
	return job;
}

int jobspec_is_ours(const json_t *job, const char *task_id)
{
	const char *m = kobj_label(job, GWB_LABEL_MANAGED), *t = kobj_label(job, GWB_LABEL_TASK);
	return m && strcmp(m, "true") == 0 && t && strcmp(t, task_id) == 0;
}

const char *jobspec_task_of(const json_t *obj)
{
	const char *m = kobj_label(obj, GWB_LABEL_MANAGED);
	return m && strcmp(m, "true") == 0 ? kobj_label(obj, GWB_LABEL_TASK) : NULL;
}
