/* The connection guard (server/api/conn.h). evhttp builds each connection on a bufferevent
 * this file makes (evhttp_set_bevcb); a callback on its input buffer sees the bytes of every
 * read before evhttp parses them. A refused connection is answered here, by one send() of the
 * API's JSON error, and freed through evhttp, never from inside evhttp's own callbacks. */
#include "server/api/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/listener.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "config/config.h"
#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/prom.h"
#include "lib/strmap.h"
#include "lib/framing.h"

/* How long the listener stays paused after running out of descriptors, and how often at
 * most a pause or the refusals are logged (ms). */
#define CONN_PAUSE_MS 250
#define CONN_LOG_EVERY_MS 10000
/* Descriptors kept back from http.max_connections for the store, Redis, the cluster's
 * watches and the page's files. */
#define CONN_FD_RESERVE 64
/* What a refused connection's last bytes are read and dropped up to before it closes, so
 * that its answer is not lost to a reset. */
#define CONN_DRAIN_MAX 65536

/* Distinct refusal codes counted for /metrics (framing's and the guard's own are fewer). */
#define CONN_CODES 24

enum conn_wait {
	WAIT_ACCEPT, /* the first tick after accept: caps and the close callback */
	WAIT_NONE,
	WAIT_HEAD,   /* the head's deadline */
	WAIT_BODY,   /* the body's deadline, armed at its first byte */
	WAIT_REFUSE, /* the refusal is answered once no request is in evhttp's hands */
};

struct conn {
	struct conn *prev, *next;
	struct conn_guard *g;
	struct bufferevent *bev;
	struct evhttp_connection *evcon;
	struct evbuffer_cb_entry *in_cb, *out_cb;
	struct event *timer;
	enum conn_wait wait;
	int refused;
	int counted;              /* counted under addr */
	char addr[INET6_ADDRSTRLEN];
	void (*user_close)(struct evhttp_connection *, void *);
	void *user_arg;
	struct framing fr;
};

struct conn_guard {
	struct conn_guard *next;  /* the process's guards (the error callback finds its own) */
	struct event_base *base;
	struct evconnlistener *lev;
	struct event *resume;     /* re-enables lev after a pause */
	int64_t accept_failed;    /* accept() failures since the last log line */
	int64_t pauses;           /* pauses since the last log line */
	int64_t logged_ms;        /* when the last pause was logged (0: never) */
	int paused;
	struct conn *conns;
	int64_t open;
	int64_t max_open, max_per_addr;
	int64_t head_ms, body_ms;
	int64_t max_head, max_body;
	struct strmap *per_addr;  /* address -> open connections, as an intptr_t */
	int64_t refused_unlogged, refused_logged_ms;
	struct {
		const char *code; /* a framing or guard code: a string literal */
		int64_t n;
	} codes[CONN_CODES];
};

/* evconnlistener's error callback gets the listener's own argument (evhttp's), not ours: the
 * guards are found by their listener. Only the loop's thread touches this list. */
static struct conn_guard *conn_guards;

static struct conn_guard *conn_guard_find(struct evconnlistener *lev)
{
	for (struct conn_guard *g = conn_guards; g; g = g->next)
		if (g->lev == lev)
			return g;
	return NULL;
}

static void conn_guard_on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn_guard *g = arg;
	g->paused = 0;
	evconnlistener_enable(g->lev);
}

static void conn_guard_on_accept_error(struct evconnlistener *lev, void *arg)
{
	(void)arg;
	int err = errno;
	struct conn_guard *g = conn_guard_find(lev);
	if (!g)
		return;
	g->accept_failed++;
	if (g->paused)
		return;
	/* Out of descriptors (EMFILE, ENFILE; libevent already retries the transient errors):
	 * the pending connection stays in the backlog and would wake the loop at once again,
	 * so the listener waits for some to close. */
	evconnlistener_disable(lev);
	g->paused = 1;
	g->pauses++;
	int64_t now = clock_mono_ms();
	if (g->logged_ms == 0 || now - g->logged_ms >= CONN_LOG_EVERY_MS) {
		log_warn("http", "accept_paused",
			 "errno=%d error=%s failed=%lld pauses=%lld pause_ms=%d", err,
			 log_q(strerror(err)), (long long)g->accept_failed, (long long)g->pauses,
			 CONN_PAUSE_MS);
		g->accept_failed = 0;
		g->pauses = 0;
		g->logged_ms = now;
	}
	struct timeval tv = { CONN_PAUSE_MS / 1000, (CONN_PAUSE_MS % 1000) * 1000 };
	evtimer_add(g->resume, &tv);
}

