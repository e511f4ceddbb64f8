/* The HTTP transport: the request as the handlers see it (struct req), the replies, headers and
 * body, and the transport's own part of the API's context. A request is read whole by evhttp
 * (body capped), routed (server/api/router.c), and answered exactly once through one of the
 * reply functions. */
#ifndef GWB_HTTP_H
#define GWB_HTTP_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/prom.h"

struct api_ctx;

/* The transport's part of the API's context (server/api/api.h), zero before http_start. */
struct http_server {
	struct evhttp *evh;
	struct conn_guard *guard;       /* the connection guard (server/api/conn.c) */
	char url[300];                  /* http://HOST:PORT actually bound */
	int64_t replies[6];             /* replies by status class: [2] = 2xx ... [5] = 5xx */
	struct prom_hist submit_seconds; /* POST /v1/tasks: arrival to reply */
};

/* Starts the API: its authentication and group commit, then binds the HTTP server on
 * api->cfg->listen and fills api->http.url with the real address. 0, or a negative error
 * with the reason in err. */
int http_start(struct api_ctx *api, char *err, size_t errlen);
/* Answers what the group commit still holds, stops accepting and frees the HTTP server.
 * Accepts an API that never started. */
void http_stop(struct api_ctx *api);

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
/* Sends status with buf (the body; may be NULL, stays the caller's) through evhttp. A HEAD
 * request gets the headers and Content-Length the GET would, and no body. Used by every
 * reply function and the handlers that build their own body (an asset, /metrics). */
void http_send(struct req *r, int status, struct evbuffer *buf);
/* Counts a reply of status that its handler sends itself (a stream, an asset, /metrics) in
 * the replies by class that /metrics shows; the reply functions above count their own. */
void http_count_reply(struct req *r, int status);
/* 1 when the client of a reply still being sent (a stream) has closed its side: evhttp reads
 * nothing while it sends, so it would notice only when a write fails; a peek at the socket
 * notices now. Bytes the client sent are left alone. */
int http_peer_closed(struct evhttp_request *ev);
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

#endif
