/* The group commit: the decisions deferred in one loop turn, made in one transaction and
 * committed once, then answered, each only once its commit is durable. */
#include "server/api/commit.h"

#include <event2/event.h>
#include <malloc.h>
#include <sys/queue.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/api/api.h"

/* Decisions per batch. */
static const double batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };

/* Free heap kept rather than given back to the kernel (see commit_start): 16 MiB. */
#define COMMIT_HEAP_KEEP (16 << 20)

/* Deferred requests kept for reuse: about two batches' worth at 64 connections. */
#define COMMIT_SPARE_MAX 128

struct commit_deferred {
	struct commit_deferred *next;
	struct req r;
	const struct commit_ops *ops;
	void *ctx;
};

/* A batch committed whose answers wait for the sync that makes its commit durable. */
struct commit_wait {
	struct commit_wait *next;
	uint64_t seq; /* the batch's commit */
	struct commit_deferred *list;
};

void commit_defer(struct req *r, const struct commit_ops *ops, void *ctx)
{
	struct commit_group *g = &r->api->commit;
	/* A spare one if a batch left any: the struct is large, and a fresh allocation of
	 * that size makes glibc consolidate its small free chunks first. */
	struct commit_deferred *d = g->spare;
	if (d) {
		g->spare = d->next;
		g->nspare--;
	} else {
		d = gwb_malloc(sizeof *d);
	}
	d->next = NULL;
	d->r = *r;
	/* The copy keeps what a reply needs; the query list and the body stay the caller's. */
	TAILQ_INIT(&d->r.query);
	d->r.body = NULL;
	d->r.body_len = 0;
	for (int i = 0; i < r->nsegs; i++)
		d->r.segs[i] = d->r.segbuf + (r->segs[i] - r->segbuf);
	d->ops = ops;
	d->ctx = ctx;
	*g->pend_tail = d;
	g->pend_tail = &d->next;
	if (g->npending++ == 0) {
		/* A zero time-out fires on the loop's next turn, after the other sockets that
		 * turn finds readable: their requests join this batch. */
		static const struct timeval zero = { 0, 0 };
		event_add(g->flush_ev, &zero);
	}
}

/* Answers the decisions of a batch, with the outcome of its commit. */
static void batch_answer(struct commit_group *g, struct commit_deferred *list, int rc)
{
	while (list) {
		struct commit_deferred *d = list;
		list = d->next;
		/* The request is evhttp's and is only ever released by answering it, never
		 * freed here. libevent 2.1 stops reading a connection while its request waits
		 * for the answer, so a client that closed is mostly found by the write (evhttp
		 * then frees the connection itself). When a socket error did reach it first,
		 * evhttp detached the request from its connection and left it to us: the
		 * reply below frees it, sending nothing. */
		if (!evhttp_request_get_connection(d->r.ev))
			g->replies_gone++;
		d->ops->reply(&d->r, d->ctx, rc);
		d->ops->release(d->ctx);
		if (g->nspare < COMMIT_SPARE_MAX) {
			d->next = g->spare;
			g->spare = d;
			g->nspare++;
		} else {
			gwb_free(d);
		}
	}
}

/* Runs the deferred decisions in one transaction, commits once, then answers each: no reply
 * leaves before its decision is durable. */
