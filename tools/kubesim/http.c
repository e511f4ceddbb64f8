/* HTTP front on evhttp. Ownership rules at the libevent boundary:
 * - evhttp_send_reply* copies nothing it is not given: we own and free our evbuffers.
 * - A request that is never answered is never noticed closed by evhttp 2.1, so parked and
 *   withheld requests get our own read event on the socket: EOF there means the client left,
 *   and we free the connection (outside evhttp's callbacks, from that event).
 * - evhttp_connection_free on a server connection also frees its pending request. */
#include "tools/kubesim/http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <sys/queue.h>
#include <event2/util.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/addr.h"
#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "tools/kubesim/obj.h"

/* More parked requests than this and new ones get their connection closed at once. */
#define HTTP_MAX_PARKED 256

enum park_kind { PARK_HANG, PARK_WITHHELD, PARK_DELAYED, PARK_CLOSE };

struct parked {
	struct http *hp;
	enum park_kind kind;
	struct hreq *h;              /* PARK_HANG: the request to dispatch later */
	struct evhttp_request *req;
	struct evhttp_connection *conn;
	struct event *ev;            /* read watch (hang/withheld), timer (delayed), zero timer */
	int code;                    /* PARK_DELAYED: the answer */
	struct evbuffer *body;
	int inflight;                /* the request's in-flight class, released with the record */
	struct parked *next;
};

struct http {
	struct ks *ks;
	struct evhttp *api;
	struct evhttp *ctl;
	struct evhttp_bound_socket *api_sock;
	char host[256];
	int port;
	char unix_path[PATH_MAX];
	http_handler_fn on_api, on_control;
	void *arg;
	int refuse, hang;
	long slow_ms;
	struct parked *parked;
	int nparked;
	long max_inflight[3];       /* [1] non-mutating, [2] mutating; 0 = no limit */
	long inflight[3];
	unsigned long long rejected[3];
};

/* Releases a request's in-flight slot (once: the slot is zeroed). */
static void inflight_end(struct http *hp, int *slot)
{
	if (*slot == 1 || *slot == 2)
		hp->inflight[*slot]--;
	*slot = 0;
}

static void parked_unlink(struct http *hp, struct parked *p)
{
	for (struct parked **pp = &hp->parked; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			hp->nparked--;
			return;
		}
	}
}

static void hreq_free(struct hreq *h)
{
	if (!h)
		return;
	inflight_end(h->http, &h->inflight);
	evhttp_clear_headers(&h->query);
	gwb_free(h->path);
	gwb_free(h->body);
	gwb_free(h);
}

static void parked_free(struct parked *p)
{
	inflight_end(p->hp, &p->inflight);
	if (p->ev)
		event_free(p->ev);
	if (p->body)
		evbuffer_free(p->body);
	hreq_free(p->h);
	gwb_free(p);
}

/* ---- requests ---- */

static void dispatch(struct hreq *h);

static void close_later_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct parked *p = arg;
	struct http *hp = p->hp;
	parked_unlink(hp, p);
	evhttp_connection_free(p->conn); /* also frees p->req */
	parked_free(p);
}

/* Closes a connection whose request we will not answer, from a fresh loop turn. */
static void close_conn_later(struct http *hp, struct hreq *h)
{
	struct parked *p = gwb_calloc(1, sizeof *p);
	p->hp = hp;
	p->kind = PARK_CLOSE;
	p->req = h->req;
	p->inflight = h->inflight;
	h->inflight = 0;
	p->conn = evhttp_request_get_connection(h->req);
	p->ev = evtimer_new(hp->ks->base, close_later_cb, p);
	struct timeval tv = { 0, 0 };
	evtimer_add(p->ev, &tv);
	p->next = hp->parked;
	hp->parked = p;
	hp->nparked++;
	hreq_free(h);
}

static void peer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	struct parked *p = arg;
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0)
		return; /* the client sent more (pipelining): stop watching, keep it parked */
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		event_add(p->ev, NULL);
		return;
	}
	struct http *hp = p->hp;
	parked_unlink(hp, p);
	log_debug("http", "parked_client_left", "kind=%d", (int)p->kind);
	evhttp_connection_free(p->conn);
	parked_free(p);
}