static void arm(struct conn *c, enum conn_wait wait, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	c->wait = wait;
	evtimer_add(c->timer, &tv);
}

static void disarm(struct conn *c)
{
	c->wait = WAIT_NONE;
	evtimer_del(c->timer);
}

/* A request is in evhttp's hands (being answered) while evhttp reads nothing. */
static int request_in_flight(const struct conn *c)
{
	return !(bufferevent_get_enabled(c->bev) & EV_READ);
}

static void refuse(struct conn *c, int status, const char *code, const char *message,
		   const char *field)
{
	c->refused = 1;
	c->fr.refusal = (struct framing_refusal){ status, code, message, field };
	struct evbuffer *in = bufferevent_get_input(c->bev);
	evbuffer_drain(in, evbuffer_get_length(in));
	/* Answered from the loop, not from inside evhttp's read; after an answer in flight. */
	c->wait = WAIT_REFUSE;
	if (!request_in_flight(c))
		event_active(c->timer, EV_TIMEOUT, 1);
	else
		evtimer_del(c->timer);
}

static const char *status_text(int status)
{
	switch (status) {
	case 400: return "Bad Request";
	case 408: return "Request Timeout";
	case 413: return "Payload Too Large";
	case 431: return "Request Header Fields Too Large";
	case 503: return "Service Unavailable";
	case 505: return "HTTP Version Not Supported";
	default: return "Error";
	}
}

/* The refusal's answer, sent in one go (a few hundred bytes fit any socket buffer; if not,
 * the client sees the connection close), then the connection is closed. */
static void answer_and_close(struct conn *c)
{
	const struct framing_refusal *r = &c->fr.refusal;
	json_t *err = json_pack("{s:s, s:s}", "code", r->code, "message", r->message);
	if (err && r->field)
		json_object_set_new(err, "field", json_string(r->field));
	/* The router's 413 and 431 name the limit too (docs/API.md). */
	if (err && (r->status == 413 || r->status == 431))
		json_object_set_new(err, "max_bytes",
				    json_integer(r->status == 413 ? c->fr.max_body : c->fr.max_head));
	json_t *body = err ? json_pack("{s:o}", "error", err) : NULL;
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	char head[512];
	size_t body_len = text ? strlen(text) + 1 : 0;
	int n = snprintf(head, sizeof head,
			 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n"
			 "X-Content-Type-Options: nosniff\r\n%s\r\n",
			 r->status, status_text(r->status), body_len,
			 r->status == 503 ? "Retry-After: 1\r\n" : "");
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	if (fd >= 0 && n > 0 && (size_t)n < sizeof head) {
		struct iovec iov[3] = { { head, (size_t)n }, { text, text ? strlen(text) : 0 },
					{ "\n", text ? 1 : 0 } };
		struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };
		(void)sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		char sink[4096];
		for (size_t got = 0; got < CONN_DRAIN_MAX;) {
			ssize_t k = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
			if (k <= 0)
				break;
			got += (size_t)k;
		}
	}
	gwb_free(text);
	struct conn_guard *g = c->g;
	for (int i = 0; i < CONN_CODES; i++)
		if (!g->codes[i].code || strcmp(g->codes[i].code, r->code) == 0) {
			g->codes[i].code = r->code;
			g->codes[i].n++;
			break;
		}
	g->refused_unlogged++;
	int64_t now = clock_mono_ms();
	if (g->refused_logged_ms == 0 || now - g->refused_logged_ms >= CONN_LOG_EVERY_MS) {
		log_info("http", "refused", "status=%d code=%s addr=%s refused=%lld", r->status,
			 r->code, log_q(c->addr), (long long)g->refused_unlogged);
		g->refused_unlogged = 0;
		g->refused_logged_ms = now;
	}
	/* evhttp frees the connection and calls on_close, which frees c. */
	evhttp_connection_free(c->evcon);
}

static void on_close(struct evhttp_connection *evcon, void *arg);

static intptr_t addr_count(struct conn_guard *g, const char *addr, int delta)
{
	intptr_t n = (intptr_t)strmap_get(g->per_addr, addr) + delta;
	if (n > 0)
		strmap_put(g->per_addr, addr, (void *)n);
	else
		strmap_del(g->per_addr, addr);
	return n;
}

