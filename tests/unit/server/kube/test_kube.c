/* The Kubernetes request client (server/kube/kube.c) against a peer on loopback that the test
 * runs on the same event base: its four outcomes (OK for 2xx; REJECTED for a 4xx other than
 * 408/429; NOT_SENT when no connection could be made; UNKNOWN for a time-out, a close before
 * the answer, a 5xx or a 408), each callback exactly once and never from inside the call,
 * cancels, the flow control kube.h promises (slots, class order, the token bucket, a time-out
 * counted from the send, 429 back in the queue, the room watcher) and one watch stream.
 *
 * The peer reads HTTP/1.1 requests and acts on the last segment of the path: "sNNN" answers
 * NNN (a Status with reason "RNNN" unless 2xx), "close" closes without answering, "hang"
 * never answers, "delayN" answers 200 after N ms, "throttle" answers 429 (Retry-After: 0)
 * while p->throttle lasts; a path with watch=1 streams two events and closes ("watch=1&hang"
 * sends nothing after the headers); anything else answers 200. */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "server/kube/kube.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/t.h"

/* ---- the peer ---- */

#define PEER_LOG 64

struct peer {
	struct event_base *base;
	struct evconnlistener *l;
	int port;
	int received;                     /* requests read */
	int outstanding, max_outstanding; /* read and not yet answered (or closed) */
	int throttle;                     /* 429s still to answer to "throttle" */
	int nlog;
	char log[PEER_LOG][160];          /* "METHOD path" in arrival order */
	char auth[256];                   /* the last Authorization header */
	char ctype[128];                  /* the last Content-Type header */
	char body[512];                   /* the last request body */
	struct pconn *conns;              /* open connections */
};

struct pconn {
	struct peer *p;
	struct bufferevent *bev;
	struct event *later; /* a delayed answer */
	int waiting;         /* a request read and not answered */
	int close_written;   /* close once the output is written (a watch's end) */
	struct pconn *next;
};

