/* One asynchronous Redis connection: URL parsing, the connection state machine with
 * reconnection back-off, the handshake, and command time-outs on our own timer. */
#include "queue/conn.h"

#include <errno.h>
#include <hiredis/adapters/libevent.h>
#include <hiredis/async.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/addr.h"
#include "lib/alloc.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"

/* Reconnection back-off (lib/backoff.h: doubling, jittered, capped): short enough that a
 * restarted Redis is found within seconds, long enough not to spin on a dead one. */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 5000

/* One command in flight. Commands on one connection are answered in the order they were
 * sent, so the list head is the one whose answer comes next. */
struct q_cmd {
	struct q_conn *conn;
	q_reply_fn fn;
	void *arg;
	uint64_t gen;          /* the hiredis context it was sent on */
	int64_t budget_ms;     /* time allowed once it is at the head */
	int64_t deadline_ms;   /* monotonic */
	struct q_cmd *next, *prev;
};

struct q_conn {
	struct event_base *base;
	struct q_addr addr;
	char name[32];
	int64_t timeout_ms;
	q_state_fn state_fn;
	void *state_arg;
	enum q_conn_state state;
	redisAsyncContext *ac;   /* NULL unless CONNECTING or CONNECTED */
	uint64_t gen;            /* bumped for every new hiredis context */
	struct event *timer;     /* command deadline, or the reconnect back-off */
	struct q_cmd *head, *tail;
	int ninflight;
	struct backoff backoff;
	int64_t drops;
	char last_error[160];
};

const char *q_conn_state_name(enum q_conn_state s)
{
	switch (s) {
#define Q_CONN_NAME(id, str) \
	case Q_CONN_##id:    \
		return str;
		Q_CONN_STATES(Q_CONN_NAME)
#undef Q_CONN_NAME
	}
	return "?";
}

int q_addr_parse(const char *url, struct q_addr *a, char *err, size_t errlen)
{
	struct addr x;
	memset(a, 0, sizeof *a);
	if (addr_parse(url, ADDR_F_REDIS | ADDR_F_UNIX, &x, err, errlen) < 0)
		return GWB_EINVAL;
	a->is_unix = x.kind == ADDR_UNIX;
	/* addr_parse bounds the socket path below sizeof a->path and the host to 255 bytes. */
	snprintf(a->path, sizeof a->path, "%s", a->is_unix ? x.path : "");
	snprintf(a->host, sizeof a->host, "%s", x.host);
	a->port = x.port;
	a->db = x.db;
	return 0;
}

static void set_state(struct q_conn *c, enum q_conn_state st)
{
	if (c->state == st)
		return;
	enum q_conn_state prev = c->state;
	log_info("queue", "redis_state", "conn=%s from=%s to=%s error=%s", c->name,
		 q_conn_state_name(prev), q_conn_state_name(st),
		 log_q(st == Q_CONN_BACKOFF ? c->last_error : ""));
	c->state = st;
	/* Users care about "usable" and "no longer usable". */
	if (c->state_fn && (st == Q_CONN_CONNECTED || prev == Q_CONN_CONNECTED))
		c->state_fn(c, st, c->state_arg);
}

static void arm_timer(struct q_conn *c, int64_t at_mono)
{
	int64_t left = at_mono - clock_mono_ms();
	if (left < 0)
		left = 0;
	struct timeval tv = { (time_t)(left / 1000), (suseconds_t)((left % 1000) * 1000) };
	evtimer_add(c->timer, &tv);
}

/* Re-arms the deadline timer for the head command (or stops it). */
static void arm_deadline(struct q_conn *c)
{
	if (c->head)
		arm_timer(c, c->head->deadline_ms);
	else
		evtimer_del(c->timer);
}

static void unlink_cmd(struct q_conn *c, struct q_cmd *q)
{
	int was_head = c->head == q;
	if (q->prev)
		q->prev->next = q->next;
	else
		c->head = q->next;
	if (q->next)
		q->next->prev = q->prev;
	else
		c->tail = q->prev;
	c->ninflight--;
	/* The next command's clock starts when the one before it is answered. */
	if (was_head && c->head) {
		int64_t from_now = clock_mono_ms() + c->head->budget_ms;
		if (c->head->deadline_ms < from_now)
			c->head->deadline_ms = from_now;
	}
}

static void conn_lost(struct q_conn *c, const char *why, int free_ctx);

