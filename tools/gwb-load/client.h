/* One keep-alive HTTP/1.1 connection to gwb-server on libevent's evhttp client: requests with
 * the bearer token and JSON bodies, answers parsed into a small result. evhttp sends the
 * requests of one connection one after the other; the ones given while another is in flight
 * wait in its queue, which is what the open loop's latency has to include. */
#ifndef GWB_LOAD_CLIENT_H
#define GWB_LOAD_CLIENT_H

#include <event2/event.h>
#include <jansson.h>

/* An answer larger than this is refused: a page of 500 tasks is about 700 KiB. */
#define CLIENT_BODY_MAX (16 << 20)

struct client;

/* Where requests go: parsed once from the URL and shared by every connection. */
struct client_target {
	char host[256];
	int port;
	char host_header[300];
	char auth[600]; /* "Bearer TOKEN" */
	char metrics_auth[600]; /* what GET /metrics sends: "Bearer METRICS_TOKEN", or auth */
};

/* Fills t from an http:// URL (host, optional port, no path beyond "/") and the token.
 * Returns 0, or -1 with err saying what is wrong. */
int client_target_parse(struct client_target *t, const char *url, const char *token, char *err,
                        size_t errlen);

/* The outcome of one request. status is 0 when no answer came (err says why). body is the raw
 * answer (NUL-terminated), json its parse (NULL when not JSON); both live only during the
 * callback. replayed is 1 when the answer carried Idempotent-Replayed: true. */
struct client_result {
	int status;
	const char *err;
	const char *body;
	json_t *json;
	int replayed;
};

/* Fires exactly once per accepted request, from the event loop, never from inside
 * client_send. */
typedef void (*client_done_fn)(const struct client_result *res, void *arg);

/* A connection to t on base (t must outlive it), each request timing out after timeout_s.
 * Connects on the first request; reconnects after the server closes it. */
struct client *client_new(struct event_base *base, const struct client_target *t, int timeout_s);
/* Frees the connection. Call only when no request is in flight (their callbacks would not
 * fire). Accepts NULL. */
void client_free(struct client *c);

/* Sends method (GET or POST) path with an optional JSON body (compact text, copied) and an
 * optional Idempotency-Key. Returns 0 and done fires later exactly once; or -1 (done never
 * fires). */
int client_send(struct client *c, const char *method, const char *path, const char *body,
                const char *idem_key, client_done_fn done, void *arg);

/* Requests sent on c whose answer has not come yet. */
int client_inflight(const struct client *c);

#endif
