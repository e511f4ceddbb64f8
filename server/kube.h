/* The Kubernetes API client: libcurl's multi-socket interface driven by the server's event
 * base. One-shot requests come back classified (success, definite failure, or unknown
 * outcome), and watch streams deliver one decoded event per newline-ended line. */
#ifndef GWB_KUBE_H
#define GWB_KUBE_H

#include <event2/event.h>
#include <jansson.h>
#include <stddef.h>

#include "server/kubeconfig.h"

struct kube;

/* How a request ended. The reconciler's safety rests on this split: only KUBE_OK and
 * KUBE_REJECTED say what the server did; KUBE_NOT_SENT says it did nothing; KUBE_UNKNOWN means
 * the request may or may not have taken effect. */
enum kube_outcome {
	KUBE_OK,        /* 2xx */
	KUBE_REJECTED,  /* a 4xx answer other than 408/429: the server refused, nothing changed */
	KUBE_NOT_SENT,  /* no connection could be made: nothing reached the server */
	KUBE_UNKNOWN,   /* time-out, reset, 5xx, 408, 429: it may have taken effect */
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
/* Called once when a watch stream ends, with how it ended (KUBE_OK: the server closed it,
 * usually at timeoutSeconds). The watch handle is gone after this call. */
typedef void (*kube_end_fn)(void *arg, const struct kube_result *res);

/* Creates a client on base for the API server described by auth (copied). 0 and *out, or a
 * negative error with err filled. */
int kube_new(struct kube **out, struct event_base *base, const struct kube_auth *auth, char *err,
	     size_t errlen);
/* Cancels every request without calling its callback, and frees the client. Accepts NULL. */
void kube_free(struct kube *k);
/* The API server URL. */
const char *kube_server(const struct kube *k);
/* Re-reads a token file if one is configured (call from housekeeping). */
void kube_refresh_token(struct kube *k);

/* Starts one request: method and path ("/apis/batch/v1/namespaces/ns/jobs?x=y"), body (may be
 * NULL; borrowed, serialised now) with content_type (NULL: application/json), a time-out.
 * Returns a request id (> 0) — done fires exactly once, later, never from inside this call —
 * or a negative error, in which case done never fires. */
long kube_request(struct kube *k, const char *method, const char *path, const json_t *body,
		  const char *content_type, int timeout_ms, kube_done_fn done, void *arg);

/* Opens a watch stream on path (which must carry watch=1 and its other parameters). Lines
 * longer than max_line bytes end the stream with KUBE_UNKNOWN, and so does a stream that
 * sends nothing for idle_s seconds (pick it above the server's bookmark interval and
 * timeoutSeconds). Events are delivered from the loop, never from inside libcurl. Returns an
 * id (> 0) — end fires exactly once — or a negative error. */
long kube_watch(struct kube *k, const char *path, size_t max_line, int idle_s,
		kube_event_fn event, kube_end_fn end, void *arg);

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
