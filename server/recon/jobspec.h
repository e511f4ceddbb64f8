/* The Kubernetes Job of a task, as a pure function of the task: deterministic name, labels,
 * Koordinator GPU resources (koordinator.md §8.1), the container (the simulated worker with
 * its settings, or the team's workload with gwb's), the downward-API annotations volume, and
 * a Pod that meets the Pod Security Standard "restricted". Also recognises a Job as ours. */
#ifndef GWB_JOBSPEC_H
#define GWB_JOBSPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct jobspec_in {
	const char *task_id;
	const char *team;
	int64_t gpu_memory_mib;   /* per card */
	int64_t gpu_core_percent; /* per card */
	int64_t gpu_count;
	int64_t duration_seconds;
	const char *qos;          /* LS | BE */
	const char *experiment;   /* normal | overlimit */
	const char *namespace_;
	const char *image;        /* the worker's container image */
	const char *isolation;    /* koordinator.sh/gpu-isolation-provider value, "" for none */
	int suspend;              /* 1: the cancel marker, created already suspended */
	int64_t ttl_seconds;      /* ttlSecondsAfterFinished; 0 keeps finished Jobs */
	const char *workload;     /* the team's container (canonical JSON); "" or NULL: worker */
};

/* The user every container of ours runs as unless its image names a non-root one: an image
 * built to run as root still starts under runAsNonRoot. */
#define JOBSPEC_RUN_AS_USER 65532

/* The default of kube.pod_deadline_margin_seconds. */
#define JOBSPEC_DEADLINE_MARGIN_DEFAULT_S 300
/* Sets the margin every task Pod's activeDeadlineSeconds adds to the task's duration (>= 1;
 * the kube.pod_deadline_margin_seconds setting). Called once at start-up, before any Job is
 * built, and read-only afterwards like the rest of the configuration: it is process-wide
 * because the Job is built where the setting is not at hand (server/recon/recon_ops.c). */
void jobspec_set_deadline_margin(int64_t seconds);
/* The activeDeadlineSeconds of a task Pod of duration_seconds: the duration plus the margin.
 * Past it the kubelet stops the Pod on its own, so it bounds how long a Pod can run even when
 * its control plane is gone. */
int64_t jobspec_pod_deadline_s(int64_t duration_seconds);
/* Builds the Job object (its Pod template with activeDeadlineSeconds from
 * jobspec_pod_deadline_s). Returns a new reference. */
json_t *jobspec_build(const struct jobspec_in *in);
/* 1 when job carries our labels for task_id (gwb.io/managed=true, gwb.io/task=<id>). */
int jobspec_is_ours(const json_t *job, const char *task_id);
/* The task id of a gwb-managed object (its gwb.io/task label), or NULL. Borrowed. */
const char *jobspec_task_of(const json_t *obj);

#define GWB_LABEL_TASK "gwb.io/task"
#define GWB_LABEL_TEAM "gwb.io/team"
#define GWB_LABEL_MANAGED "gwb.io/managed"
#define GWB_WORKER_CONTAINER "worker"

#endif
