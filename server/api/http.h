/* The HTTP layer's request context and reply helpers, shared by the API handler files. A
 * request is read whole by evhttp (body capped), authenticated, routed, and answered exactly
 * once through one of the reply functions. */
#ifndef GWB_HTTP_H
#define GWB_HTTP_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stddef.h>

#include "config/config.h"
#include "server/server.h"
#include "server/store/store.h"

struct reconciler;
struct ratelimit;
struct http_deferred;

/* A Prometheus histogram with fixed bucket bounds (ascending, the last +Inf implied). */
#define API_HIST_MAX 16
struct api_hist {
	const double *bounds;
	int nbounds;                    /* <= API_HIST_MAX - 1 */
	int64_t counts[API_HIST_MAX];   /* per bucket, not cumulative; [nbounds] is +Inf */
	double sum;
	int64_t count;
};
/* Counts value v into h. */
void api_hist_observe(struct api_hist *h, double v);
/* Appends h as Prometheus text (cumulative buckets, _sum, _count) named name to out. */
void api_hist_write(const struct api_hist *h, const char *name, struct evbuffer *out);

/* The HTTP API's narrow context, filled by main.c before http_start and kept alive until
 * after http_stop. */
struct submit_ctx;

/* The token memo: slots, and the longest token it keeps (longer ones are hashed each time). */
#define HTTP_TOKEN_MEMO_SLOTS 16
#define HTTP_TOKEN_MEMO_BYTES 128 /* a multiple of 8: compared a word at a time */

struct api_ctx {
	struct event_base *base;
	const struct gwb_config *cfg;
	struct store *store;
	struct reconciler *recon; /* NULL without a cluster */
	/* A submission or a cancel was recorded for task_id: where it goes when no queue
	 * carries it (NULL: the outbox and the queue carry it). */
	void (*task_changed)(void *arg, const char *task_id);
	void *task_changed_arg;
	/* Adds each registered dependency's entry to deps for /readyz; clears *ready when one
	 * keeps the server from serving. */
	void (*readiness)(void *arg, json_t *deps, int *ready);
	void *readiness_arg;
	/* Appends the other modules' metrics (Prometheus text) to out for /metrics; may be NULL. */
	void (*metrics)(void *arg, struct evbuffer *out);
	void *metrics_arg;
	int64_t started_ms;
	unsigned char admin_hash[32]; /* SHA-256 of the admin token */
	/* Bearer tokens seen lately with their SHA-256 (http.c, token_hash): a function of the
	 * token alone, so an entry is never stale. Tokens are zero-padded to the slot. */
	struct http_token_memo {
		size_t len; /* 0: empty */
		char tok[HTTP_TOKEN_MEMO_BYTES];
		unsigned char hash[32];
	} token_memo[HTTP_TOKEN_MEMO_SLOTS];
	int has_admin;
	/* The last audit (server/api/api_audit.c): when it ran and the drift it found; when the
	 * housekeeping run last started it. */
	int64_t audit_at_ms, audit_drift, audit_cron_ms;
	/* The HTTP layer's own state (zero before http_start). */
	struct ratelimit *rl;    /* per-token request limit; NULL when off */
	struct evhttp *evh;
	char url[300];           /* http://HOST:PORT actually bound */
	int64_t replies[6];      /* replies by status class: [2] = 2xx ... [5] = 5xx */
	/* Group commit: the decisions deferred in this loop turn, run by flush_ev (a
	 * zero-timeout event: the loop's "before sleep" point) in one transaction. */
	struct event *flush_ev;
	struct http_deferred *pend_head, **pend_tail;
	int npending;
	struct http_deferred *spare; /* answered ones, kept for the next batch */
	int nspare;
	struct submit_ctx *submit_spare; /* the same for submissions (server/api/api_tasks.c) */
	int nsubmit_spare;
	int64_t batches;          /* batches committed or failed */
	int64_t batch_requests;   /* decisions they held */
	int64_t batches_failed;   /* batches whose BEGIN or COMMIT failed (all answered 5xx) */
	int64_t replies_gone;     /* deferred replies whose client had gone */
	/* Batches committed whose answers wait for the disk (server/store/store_sync.c), oldest
	 * first; sync_ev fires when a sync ends. */
	struct http_durable_wait {
		struct http_durable_wait *next;
		uint64_t seq; /* the batch's commit */
		struct http_deferred *list;
	} *wait_head, **wait_tail;
	struct event *sync_ev;
	struct api_hist batch_size;      /* decisions per batch */
	struct api_hist submit_seconds;  /* POST /v1/tasks: arrival to reply */
};

