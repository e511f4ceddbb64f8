/* Watch streams. A stream's life:
 *
 *   STREAMING --timeout / too old / overflow / shutdown--> ENDED (reply ended, freed at reap)
 *   STREAMING --client closed--> GONE (evhttp detaches the request; the reap ends and frees it)
 *
 * Events come synchronously from the store subscription; every event is one compact JSON
 * document and a newline in its own chunk. The connection's output buffer is the queue: when
 * more than cfg.watch_queue_max bytes wait unsent, the stream is ended (the client re-watches
 * from the last resourceVersion it saw, as with any ended watch). */
#include "tools/kubesim/watch.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "tools/kubesim/faults.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/store.h"

enum ws_state { WS_STREAMING, WS_ENDED, WS_GONE };

struct watcher {
	struct watch_hub *hub;
	struct evhttp_request *req;
	struct evhttp_connection *conn;
	enum ws_state state;
	const struct res_def *r;
	char *ns;
	struct selector *labels, *fields;
	int bookmarks;
	const char *table_version;
	enum table_include include;
	int columns_sent;
	int sub_id;
	uint64_t id;
	struct event *timeout_ev, *bookmark_ev;
	struct watcher *next;
};

struct watch_hub {
	struct ks *ks;
	struct watcher *list;
	int open;
	uint64_t next_id;
};

static const char *ws_state_name(enum ws_state s)
{
	switch (s) {
	case WS_STREAMING: return "streaming";
	case WS_ENDED: return "ended";
	case WS_GONE: return "gone";
	}
	return "?";
}

struct watch_hub *watch_hub_new(struct ks *ks)
{
	struct watch_hub *hub = gwb_calloc(1, sizeof *hub);
	hub->ks = ks;
	hub->next_id = 1;
	return hub;
}

static void detach(struct watcher *w)
{
	if (w->sub_id) {
		store_unsubscribe(w->hub->ks->store, w->sub_id);
		w->sub_id = 0;
	}
	if (w->timeout_ev) {
		event_free(w->timeout_ev);
		w->timeout_ev = NULL;
	}
	if (w->bookmark_ev) {
		event_free(w->bookmark_ev);
		w->bookmark_ev = NULL;
	}
}

static void end_stream(struct watcher *w, const char *why)
{
	if (w->state != WS_STREAMING)
		return;
	log_debug("watch", "end", "id=%" PRIu64 " resource=%s why=%s", w->id, w->r->plural, why);
	detach(w);
	w->state = WS_ENDED;
	w->hub->open--;
	/* The close callback must not outlive the watcher: the connection may be kept alive. */
	evhttp_connection_set_closecb(w->conn, NULL, NULL);
	evhttp_send_reply_end(w->req);
	w->req = NULL;
}

static void send_doc(struct watcher *w, json_t *doc)
{
	size_t n;
	char *line = http_dump_line(doc, &n);
	struct evbuffer *b = evbuffer_new();
	evbuffer_add(b, line, n);
	evhttp_send_reply_chunk(w->req, b);
	evbuffer_free(b);
	gwb_free(line);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(w->conn);
	size_t queued = bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
	if ((long)queued > w->hub->ks->cfg.watch_queue_max) {
		log_warn("watch", "queue_overflow", "id=%" PRIu64 " queued=%zu", w->id, queued);
		end_stream(w, "overflow");
	}
}

static void send_event(struct watcher *w, const char *type, json_t *obj)
{
	json_t *o;
	if (w->table_version) {
		json_t *objs[1] = { obj };
		o = table_build(w->r, objs, 1, w->table_version,
				obj_str(obj, "metadata.resourceVersion"), w->include,
				!w->columns_sent);
		w->columns_sent = 1;
	} else {
		o = json_incref(obj);
	}
	json_t *ev = json_pack("{s:s, s:o}", "type", type, "object", o);
	send_doc(w, ev);
	json_decref(ev);
}

static void send_bookmark(struct watcher *w, int initial_end)
{
	char rv[32];
	snprintf(rv, sizeof rv, "%" PRIu64, store_rv(w->hub->ks->store));
	json_t *meta = json_pack("{s:s}", "resourceVersion", rv);
	if (initial_end)
		json_object_set_new(meta, "annotations",
				    json_pack("{s:s}", "k8s.io/initial-events-end", "true"));
	json_t *ev = json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "BOOKMARK", "object", "kind",
			       w->r->kind, "apiVersion", w->r->api_version, "metadata", meta);
	send_doc(w, ev);
	json_decref(ev);
}