/* The first tick of a connection: evhttp has made its connection object by now. */
static int accept_check(struct conn *c)
{
	void *arg = NULL;
	bufferevent_getcb(c->bev, NULL, NULL, NULL, &arg);
	c->evcon = arg;
	if (!c->evcon)
		return -1;
	evhttp_connection_set_closecb(c->evcon, on_close, c);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	snprintf(c->addr, sizeof c->addr, "?");
	if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, c->addr,
				  sizeof c->addr);
		else if (ss.ss_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, c->addr,
				  sizeof c->addr);
	}
	c->counted = 1;
	intptr_t here = addr_count(c->g, c->addr, +1);
	c->wait = WAIT_NONE;
	if (c->g->open > c->g->max_open)
		refuse(c, 503, "too_many_connections",
		       "the server holds as many connections as it takes (http.max_connections)",
		       NULL);
	else if (here > c->g->max_per_addr)
		refuse(c, 503, "too_many_connections",
		       "this address holds as many connections as one may "
		       "(http.max_connections_per_address)",
		       NULL);
	return 0;
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn *c = arg;
	switch (c->wait) {
	case WAIT_ACCEPT:
		if (accept_check(c) < 0)
			c->wait = WAIT_NONE;
		return;
	case WAIT_HEAD:
		refuse(c, 408, "header_timeout",
		       "the request's headers did not arrive in time (http.header_timeout_seconds)",
		       NULL);
		return;
	case WAIT_BODY:
		refuse(c, 408, "body_timeout",
		       "the request's body did not arrive in time (http.body_timeout_seconds)",
		       NULL);
		return;
	case WAIT_REFUSE:
		if (request_in_flight(c))
			return; /* on_output wakes it when that answer is out */
		answer_and_close(c);
		return;
	case WAIT_NONE:
		return;
	}
}

/* The framing's events in the bytes one read added: deadlines start and stop with them. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	if (info->n_added == 0)
		return; /* evhttp consumed bytes, or a drain */
	struct conn *c = arg;
	if (c->refused) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	struct evbuffer_ptr pos;
	size_t len = evbuffer_get_length(buf);
	if (evbuffer_ptr_set(buf, &pos, len - info->n_added, EVBUFFER_PTR_SET) < 0)
		return;
	size_t left = info->n_added;
	while (left > 0) {
		struct evbuffer_iovec v[4];
		int nv = evbuffer_peek(buf, (ev_ssize_t)left, &pos, v, 4);
		if (nv <= 0)
			return;
		nv = nv < 4 ? nv : 4;
		for (int i = 0; i < nv && left > 0; i++) {
			const char *p = v[i].iov_base;
			size_t n = v[i].iov_len < left ? v[i].iov_len : left;
			size_t done = 0;
			while (done < n) {
				enum framing_event ev;
				done += framing_feed(&c->fr, p + done, n - done, &ev);
				if (ev == FRAMING_REFUSED) {
					const struct framing_refusal *r = framing_refusal(&c->fr);
					refuse(c, r->status, r->code, r->message, r->field);
					return;
				}
				if ((ev == FRAMING_HEAD_ENDED || ev == FRAMING_BODY_ENDED) &&
				    c->wait != WAIT_NONE)
					disarm(c);
			}
			left -= n;
		}
		if (evbuffer_ptr_set(buf, &pos, len - left, EVBUFFER_PTR_SET) < 0)
			break;
	}
	/* A head or body left incomplete by this read gets its deadline now, from its first byte,
	 * which came in this read if none was armed: one that arrives whole costs no timer. */
	if (c->wait == WAIT_NONE && framing_in_head(&c->fr))
		arm(c, WAIT_HEAD, c->g->head_ms);
	else if (c->wait == WAIT_NONE && framing_in_body(&c->fr) && framing_body_read(&c->fr) > 0)
		arm(c, WAIT_BODY, c->g->body_ms);
}

/* A refusal that waited for an answer in flight goes on once that answer has left. */
static void on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	(void)info;
	struct conn *c = arg;
	if (c->wait == WAIT_REFUSE && evbuffer_get_length(buf) == 0)
		event_active(c->timer, EV_TIMEOUT, 1);
}

/* Unlinks and frees c, not its bufferevent (evhttp's, maybe freed already). */
static void conn_forget(struct conn *c)
{
	struct conn_guard *g = c->g;
	if (c->prev)
		c->prev->next = c->next;
	else
		g->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	g->open--;
	if (c->counted)
		addr_count(g, c->addr, -1);
	event_free(c->timer);
	gwb_free(c);
}

static void conn_free(struct conn *c)
{
	/* evhttp may still drain the buffers after its close callback: ours go first. */
	evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
	evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	conn_forget(c);
}