/* Binds the HTTP API on api->cfg->listen and fills api->url with the real address. 0, or a
 * negative error with the reason in err. */
int http_start(struct api_ctx *api, char *err, size_t errlen);
/* Stops accepting and frees the HTTP server. Accepts an API that never started. */
void http_stop(struct api_ctx *api);
/* Tells api->task_changed (when set) that task_id was submitted or cancelled. */
void api_task_changed(const struct api_ctx *api, const char *task_id);

struct req {
	struct evhttp_request *ev;
	struct api_ctx *api;
	enum evhttp_cmd_type method;
	char path[512];              /* decoded path */
	char *segs[8];               /* path segments (point into segbuf) */
	int nsegs;
	char segbuf[512];
	struct evkeyvalq query;      /* decoded query parameters */
	char *body;                  /* NUL-terminated copy of the body (gwb_malloc'd) */
	size_t body_len;
	int is_admin;                /* authenticated as the administrator */
	char team[64];               /* authenticated team ("" for the admin) */
	int64_t t0_us;               /* monotonic time the request arrived */
	int is_submit;               /* a submission: its reply is timed */
};

/* A decision deferred to the group commit (http_defer). The callbacks run at the loop's
 * flush point, in order: decide for every deferred request of the turn inside one batch
 * transaction (each call is one unit of the store and keeps its outcome in ctx; it must not
 * reply), then, once the one COMMIT is durable (after the sync thread's sync), reply for
 * each (it answers r exactly once), then release. decide may run twice for the same request
 * when the batch is decided again (store_batch_spoiled): each call replaces the outcome of the
 * one before. */
