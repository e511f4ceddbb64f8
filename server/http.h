/* The HTTP layer's request context and reply helpers, shared by the API handler files. A
 * request is read whole by evhttp (body capped), authenticated, routed, and answered exactly
 * once through one of the reply functions. */
#ifndef GWB_HTTP_H
#define GWB_HTTP_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stddef.h>

#include "server/server.h"

struct req {
	struct evhttp_request *ev;
	struct server *srv;
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
};

/* Sends status with body (stolen; may be NULL for no body) as application/json. */
void http_reply_json(struct req *r, int status, json_t *body);
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
/* Requires a JSON body: checks Content-Type (415), parses it (400 invalid_json / invalid_utf8
 * with the position) and requires an object. Returns the object (caller owns it), or NULL after
 * replying. */
json_t *http_json_body(struct req *r);
/* 1 when the caller may act on team's resources (the admin, or that team's token); otherwise
 * replies 403 and returns 0. */
int http_may_act_on(struct req *r, const char *team);

/* API handlers: each answers r exactly once. */
void api_tasks_submit(struct req *r);
void api_tasks_list(struct req *r);
void api_task_get(struct req *r, const char *id);
void api_task_events(struct req *r, const char *id);
/* POST /v1/tasks/{id}/cancel (server/api_cancel.c). */
void api_task_cancel(struct req *r, const char *id);
void api_teams_list(struct req *r);
void api_team_get(struct req *r, const char *team);
void api_team_put(struct req *r, const char *team);
void api_info(struct req *r);
void api_devices(struct req *r);
void api_healthz(struct req *r);
void api_readyz(struct req *r);
void api_metrics(struct req *r);
/* GET /v1/stream (server/api_stream.c): Server-Sent Events of task, team and device changes;
 * the request stays open (answered with a chunked reply) until either side closes it. */
void api_stream(struct req *r);
/* GET / and the page's assets (server/api_web.c); a 404 for any other path outside /v1. */
void api_web(struct req *r);

/* 1 when s is a valid team name: a DNS label (it becomes a Kubernetes label value). */
int api_valid_team(const char *s);
/* 1 when s could be a task id: 3-32 lowercase letters, digits and '-' (URL- and DNS-safe). */
int api_valid_task_id(const char *s);

#endif