static void send_error(struct watcher *w, int code, const char *reason, const char *msg)
{
	json_t *ev = json_pack("{s:s, s:{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}}", "type", "ERROR",
			       "object", "kind", "Status", "apiVersion", "v1", "metadata", "status",
			       "Failure", "message", msg, "reason", reason, "code", code);
	send_doc(w, ev);
	json_decref(ev);
}

static int matches(const struct watcher *w, const json_t *obj)
{
	if (!obj)
		return 0;
	if (w->ns && strcmp(obj_ns(obj), w->ns) != 0)
		return 0;
	return selector_match(w->labels, obj) && selector_match(w->fields, obj);
}

static void on_event(const struct store_event *ev, void *arg)
{
	struct watcher *w = arg;
	if (w->state != WS_STREAMING || ev->res != w->r->id)
		return;
	int cur = matches(w, ev->obj), prev = matches(w, ev->prev);
	switch (ev->type) {
	case STORE_ADDED:
		if (cur)
			send_event(w, "ADDED", ev->obj);
		break;
	case STORE_MODIFIED:
		if (cur && prev)
			send_event(w, "MODIFIED", ev->obj);
		else if (cur)
			send_event(w, "ADDED", ev->obj);
		else if (prev)
			send_event(w, "DELETED", ev->obj);
		break;
	case STORE_DELETED:
		if (cur || prev)
			send_event(w, "DELETED", ev->obj);
		break;
	}
}

static void close_cb(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	struct watcher *w = arg;
	if (w->state != WS_STREAMING)
		return;
	log_debug("watch", "client_left", "id=%" PRIu64, w->id);
	detach(w);
	w->state = WS_GONE;
	w->hub->open--;
	/* evhttp has detached the unfinished request from the failed connection and left it
	 * to us: ending it at the reap frees it (evhttp_send_reply_end on a detached request). */
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	end_stream(arg, "timeout");
}

static void bookmark_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct watcher *w = arg;
	if (w->state == WS_STREAMING)
		send_bookmark(w, 0);
}

static void reply_status(struct hreq *h, int code, const char *reason, const char *msg)
{
	struct kerr e = { 0 };
	kerr_set(&e, code, reason, "%s", msg);
	http_reply_kerr(h, &e);
	kerr_clear(&e);
}

static void send_initial(struct watcher *w)
{
	json_t **objs = NULL;
	size_t n = store_list(w->hub->ks->store, w->r->id, w->ns, &objs);
	for (size_t i = 0; i < n && w->state == WS_STREAMING; i++)
		if (matches(w, objs[i]))
			send_event(w, "ADDED", objs[i]);
	gwb_free(objs);
}

