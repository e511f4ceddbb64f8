/* GET /v1/tasks/{id}/logs?tail=N[&follow=true]: the task's Pod log, read through the API
 * server's pods/log (on kubesim as on a cluster) as text/plain. A read asks for the last
 * tail lines and at most LOGS_MAX_BYTES; a follow streams them and what the container writes
 * next (chunked) until the container ends, the stream reaches LOGS_FOLLOW_MAX_BYTES, or the
 * client goes. Nothing here waits: the Kubernetes client runs on the loop and a followed
 * stream's bytes are passed on as they come; the client sets the pace: past LOGS_UNSENT_MAX
 * unsent bytes the stream from the API server pauses until they are written, and a client that
 * reads nothing for LOGS_STALL_MS is closed. A team sees only its own tasks' logs (another
 * team's task is an unknown one). */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/api/api.h"
#include "server/kube/kube.h"
#include "server/recon/jobspec.h"
#include "server/recon/reconciler.h"

#define LOGS_TAIL_DEFAULT 100
#define LOGS_TAIL_MAX 10000
/* Bytes of a read's answer at most (the first of the tail lines when they are more). */
#define LOGS_MAX_BYTES (1 << 20)
/* Bytes of a followed stream at most, the tail included: the client reconnects for more. */
#define LOGS_FOLLOW_MAX_BYTES (64 << 20)
/* Unsent bytes of a followed stream past which reading from the API server pauses. */
#define LOGS_UNSENT_MAX (1 << 20)
/* A followed stream paused this long (its client reads nothing) is closed. */
#define LOGS_STALL_MS 60000
/* Bytes the Kubernetes client may hold between two deliveries (libcurl reads in bursts). */
#define LOGS_KUBE_BUFFER (4 << 20)
/* Followed streams one token may hold (the server's total is KUBE_STREAM_SLOTS). */
#define LOGS_FOLLOW_PER_TOKEN 4
#define LOGS_TIMEOUT_MS 15000
/* How often a followed stream looks whether its client went (a quiet log writes nothing). */
#define LOGS_PEEK_MS 1000

/* One log request: waiting for the API server's answer (a read gathers it in body), then, for
 * a follow, streaming (started) until the end or its client's close. */
struct logreq {
	struct req r;           /* a copy of what a reply needs (as commit.c keeps one) */
	struct kube *kube;
	long kid;               /* the kube_stream, 0 once it ended */
	int follow, started;
	int paused;             /* a follow: reading from the API server waits for the client */
	int64_t paused_ms;      /* monotonic, since when */
	struct evbuffer *body;  /* a read's answer so far */
	struct event *peek;     /* a follow: the client check */
	char id[40], owner[64]; /* the task; the team whose token asked ("" the admin's) */
	struct logreq *next;
};

/* Every log request not yet ended (one loop, one list): for the per-token count of follows,
 * and so that one still waiting when the server stops is not lost. */
static struct logreq *open_reqs;

static void unlink_req(struct logreq *l)
{
	for (struct logreq **p = &open_reqs; *p; p = &(*p)->next)
		if (*p == l) {
			*p = l->next;
			return;
		}
}

static void logreq_free(struct logreq *l)
{
	if (l->kid)
		kube_cancel(l->kube, l->kid);
	if (l->peek)
		event_free(l->peek);
	if (l->body)
		evbuffer_free(l->body);
	unlink_req(l);
	gwb_free(l);
}

/* tail=N (0..LOGS_TAIL_MAX) and follow=true|false; any other parameter is refused. Returns 0,
 * or -1 after replying 400 naming the field. */
static int logs_query(struct req *r, long *tail, int *follow)
{
	*tail = LOGS_TAIL_DEFAULT;
	*follow = 0;
	for (struct evkeyval *kv = r->query.tqh_first; kv; kv = kv->next.tqe_next) {
		if (strcmp(kv->key, "tail") == 0) {
			char *end;
			errno = 0;
			long x = strtol(kv->value, &end, 10);
			if (errno || end == kv->value || *end || x < 0 || x > LOGS_TAIL_MAX) {
				char rule[80];
				snprintf(rule, sizeof rule, "must be an integer from 0 to %d",
					 LOGS_TAIL_MAX);
				http_reply_invalid_field(r, "tail", rule);
				return -1;
			}
			*tail = x;
		} else if (strcmp(kv->key, "follow") == 0) {
			if (strcmp(kv->value, "true") && strcmp(kv->value, "false")) {
				http_reply_invalid_field(r, "follow", "must be true or false");
				return -1;
			}
			*follow = strcmp(kv->value, "true") == 0;
		} else {
			http_reply_invalid_field(r, kv->key, "unknown query parameter");
			return -1;
		}
	}
	return 0;
}