/* hiredis' callback for every command: unlinks it, then calls the user's callback. */
static void on_reply(redisAsyncContext *ac, void *r, void *privdata)
{
	struct q_cmd *q = privdata;
	struct q_conn *c = q->conn;
	const redisReply *reply = r;
	unlink_cmd(c, q);
	const char *err = NULL;
	if (!reply)
		err = c->state == Q_CONN_CLOSED ? "closed"
		      : c->last_error[0] && q->gen != c->gen ? c->last_error
		      : ac->errstr[0]			     ? ac->errstr
							     : "connection lost";
	else if (reply->type == REDIS_REPLY_ERROR)
		err = reply->str;
	if (c->ac == ac)
		arm_deadline(c);
	q->fn(c, reply, err, q->arg);
	gwb_free(q);
	/* hiredis answers NULL only while it frees the context (a read or write error): the
	 * connection is gone even if its disconnect callback comes later or not at all. */
	if (!reply && c->ac == ac)
		conn_lost(c, err, 0);
}

static void schedule_reconnect(struct q_conn *c)
{
	arm_timer(c, clock_mono_ms() + backoff_next(&c->backoff));
}

/* The connection is gone (or must go): forgets the context, fails what was in flight
 * (through hiredis' own clean-up; when free_ctx, by freeing the context here, which hiredis
 * defers to the end of its callback when called from one), and schedules the reconnection. */
static void conn_lost(struct q_conn *c, const char *why, int free_ctx)
{
	if (!c->ac)
		return;
	redisAsyncContext *ac = c->ac;
	c->ac = NULL;
	c->gen++;
	c->drops++;
	snprintf(c->last_error, sizeof c->last_error, "%s", why);
	enum q_conn_state prev = c->state;
	c->state = Q_CONN_BACKOFF; /* q_conn_cmd refuses while the old commands fail */
	if (free_ctx)
		redisAsyncFree(ac); /* runs the pending callbacks with a NULL reply */
	c->state = prev;
	set_state(c, Q_CONN_BACKOFF);
	if (c->state == Q_CONN_BACKOFF)
		schedule_reconnect(c);
}

static void on_connect(const redisAsyncContext *ac, int status)
{
	struct q_conn *c = ac->data;
	if (status == REDIS_OK || c->ac != ac)
		return;
	/* hiredis frees the context after this returns: do not free it again. */
	conn_lost(c, ac->errstr[0] ? ac->errstr : "connect failed", 0);
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
	(void)status;
	struct q_conn *c = ac->data;
	if (c->ac != ac)
		return; /* we dropped it ourselves */
	conn_lost(c, ac->errstr[0] ? ac->errstr : "connection closed by the server", 0);
}

static int send_cmd(struct q_conn *c, q_reply_fn fn, void *arg, int64_t extra_ms, int argc,
		    const char **argv, const size_t *lens)
{
	struct q_cmd *q = gwb_calloc(1, sizeof *q);
	q->conn = c;
	q->fn = fn;
	q->arg = arg;
	q->gen = c->gen;
	q->budget_ms = c->timeout_ms + extra_ms;
	q->deadline_ms = clock_mono_ms() + q->budget_ms;
	q->prev = c->tail;
	if (c->tail)
		c->tail->next = q;
	else
		c->head = q;
	c->tail = q;
	c->ninflight++;
	if (redisAsyncCommandArgv(c->ac, on_reply, q, argc, argv, lens) != REDIS_OK) {
		unlink_cmd(c, q);
		gwb_free(q);
		return GWB_EUNAVAIL;
	}
	if (c->head == q)
		arm_deadline(c);
	return 0;
}

static void on_handshake(struct q_conn *c, const redisReply *r, const char *err, void *arg)
{
	uint64_t gen = (uint64_t)(uintptr_t)arg;
	if (gen != c->gen || c->state != Q_CONN_CONNECTING)
		return;
	if (!r)
		return; /* hiredis is dropping the context; on_reply handles it */
	if (r->type == REDIS_REPLY_ERROR) {
		char why[200];
		snprintf(why, sizeof why, "handshake: %s", err ? err : "failed");
		conn_lost(c, why, 1);
		return;
	}
	backoff_reset(&c->backoff);
	c->last_error[0] = '\0';
	set_state(c, Q_CONN_CONNECTED);
}

