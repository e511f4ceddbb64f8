/* The reconciler turns task intents into Kubernetes Jobs and the cluster's observed state back
 * into task state. SQLite is the truth about what was asked; the informers' picture is the
 * truth about what is; every decision compares the two. It creates by observing first (GET,
 * then POST a deterministically named Job), treats an unknown outcome as unknown (quota kept,
 * retried), cancels through a durable intent and a suspended Job (the cancel marker), and
 * releases a reservation only when a fresh picture proves every Pod of the task stopped. */
#ifndef GWB_RECONCILER_H
#define GWB_RECONCILER_H

#include <event2/event.h>
#include <jansson.h>

#include "config/config.h"
#include "server/server.h"
#include "server/store/store.h"

struct reconciler;
struct kube;

/* What the reconciler needs; copied by reconciler_new, pointers borrowed for its life. */
struct reconciler_ctx {
	struct event_base *base;
	const struct gwb_config *cfg;
	struct store *store;
	/* 1: intents arrive through the queue (reconciler_intent), so a queued task waits for
	 * its intent up to reconcile.queued_grace_ms; 0: they arrive as reconciler_kick. */
	int has_queue;
	struct server_hooks hooks;
};

/* Creates the reconciler: finds the API server (kube.server, then a kubeconfig, then
 * in-cluster), starts the Job, Pod, Device and Event informers, and registers its
 * housekeeping and its /readyz entry "kube". Returns 0 and *out; 1 when no API server is
 * configured (*out NULL, the server runs without a cluster); or a negative error with err
 * filled. */
int reconciler_new(struct reconciler **out, const struct reconciler_ctx *ctx, char *err,
		   size_t errlen);
/* Stops everything; no callback fires afterwards. Accepts NULL. */
void reconciler_free(struct reconciler *r);

/* Called once an intent's outcome is durably recorded (rc 0), or when the intent cannot be
 * handled (rc < 0: GWB_ENOTFOUND for a task that does not exist). */
typedef void (*reconciler_done_fn)(void *arg, int rc);

/* Hands one intent to the reconciler: kind "create" or "cancel" for task_id. done fires
 * exactly once, possibly before this call returns. */
void reconciler_intent(struct reconciler *r, const char *kind, const char *task_id,
		       reconciler_done_fn done, void *arg);

/* Asks the reconciler to look at a task now (a submission or cancel when no queue carries
 * intents). Accepts a NULL reconciler. */
void reconciler_kick(struct reconciler *r, const char *task_id);

/* The queue lost its stream at now_ms (wall clock): every task queued before then is taken
 * without its intent at its next pass, which starts now. */
void reconciler_intents_lost(struct reconciler *r, int64_t now_ms);
/* 1 while the Job and Pod informers' picture is fresh. */
int reconciler_fresh(const struct reconciler *r);
/* The picture's Jobs and Pods of ours (name -> object, borrowed until the next informer
 * callback: read them and return to the loop), for the audit. Returns 1 when the picture is
 * fresh; a stale picture is no evidence of anything. */
int reconciler_objects(const struct reconciler *r, const json_t **jobs, const json_t **pods);
/* 1 unless the last Kubernetes request that ended could not reach the API server. */
int reconciler_reachable(const struct reconciler *r);

/* The reconciler's Kubernetes client (for its flow settings, room and metrics); owned by r. */
struct kube *reconciler_kube(struct reconciler *r);

struct diag_req;
/* The dry run's placement from the current picture (see predict.h): {"outcome", "node",
 * "cards", "tied_nodes", "diagnosis", "unblock"}, where each unblock option names the card,
 * the running tasks to end and, for each, when it is due to end (the start of its Pod's
 * container plus its duration; null when not known). *fresh is 1 when the card picture is
 * fresh. Returns a new reference. */
json_t *reconciler_predict(struct reconciler *r, const struct diag_req *req, const char *strategy,
			   int *fresh);

/* GET /v1/devices: every card with totals, health, allocated, free and the tasks on it, and
 * whether the picture is fresh. Returns a new reference. */
json_t *reconciler_devices_json(struct reconciler *r);

#endif
