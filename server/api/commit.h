/* The group commit (server/api/commit.c): the decisions deferred in one loop turn are made in
 * one transaction, committed once, and answered once that commit is on the disk. */
#ifndef GWB_COMMIT_H
#define GWB_COMMIT_H

#include <stdint.h>

#include "server/api/http.h"

struct event;
struct event_base;
struct store;
struct commit_deferred;
struct commit_wait;

/* The group commit's part of the API's context (server/api/api.h), zero before commit_start. */
struct commit_group {
	struct store *store;
	/* The decisions deferred in this loop turn, run by flush_ev (a zero-timeout event: the
	 * loop's "before sleep" point) in one transaction. */
	struct event *flush_ev;
	struct commit_deferred *pend_head, **pend_tail;
	int npending;
	struct commit_deferred *spare; /* answered ones, kept for the next batch */
	int nspare;
	/* Batches committed whose answers wait for the disk (server/store/store_sync.c), oldest
	 * first; sync_ev fires when a sync ends. */
	struct commit_wait *wait_head, **wait_tail;
	struct event *sync_ev;
	int64_t batches;          /* batches committed or failed */
	int64_t batch_requests;   /* decisions they held */
	int64_t batches_failed;   /* batches whose BEGIN or COMMIT failed (all answered 5xx) */
	int64_t replies_gone;     /* deferred replies whose client had gone */
	struct prom_hist batch_size; /* decisions per batch */
};

/* A decision deferred to the group commit (commit_defer). The callbacks run at the loop's
 * flush point, in order: decide for every deferred request of the turn inside one batch
 * transaction (each call is one unit of the store and keeps its outcome in ctx; it must not
 * reply), then, once the one COMMIT is durable (after the sync thread's sync), reply for
 * each (it answers r exactly once), then release. decide may run twice for the same request
 * when the batch is decided again (store_batch_spoiled): each call replaces the outcome of the
 * one before. */
struct commit_ops {
	void (*decide)(struct req *r, void *ctx);
	/* commit_rc: 0 when the batch is durable, otherwise the batch's error (GWB_EBUSY, ...):
	 * then every decision was undone and the reply must say so (http_reply_store_error);
	 * GWB_EIO: the batch committed but the sync that was to make it durable failed, so
	 * whether it is on the disk is not known. */
	void (*reply)(struct req *r, void *ctx, int commit_rc);
	void (*release)(void *ctx);
	/* Optional (NULL): called once the batch has committed, before its answers wait for
	 * the sync, to build what reply will send. That work then runs while the disk syncs,
	 * when the loop would otherwise wait with nothing to do; nothing may be sent yet. */
	void (*prepare)(void *ctx);
};

/* Sets g up on base over store: the flush event, and the sync thread that lets batches commit
 * without waiting for the disk (without it, each batch's COMMIT syncs on the loop). */
void commit_start(struct commit_group *g, struct event_base *base, struct store *store);
/* Makes and answers the decisions still waiting (every commit made durable first), then frees
 * the group's events and spares. Accepts a group that never started. */
void commit_stop(struct commit_group *g);
/* Defers r's decision to this loop turn's group commit (r->api->commit). ctx becomes the
 * batch's (released through ops->release once answered); r is copied (its query and body are
 * not: ctx must hold what decide needs). The reply is sent after the COMMIT, whether or not
 * the client is still there (answering is how evhttp releases the request). The caller must
 * not reply. */
void commit_defer(struct req *r, const struct commit_ops *ops, void *ctx);

#endif
