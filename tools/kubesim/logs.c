/* Log followers. Life of a stream:
 *
 *   STREAMING --container ended and file drained / shutdown--> ENDED (reply ended)
 *   STREAMING --client closed--> GONE (evhttp detached the request; the reap ends it)
 *
 * A follower reads at most LOGS_CHUNK bytes per poll, so a chatty container cannot make one
 * turn of the loop long, and stops sending while more than cfg.watch_queue_max bytes wait.
 * With limitBytes the stream ends once that many bytes were sent, initial ones included. */
#include "tools/kubesim/logs.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/log.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/store.h"

#define LOGS_POLL_MS 200
#define LOGS_CHUNK 65536
#define LOGS_MAX 256

enum lf_state { LF_STREAMING, LF_ENDED, LF_GONE };

struct follower {
	struct logs *l;
	struct evhttp_request *req;
	struct evhttp_connection *conn;
	enum lf_state state;
	char path[PATH_MAX];
	char ns[256], pod[256], uid[40];
	long off;
	long left; /* bytes the stream may still send (limitBytes), or -1: no limit */
	struct event *timer;
	struct follower *next;
};

struct logs {
	struct ks *ks;
	struct follower *list;
	int open;
};

static const char *lf_state_name(enum lf_state s)
{
	return s == LF_STREAMING ? "streaming" : s == LF_ENDED ? "ended" : "gone";
}

struct logs *logs_new(struct ks *ks)
{
	struct logs *l = gwb_calloc(1, sizeof *l);
	l->ks = ks;
	return l;
}

static void stop_timer(struct follower *f)
{
	if (f->timer) {
		event_free(f->timer);
		f->timer = NULL;
	}
}

static void end_stream(struct follower *f)
{
	if (f->state != LF_STREAMING)
		return;
	stop_timer(f);
	f->state = LF_ENDED;
	f->l->open--;
	evhttp_connection_set_closecb(f->conn, NULL, NULL);
	evhttp_send_reply_end(f->req);
	f->req = NULL;
}

static void close_cb(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	struct follower *f = arg;
	if (f->state != LF_STREAMING)
		return;
	stop_timer(f);
	f->state = LF_GONE;
	f->l->open--;
}

static void send_bytes(struct follower *f, const char *data, size_t n)
{
	if (!n)
		return;
	struct evbuffer *b = evbuffer_new();
	evbuffer_add(b, data, n);
	evhttp_send_reply_chunk(f->req, b);
	evbuffer_free(b);
}

static int container_done(struct follower *f)
{
	json_t *pod = store_get(f->l->ks->store, RES_PODS, f->ns, f->pod);
	return !pod || strcmp(obj_uid(pod), f->uid) || obj_pod_terminal(pod);
}

static void poll_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct follower *f = arg;
	if (f->state != LF_STREAMING)
		return;
	struct bufferevent *bev = evhttp_connection_get_bufferevent(f->conn);
	if (bev && (long)evbuffer_get_length(bufferevent_get_output(bev)) >
			   f->l->ks->cfg.watch_queue_max)
		return; /* the client is slow: wait for it */
	int done = container_done(f);
	size_t want = f->left >= 0 && f->left < LOGS_CHUNK ? (size_t)f->left : LOGS_CHUNK;
	FILE *file = fopen(f->path, "rb");
	size_t n = 0;
	if (file) {
		char *buf = gwb_malloc(LOGS_CHUNK);
		fseek(file, f->off, SEEK_SET);
		n = fread(buf, 1, want, file);
		fclose(file);
		send_bytes(f, buf, n);
		f->off += (long)n;
		if (f->left >= 0)
			f->left -= (long)n;
		gwb_free(buf);
	}
	if ((done && n < want) || f->left == 0)
		end_stream(f);
}

void logs_follow(struct logs *l, struct hreq *h, const char *path, long offset,
		 const char *initial, size_t len, long limit, const char *ns, const char *pod,
		 const char *uid)
{
	if (l->open >= LOGS_MAX) {
		struct kerr e = { 0 };
		kerr_set(&e, 429, "TooManyRequests", "too many followed logs");
		http_reply_kerr(h, &e);
		kerr_clear(&e);
		return;
	}
	struct follower *f = gwb_calloc(1, sizeof *f);
	f->l = l;
	snprintf(f->path, sizeof f->path, "%s", path);
	snprintf(f->ns, sizeof f->ns, "%s", ns);
	snprintf(f->pod, sizeof f->pod, "%s", pod);
	snprintf(f->uid, sizeof f->uid, "%s", uid);
	f->off = offset;
	f->left = limit > 0 ? limit - (long)len : -1;
	if (f->left < -1)
		f->left = 0;
	http_header_add(h, "Content-Type", "text/plain");
	f->req = http_detach(h);
	f->conn = evhttp_request_get_connection(f->req);
	f->state = LF_STREAMING;
	f->next = l->list;
	l->list = f;
	l->open++;
	evhttp_send_reply_start(f->req, 200, "OK");
	evhttp_connection_set_closecb(f->conn, close_cb, f);
	send_bytes(f, initial, len);
	if (f->left == 0) {
		end_stream(f);
		return;
	}
	f->timer = event_new(l->ks->base, -1, EV_PERSIST, poll_cb, f);
	struct timeval tv = { 0, LOGS_POLL_MS * 1000 };
	evtimer_add(f->timer, &tv);
	log_debug("logs", "follow", "pod=%s/%s path=%s", ns, pod, log_q(path));
}

void logs_reap(struct logs *l)
{
	for (struct follower **pp = &l->list; *pp;) {
		struct follower *f = *pp;
		if (f->state == LF_STREAMING) {
			pp = &f->next;
			continue;
		}
		log_debug("logs", "reap", "pod=%s/%s state=%s", f->ns, f->pod, lf_state_name(f->state));
		if (f->state == LF_GONE && f->req)
			evhttp_send_reply_end(f->req); /* frees the detached request */
		*pp = f->next;
		stop_timer(f);
		gwb_free(f);
	}
}

void logs_free(struct logs *l)
{
	if (!l)
		return;
	for (struct follower *f = l->list; f; f = f->next)
		end_stream(f);
	logs_reap(l);
	gwb_free(l);
}
