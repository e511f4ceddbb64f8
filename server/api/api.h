/* The API handlers' context and prototypes: struct api_ctx, filled by main.c and made of the
 * parts each file of server/api/ owns, the router, and the handlers, views and checks the
 * handler files share. */
#ifndef GWB_API_H
#define GWB_API_H

#include <event2/buffer.h>
#include <jansson.h>
#include <stdint.h>

#include "config/config.h"
#include "server/api/api_audit.h"
#include "server/api/auth.h"
#include "server/api/commit.h"
#include "server/api/http.h"
#include "server/server.h"
#include "server/store/store.h"

struct reconciler;
struct submit_ctx;

/* Answered submissions' contexts kept for the next batch's (server/api/api_tasks.c). */
struct api_tasks_spares {
	struct submit_ctx *head;
	int n;
};

/* The HTTP API's narrow context, filled by main.c before http_start and kept alive until
 * after http_stop. */
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
	/* The parts of the files that use them, each defined next to its owner. */
	struct http_server http;        /* the transport (server/api/http.c) */
	struct auth_state auth;         /* tokens and the request limit (server/api/auth.c) */
	struct commit_group commit;     /* the group commit (server/api/commit.c) */
	struct api_audit_state audit;   /* the last audit (server/api/api_audit.c) */
	struct api_tasks_spares submit; /* submission contexts (server/api/api_tasks.c) */
};

/* Splits r->path into r->segs (server/api/router.c). 0, or -1 after replying 404 when no
 * resource is named so: an empty ("//"), "." or ".." segment, or more segments than a route
 * has. */
int router_split(struct req *r);
/* Routes r, its path split and its query and body read: /healthz, /readyz, /metrics and
 * /v1/openapi.json unauthenticated, /v1 once auth_admit lets it in, any other path to the page (api_web).
 * Answers r exactly once. */
void router_route(struct req *r);

/* Tells api->task_changed (when set) that task_id was submitted or cancelled. */
void api_task_changed(const struct api_ctx *api, const char *task_id);

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

/* Waiting for quota (server/api/api_queue.c): a waiting task's view with its place in the
 * line, the line of a team, the line's /metrics. */
void api_task_reply_waiting(struct req *r, int status, const struct task *t);
/* A dry run's "queue": null when the task would not wait, else its place at the line's end. */
json_t *api_queue_dry_run(struct req *r, const struct task_req *q, int fits);
void api_team_queue(struct req *r, const char *team);
struct evbuffer;
void api_queue_metrics(struct store *s, struct evbuffer *out);

/* API handlers: each answers r exactly once. */
void api_tasks_submit(struct req *r);
/* Frees the submission contexts kept for reuse (http_stop). */
void api_tasks_spares_free(struct api_ctx *api);
void api_tasks_list(struct req *r);
void api_task_get(struct req *r, const char *id);
void api_task_events(struct req *r, const char *id);
/* GET /v1/tasks/{id}/logs (server/api/api_logs.c): the task's Pod log, read or followed. */
void api_task_logs(struct req *r, const char *id);
/* POST /v1/tasks/{id}/cancel (server/api/api_cancel.c). */
void api_task_cancel(struct req *r, const char *id);
void api_teams_list(struct req *r);
/* The team's usage beside its reservation (new reference): the figures a monitor gives its
 * running tasks, summed, and the tasks using less than a quarter of what they reserved; NULL
 * when no collector is configured. */
json_t *api_team_usage(struct store *s, const char *team);
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
/* GET /v1/openapi.json (server/api/api_openapi.c): the API's OpenAPI document, no token. */
void api_openapi(struct req *r);
/* GET / and the page's assets (server/api/api_web.c); a 404 for any other path outside /v1. */
void api_web(struct req *r);

/* 1 when s is a valid team name: a DNS label (it becomes a Kubernetes label value). */
int api_valid_team(const char *s);
/* 1 when s could be a task id: 3-32 lowercase letters, digits and '-' (URL- and DNS-safe). */
int api_valid_task_id(const char *s);
/* 1 when r's token may see the tasks of team: the admin sees all, a team only its own. */
int api_task_team_visible(const struct req *r, const char *team);

#endif