/* The kube answer that ended a log request before any byte was passed on, as our error. */
static void reply_kube_error(struct logreq *l, const struct kube_result *res)
{
	const char *msg = json_string_value(json_object_get(res->body, "message"));
	json_t *d = json_pack("{s:s, s:i}", "task", l->id, "kube_status", (int)res->status);
	if (msg)
		json_object_set_new(d, "kube_message", json_string(msg));
	if (res->outcome == KUBE_NOT_SENT || res->outcome == KUBE_UNKNOWN) {
		json_decref(d);
		http_add_header(&l->r, "Retry-After", "5");
		http_reply_error(&l->r, 503, "kube_unavailable",
				 "the Kubernetes API did not answer the log request",
				 json_pack("{s:s, s:s?}", "task", l->id, "reason", res->reason));
	} else if (res->status == 404) {
		http_reply_error(&l->r, 409, "pod_gone", "the task's Pod is gone, and its log with it",
				 d);
	} else if (res->status == 400) {
		/* The container has not started (or cannot): the API server says why. */
		http_reply_error(&l->r, 409, "container_not_started",
				 msg ? msg : "the task's container has not started", d);
	} else {
		http_reply_error(&l->r, 502, "kube_error", "the Kubernetes API refused the log request",
				 d);
	}
}

static void text_headers(struct logreq *l)
{
	http_add_header(&l->r, "Content-Type", "text/plain; charset=utf-8");
	http_add_header(&l->r, "Cache-Control", "no-store");
}

/* ---- a read ---- */

static void read_data(void *arg, const char *data, size_t len)
{
	struct logreq *l = arg;
	evbuffer_add(l->body, data, len);
}

static void read_end(void *arg, const struct kube_result *res)
{
	struct logreq *l = arg;
	l->kid = 0;
	if (res->outcome != KUBE_OK) {
		reply_kube_error(l, res);
	} else {
		text_headers(l);
		http_count_reply(&l->r, 200);
		http_send(&l->r, 200, l->body);
	}
	logreq_free(l);
}

/* ---- a follow ---- */

static size_t unsent_bytes(struct evhttp_request *ev)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(ev);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

/* evhttp's close callback: the client went (evhttp detached the request: it is ours to free),
 * or we closed the connection. The follow ends here. */
static void follow_closed(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	struct logreq *l = arg;
	if (!evhttp_request_get_connection(l->r.ev))
		evhttp_request_free(l->r.ev);
	log_debug("logs", "follow_closed", "task=%s", l->id);
	logreq_free(l);
}

/* Ends a follow that started: closes the connection (a slow client) or ends the reply. */
static void follow_stop(struct logreq *l, int drop)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(l->r.ev);
	if (drop && conn) {
		evhttp_connection_free(conn); /* follow_closed frees l */
		return;
	}
	if (conn)
		evhttp_connection_set_closecb(conn, NULL, NULL);
	evhttp_send_reply_end(l->r.ev);
	logreq_free(l);
}

/* 1 when the client closed its side (evhttp reads nothing while it sends a reply). */
static int peer_closed(struct evhttp_request *ev)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(ev);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (fd < 0)
		return 1;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void follow_peek(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct logreq *l = arg;
	if (l->paused && clock_mono_ms() - l->paused_ms >= LOGS_STALL_MS) {
		log_warn("logs", "stalled_client_dropped", "task=%s unsent=%zu", l->id,
			 unsent_bytes(l->r.ev));
		return follow_stop(l, 1);
	}
	if (peer_closed(l->r.ev))
		follow_stop(l, 1);
}

/* evhttp wrote everything it held for the client: reading resumes. */
static void follow_drained(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	struct logreq *l = arg;
	if (!l->paused)
		return;
	l->paused = 0;
	kube_stream_pause(l->kube, l->kid, 0);
}

/* The answer began (2xx): the reply starts, chunked. */
static void follow_start(struct logreq *l)
{
	l->started = 1;
	text_headers(l);
	http_add_header(&l->r, "X-Accel-Buffering", "no"); /* proxies: pass the lines on */
	evhttp_send_reply_start(l->r.ev, 200, "OK");
	http_count_reply(&l->r, 200);
	struct evhttp_connection *conn = evhttp_request_get_connection(l->r.ev);
	if (conn)
		evhttp_connection_set_closecb(conn, follow_closed, l);
	l->peek = event_new(l->r.api->base, -1, EV_PERSIST, follow_peek, l);
	struct timeval tv = { LOGS_PEEK_MS / 1000, (LOGS_PEEK_MS % 1000) * 1000 };
	evtimer_add(l->peek, &tv);
}

static void follow_data(void *arg, const char *data, size_t len)
{
	struct logreq *l = arg;
	if (!l->started)
		follow_start(l);
	if (!len)
		return;
	struct evbuffer *b = evbuffer_new();
	evbuffer_add(b, data, len);
	evhttp_send_reply_chunk_with_cb(l->r.ev, b, follow_drained, l);
	evbuffer_free(b);
	if (!l->paused && unsent_bytes(l->r.ev) > LOGS_UNSENT_MAX) {
		l->paused = 1;
		l->paused_ms = clock_mono_ms();
		kube_stream_pause(l->kube, l->kid, 1);
		log_debug("logs", "follow_paused", "task=%s unsent=%zu", l->id,
			  unsent_bytes(l->r.ev));
	}
}

