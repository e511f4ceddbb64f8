/* kubesim's composition root: the settings (read-only after start-up) and the context every
 * module receives, holding the event base, the store, the registry and the module instances. */
#ifndef KUBESIM_KUBESIM_H
#define KUBESIM_KUBESIM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

struct event_base;
struct event;

struct ks_config {
	char listen[300];        /* host:port; port 0 picks one */
	char node[64];           /* the first node's name; the others are <node>-2, <node>-3 ... */
	int nodes;               /* number of nodes, each with the same Device and cards */
	int cards;               /* GPU cards per node */
	int64_t card_memory;     /* bytes per card */
	int card_core;           /* percent of compute per card (gpu-core total) */
	char worker[PATH_MAX];   /* the worker: what a container without a command runs */
	char exec_allow[8192];   /* comma-separated absolute programs the kubelet may run besides
				  * the worker ("": the worker alone) */
	char state_dir[PATH_MAX];
	int state_is_temp;       /* created by us: removed at exit */
	char control_socket[PATH_MAX]; /* optional Unix socket serving /_kubesim/ only */
	long history;            /* watch history length (events) */
	long bookmark_ms;        /* interval of BOOKMARK events when asked for */
	long job_backoff_ms;     /* first pod-failure back-off of the Job controller */
	long metric_ms;          /* NodeMetric report interval */
	int create_device;       /* create the node's Device at start */
	int gpu_shared_sync;     /* koord-manager gate EnableSyncGPUSharedResource */
	int hami_label;          /* node labelled koordinator.sh/gpu-isolation-provider=HAMi-core */
	int64_t node_cpu_milli;
	int64_t node_memory;
	long node_pods;
	long max_body;           /* request body cap, bytes */
	long max_headers;        /* request header cap, bytes */
	long watch_queue_max;    /* unsent bytes per watch before it is closed */
	long max_watchers;
	long kube_minor;         /* /version minor: the gcloud kubectl dispatcher picks by it */
	int log_level;
	char score_strategy[32]; /* DeviceShare scoring: LeastAllocated | MostAllocated */
	int score_most;          /* score_strategy is MostAllocated */
	long max_inflight;       /* non-mutating API requests in flight at most (0: no limit) */
	long max_mutating_inflight; /* mutating ones (POST, PUT, PATCH, DELETE) */
};

struct ks {
	struct event_base *base;
	struct ks_config cfg;
	struct store *store;
	struct registry *registry; /* every write goes through it (registry.h) */
	struct http *http;
	struct watch_hub *watch;
	struct logs *logs;
	struct faults *faults;
	struct jobctl *jobctl;
	struct sched *sched;
	struct kubelet *kubelet;
	struct nodemetric *nodemetric;
	struct event *kick_ev;  /* zero-timeout: one reconcile at the next loop turn, made active
				 * by the registry's commit hook */
	struct event *tick_ev;  /* housekeeping timer */
	uint64_t settled_rv;    /* store resourceVersion after the last reconcile pass */
	int64_t last_pass_ms;   /* monotonic time of the last reconcile pass */
	int reconciling;        /* inside a reconcile: its passes go on while commits come */
	int stopping;
};

/* The name of node i (0-based): the configured node, then "<node>-2", "<node>-3" ... */
void ks_node_name(const struct ks *ks, int i, char *buf, size_t len);

#endif