static void park(struct http *hp, struct hreq *h, enum park_kind kind)
{
	if (hp->nparked >= HTTP_MAX_PARKED) {
		close_conn_later(hp, h);
		return;
	}
	struct parked *p = gwb_calloc(1, sizeof *p);
	p->hp = hp;
	p->kind = kind;
	p->req = h->req;
	p->conn = evhttp_request_get_connection(h->req);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(p->conn);
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (kind == PARK_HANG) {
		p->h = h;
		h->parked = 1;
	} else {
		p->inflight = h->inflight; /* a withheld answer holds its slot until the client leaves */
		h->inflight = 0;
		hreq_free(h);
	}
	if (fd >= 0) {
		p->ev = event_new(hp->ks->base, fd, EV_READ, peer_cb, p);
		event_add(p->ev, NULL);
	}
	p->next = hp->parked;
	hp->parked = p;
	hp->nparked++;
}

static void delayed_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct parked *p = arg;
	struct http *hp = p->hp;
	parked_unlink(hp, p);
	evhttp_send_reply(p->req, p->code, NULL, p->body);
	parked_free(p);
}

static int read_request(struct http *hp, struct evhttp_request *req, int control,
			struct hreq **out)
{
	struct hreq *h = gwb_calloc(1, sizeof *h);
	h->ks = hp->ks;
	h->http = hp;
	h->req = req;
	h->control = control;
	TAILQ_INIT(&h->query);
	h->cmd = evhttp_request_get_command(req);
	switch (h->cmd) {
	case EVHTTP_REQ_GET: h->method = "GET"; break;
	case EVHTTP_REQ_POST: h->method = "POST"; break;
	case EVHTTP_REQ_PUT: h->method = "PUT"; break;
	case EVHTTP_REQ_PATCH: h->method = "PATCH"; break;
	case EVHTTP_REQ_DELETE: h->method = "DELETE"; break;
	case EVHTTP_REQ_HEAD: h->method = "HEAD"; break;
	default: h->method = "OTHER"; break;
	}
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
	size_t plen = 0;
	char *dec = evhttp_uridecode(path && path[0] ? path : "/", 0, &plen);
	h->path = gwb_strdup(dec ? dec : "/");
	free(dec); /* banned-ok: evhttp_uridecode allocates with libevent's malloc */
	if (q && evhttp_parse_query_str(q, &h->query) < 0)
		evhttp_clear_headers(&h->query);
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	h->body = gwb_malloc(n + 1);
	if (n)
		evbuffer_remove(in, h->body, n);
	h->body[n] = '\0';
	h->body_len = n;
	*out = h;
	return 0;
}

static void dispatch(struct hreq *h)
{
	struct http *hp = h->http;
	if (h->control || !strncmp(h->path, "/_kubesim/", 10) || !strcmp(h->path, "/_kubesim"))
		hp->on_control(h, hp->arg);
	else
		hp->on_api(h, hp->arg);
}

/* Go's strconv.ParseBool true values (as the API reads query booleans). */
static int query_true(const struct hreq *h, const char *name)
{
	const char *v = evhttp_find_header(&h->query, name);
	static const char *const yes[] = { "1", "t", "T", "TRUE", "true", "True" };
	for (size_t i = 0; v && i < sizeof yes / sizeof yes[0]; i++)
		if (!strcmp(v, yes[i]))
			return 1;
	return 0;
}

/* Watches (?watch=true or a /watch/ path) and followed logs: kept open, never counted. */
static int long_running(const struct hreq *h)
{
	if (h->cmd != EVHTTP_REQ_GET)
		return 0;
	if (query_true(h, "watch") || strstr(h->path, "/watch/"))
		return 1;
	size_t n = strlen(h->path);
	return n > 4 && !strcmp(h->path + n - 4, "/log") && query_true(h, "follow");
}

