/* kubesim's HTTP front: evhttp listeners (the TCP API port and an optional Unix control
 * socket), one struct per request with its decoded path, query and body, reply helpers that
 * write Kubernetes-style headers, and the mechanics the fault injector drives: refusing
 * connections, parking requests unanswered, delaying answers, and withholding one answer. */
#ifndef KUBESIM_HTTP_H
#define KUBESIM_HTTP_H

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stddef.h>

#include "tools/kubesim/kerr.h"
#include "tools/kubesim/kubesim.h"

/* One request being handled. Owned by the http module: every path that ends it (a reply,
 * http_withhold, http_detach) frees it, and the handler must not touch it afterwards. */
struct hreq {
	struct ks *ks;
	struct http *http;
	struct evhttp_request *req;
	enum evhttp_cmd_type cmd;
	const char *method; /* "GET", "POST", ... */
	char *path;         /* percent-decoded path, no query */
	struct evkeyvalq query;
	char *body;         /* NUL-terminated copy of the body ("" when none) */
	size_t body_len;
	int control;        /* arrived on the control socket */
	int parked;         /* currently parked by the hang fault */
	int inflight;       /* counted in flight: 0 no, 1 non-mutating, 2 mutating */
};

typedef void (*http_handler_fn)(struct hreq *h, void *arg);

struct http;

/* A new front on ks->base. api handles every request but /_kubesim/ ones, control those (and
 * every request on the control socket). Never NULL. */
struct http *http_new(struct ks *ks, http_handler_fn api, http_handler_fn control, void *arg);
/* Ends every parked or delayed answer without touching closed connections, then frees
 * evhttp and the listeners. Accepts NULL. */
void http_free(struct http *hp);

/* Listens on host:port (port 0 picks one). Writes "http://HOST:PORT" into url. Returns 0, or
 * GWB_EINVAL (bad address) / GWB_EIO (cannot bind). */
int http_listen_tcp(struct http *hp, const char *hostport, char *url, size_t urllen);
/* Serves only /_kubesim/ on a Unix socket at path (replacing a stale file). 0 or GWB_EIO. */
int http_listen_unix(struct http *hp, const char *path);

/* Fault mechanics. refuse: closes the API listener (connection refused) and drops requests
 * arriving on open connections; off re-binds the same port (GWB_EIO if it cannot). */
int http_set_refuse(struct http *hp, int on);
/* hang: API requests are parked unanswered; turning it off dispatches those still open. */
void http_set_hang(struct http *hp, int on);
/* Every API answer is delayed by ms (0 = off). */
void http_set_slow(struct http *hp, long ms);
/* Number of requests currently parked or withheld (for tests and the control endpoint). */
int http_parked_count(const struct http *hp);

/* The API server's in-flight limits (--max-requests-inflight,
 * --max-mutating-requests-inflight). A request of the API port is in flight from when it is
 * read until its answer is handed to evhttp, or its connection is closed: while it is being
 * handled, parked by the hang fault, delayed by slow_ms, or withheld by withhold_create (until
 * the client leaves). Watches and followed logs are long-running and never count; nor does
 * /_kubesim/ or the control socket. A request that finds its class at its limit is answered
 * at once with 429 TooManyRequests, `Retry-After: 1` and details.retryAfterSeconds 1.
 * 0 means no limit. Applies to requests read from now on. */
void http_set_limits(struct http *hp, long max_readonly, long max_mutating);
/* Current limits, requests in flight per class, and 429s answered so far (new reference). */
json_t *http_limits_doc(const struct http *hp);

/* Adds an output header. */
void http_header_add(struct hreq *h, const char *name, const char *value);
/* Query parameter value (decoded), or NULL. */
const char *http_query(const struct hreq *h, const char *name);
/* Request header value, or NULL. */
const char *http_req_header(const struct hreq *h, const char *name);

/* Answers and ends the request. */
void http_reply(struct hreq *h, int code, const char *ctype, const char *body, size_t len);
/* Answers with a JSON document (stolen) and ends the request. */
void http_reply_json(struct hreq *h, int code, json_t *doc);
/* Compact JSON of doc followed by a newline, in a gwb_malloc'd buffer the caller frees with
 * gwb_free; *len is its length (without the NUL). */
char *http_dump_line(const json_t *doc, size_t *len);
/* Answers with the Status of e and ends the request. */
void http_reply_kerr(struct hreq *h, const struct kerr *e);
/* Ends the request without an answer: the connection stays open and silent until the client
 * gives up (or the fault is cleared / kubesim stops), as a lost answer looks to a client. */
void http_withhold(struct hreq *h);
/* Hands the evhttp request to a streaming owner (watch): frees h, returns the request. */
struct evhttp_request *http_detach(struct hreq *h);

#endif