static void on_close(struct evhttp_connection *evcon, void *arg)
{
	struct conn *c = arg;
	void (*cb)(struct evhttp_connection *, void *) = c->user_close;
	void *user_arg = c->user_arg;
	conn_free(c);
	if (cb)
		cb(evcon, user_arg);
}

void conn_set_closecb(struct evhttp_connection *evcon,
		      void (*cb)(struct evhttp_connection *, void *), void *arg)
{
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	for (struct conn_guard *g = conn_guards; g; g = g->next)
		for (struct conn *c = g->conns; c; c = c->next)
			if (c->bev == bev && c->evcon == evcon) {
				c->user_close = cb;
				c->user_arg = arg;
				return;
			}
	evhttp_connection_set_closecb(evcon, cb, arg);
}

/* evhttp's bevcb: the bufferevent a new connection is built on (its socket is set after). */
static struct bufferevent *conn_new_bev(struct event_base *base, void *arg)
{
	struct conn_guard *g = arg;
	struct conn *c = gwb_calloc(1, sizeof *c);
	struct bufferevent *bev = c ? bufferevent_socket_new(base, -1, 0) : NULL;
	struct event *timer = bev ? evtimer_new(base, on_timer, c) : NULL;
	if (!timer) {
		if (bev)
			bufferevent_free(bev);
		gwb_free(c);
		return NULL; /* evhttp makes its own: this one connection goes unguarded */
	}
	c->g = g;
	c->bev = bev;
	c->timer = timer;
	framing_init(&c->fr, g->max_head, g->max_body);
	c->in_cb = evbuffer_add_cb(bufferevent_get_input(bev), on_input, c);
	c->out_cb = evbuffer_add_cb(bufferevent_get_output(bev), on_output, c);
	c->next = g->conns;
	if (g->conns)
		g->conns->prev = c;
	g->conns = c;
	g->open++;
	c->wait = WAIT_ACCEPT;
	event_active(timer, EV_TIMEOUT, 1);
	return bev;
}

struct conn_guard *conn_guard_start(struct event_base *base, struct evhttp *evh,
				    struct evhttp_bound_socket *bs,
				    const struct gwb_config *cfg)
{
	struct conn_guard *g = gwb_calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->base = base;
	g->lev = evhttp_bound_socket_get_listener(bs);
	g->resume = evtimer_new(base, conn_guard_on_resume, g);
	g->per_addr = strmap_new();
	if (!g->resume || !g->per_addr) {
		if (g->resume)
			event_free(g->resume);
		strmap_free(g->per_addr);
		gwb_free(g);
		return NULL;
	}
	g->max_open = cfg->http_max_connections;
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    (int64_t)rl.rlim_cur - CONN_FD_RESERVE < g->max_open) {
		int64_t fit = (int64_t)rl.rlim_cur - CONN_FD_RESERVE;
		g->max_open = fit > 1 ? fit : 1;
		log_info("http", "max_connections", "setting=%lld open_files=%lld cap=%lld",
			 (long long)cfg->http_max_connections, (long long)rl.rlim_cur,
			 (long long)g->max_open);
	}
	g->max_per_addr = cfg->http_max_connections_per_address;
	g->head_ms = cfg->http_header_timeout_seconds * 1000;
	g->body_ms = cfg->http_body_timeout_seconds * 1000;
	g->max_head = cfg->http_max_header_bytes;
	g->max_body = cfg->http_max_body_bytes;
	evconnlistener_set_error_cb(g->lev, conn_guard_on_accept_error);
	evhttp_set_bevcb(evh, conn_new_bev, g);
	g->next = conn_guards;
	conn_guards = g;
	return g;
}

void conn_guard_stop(struct conn_guard *g)
{
	if (!g)
		return;
	for (struct conn_guard **p = &conn_guards; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			break;
		}
	/* evhttp_free closed every connection that got its close callback; any left were never
	 * set up (their first tick had not come). */
	while (g->conns)
		conn_forget(g->conns);
	event_free(g->resume);
	strmap_free(g->per_addr);
	gwb_free(g);
}

void conn_guard_metrics(const struct conn_guard *g, struct evbuffer *out)
{
	prom_gauge(out, "gwb_http_connections", "open HTTP connections", g ? g->open : 0);
	prom_family(out, "gwb_http_connections_refused_total", PROM_COUNTER,
		    "connections answered and closed by the front door, by error code");
	for (int i = 0; g && i < CONN_CODES && g->codes[i].code; i++) {
		struct prom_label l = { "code", g->codes[i].code };
		prom_sample_int(out, "gwb_http_connections_refused_total", &l, 1, g->codes[i].n);
	}
}