static void batch_run(struct commit_group *g)
{
	struct commit_deferred *list = g->pend_head;
	int n = g->npending;
	g->pend_head = NULL;
	g->pend_tail = &g->pend_head;
	g->npending = 0;
	if (!list)
		return;
	/* Optimistic first: no SAVEPOINT per decision, and the new tasks inserted together once
	 * every decision is made. In the rare batch where a decision that wrote has to be
	 * undone, or a new task's id was taken, the whole batch is rolled back and decided again
	 * with one SAVEPOINT each (decide callbacks overwrite their outcome), so that decision
	 * alone is undone, as it would have been the first time. */
	int rc = store_batch_begin_later(g->store);
	if (rc == 0) {
		for (struct commit_deferred *d = list; d; d = d->next)
			d->ops->decide(&d->r, d->ctx);
		/* The new tasks, a few statements for all (a failure is the commit's to say). */
		store_batch_write(g->store);
		if (store_batch_spoiled(g->store)) {
			store_batch_rollback(g->store);
			log_warn("http", "batch_redone", "size=%d", n);
			rc = store_batch_begin(g->store);
			for (struct commit_deferred *d = list; d && rc == 0; d = d->next)
				d->ops->decide(&d->r, d->ctx);
		}
		if (rc == 0)
			rc = store_batch_commit(g->store);
	}
	g->batches++;
	g->batch_requests += n;
	prom_hist_observe(&g->batch_size, n);
	if (rc) {
		g->batches_failed++;
		log_warn("http", "batch_failed", "size=%d error=%s db=%s", n, err_name(rc),
			 log_q(store_errmsg(g->store)));
	}
	for (struct commit_deferred *d = list; d && rc == 0; d = d->next)
		if (d->ops->prepare)
			d->ops->prepare(d->ctx);
	uint64_t seq = store_commit_seq(g->store);
	if (rc == 0 && seq > store_durable_seq(g->store)) {
		/* Committed, not yet on the disk: the answers wait for the sync (on_synced). */
		struct commit_wait *w = gwb_calloc(1, sizeof *w);
		w->seq = seq;
		w->list = list;
		*g->wait_tail = w;
		g->wait_tail = &w->next;
		return;
	}
	batch_answer(g, list, rc);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	batch_run(arg);
}

/* Answers the batches whose commit is durable now, oldest first; a sync that failed answers
 * those it covered with 503. */
static void durable_answer(struct commit_group *g)
{
	if (!g->wait_head)
		return; /* nothing waits (and a group that never started has no store) */
	uint64_t durable = store_durable_seq(g->store);
	while (g->wait_head && g->wait_head->seq <= durable) {
		struct commit_wait *w = g->wait_head;
		g->wait_head = w->next;
		if (!g->wait_head)
			g->wait_tail = &g->wait_head;
		int rc = store_sync_failed_upto(g->store, w->seq) ? GWB_EIO : 0;
		batch_answer(g, w->list, rc);
		gwb_free(w);
	}
}

static void on_synced(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct commit_group *g = arg;
	store_sync_done(g->store);
	durable_answer(g);
}

void commit_start(struct commit_group *g, struct event_base *base, struct store *store)
{
	/* A batch holds a loop turn's requests (several hundred KiB at 64 connections:
	 * contexts, task views, reply buffers) and frees them together once answered. With
	 * glibc's trim threshold (128 KiB) that memory would go back to the kernel every turn
	 * and be faulted in again the next; up to COMMIT_HEAP_KEEP stays in the heap instead. */
	mallopt(M_TRIM_THRESHOLD, COMMIT_HEAP_KEEP);
	g->store = store;
	g->pend_head = NULL;
	g->pend_tail = &g->pend_head;
	prom_hist_init(&g->batch_size, batch_bounds,
		       (int)(sizeof batch_bounds / sizeof batch_bounds[0]));
	g->flush_ev = event_new(base, -1, 0, on_flush, g);
	g->wait_head = NULL;
	g->wait_tail = &g->wait_head;
	/* Batches commit without waiting for the disk; their answers wait for the sync thread
	 * (server/store/store_sync.c). Without it, each batch's COMMIT syncs as before. */
	if (store_sync_start(store) == 0) {
		g->sync_ev =
		    event_new(base, store_sync_fd(store), EV_READ | EV_PERSIST, on_synced, g);
		event_add(g->sync_ev, NULL);
	} else {
		log_warn("http", "sync_thread_off", "reason=%s",
			 log_q("each batch's commit syncs on the loop"));
	}
}

void commit_stop(struct commit_group *g)
{
	/* Decisions still waiting are made and answered before evhttp frees their requests;
	 * stopping the sync thread makes every commit durable first. */
	batch_run(g);
	if (g->sync_ev) {
		event_free(g->sync_ev);
		g->sync_ev = NULL;
		store_sync_done(g->store);
		store_sync_stop(g->store);
	}
	durable_answer(g);
	if (g->flush_ev)
		event_free(g->flush_ev);
	g->flush_ev = NULL;
	while (g->spare) {
		struct commit_deferred *d = g->spare;
		g->spare = d->next;
		gwb_free(d);
	}
	g->nspare = 0;
}
