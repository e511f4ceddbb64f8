/* The Kubernetes Job of a task, as a pure function of the task: deterministic name, labels,
 * Koordinator GPU resources (koordinator.md §8.1), the worker's settings and the downward-API
 * annotations volume. Also recognises a Job as ours. */
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
};

/* Builds the Job object. Returns a new reference. */
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