static void connect_now(struct q_conn *c)
{
	redisAsyncContext *ac = c->addr.is_unix ? redisAsyncConnectUnix(c->addr.path)
						: redisAsyncConnect(c->addr.host, c->addr.port);
	if (!ac || ac->err) {
		/* Refused at once (no socket file, say): nothing was registered yet. */
		snprintf(c->last_error, sizeof c->last_error, "connect: %s",
			 ac ? ac->errstr : "out of memory");
		if (ac)
			redisAsyncFree(ac);
		set_state(c, Q_CONN_BACKOFF);
		if (c->state == Q_CONN_BACKOFF)
			schedule_reconnect(c);
		return;
	}
	c->gen++;
	c->ac = ac;
	ac->data = c;
	redisLibeventAttach(ac, c->base);
	redisAsyncSetConnectCallback(ac, on_connect);
	redisAsyncSetDisconnectCallback(ac, on_disconnect);
	set_state(c, Q_CONN_CONNECTING);
	/* hiredis queues commands until the socket is connected; the handshake's answer is the
	 * proof that Redis is serving (not loading, not refusing us). */
	char db[16];
	snprintf(db, sizeof db, "%d", c->addr.db);
	const char *sel[] = { "SELECT", db };
	const char *ping[] = { "PING" };
	int rc = c->addr.db ? send_cmd(c, on_handshake, (void *)(uintptr_t)c->gen, 0, 2, sel, NULL)
			    : send_cmd(c, on_handshake, (void *)(uintptr_t)c->gen, 0, 1, ping, NULL);
	if (rc)
		conn_lost(c, "cannot send the handshake", 1);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct q_conn *c = arg;
	if (c->state == Q_CONN_BACKOFF) {
		connect_now(c);
		return;
	}
	if (c->head && clock_mono_ms() >= c->head->deadline_ms) {
		log_warn("queue", "redis_timeout", "conn=%s inflight=%d timeout_ms=%lld", c->name,
			 c->ninflight, (long long)c->head->budget_ms);
		conn_lost(c, "command timed out", 1);
		return;
	}
	arm_deadline(c);
}

struct q_conn *q_conn_new(struct event_base *base, const struct q_addr *addr, const char *name,
			  int64_t timeout_ms, q_state_fn fn, void *arg)
{
	struct q_conn *c = gwb_calloc(1, sizeof *c);
	c->base = base;
	c->addr = *addr;
	snprintf(c->name, sizeof c->name, "%s", name);
	c->timeout_ms = timeout_ms;
	c->state_fn = fn;
	c->state_arg = arg;
	c->state = Q_CONN_IDLE;
	c->timer = evtimer_new(base, on_timer, c);
	/* Seeded per connection and per process, so that servers losing one Redis together do
	 * not come back in step. */
	backoff_init(&c->backoff, BACKOFF_FIRST_MS, BACKOFF_MAX_MS,
		     (uint64_t)(uintptr_t)c ^ (uint64_t)clock_now_ms() ^ ((uint64_t)getpid() << 32));
	return c;
}

void q_conn_start(struct q_conn *c)
{
	if (c->state == Q_CONN_IDLE)
		connect_now(c);
}

void q_conn_free(struct q_conn *c)
{
	if (!c)
		return;
	c->state = Q_CONN_CLOSED;
	if (c->ac) {
		redisAsyncContext *ac = c->ac;
		c->ac = NULL;
		c->gen++;
		redisAsyncFree(ac); /* fails every command in flight with "closed" */
	}
	event_free(c->timer);
	gwb_free(c);
}

int q_conn_cmd(struct q_conn *c, q_reply_fn fn, void *arg, int64_t extra_ms, int argc,
	       const char **argv, const size_t *lens)
{
	if (c->state != Q_CONN_CONNECTED || !c->ac)
		return GWB_EUNAVAIL;
	return send_cmd(c, fn, arg, extra_ms, argc, argv, lens);
}

enum q_conn_state q_conn_state(const struct q_conn *c)
{
	return c->state;
}

const char *q_conn_last_error(const struct q_conn *c)
{
	return c->last_error;
}

int q_conn_inflight(const struct q_conn *c)
{
	return c->ninflight;
}

int64_t q_conn_drops(const struct q_conn *c)
{
	return c->drops;
}

const redisReply *q_reply_elem(const redisReply *r, size_t i)
{
	if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
		return NULL;
	return r->element[i];
}

int q_reply_is_str(const redisReply *r)
{
	return r && (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS);
}

int q_reply_is_error(const redisReply *r, const char *prefix)
{
	return r && r->type == REDIS_REPLY_ERROR && r->str &&
	       strncmp(r->str, prefix, strlen(prefix)) == 0;
}