/* Answers 429 at once, as the API server's max-in-flight filter does (no slow_ms delay). */
static void reply_too_many(struct http *hp, struct hreq *h, int cls)
{
	hp->rejected[cls]++;
	json_t *doc = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:{s:i}, s:i}", "kind", "Status",
				"apiVersion", "v1", "metadata", "status", "Failure", "message",
				"Too many requests, please try again later.", "reason",
				"TooManyRequests", "details", "retryAfterSeconds", 1, "code", 429);
	size_t n;
	char *body = http_dump_line(doc, &n);
	json_decref(doc);
	struct evkeyvalq *oh = evhttp_request_get_output_headers(h->req);
	evhttp_add_header(oh, "Content-Type", "application/json");
	evhttp_add_header(oh, "Cache-Control", "no-cache, private");
	evhttp_add_header(oh, "Retry-After", "1");
	struct evbuffer *buf = evbuffer_new();
	if (h->cmd != EVHTTP_REQ_HEAD)
		evbuffer_add(buf, body, n);
	evhttp_send_reply(h->req, 429, "Too Many Requests", buf);
	evbuffer_free(buf);
	gwb_free(body);
	log_debug("http", "too_many_requests", "method=%s path=%s inflight=%ld", h->method,
		  log_q(h->path), hp->inflight[cls]);
	hreq_free(h);
}

static void api_cb(struct evhttp_request *req, void *arg)
{
	struct http *hp = arg;
	struct hreq *h;
	read_request(hp, req, 0, &h);
	int is_control = !strncmp(h->path, "/_kubesim", 9);
	if (!is_control && hp->refuse) {
		/* A connection opened before the listener closed: the peer sees it reset. */
		close_conn_later(hp, h);
		return;
	}
	if (!is_control && !long_running(h)) {
		int cls = h->cmd == EVHTTP_REQ_GET || h->cmd == EVHTTP_REQ_HEAD ? 1 : 2;
		if (hp->max_inflight[cls] > 0 && hp->inflight[cls] >= hp->max_inflight[cls]) {
			reply_too_many(hp, h, cls);
			return;
		}
		h->inflight = cls;
		hp->inflight[cls]++;
	}
	if (!is_control && hp->hang) {
		park(hp, h, PARK_HANG);
		return;
	}
	dispatch(h);
}

static void ctl_cb(struct evhttp_request *req, void *arg)
{
	struct http *hp = arg;
	struct hreq *h;
	read_request(hp, req, 1, &h);
	dispatch(h);
}

struct http *http_new(struct ks *ks, http_handler_fn api, http_handler_fn control, void *arg)
{
	struct http *hp = gwb_calloc(1, sizeof *hp);
	hp->ks = ks;
	hp->on_api = api;
	hp->on_control = control;
	hp->arg = arg;
	struct evhttp *v[2];
	v[0] = hp->api = evhttp_new(ks->base);
	v[1] = hp->ctl = evhttp_new(ks->base);
	for (int i = 0; i < 2; i++) {
		evhttp_set_allowed_methods(v[i], EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
							 EVHTTP_REQ_PATCH | EVHTTP_REQ_DELETE |
							 EVHTTP_REQ_HEAD);
		evhttp_set_max_body_size(v[i], (ev_ssize_t)ks->cfg.max_body);
		evhttp_set_max_headers_size(v[i], (ev_ssize_t)ks->cfg.max_headers);
		/* Watches stay open up to an hour without a byte from the client; evhttp's 50 s
		 * default read timeout would cut them. */
		evhttp_set_timeout(v[i], 2 * 3600);
	}
	evhttp_set_gencb(hp->api, api_cb, hp);
	evhttp_set_gencb(hp->ctl, ctl_cb, hp);
	http_set_limits(hp, ks->cfg.max_inflight, ks->cfg.max_mutating_inflight);
	return hp;
}

void http_free(struct http *hp)
{
	if (!hp)
		return;
	/* evhttp_free below frees every connection and request: drop our records first. */
	while (hp->parked) {
		struct parked *p = hp->parked;
		hp->parked = p->next;
		parked_free(p);
	}
	evhttp_free(hp->api);
	evhttp_free(hp->ctl);
	if (hp->unix_path[0])
		unlink(hp->unix_path);
	gwb_free(hp);
}