struct http_deferred_ops {
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
/* Defers r's decision to this loop turn's group commit. ctx becomes the batch's (released
 * through ops->release once answered); r is copied (its query and body are not: ctx must hold
 * what decide needs). The reply is sent after the COMMIT, whether or not the client is still
 * there (answering is how evhttp releases the request). The caller must not reply. */
void http_defer(struct req *r, const struct http_deferred_ops *ops, void *ctx);
/* Answers a store error: GWB_EBUSY is 503 busy with Retry-After: 1; GWB_EUNAVAIL (a storage
 * fault) is 503 storage_full, storage_read_only or storage_error with Retry-After: 5 and the
 * store's fault in details; GWB_EIO (a group commit's failed sync) is 503 storage_error that
 * says the request may or may not be stored; anything else 500 internal with message. */
void http_reply_store_error(struct req *r, int rc, const char *message);

/* Sends status with body (stolen; may be NULL for no body) as application/json. */
void http_reply_json(struct req *r, int status, json_t *body);
/* Replies with status and the JSON text[0..len) (a newline is added, as to every body). */
void http_reply_json_text(struct req *r, int status, const char *text, size_t len);
/* Sends {"error": {"code": code, "message": message, ...details}}; details is stolen and may be
 * NULL. */
void http_reply_error(struct req *r, int status, const char *code, const char *message,
		      json_t *details);
/* 400 invalid_field naming the field and the rule it broke. */
void http_reply_invalid_field(struct req *r, const char *field, const char *rule);
/* Adds a response header (before the reply). */
void http_add_header(struct req *r, const char *name, const char *value);
/* Value of a request header, or NULL. */
const char *http_header(struct req *r, const char *name);
/* Makes libevent allocate through lib/pool.h's free lists: the buffers, requests and
 * headers of a batch of deferred requests are live together, and more than glibc keeps at
 * hand. Call first, before any libevent call that allocates. */
void http_mem_install(void);
/* Frees what libevent allocated for its caller (evhttp_uridecode's string). */
void http_event_free(void *p);
/* SHA-256 of data into out (32 bytes). */
void http_sha256(const void *data, size_t n, unsigned char out[32]);
/* Requires a JSON body: checks Content-Type (415), parses it (400 invalid_json / invalid_utf8
 * with the position) and requires an object. Returns the object (caller owns it), or NULL after
 * replying. */
json_t *http_json_body(struct req *r);
/* http_json_body's first check alone: 1 when the body is sent as application/json, otherwise
 * 0 after replying 415. */
int http_json_type_ok(struct req *r);
/* 1 when the caller may act on team's resources (the admin, or that team's token); otherwise
 * replies 403 and returns 0. */
int http_may_act_on(struct req *r, const char *team);

/* A task as the API shows it (docs/API.md), as a new reference (server/api/api_taskview.c). */
json_t *api_task_view(const struct task *t);
/* One event of a task's history as the API shows it (a new reference). */
json_t *api_task_event_view(const struct task_event *ev);
/* One task read from the store with the fields only GET /v1/tasks/{id} shows
 * (cancel_requested_at): a new reference, or NULL when there is no such task (or it cannot
 * be read). */
json_t *api_task_detail(struct store *s, const char *id);
/* The same view of a task already in memory (a new reference): what api_task_detail gives
 * for the row t was read from, byte for byte once dumped. */
json_t *api_task_detail_view(const struct task *t);
/* 1 when the views of t are built with every key in sorted order, at every depth (true
 * unless t has an allocation annotation or a pending message or diagnosis, whose JSON keeps
 * the order it was stored in), so that api_task_view_write can write them. */
int api_task_view_sorted(const struct task *t);
struct jw;
/* Appends to w the text of api_task_view (with_cancel 0) or api_task_detail_view (1) of t,
 * byte for byte what dumping that view gives (compact, keys sorted), without building it:
 * 0, or -1 when the view has parts shaped from outside text (api_task_view_sorted is 0) or a
 * text is not valid UTF-8; then w holds a partial text and the caller dumps the view. */
int api_task_view_write(const struct task *t, int with_cancel, struct jw *w);
/* The same as api_task_view_write(t, 1, w) for a task a submission has just made (w empty),
 * from a template cut out of the first such task's text: every later task whose fields
 * other than the template's holes (id, Job name, name, team, key, request, reservation and
 * time) equal that task's is written from its pieces; any other goes to the writer. */
int api_task_view_write_new(const struct task *t, struct jw *w);
/* How many views api_task_view_write_new wrote from its template (for the tests). */
uint64_t api_task_view_template_uses(void);

/* API handlers: each answers r exactly once. */
void api_tasks_submit(struct req *r);
/* Frees the submission contexts kept for reuse (http_stop). */
void api_tasks_spares_free(struct api_ctx *api);
void api_tasks_list(struct req *r);
void api_task_get(struct req *r, const char *id);
void api_task_events(struct req *r, const char *id);
/* POST /v1/tasks/{id}/cancel (server/api/api_cancel.c). */
void api_task_cancel(struct req *r, const char *id);
void api_teams_list(struct req *r);
void api_team_get(struct req *r, const char *team);
void api_team_put(struct req *r, const char *team);
void api_info(struct req *r);
void api_devices(struct req *r);
void api_healthz(struct req *r);
void api_readyz(struct req *r);
void api_metrics(struct req *r);
/* GET /v1/stream (server/api/api_stream.c): Server-Sent Events of task, team and device changes;
 * the request stays open (answered with a chunked reply) until either side closes it. */
void api_stream(struct req *r);
/* GET / and the page's assets (server/api/api_web.c); a 404 for any other path outside /v1. */
void api_web(struct req *r);

/* 1 when s is a valid team name: a DNS label (it becomes a Kubernetes label value). */
int api_valid_team(const char *s);
/* 1 when s could be a task id: 3-32 lowercase letters, digits and '-' (URL- and DNS-safe). */
int api_valid_task_id(const char *s);

#endif