static void follow_end(void *arg, const struct kube_result *res)
{
	struct logreq *l = arg;
	l->kid = 0;
	if (!l->started) {
		if (res->outcome == KUBE_OK)
			follow_start(l); /* an empty log of a container that ended */
		else {
			reply_kube_error(l, res);
			logreq_free(l);
			return;
		}
	}
	if (res->outcome != KUBE_OK)
		log_info("logs", "follow_cut", "task=%s reason=%s", l->id, log_q(res->reason));
	follow_stop(l, 0);
}

/* ---- the handler ---- */

static int follows_of(const char *owner)
{
	int n = 0;
	for (struct logreq *l = open_reqs; l; l = l->next)
		n += l->follow && strcmp(l->owner, owner) == 0;
	return n;
}

static void not_found(struct req *r, const char *id)
{
	http_reply_error(r, 404, "not_found", "no such task", json_pack("{s:s}", "id", id));
}

/* The task's Pod, or 0 after replying (unknown or another team's task: 404; no Pod yet). */
static int task_pod(struct req *r, const char *id, char *pod, size_t len)
{
	if (!api_valid_task_id(id)) {
		not_found(r, id);
		return 0;
	}
	struct task *t = gwb_malloc(sizeof *t);
	int rc = store_task_load(r->api->store, id, t);
	if (rc == GWB_ENOTFOUND || (rc == 0 && !api_task_team_visible(r, t->team))) {
		gwb_free(t);
		not_found(r, id);
		return 0;
	}
	if (rc) {
		gwb_free(t);
		http_reply_error(r, 500, "internal", "the task cannot be read", NULL);
		return 0;
	}
	snprintf(pod, len, "%s", t->pod_name);
	if (!pod[0])
		http_reply_error(r, 409, "no_pod_yet",
				 task_state_is(t->state, TASK_FINAL)
					 ? "the task ended without a Pod: it has no log"
					 : "the task has no Pod yet: its log starts when its Pod runs",
				 json_pack("{s:s, s:s}", "task", id, "state",
					   task_state_name(t->state)));
	gwb_free(t);
	return pod[0] != 0;
}

void api_task_logs(struct req *r, const char *id)
{
	long tail;
	int follow;
	char pod[128];
	if (logs_query(r, &tail, &follow) < 0 || !task_pod(r, id, pod, sizeof pod))
		return;
	if (r->method == EVHTTP_REQ_HEAD)
		follow = 0; /* a HEAD gets the headers of a read */
	if (!r->api->recon)
		return http_reply_error(r, 503, "no_cluster",
					"no Kubernetes API is configured (GWB_KUBE_SERVER or a "
					"kubeconfig)",
					NULL);
	const char *owner = r->is_admin ? "" : r->team;
	if (follow && !r->is_admin && follows_of(owner) >= LOGS_FOLLOW_PER_TOKEN) {
		http_add_header(r, "Retry-After", "5");
		return http_reply_error(r, 429, "too_many_streams",
					"this token follows as many logs as one token may",
					json_pack("{s:i}", "max_per_token", LOGS_FOLLOW_PER_TOKEN));
	}
	char path[512], ns[200], name[400];
	snprintf(path, sizeof path,
		 "/api/v1/namespaces/%s/pods/%s/log?container=%s&tailLines=%ld&limitBytes=%d%s",
		 kube_query_escape(r->api->cfg->kube_namespace, ns, sizeof ns),
		 kube_query_escape(pod, name, sizeof name), GWB_WORKER_CONTAINER, tail,
		 follow ? LOGS_FOLLOW_MAX_BYTES : LOGS_MAX_BYTES, follow ? "&follow=true" : "");
	struct logreq *l = gwb_calloc(1, sizeof *l);
	l->r = *r;
	/* The copy keeps what a reply needs; the query list and the body stay the caller's. */
	TAILQ_INIT(&l->r.query);
	l->r.body = NULL;
	l->r.body_len = 0;
	for (int i = 0; i < r->nsegs; i++)
		l->r.segs[i] = l->r.segbuf + (r->segs[i] - r->segbuf);
	l->kube = reconciler_kube(r->api->recon);
	l->follow = follow;
	snprintf(l->id, sizeof l->id, "%s", id);
	snprintf(l->owner, sizeof l->owner, "%s", owner);
	if (!follow)
		l->body = evbuffer_new();
	long kid = kube_stream(l->kube, path, follow, LOGS_TIMEOUT_MS, LOGS_KUBE_BUFFER,
			       follow ? follow_data : read_data, follow ? follow_end : read_end,
			       l);
	if (kid < 0) {
		logreq_free(l);
		http_add_header(r, "Retry-After", "5");
		return http_reply_error(r, 503, "too_many_streams",
					"the server follows as many logs as it allows",
					json_pack("{s:i}", "max_streams", KUBE_STREAM_SLOTS));
	}
	l->kid = kid;
	l->next = open_reqs;
	open_reqs = l;
	log_debug("logs", "requested", "task=%s pod=%s tail=%ld follow=%d", id, log_q(pod), tail,
		  follow);
}