void watch_start(struct watch_hub *hub, struct hreq *h, struct watch_params *p)
{
	struct ks *ks = hub->ks;
	int initial = 0;
	uint64_t from = 0;
	if (!p->rv || !p->rv[0] || !strcmp(p->rv, "0")) {
		initial = 1;
	} else {
		char *end;
		from = strtoull(p->rv, &end, 10);
		if (*end || p->rv[0] == '-') {
			selector_free(p->labels);
			selector_free(p->fields);
			char msg[200];
			snprintf(msg, sizeof msg, "invalid resource version: %.60s", p->rv);
			reply_status(h, 400, "BadRequest", msg);
			return;
		}
	}
	if (p->send_initial_events)
		initial = 1;
	if (hub->open >= ks->cfg.max_watchers) {
		selector_free(p->labels);
		selector_free(p->fields);
		http_header_add(h, "Retry-After", "1");
		reply_status(h, 429, "TooManyRequests", "too many open watches, please try again later");
		return;
	}
	struct watcher *w = gwb_calloc(1, sizeof *w);
	w->hub = hub;
	w->id = hub->next_id++;
	w->r = p->r;
	w->ns = p->ns ? gwb_strdup(p->ns) : NULL;
	w->labels = p->labels;
	w->fields = p->fields;
	w->bookmarks = p->bookmarks;
	w->table_version = p->table_version;
	w->include = p->include;
	w->state = WS_STREAMING;
	/* p's strings live in h's query: keep what is used after h is gone. */
	char rvcopy[64];
	snprintf(rvcopy, sizeof rvcopy, "%s", p->rv ? p->rv : "");
	http_header_add(h, "Content-Type", "application/json");
	http_header_add(h, "Cache-Control", "no-cache, private");
	w->req = http_detach(h);
	w->conn = evhttp_request_get_connection(w->req);
	w->next = hub->list;
	hub->list = w;
	hub->open++;
	evhttp_send_reply_start(w->req, 200, "OK");
	evhttp_connection_set_closecb(w->conn, close_cb, w);
	log_debug("watch", "start", "id=%" PRIu64 " resource=%s rv=%s", w->id, w->r->plural,
		  log_q(rvcopy));

	uint64_t now = store_rv(ks->store);
	if (!initial && !store_can_resume(ks->store, from)) {
		char msg[160];
		snprintf(msg, sizeof msg, "too old resource version: %" PRIu64 " (%" PRIu64 ")", from,
			 store_oldest_rv(ks->store));
		send_error(w, 410, "Expired", msg);
		end_stream(w, "too_old");
		return;
	}
	if (!initial && faults_watch_gone(ks->faults)) {
		/* The watch_gone fault: as if the version had been compacted away. */
		char msg[160];
		snprintf(msg, sizeof msg, "too old resource version: %" PRIu64 " (%" PRIu64 ")", from,
			 now);
		send_error(w, 410, "Expired", msg);
		end_stream(w, "gone_fault");
		return;
	}
	if (!initial && from > now) {
		char msg[160];
		snprintf(msg, sizeof msg, "Too large resource version: %" PRIu64 ", current: %" PRIu64,
			 from, now);
		send_error(w, 504, "Timeout", msg);
		end_stream(w, "too_large");
		return;
	}
	if (initial) {
		send_initial(w);
		if (p->send_initial_events && w->state == WS_STREAMING)
			send_bookmark(w, 1);
	} else {
		store_replay(ks->store, from, on_event, w);
	}
	if (w->state != WS_STREAMING)
		return;
	w->sub_id = store_subscribe(ks->store, on_event, w);
	long t = p->timeout_s;
	if (t <= 0) {
		/* The API server's default: a random time between 30 and 60 minutes. */
		unsigned char rnd;
		obj_random(&rnd, 1);
		t = 1800 + (long)rnd * 1800 / 255;
	}
	struct timeval tv = { t, 0 };
	w->timeout_ev = evtimer_new(ks->base, timeout_cb, w);
	evtimer_add(w->timeout_ev, &tv);
	if (w->bookmarks && ks->cfg.bookmark_ms > 0) {
		struct timeval bv = { ks->cfg.bookmark_ms / 1000, (ks->cfg.bookmark_ms % 1000) * 1000 };
		w->bookmark_ev = event_new(ks->base, -1, EV_PERSIST, bookmark_cb, w);
		evtimer_add(w->bookmark_ev, &bv);
	}
}

static void watcher_free(struct watcher *w)
{
	detach(w);
	selector_free(w->labels);
	selector_free(w->fields);
	gwb_free(w->ns);
	gwb_free(w);
}

void watch_reap(struct watch_hub *hub)
{
	for (struct watcher **pp = &hub->list; *pp;) {
		struct watcher *w = *pp;
		if (w->state == WS_STREAMING) {
			pp = &w->next;
			continue;
		}
		log_debug("watch", "reap", "id=%" PRIu64 " state=%s", w->id, ws_state_name(w->state));
		if (w->state == WS_GONE && w->req)
			evhttp_send_reply_end(w->req);
		*pp = w->next;
		watcher_free(w);
	}
}

int watch_cut_all(struct watch_hub *hub)
{
	int n = 0;
	for (struct watcher *w = hub->list; w; w = w->next) {
		if (w->state != WS_STREAMING)
			continue;
		struct bufferevent *bev = evhttp_connection_get_bufferevent(w->conn);
		evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
		/* Both directions: the client sees the connection end with the chunked body
		 * unfinished, and our side reads end-of-file, which runs close_cb as when a
		 * client leaves. */
		if (fd >= 0 && shutdown(fd, SHUT_RDWR) == 0)
			n++;
	}
	return n;
}

int watch_count(const struct watch_hub *hub)
{
	return hub->open;
}

void watch_hub_free(struct watch_hub *hub)
{
	if (!hub)
		return;
	for (struct watcher *w = hub->list; w; w = w->next)
		end_stream(w, "shutdown");
	watch_reap(hub);
	gwb_free(hub);
}
