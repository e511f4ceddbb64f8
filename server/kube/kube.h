/* The Kubernetes API client: libcurl's multi-socket interface driven by the server's event
 * base. One-shot requests come back classified (success, definite failure, or unknown
 * outcome), and watch streams deliver one decoded event per newline-ended line. It is a good
 * citizen of the API server, as client-go is:
 *
 * - every request first waits in a local queue ordered by class (lists and watches, then
 *   cancels and suspends — PATCH, PUT, DELETE —, then reads of one object, then creates),
 *   then by arrival;
 * - at most max_inflight requests are in flight, over a bounded pool of kept-alive
 *   connections (HTTP/2 streams on one connection when the server offers it over TLS);
 * - each send takes a token from a bucket of qps tokens a second, burst at most;
 * - a request's time-out starts when it is sent, so waiting in the queue never makes an
 *   outcome unknown;
 * - a 429 was not acted on: the request goes back in the queue at its place until its
 *   Retry-After has passed, up to 32 times, and only then ends as KUBE_NOT_SENT.
 *
 * Watches are long-running: like the API server's --max-requests-inflight, which exempts
 * them, they do not count against max_inflight (a few open watches would otherwise hold the
 * slots for minutes and starve every other request). They have KUBE_WATCH_SLOTS slots of
 * their own, are first in the queue and take a token at each (re)start, so a reconnect storm
 * is paced and watches are never starved.
 *
 * Streams of text (pods/log) are delivered as their bytes come. A short one (a log read
 * whole) is a request like any other, queued in the last class (with the creates); a
 * long-running one (a followed log, open as long as the
 * container runs) takes none of the queue's slots: it has KUBE_STREAM_SLOTS of its own, is
 * sent at the next safe point, and one more is refused at once. */
#ifndef GWB_KUBE_H
#define GWB_KUBE_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>

#include "server/kube/kubeconfig.h"

struct kube;
struct evbuffer;

/* Defaults of the flow settings (kube.max_inflight, kube.qps, kube.burst), as a controller
 * built on client-go would set them. */
#define KUBE_DEFAULT_MAX_INFLIGHT 32
#define KUBE_DEFAULT_QPS 50
#define KUBE_DEFAULT_BURST 100
/* Watches open at once, at most; the server opens four. */
#define KUBE_WATCH_SLOTS 16
/* Long-running streams (followed logs) open at once, at most. */
#define KUBE_STREAM_SLOTS 32

/* How a request ended. The reconciler's safety rests on this split: only KUBE_OK and
 * KUBE_REJECTED say what the server did; KUBE_NOT_SENT says it did nothing; KUBE_UNKNOWN means
 * the request may or may not have taken effect. */
enum kube_outcome {
	KUBE_OK,        /* 2xx */
	KUBE_REJECTED,  /* a 4xx answer other than 408/429: the server refused, nothing changed */
	KUBE_NOT_SENT,  /* no connection could be made, or 429 every time: nothing was done */
	KUBE_UNKNOWN,   /* time-out (counted from the send), reset, 5xx, 408: it may have taken
			 * effect */
};

struct kube_result {
	enum kube_outcome outcome;
	long status;        /* HTTP status, 0 when none came */
	json_t *body;       /* parsed answer (borrowed for the callback), or NULL */
	const char *reason; /* Status.reason of an error answer, or a transport error text */
};

/* Called once per request when it ends. res and its body live only during the call. */
typedef void (*kube_done_fn)(void *arg, const struct kube_result *res);

/* Called for each watch line: type is ADDED, MODIFIED, DELETED, BOOKMARK or ERROR; object is
 * borrowed for the call. */
typedef void (*kube_event_fn)(void *arg, const char *type, json_t *object);
/* Called with the next bytes of a stream (kube_stream), borrowed for the call. */
typedef void (*kube_data_fn)(void *arg, const char *data, size_t len);
/* Called once when a watch stream or a stream ends, with how it ended (KUBE_OK: the server closed it,
 * usually at timeoutSeconds). The watch handle is gone after this call. */
typedef void (*kube_end_fn)(void *arg, const struct kube_result *res);

/* Creates a client on base for the API server described by auth (copied), with the default
 * flow settings. 0 and *out, or a negative error with err filled. */
int kube_new(struct kube **out, struct event_base *base, const struct kube_auth *auth, char *err,
	     size_t errlen);