static int split_hostport(const char *hp, char *host, size_t hlen, int *port)
{
	struct addr a;
	char why[160];
	if (addr_parse(hp, ADDR_F_HOSTPORT | ADDR_F_PORT0, &a, why, sizeof why) < 0 ||
	    strlen(a.host) >= hlen)
		return GWB_EINVAL;
	memcpy(host, a.host, strlen(a.host) + 1);
	*port = a.port;
	return 0;
}

static int bound_port(struct evhttp_bound_socket *s)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	evutil_socket_t fd = evhttp_bound_socket_get_fd(s);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -1;
	char portbuf[16];
	if (getnameinfo((struct sockaddr *)&ss, len, NULL, 0, portbuf, sizeof portbuf,
			NI_NUMERICSERV) != 0)
		return -1;
	return (int)strtol(portbuf, NULL, 10);
}

int http_listen_tcp(struct http *hp, const char *hostport, char *url, size_t urllen)
{
	if (split_hostport(hostport, hp->host, sizeof hp->host, &hp->port) < 0)
		return GWB_EINVAL;
	hp->api_sock = evhttp_bind_socket_with_handle(hp->api, hp->host, (ev_uint16_t)hp->port);
	if (!hp->api_sock)
		return GWB_EIO;
	hp->port = bound_port(hp->api_sock);
	if (hp->port <= 0)
		return GWB_EIO;
	if (strchr(hp->host, ':'))
		snprintf(url, urllen, "http://[%s]:%d", hp->host, hp->port);
	else
		snprintf(url, urllen, "http://%s:%d", hp->host, hp->port);
	return 0;
}

int http_listen_unix(struct http *hp, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof sa.sun_path)
		return GWB_EINVAL;
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return GWB_EIO;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0) {
		close(fd);
		return GWB_EIO;
	}
	if (!evhttp_accept_socket_with_handle(hp->ctl, fd)) {
		close(fd);
		return GWB_EIO;
	}
	snprintf(hp->unix_path, sizeof hp->unix_path, "%s", path);
	return 0;
}

int http_set_refuse(struct http *hp, int on)
{
	if (on && !hp->refuse) {
		if (hp->api_sock)
			evhttp_del_accept_socket(hp->api, hp->api_sock);
		hp->api_sock = NULL;
		hp->refuse = 1;
		return 0;
	}
	if (!on && hp->refuse) {
		hp->api_sock =
			evhttp_bind_socket_with_handle(hp->api, hp->host, (ev_uint16_t)hp->port);
		if (!hp->api_sock) {
			log_error("http", "rebind_failed", "port=%d", hp->port);
			return GWB_EIO;
		}
		hp->refuse = 0;
	}
	return 0;
}

void http_set_hang(struct http *hp, int on)
{
	hp->hang = on;
	if (on)
		return;
	/* Dispatch what is still parked, oldest first. */
	struct parked *list = NULL;
	for (struct parked **pp = &hp->parked; *pp;) {
		struct parked *p = *pp;
		if (p->kind == PARK_HANG) {
			*pp = p->next;
			hp->nparked--;
			p->next = list;
			list = p;
		} else {
			pp = &p->next;
		}
	}
	while (list) {
		struct parked *p = list;
		list = p->next;
		struct hreq *h = p->h;
		p->h = NULL;
		h->parked = 0;
		parked_free(p);
		dispatch(h);
	}
}

void http_set_limits(struct http *hp, long max_readonly, long max_mutating)
{
	hp->max_inflight[1] = max_readonly > 0 ? max_readonly : 0;
	hp->max_inflight[2] = max_mutating > 0 ? max_mutating : 0;
}

json_t *http_limits_doc(const struct http *hp)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "max_requests_inflight",
			 (json_int_t)hp->max_inflight[1], "max_mutating_requests_inflight",
			 (json_int_t)hp->max_inflight[2], "inflight", (json_int_t)hp->inflight[1],
			 "mutating_inflight", (json_int_t)hp->inflight[2], "rejected",
			 (json_int_t)hp->rejected[1], "mutating_rejected",
			 (json_int_t)hp->rejected[2]);
}

