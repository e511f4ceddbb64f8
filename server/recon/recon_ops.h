/* The reconciler's per-task operations against the Kubernetes API: observe the Job (GET),
 * create it (POST, already suspended for a cancel: the marker), suspend it (PATCH), and list
 * the task's Pods to confirm a release; their answers recorded in the store. At most one
 * operation per task is in flight; failures back off per task; intents wait here for their
 * task's outcome. Every answer marks the task dirty, so the next decision sees what it did.
 * An unknown outcome is treated as unknown: quota kept, the next attempt observes first. */
#ifndef GWB_RECON_OPS_H
#define GWB_RECON_OPS_H

#include <jansson.h>
#include <stdint.h>

#include "server/kube/kube.h"
#include "server/recon/recon_decide.h"
#include "server/recon/recon_picture.h"
#include "server/store/store.h"

/* Fires once an intent's outcome is recorded (rc 0) or cannot be (rc < 0). */
typedef void (*recon_done_fn)(void *arg, int rc);

/* What the operations need, and nothing more. Pointers are borrowed for the life of the
 * operations. */
struct recon_ctx {
	struct store *store;
	struct kube *kube;
	struct picture *pic;
	const char *ns;
	const char *image;        /* the worker's image */
	const char *isolation;    /* gpu-isolation-provider label value, "" for none */
	int64_t job_ttl_seconds;  /* ttlSecondsAfterFinished of our Jobs */
	int request_timeout_ms;
	/* Task id should be decided again (at the owner's safe point). */
	void (*dirty)(void *arg, const char *task_id);
	void *arg;
};

struct recon_ops;

/* Creates the operations table. Returns it (free with recon_ops_free). */
struct recon_ops *recon_ops_new(const struct recon_ctx *ctx);
/* Sends what the safe point asked for in bulk: the Pod lists of the releases asked for go out
 * as one list per LIST_BATCH_MAX tasks (a labelSelector "in" set). While the Kubernetes
 * client is busy they are held, up to a second, until a full list's worth has gathered, so a
 * burst's releases cost a few lists rather than one each. The owner calls it at the end of
 * each safe point and at each housekeeping tick. */
void recon_ops_flush(struct recon_ops *ops);
/* Frees everything. Requests in flight must have been cancelled (kube_free) first: no
 * waiter fires. Accepts NULL. */
void recon_ops_free(struct recon_ops *ops);

/* 1 when no operation of task id is in flight (and starts tracking it). */
int recon_ops_idle(struct recon_ops *ops, const char *id);
/* 1 when task id's back-off has passed at now_ms. */
int recon_ops_due(struct recon_ops *ops, const char *id, int64_t now_ms);
/* Starts the operation a for task t (RECON_NONE does nothing). The answer fires later,
 * never from inside this call; when the request cannot be sent, the task backs off. */
void recon_ops_start(struct recon_ops *ops, const struct task *t, enum recon_action a);
/* Adds a waiter to task id (fn fires exactly once: when the task's pass ends with no
 * operation in flight, possibly before this returns for a full table) and makes it due now. */
void recon_ops_wait(struct recon_ops *ops, const char *id, recon_done_fn fn, void *arg);
/* The task's pass ended: with no operation in flight, its waiters fire with rc; a task that
 * is done (done 1: final and released) and has nobody waiting is forgotten. */
void recon_ops_settle(struct recon_ops *ops, const char *id, int rc, int done);
/* Calls fn(arg, id) for every idle task whose back-off ended by now_ms. */
void recon_ops_each_due(struct recon_ops *ops, int64_t now_ms,
			void (*fn)(void *arg, const char *id), void *arg);

#endif