static void pconn_close(struct pconn *c)
{
	for (struct pconn **pp = &c->p->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	if (c->waiting)
		c->p->outstanding--;
	if (c->later)
		event_free(c->later);
	bufferevent_free(c->bev);
	gwb_free(c);
}

static void peer_answer(struct pconn *c, int code)
{
	char body[200];
	if (code / 100 == 2)
		snprintf(body, sizeof body, "{\"kind\":\"ConfigMap\",\"ok\":true}");
	else
		snprintf(body, sizeof body,
			 "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"R%d\",\"code\":%d}",
			 code, code);
	struct evbuffer *out = bufferevent_get_output(c->bev);
	evbuffer_add_printf(out, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n", code);
	if (code == 429)
		evbuffer_add_printf(out, "Retry-After: 0\r\n");
	evbuffer_add_printf(out, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
	c->waiting = 0;
	c->p->outstanding--;
}

static void on_later(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	peer_answer(arg, 200);
}

static void header_value(const char *head, const char *name, char *out, size_t len)
{
	out[0] = '\0';
	const char *h = strcasestr(head, name);
	if (!h)
		return;
	h += strlen(name);
	while (*h == ' ')
		h++;
	size_t n = strcspn(h, "\r\n");
	snprintf(out, len, "%.*s", (int)n, h);
}

/* Acts on one request; 0, or -1 when the connection was closed (c is gone). */
static int peer_handle(struct pconn *c, const char *method, const char *path)
{
	struct peer *p = c->p;
	if (p->nlog < PEER_LOG)
		snprintf(p->log[p->nlog++], sizeof p->log[0], "%s %s", method, path);
	p->received++;
	c->waiting = 1;
	if (++p->outstanding > p->max_outstanding)
		p->max_outstanding = p->outstanding;
	if (strstr(path, "/log?")) {
		/* A Pod's log: text, ended by the close unless it hangs (a quiet follow). */
		struct evbuffer *out = bufferevent_get_output(c->bev);
		evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
					 "Connection: close\r\n\r\nline one\nline two\n");
		c->close_written = !strstr(path, "hang");
		return 0;
	}
	if (strstr(path, "watch=1")) {
		struct evbuffer *out = bufferevent_get_output(c->bev);
		evbuffer_add_printf(out, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
					 "Connection: close\r\n\r\n");
		c->close_written = !strstr(path, "hang");
		if (c->close_written)
			evbuffer_add_printf(out,
					    "{\"type\":\"ADDED\",\"object\":{\"n\":1}}\n"
					    "{\"type\":\"MODIFIED\",\"object\":{\"n\":2}}\n");
		return 0;
	}
	const char *last = strrchr(path, '/');
	last = last ? last + 1 : path;
	if (strcmp(last, "close") == 0) {
		pconn_close(c);
		return -1;
	}
	if (strcmp(last, "hang") == 0)
		return 0;
	if (strncmp(last, "delay", 5) == 0) {
		int ms = (int)strtol(last + 5, NULL, 10);
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
		if (!c->later)
			c->later = evtimer_new(p->base, on_later, c);
		evtimer_add(c->later, &tv);
		return 0;
	}
	if (strcmp(last, "throttle") == 0 && p->throttle > 0) {
		p->throttle--;
		peer_answer(c, 429);
		return 0;
	}
	peer_answer(c, last[0] == 's' ? (int)strtol(last + 1, NULL, 10) : 200);
	return 0;
}

static void on_peer_read(struct bufferevent *bev, void *arg)
{
	struct pconn *c = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	for (;;) {
		struct evbuffer_ptr end = evbuffer_search(in, "\r\n\r\n", 4, NULL);
		if (end.pos < 0)
			return;
		size_t hl = (size_t)end.pos + 4;
		char head[4096];
		if (hl >= sizeof head) {
			pconn_close(c);
			return;
		}
		evbuffer_copyout(in, head, hl);
		head[hl] = '\0';
		char clen[32];
		header_value(head, "\r\nContent-Length:", clen, sizeof clen);
		size_t bl = (size_t)strtoul(clen, NULL, 10);
		if (evbuffer_get_length(in) < hl + bl)
			return;
		evbuffer_drain(in, hl);
		char body[512] = "";
		size_t take = bl < sizeof body - 1 ? bl : sizeof body - 1;
		evbuffer_remove(in, body, take);
		evbuffer_drain(in, bl - take);
		char method[16], path[1024];
		if (sscanf(head, "%15s %1023s", method, path) != 2) {
			pconn_close(c);
			return;
		}
		header_value(head, "\r\nAuthorization:", c->p->auth, sizeof c->p->auth);
		header_value(head, "\r\nContent-Type:", c->p->ctype, sizeof c->p->ctype);
		snprintf(c->p->body, sizeof c->p->body, "%s", body);
		if (peer_handle(c, method, path) < 0)
			return;
	}
}

/* A watch's answer ends with its connection, once written out. */
static void on_peer_write(struct bufferevent *bev, void *arg)
{
	(void)bev;
	struct pconn *c = arg;
	if (c->close_written)
		pconn_close(c);
}

static void on_peer_event(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
		pconn_close(arg);
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	(void)l;
	(void)sa;
	(void)len;
	struct peer *p = arg;
	struct pconn *c = gwb_calloc(1, sizeof *c);
	c->p = p;
	c->next = p->conns;
	p->conns = c;
	c->bev = bufferevent_socket_new(p->base, fd, BEV_OPT_CLOSE_ON_FREE);
	bufferevent_setcb(c->bev, on_peer_read, on_peer_write, on_peer_event, c);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

static void peer_start(struct peer *p, struct event_base *base)
{
	memset(p, 0, sizeof *p);
	p->base = base;
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	p->l = evconnlistener_new_bind(base, on_accept, p, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
				       -1, (struct sockaddr *)&sa, sizeof sa);
	CHECKF(p->l != NULL, "cannot listen on loopback");
	socklen_t sl = sizeof sa;
	getsockname(evconnlistener_get_fd(p->l), (struct sockaddr *)&sa, &sl);
	p->port = ntohs(sa.sin_port);
}

/* A loopback port nothing listens on: bound, then closed. */
static int closed_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { 0 };
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	socklen_t sl = sizeof sa;
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	close(fd);
	return ntohs(sa.sin_port);
}

/* ---- the client side ---- */

#define MAX_REQS 16

struct call {
	long id;
	int fired;         /* callbacks so far */
	int fired_in_call; /* a callback came from inside a call of the client */
	enum kube_outcome outcome;
	long status;
	char reason[160];
	char body_kind[32];
	int64_t at_ms;     /* when it ended */
};

static int in_call; /* 1 while the test is inside a call of the client's API */
static int ended;   /* callbacks so far, all requests */

static void on_done(void *arg, const struct kube_result *res)
{
	struct call *c = arg;
	c->fired++;
	c->fired_in_call |= in_call;
	c->outcome = res->outcome;
	c->status = res->status;
	snprintf(c->reason, sizeof c->reason, "%s", res->reason ? res->reason : "");
	const char *kind = json_string_value(json_object_get(res->body, "kind"));
	snprintf(c->body_kind, sizeof c->body_kind, "%s", kind ? kind : "");
	c->at_ms = clock_mono_ms();
	ended++;
}

struct fixture {
	struct event_base *base;
	struct peer peer;
	struct kube *k;
};

static struct kube *client_on(struct event_base *base, int port, const char *token)
{
	struct kube_auth a;
	memset(&a, 0, sizeof a);
	snprintf(a.server, sizeof a.server, "http://127.0.0.1:%d", port);
	a.token = (char *)token;
	struct kube *k = NULL;
	char err[256];
	CHECKF(kube_new(&k, base, &a, err, sizeof err) == 0, "kube_new: %s", err);
	return k;
}

static void fixture_start(struct fixture *f)
{
	ended = 0;
	in_call = 0;
	f->base = event_base_new();
	peer_start(&f->peer, f->base);
	f->k = client_on(f->base, f->peer.port, "tok-1");
}

static void fixture_stop(struct fixture *f)
{
	kube_free(f->k);
	while (f->peer.conns)
		pconn_close(f->peer.conns);
	evconnlistener_free(f->peer.l);
	event_base_free(f->base);
}

static long request(struct kube *k, const char *method, const char *path, const json_t *body,
		    int timeout_ms, struct call *c)
{
	memset(c, 0, sizeof *c);
	in_call = 1;
	c->id = kube_request(k, method, path, body, NULL, timeout_ms, on_done, c);
	in_call = 0;
	CHECKF(c->id > 0, "kube_request %s %s: %ld", method, path, c->id);
	CHECKF(c->fired == 0, "%s %s: done fired inside kube_request", method, path);
	return c->id;
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(arg);
}

/* Runs the loop until *count reaches want or timeout_ms passes; then runs it idle_ms more,
 * so that a second callback would have its chance to fire. */
static void run_until(struct event_base *base, const int *count, int want, int timeout_ms,
		      int idle_ms)
{
	struct event *t = evtimer_new(base, on_deadline, base);
	int64_t deadline = clock_mono_ms() + timeout_ms;
	while (*count < want && clock_mono_ms() < deadline) {
		struct timeval tv = { 0, 20000 };
		evtimer_add(t, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	int64_t stop = clock_mono_ms() + idle_ms;
	while (clock_mono_ms() < stop) {
		struct timeval tv = { 0, 20000 };
		evtimer_add(t, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(t);
	CHECKF(*count >= want, "%d of %d callbacks within %d ms", *count, want, timeout_ms);
}

static void check_once(const struct call *c, const char *what)
{
	CHECKF(c->fired == 1, "%s: done fired %d times", what, c->fired);
	CHECKF(!c->fired_in_call, "%s: done fired from inside a call of the client", what);
}

#define CM "/api/v1/namespaces/ns/configmaps"

/* ---- the four outcomes ---- */

TEST(kube_2xx_is_ok_with_the_body_token_and_json_sent)
{
	struct fixture f;
	fixture_start(&f);
	struct call get, create, del;
	request(f.k, "GET", CM "/a", NULL, 5000, &get);
	json_t *body = json_pack("{s:s}", "kind", "ConfigMap");
	request(f.k, "POST", CM "/s201", body, 5000, &create);
	json_decref(body);
	request(f.k, "DELETE", CM "/s202", NULL, 5000, &del);
	run_until(f.base, &ended, 3, 5000, 200);
	check_once(&get, "GET 200");
	check_once(&create, "POST 201");
	check_once(&del, "DELETE 202");
	CHECK_INT(get.outcome, KUBE_OK);
	CHECK_INT(get.status, 200);
	CHECK_STR(get.body_kind, "ConfigMap");
	CHECK_INT(create.outcome, KUBE_OK);
	CHECK_INT(create.status, 201);
	CHECK_INT(del.outcome, KUBE_OK);
	CHECK_INT(del.status, 202);
	CHECK_STR(f.peer.auth, "Bearer tok-1");
	CHECK_INT(f.peer.received, 3);
	CHECK(kube_reachable(f.k));
	fixture_stop(&f);
}

TEST(kube_request_body_goes_out_as_json)
{
	struct fixture f;
	fixture_start(&f);
	struct call c;
	json_t *body = json_pack("{s:s,s:i}", "kind", "ConfigMap", "n", 7);
	request(f.k, "POST", CM, body, 5000, &c);
	json_decref(body);
	run_until(f.base, &ended, 1, 5000, 0);
	CHECK_INT(c.outcome, KUBE_OK);
	json_t *sent = json_loads(f.peer.body, 0, NULL);
	CHECKF(sent != NULL, "body sent: %s", f.peer.body);
	CHECK_STR(json_string_value(json_object_get(sent, "kind")), "ConfigMap");
	CHECK_INT(json_integer_value(json_object_get(sent, "n")), 7);
	json_decref(sent);
	CHECK_STR(f.peer.ctype, "application/json");
	fixture_stop(&f);
}

TEST(kube_4xx_is_rejected_with_the_status_reason)
{
	static const int codes[] = { 400, 403, 404, 409, 422 };
	enum { N = sizeof codes / sizeof codes[0] };
	struct fixture f;
	fixture_start(&f);
	struct call c[N];
	for (int i = 0; i < N; i++) {
		char path[128];
		snprintf(path, sizeof path, CM "/s%d", codes[i]);
		request(f.k, i % 2 ? "POST" : "GET", path, NULL, 5000, &c[i]);
	}
	run_until(f.base, &ended, N, 5000, 200);
	for (int i = 0; i < N; i++) {
		char what[32], reason[32];
		snprintf(what, sizeof what, "status %d", codes[i]);
		check_once(&c[i], what);
		CHECKF(c[i].outcome == KUBE_REJECTED, "%s: outcome %d", what, c[i].outcome);
		CHECK_INT(c[i].status, codes[i]);
		snprintf(reason, sizeof reason, "R%d", codes[i]);
		CHECK_STR(c[i].reason, reason);
		CHECK_STR(c[i].body_kind, "Status");
	}
	/* The server answered: it is reachable. */
	CHECK(kube_reachable(f.k));
	fixture_stop(&f);
}

TEST(kube_no_connection_is_not_sent)
{
	ended = 0;
	in_call = 0;
	struct event_base *base = event_base_new();
	struct kube *k = client_on(base, closed_port(), NULL);
	struct call c[3];
	request(k, "POST", CM, NULL, 2000, &c[0]);
	request(k, "GET", CM "/a", NULL, 2000, &c[1]);
	request(k, "DELETE", CM "/a", NULL, 2000, &c[2]);
	run_until(base, &ended, 3, 5000, 200);
	for (int i = 0; i < 3; i++) {
		check_once(&c[i], "refused");
		CHECKF(c[i].outcome == KUBE_NOT_SENT, "request %d: outcome %d (%s)", i, c[i].outcome,
		       c[i].reason);
		CHECK_INT(c[i].status, 0);
		CHECKF(c[i].reason[0], "request %d: no reason", i);
	}
	CHECK(!kube_reachable(k));
	json_t *d = json_object();
	kube_describe(k, d);
	CHECK(json_is_false(json_object_get(d, "reachable")));
	CHECK_INT(json_integer_value(json_object_get(d, "failures")), 3);
	CHECK(json_is_string(json_object_get(d, "last_error")));
	json_decref(d);
	kube_free(k);
	event_base_free(base);
}

TEST(kube_5xx_and_408_are_unknown)
{
	static const int codes[] = { 500, 502, 503, 504, 408 };
	enum { N = sizeof codes / sizeof codes[0] };
	struct fixture f;
	fixture_start(&f);
	struct call c[N];
	for (int i = 0; i < N; i++) {
		char path[128];
		snprintf(path, sizeof path, CM "/s%d", codes[i]);
		request(f.k, "POST", path, NULL, 5000, &c[i]);
	}
	run_until(f.base, &ended, N, 5000, 200);
	for (int i = 0; i < N; i++) {
		char what[32], reason[32];
		snprintf(what, sizeof what, "status %d", codes[i]);
		check_once(&c[i], what);
		CHECKF(c[i].outcome == KUBE_UNKNOWN, "%s: outcome %d", what, c[i].outcome);
		CHECK_INT(c[i].status, codes[i]);
		snprintf(reason, sizeof reason, "R%d", codes[i]);
		CHECK_STR(c[i].reason, reason);
	}
	CHECK(!kube_reachable(f.k));
	fixture_stop(&f);
}

TEST(kube_close_before_the_answer_is_unknown)
{
	struct fixture f;
	fixture_start(&f);
	struct call c;
	request(f.k, "POST", CM "/close", NULL, 5000, &c);
	run_until(f.base, &ended, 1, 5000, 200);
	check_once(&c, "closed");
	CHECKF(c.outcome == KUBE_UNKNOWN, "outcome %d (%s)", c.outcome, c.reason);
	CHECK_INT(c.status, 0);
	CHECKF(f.peer.received >= 1, "the request never reached the peer");
	CHECK(!kube_reachable(f.k));
	fixture_stop(&f);
}

TEST(kube_no_answer_in_time_is_unknown)
{
	struct fixture f;
	fixture_start(&f);
	struct call c;
	int64_t t0 = clock_mono_ms();
	request(f.k, "POST", CM "/hang", NULL, 300, &c);
	run_until(f.base, &ended, 1, 5000, 200);
	check_once(&c, "hang");
	CHECKF(c.outcome == KUBE_UNKNOWN, "outcome %d (%s)", c.outcome, c.reason);
	CHECK_INT(c.status, 0);
	CHECKF(c.at_ms - t0 >= 280, "ended after %lld ms, before its time-out",
	       (long long)(c.at_ms - t0));
	CHECK_INT(f.peer.received, 1);
	fixture_stop(&f);
}

/* ---- cancels and the client's end ---- */

TEST(kube_cancelled_request_never_reports)
{
	struct fixture f;
	fixture_start(&f);
	struct call queued, sent, other;
	request(f.k, "GET", CM "/a", NULL, 5000, &queued);
	in_call = 1;
	kube_cancel(f.k, queued.id);
	kube_cancel(f.k, 999999); /* unknown ids are ignored */
	in_call = 0;
	request(f.k, "POST", CM "/delay300", NULL, 5000, &sent);
	request(f.k, "GET", CM "/b", NULL, 5000, &other);
	/* Once the slow one is with the peer, cancel it. */
	run_until(f.base, &f.peer.received, 2, 5000, 0);
	kube_cancel(f.k, sent.id);
	run_until(f.base, &ended, 1, 5000, 600);
	CHECK_INT(queued.fired, 0);
	CHECK_INT(sent.fired, 0);
	check_once(&other, "the one not cancelled");
	CHECK_INT(other.outcome, KUBE_OK);
	/* The cancelled queued request never went out. */
	for (int i = 0; i < f.peer.nlog; i++)
		CHECKF(strcmp(f.peer.log[i], "GET " CM "/a") != 0, "the cancelled request was sent");
	/* Its slot is free again: the whole window is room. */
	CHECK_INT(kube_room(f.k), kube_window(f.k));
	fixture_stop(&f);
}

TEST(kube_free_drops_pending_requests_without_callbacks)
{
	struct fixture f;
	fixture_start(&f);
	struct call a, b;
	request(f.k, "POST", CM "/hang", NULL, 5000, &a);
	request(f.k, "GET", CM "/c", NULL, 5000, &b);
	run_until(f.base, &f.peer.received, 1, 5000, 0);
	kube_free(f.k);
	f.k = NULL;
	run_until(f.base, &ended, 0, 0, 200);
	CHECK_INT(a.fired, 0);
	CHECK_INT(b.fired + a.fired, ended);
	fixture_stop(&f);
}

/* ---- flow control ---- */

TEST(kube_at_most_max_inflight_requests_are_out)
{
	struct fixture f;
	fixture_start(&f);
	kube_set_flow(f.k, 2, 1000, 1000);
	CHECK_INT(kube_window(f.k), 4);
	CHECK_INT(kube_room(f.k), 4);
	struct call c[6];
	for (int i = 0; i < 6; i++) {
		request(f.k, "POST", CM "/delay100", NULL, 5000, &c[i]);
		CHECK_INT(kube_room(f.k), i + 1 < 4 ? 4 - (i + 1) : 0);
	}
	run_until(f.base, &ended, 6, 5000, 100);
	for (int i = 0; i < 6; i++) {
		check_once(&c[i], "delayed");
		CHECK_INT(c[i].outcome, KUBE_OK);
	}
	CHECK_INT(f.peer.max_outstanding, 2);
	CHECK_INT(kube_room(f.k), 4);
	fixture_stop(&f);
}

TEST(kube_queue_sends_lists_then_mutations_then_reads_then_creates)
{
	struct fixture f;
	fixture_start(&f);
	kube_set_flow(f.k, 1, 1000, 1000);
	struct call c[5];
	request(f.k, "POST", CM, NULL, 5000, &c[0]);
	request(f.k, "GET", CM "/one", NULL, 5000, &c[1]);
	request(f.k, "DELETE", CM "/two", NULL, 5000, &c[2]);
	request(f.k, "GET", CM, NULL, 5000, &c[3]);
	request(f.k, "PATCH", CM "/three", NULL, 5000, &c[4]);
	run_until(f.base, &ended, 5, 5000, 0);
	static const char *const want[] = { "GET " CM, "DELETE " CM "/two", "PATCH " CM "/three",
					    "GET " CM "/one", "POST " CM };
	CHECK_INT(f.peer.nlog, 5);
	for (int i = 0; i < 5; i++)
		CHECK_STR(f.peer.log[i], want[i]);
	fixture_stop(&f);
}

TEST(kube_sends_are_paced_by_the_token_bucket)
{
	struct fixture f;
	fixture_start(&f);
	kube_set_flow(f.k, 32, 10, 1); /* one token every 100 ms, one at once */
	struct call c[3];
	int64_t t0 = clock_mono_ms();
	for (int i = 0; i < 3; i++)
		request(f.k, "GET", CM "/a", NULL, 5000, &c[i]);
	run_until(f.base, &ended, 3, 5000, 0);
	int64_t last = 0;
	for (int i = 0; i < 3; i++) {
		CHECK_INT(c[i].outcome, KUBE_OK);
		last = c[i].at_ms > last ? c[i].at_ms : last;
	}
	/* The first at once, the next two a token (100 ms) apart. */
	CHECKF(last - t0 >= 180, "three sends in %lld ms at 10 a second, burst 1",
	       (long long)(last - t0));
	fixture_stop(&f);
}

TEST(kube_time_out_counts_from_the_send_not_the_queue)
{
	struct fixture f;
	fixture_start(&f);
	kube_set_flow(f.k, 1, 1000, 1000);
	struct call slow, waiting;
	int64_t t0 = clock_mono_ms();
	request(f.k, "POST", CM "/delay900", NULL, 5000, &slow);
	/* Waits behind the slow one for about 900 ms, longer than its own 300 ms time-out. */
	request(f.k, "POST", CM "/s201", NULL, 300, &waiting);
	run_until(f.base, &ended, 2, 5000, 0);
	CHECK_INT(slow.outcome, KUBE_OK);
	CHECKF(waiting.outcome == KUBE_OK, "queued request: outcome %d (%s)", waiting.outcome,
	       waiting.reason);
	CHECK_INT(waiting.status, 201);
	CHECKF(waiting.at_ms - t0 >= 850, "the queued request ended after %lld ms: not queued",
	       (long long)(waiting.at_ms - t0));
	fixture_stop(&f);
}

TEST(kube_429_goes_back_in_the_queue_then_succeeds)
{
	struct fixture f;
	fixture_start(&f);
	f.peer.throttle = 2;
	struct call c;
	request(f.k, "POST", CM "/throttle", NULL, 5000, &c);
	run_until(f.base, &ended, 1, 10000, 200);
	check_once(&c, "throttled twice");
	CHECK_INT(c.outcome, KUBE_OK);
	CHECK_INT(c.status, 200);
	CHECK_INT(f.peer.received, 3);
	json_t *d = json_object();
	kube_describe(f.k, d);
	CHECK_INT(json_integer_value(json_object_get(d, "throttled_retries")), 2);
	json_decref(d);
	fixture_stop(&f);
}

struct room_watch {
	struct kube *k;
	int calls, in_call, room_at_call;
};

static void on_room(void *arg)
{
	struct room_watch *w = arg;
	w->calls++;
	w->in_call |= in_call;
	w->room_at_call = kube_room(w->k);
}

TEST(kube_room_watcher_fires_from_the_loop_when_room_comes_back)
{
	struct fixture f;
	fixture_start(&f);
	kube_set_flow(f.k, 1, 1000, 1000);
	struct room_watch w = { f.k, 0, 0, 0 };
	kube_on_room(f.k, on_room, &w);
	struct call c[3];
	for (int i = 0; i < 3; i++)
		request(f.k, "POST", CM "/delay50", NULL, 5000, &c[i]);
	CHECK_INT(kube_room(f.k), 0);
	CHECK_INT(w.calls, 0);
	run_until(f.base, &ended, 3, 5000, 100);
	CHECKF(w.calls >= 1, "the room watcher never fired");
	CHECK(!w.in_call);
	CHECKF(w.room_at_call > 0, "fired with no room");
	int before = w.calls;
	kube_on_room(f.k, NULL, NULL);
	request(f.k, "POST", CM "/s201", NULL, 5000, &c[0]);
	run_until(f.base, &ended, 4, 5000, 100);
	CHECK_INT(w.calls, before); /* cleared: no more calls */
	fixture_stop(&f);
}

/* ---- metrics ---- */

static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = strstr(text, line); p; p = strstr(p + 1, line))
		if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
			return 1;
	return 0;
}

TEST(kube_metrics_count_each_send_by_verb_and_code)
{
	struct fixture f;
	fixture_start(&f);
	f.peer.throttle = 1;
	struct call c[4];
	request(f.k, "POST", CM "/s201", NULL, 5000, &c[0]);
	request(f.k, "POST", CM "/throttle", NULL, 5000, &c[1]);
	request(f.k, "GET", CM "/s404", NULL, 5000, &c[2]);
	request(f.k, "DELETE", CM "/close", NULL, 5000, &c[3]);
	run_until(f.base, &ended, 4, 5000, 0);
	struct evbuffer *b = evbuffer_new();
	kube_metrics_write(f.k, b);
	evbuffer_add(b, "", 1);
	const char *text = (const char *)evbuffer_pullup(b, -1);
	static const char *const want[] = {
		"# TYPE gwb_kube_requests_total counter",
		"gwb_kube_requests_total{verb=\"create\",code=\"201\"} 1",
		"gwb_kube_requests_total{verb=\"create\",code=\"429\"} 1",
		"gwb_kube_requests_total{verb=\"create\",code=\"200\"} 1",
		"gwb_kube_requests_total{verb=\"get\",code=\"404\"} 1",
		"gwb_kube_requests_total{verb=\"delete\",code=\"error\"} 1",
		"gwb_kube_requests_inflight 0",
		"gwb_kube_request_queue_depth 0",
		"gwb_kube_throttled_retries_total 1",
		"# TYPE gwb_kube_request_duration_seconds histogram",
		"gwb_kube_request_duration_seconds_count 5",
		"gwb_kube_request_duration_seconds_bucket{le=\"+Inf\"} 5",
		"gwb_kube_request_queue_wait_seconds_count 5",
	};
	for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
		CHECKF(has_line(text, want[i]), "no line \"%s\" in:\n%s", want[i], text);
	evbuffer_free(b);
	fixture_stop(&f);
}

/* ---- a watch ---- */

struct watch_seen {
	int events, ends, in_call;
	char types[4][16];
	enum kube_outcome outcome;
};

static void on_event(void *arg, const char *type, json_t *object)
{
	struct watch_seen *s = arg;
	(void)object;
	if (s->events < 4)
		snprintf(s->types[s->events], sizeof s->types[0], "%s", type);
	s->events++;
	s->in_call |= in_call;
}

static void on_end(void *arg, const struct kube_result *res)
{
	struct watch_seen *s = arg;
	s->ends++;
	s->in_call |= in_call;
	s->outcome = res->outcome;
	ended++;
}

TEST(kube_watch_delivers_each_line_then_ends_once)
{
	struct fixture f;
	fixture_start(&f);
	struct watch_seen s;
	memset(&s, 0, sizeof s);
	in_call = 1;
	long id = kube_watch(f.k, CM "?watch=1", 4096, 5, on_event, on_end, &s);
	in_call = 0;
	CHECK(id > 0);
	CHECK_INT(s.events + s.ends, 0);
	run_until(f.base, &ended, 1, 5000, 200);
	CHECK_INT(s.events, 2);
	CHECK_STR(s.types[0], "ADDED");
	CHECK_STR(s.types[1], "MODIFIED");
	CHECK_INT(s.ends, 1);
	CHECK_INT(s.outcome, KUBE_OK);
	CHECK(!s.in_call);
	fixture_stop(&f);
}

TEST(kube_silent_watch_ends_unknown_after_its_idle_time)
{
	struct fixture f;
	fixture_start(&f);
	struct watch_seen s;
	memset(&s, 0, sizeof s);
	long id = kube_watch(f.k, CM "?watch=1&hang", 4096, 1, on_event, on_end, &s);
	CHECK(id > 0);
	run_until(f.base, &ended, 1, 5000, 200);
	CHECK_INT(s.events, 0);
	CHECK_INT(s.ends, 1);
	CHECK_INT(s.outcome, KUBE_UNKNOWN);
	fixture_stop(&f);
}

/* ---- text streams ---- */

struct stream_seen {
	char text[256];
	int calls, ends, in_call;
	enum kube_outcome outcome;
};

static void on_bytes(void *arg, const char *data, size_t len)
{
	struct stream_seen *s = arg;
	size_t have = strlen(s->text);
	snprintf(s->text + have, sizeof s->text - have, "%.*s", (int)len, data);
	s->calls++;
	s->in_call |= in_call;
}

static void on_stream_end(void *arg, const struct kube_result *res)
{
	struct stream_seen *s = arg;
	s->ends++;
	s->in_call |= in_call;
	s->outcome = res->outcome;
	ended++;
}

TEST(kube_stream_delivers_the_bytes_then_ends_once)
{
	for (int lr = 0; lr < 2; lr++) {
		struct fixture f;
		fixture_start(&f);
		struct stream_seen s;
		memset(&s, 0, sizeof s);
		in_call = 1;
		long id = kube_stream(f.k, "/api/v1/namespaces/ns/pods/p/log?tailLines=2", lr, 5000,
				      4096, on_bytes, on_stream_end, &s);
		in_call = 0;
		CHECK(id > 0);
		CHECK_INT(s.calls + s.ends, 0);
		run_until(f.base, &ended, 1, 5000, 200);
		CHECK_STR(s.text, "line one\nline two\n");
		CHECK(s.calls >= 1);
		CHECK_INT(s.ends, 1);
		CHECK_INT(s.outcome, KUBE_OK);
		CHECK(!s.in_call);
		CHECKF(strstr(f.peer.log[0], "/log?tailLines=2") != NULL, "%s", f.peer.log[0]);
		fixture_stop(&f);
	}
}

/* Followed streams have slots of their own: when they are all open one more is refused at
 * once, and requests still go out under max_inflight as if there were none. */
TEST(kube_long_running_streams_have_their_own_slots)
{
	struct fixture f;
	fixture_start(&f);
	kube_set_flow(f.k, 1, 1000, 1000);
	static struct stream_seen s[KUBE_STREAM_SLOTS];
	long ids[KUBE_STREAM_SLOTS];
	memset(s, 0, sizeof s);
	for (int i = 0; i < KUBE_STREAM_SLOTS; i++) {
		ids[i] = kube_stream(f.k, "/api/v1/namespaces/ns/pods/p/log?follow=true&hang", 1,
				     5000, 4096, on_bytes, on_stream_end, &s[i]);
		CHECKF(ids[i] > 0, "stream %d: %ld", i, ids[i]);
	}
	struct stream_seen extra;
	memset(&extra, 0, sizeof extra);
	CHECK(kube_stream(f.k, "/api/v1/namespaces/ns/pods/p/log?follow=true&hang", 1, 5000, 4096,
			  on_bytes, on_stream_end, &extra) < 0);
	CHECK_INT(kube_room(f.k), kube_window(f.k));
	struct call c;
	request(f.k, "GET", CM "/a", NULL, 5000, &c);
	run_until(f.base, &ended, 1, 5000, 100);
	check_once(&c, "a request beside the streams");
	CHECK_INT(c.outcome, KUBE_OK);
	int bytes = 0;
	for (int i = 0; i < KUBE_STREAM_SLOTS; i++)
		bytes += strcmp(s[i].text, "line one\nline two\n") == 0;
	CHECK_INT(bytes, KUBE_STREAM_SLOTS);
	/* A cancelled one gives its slot back, and never reports. */
	kube_cancel(f.k, ids[0]);
	run_until(f.base, &ended, 1, 0, 100);
	CHECK(kube_stream(f.k, "/api/v1/namespaces/ns/pods/p/log?follow=true&hang", 1, 5000, 4096,
			  on_bytes, on_stream_end, &extra) > 0);
	CHECK_INT(s[0].ends, 0);
	fixture_stop(&f);
}

/* ---- the four outcomes against kubesim ---- */

#define JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"

/* One request, run to its end. */
static void one(struct event_base *base, struct kube *k, const char *method, const char *path,
		const json_t *body, int timeout_ms, struct call *c)
{
	int before = ended;
	request(k, method, path, body, timeout_ms, c);
	run_until(base, &ended, before + 1, 10000, 50);
	check_once(c, path);
}

static void ks_faults(const struct h_kubesim *ks, const char *body)
{
	json_t *out = NULL;
	long st = h_kubesim_ctl(ks, body ? "PUT" : "DELETE", "/_kubesim/faults", body, &out);
	json_decref(out);
	CHECKF(st == 200, "kubesim faults %s: status %ld", body ? body : "cleared", st);
}

TEST_T(kube_outcomes_against_kubesim, 60)
{
	struct h_kubesim ks;
	h_kubesim_init(&ks);
	h_kubesim_start(&ks);
	ended = 0;
	in_call = 0;
	struct event_base *base = event_base_new();
	struct kube_auth a;
	memset(&a, 0, sizeof a);
	snprintf(a.server, sizeof a.server, "%s", ks.url);
	struct kube *k = NULL;
	char err[256];
	CHECKF(kube_new(&k, base, &a, err, sizeof err) == 0, "kube_new: %s", err);
	const char *env[] = { NULL };
	char *text = h_kubesim_gpu_job("kt-1", 1024, 25, env, 0, NULL);
	json_t *job = json_loads(text, 0, NULL);
	gwb_free(text);
	struct call c;

	one(base, k, "POST", JOBS, job, 5000, &c);
	CHECKF(c.outcome == KUBE_OK && c.status == 201, "create: %d %ld %s", c.outcome, c.status,
	       c.reason);
	CHECK_STR(c.body_kind, "Job");
	one(base, k, "POST", JOBS, job, 5000, &c);
	CHECKF(c.outcome == KUBE_REJECTED && c.status == 409, "create again: %d %ld", c.outcome,
	       c.status);
	CHECK_STR(c.reason, "AlreadyExists");
	one(base, k, "GET", JOBS "/absent", NULL, 5000, &c);
	CHECK_INT(c.outcome, KUBE_REJECTED);
	CHECK_STR(c.reason, "NotFound");

	/* 429 once: back in the queue, then done. */
	ks_faults(&ks, "{\"throttle\": {\"count\": 1, \"retry_after_s\": 0}}");
	one(base, k, "GET", JOBS "/kt-1", NULL, 5000, &c);
	CHECKF(c.outcome == KUBE_OK && c.status == 200, "after a 429: %d %ld", c.outcome, c.status);

	/* The create is done but its answer never comes: unknown, and the Job exists. */
	ks_faults(&ks, "{\"withhold_create\": {\"resource\": \"jobs\", \"count\": 1}}");
	json_object_set_new(json_object_get(job, "metadata"), "name", json_string("kt-2"));
	one(base, k, "POST", JOBS, job, 500, &c);
	CHECKF(c.outcome == KUBE_UNKNOWN && c.status == 0, "withheld create: %d %ld", c.outcome,
	       c.status);
	json_decref(h_kube_get(&ks, JOBS "/kt-2"));

	ks_faults(&ks, "{\"api\": \"hang\"}");
	one(base, k, "GET", JOBS "/kt-1", NULL, 300, &c);
	CHECKF(c.outcome == KUBE_UNKNOWN, "hung API: %d (%s)", c.outcome, c.reason);

	ks_faults(&ks, "{\"api\": \"refuse\"}");
	/* A fresh client: the hung one may keep a connection kubesim has not closed. */
	kube_free(k);
	CHECKF(kube_new(&k, base, &a, err, sizeof err) == 0, "kube_new: %s", err);
	one(base, k, "GET", JOBS "/kt-1", NULL, 2000, &c);
	CHECKF(c.outcome == KUBE_NOT_SENT, "refused: %d (%s)", c.outcome, c.reason);
	CHECK(!kube_reachable(k));

	ks_faults(&ks, NULL);
	one(base, k, "GET", JOBS "/kt-1", NULL, 5000, &c);
	CHECK_INT(c.outcome, KUBE_OK);
	CHECK(kube_reachable(k));
	json_decref(job);
	kube_free(k);
	event_base_free(base);
}

TEST(kube_query_escape_encodes_all_but_unreserved)
{
	char out[64];
	CHECK_STR(kube_query_escape("gwb.io/task=t-1,a b~_", out, sizeof out),
		  "gwb.io%2Ftask%3Dt-1%2Ca%20b~_");
}