void http_set_slow(struct http *hp, long ms)
{
	hp->slow_ms = ms > 0 ? ms : 0;
}

int http_parked_count(const struct http *hp)
{
	int n = 0;
	for (const struct parked *p = hp->parked; p; p = p->next)
		n += p->kind == PARK_HANG || p->kind == PARK_WITHHELD;
	return n;
}

void http_header_add(struct hreq *h, const char *name, const char *value)
{
	evhttp_add_header(evhttp_request_get_output_headers(h->req), name, value);
}

const char *http_query(const struct hreq *h, const char *name)
{
	return evhttp_find_header(&h->query, name);
}

const char *http_req_header(const struct hreq *h, const char *name)
{
	return evhttp_find_header(evhttp_request_get_input_headers(h->req), name);
}

void http_reply(struct hreq *h, int code, const char *ctype, const char *body, size_t len)
{
	struct http *hp = h->http;
	struct evkeyvalq *oh = evhttp_request_get_output_headers(h->req);
	char audit[37];
	obj_uuid(audit);
	evhttp_add_header(oh, "Content-Type", ctype);
	evhttp_add_header(oh, "Cache-Control", "no-cache, private");
	evhttp_add_header(oh, "Audit-Id", audit);
	struct evbuffer *buf = evbuffer_new();
	if (len && h->cmd != EVHTTP_REQ_HEAD)
		evbuffer_add(buf, body, len);
	log_debug("http", "reply", "method=%s path=%s code=%d", h->method, log_q(h->path), code);
	if (hp->slow_ms > 0 && !h->control) {
		struct parked *p = gwb_calloc(1, sizeof *p);
		p->hp = hp;
		p->kind = PARK_DELAYED;
		p->req = h->req;
		p->conn = evhttp_request_get_connection(h->req);
		p->code = code;
		p->inflight = h->inflight;
		h->inflight = 0;
		p->body = buf;
		p->ev = evtimer_new(hp->ks->base, delayed_cb, p);
		struct timeval tv = { hp->slow_ms / 1000, (hp->slow_ms % 1000) * 1000 };
		evtimer_add(p->ev, &tv);
		p->next = hp->parked;
		hp->parked = p;
		hp->nparked++;
		hreq_free(h);
		return;
	}
	evhttp_send_reply(h->req, code, NULL, buf);
	evbuffer_free(buf);
	hreq_free(h);
}

void http_reply_json(struct hreq *h, int code, json_t *doc)
{
	size_t n;
	char *body = http_dump_line(doc, &n);
	json_decref(doc);
	http_reply(h, code, "application/json", body, n);
	gwb_free(body);
}

struct dumpbuf {
	char *s;
	size_t len, cap;
};

static int dump_cb(const char *buf, size_t size, void *arg)
{
	struct dumpbuf *d = arg;
	if (d->len + size + 2 > d->cap) {
		size_t cap = d->cap ? d->cap : 4096;
		while (d->len + size + 2 > cap)
			cap *= 2;
		d->s = gwb_realloc(d->s, cap);
		d->cap = cap;
	}
	memcpy(d->s + d->len, buf, size);
	d->len += size;
	return 0;
}

char *http_dump_line(const json_t *doc, size_t *len)
{
	/* One pass into a growing buffer of ours, without a sizing pass first; the final
	 * newline is what Go's encoder writes after every document (and what watch framing
	 * needs). */
	struct dumpbuf d = { 0 };
	dump_cb("", 0, &d);
	if (json_dump_callback(doc, dump_cb, &d, JSON_COMPACT) != 0)
		d.len = 0;
	d.s[d.len] = '\n';
	d.s[d.len + 1] = '\0';
	*len = d.len + 1;
	return d.s;
}

void http_reply_kerr(struct hreq *h, const struct kerr *e)
{
	http_reply_json(h, e->code, kerr_status(e));
}

void http_withhold(struct hreq *h)
{
	park(h->http, h, PARK_WITHHELD);
}

struct evhttp_request *http_detach(struct hreq *h)
{
	struct evhttp_request *req = h->req;
	hreq_free(h);
	return req;
}