/* Cancels every request without calling its callback, and frees the client. Accepts NULL. */
void kube_free(struct kube *k);
/* The API server URL. */
const char *kube_server(const struct kube *k);
/* Re-reads a token file if one is configured (call from housekeeping). */
void kube_refresh_token(struct kube *k);
/* Sets the flow control: requests in flight at most (>= 1), the bucket's tokens a second
 * (> 0) and its size (>= 1, full now). Call before the loop runs, or at any time: requests in
 * flight stay, the next sends follow the new values. */
void kube_set_flow(struct kube *k, int max_inflight, double qps, int burst);

/* How many more requests may be started now without a long wait: one round in flight and
 * one round queued (2 x max_inflight) minus the requests in flight and queued (watches
 * apart); 0 when that much is out. Callers use it to hold their own work back (the intent
 * consumer reads no more intents than this). */
int kube_room(const struct kube *k);
/* 2 x max_inflight: the requests kube_room counts room in. */
int kube_window(const struct kube *k);
/* Called at a safe point of the loop after requests ended and room is above 0; never from
 * inside a call of this client's API. */
typedef void (*kube_room_fn)(void *arg);
/* Sets (fn not NULL) or clears the one room watcher. */
void kube_on_room(struct kube *k, kube_room_fn fn, void *arg);
/* Appends the client's metrics in Prometheus text: gwb_kube_requests_total{verb,code} (each
 * send, a 429 included; code "error" when no answer came), gwb_kube_requests_inflight,
 * gwb_kube_request_queue_depth, gwb_kube_request_duration_seconds (send to end, watches
 * apart) and gwb_kube_request_queue_wait_seconds (histograms), and a few gauges more. */
void kube_metrics_write(const struct kube *k, struct evbuffer *b);

/* Queues one request: method and path ("/apis/batch/v1/namespaces/ns/jobs?x=y"), body (may
 * be NULL; borrowed, serialised now) with content_type (NULL: application/json), a time-out
 * counted from the send. Its class comes from the method and the path's shape (a GET of a
 * collection is a list). Returns a request id (> 0) — done fires exactly once, later, never
 * from inside this call — or a negative error, in which case done never fires. */
long kube_request(struct kube *k, const char *method, const char *path, const json_t *body,
		  const char *content_type, int timeout_ms, kube_done_fn done, void *arg);

/* Queues a watch stream on path (which must carry watch=1 and its other parameters). Lines
 * longer than max_line bytes end the stream with KUBE_UNKNOWN, and so does a stream that
 * sends nothing for idle_s seconds (pick it above the server's bookmark interval and
 * timeoutSeconds). Events are delivered from the loop, never from inside libcurl. Returns an
 * id (> 0) — end fires exactly once — or a negative error. */
long kube_watch(struct kube *k, const char *path, size_t max_line, int idle_s,
		kube_event_fn event, kube_end_fn end, void *arg);

/* Queues a GET of path whose answer is text (a Pod's log: .../pods/NAME/log?...), handing
 * its bytes to data as they arrive (from the loop, never from inside libcurl; the first call,
 * maybe with no bytes, comes once the answer's 2xx status is known) and ending with
 * end exactly once (KUBE_OK: the server ended it; an error answer's Status is its body). At
 * most max_buffer bytes wait between two deliveries (more ends it with KUBE_UNKNOWN).
 * long_running 0: a request (queued, timeout_ms from the send); 1: a stream on a slot of its
 * own without a time-out, or GWB_EBUSY at once when KUBE_STREAM_SLOTS are open. Returns an
 * id (> 0) or a negative error (then end never fires). */
long kube_stream(struct kube *k, const char *path, int long_running, int timeout_ms,
		 size_t max_buffer, kube_data_fn data, kube_end_fn end, void *arg);

/* Stops (pause 1) or resumes (0) reading stream id's answer, so that its owner's reader sets
 * the pace: the API server's side waits on TCP. Unknown ids are ignored. Safe inside any
 * callback of this client. */
void kube_stream_pause(struct kube *k, long id, int pause);

/* Cancels a request or watch by id; its callbacks never fire afterwards. Unknown ids are
 * ignored. Safe to call from inside any callback of this client. */
void kube_cancel(struct kube *k, long id);

/* 0 when the most recent request that ended could not reach the server or got no answer
 * (KUBE_NOT_SENT or KUBE_UNKNOWN), 1 otherwise (or when nothing ended yet). */
int kube_reachable(const struct kube *k);
/* Adds {"reachable", "last_error", "requests", "failures"} to o. */
void kube_describe(const struct kube *k, json_t *o);

/* Percent-encodes s for a query value into out. Returns out. */
char *kube_query_escape(const char *s, char *out, size_t len);

#endif
