/* The queue's Redis pieces against a real redis-server on a Unix socket: command time-outs and
 * reconnection, the relay's batches and its trim that never drops an unacknowledged entry, and
 * the consumer's start-up order (own pending, then claimed, then new), retries and dead
 * letters. The test drives its own event loop; Redis is checked with synchronous hiredis. */
#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "queue/codec.h"
#include "queue/conn.h"
#include "queue/consumer.h"
#include "queue/relay.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

/* ---- a small loop driver ---- */

struct loop {
	struct event_base *base;
	struct event *tick;
	struct q_relay *relay;
	struct q_consumer *cons;
	int64_t fake_now; /* the wall clock handed to ticks: advances 10 s per tick */
};

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct loop *l = arg;
	l->fake_now += 10000;
	if (l->relay)
		q_relay_tick(l->relay, l->fake_now);
	if (l->cons)
		q_consumer_tick(l->cons, clock_mono_ms());
}

static void loop_init(struct loop *l)
{
	memset(l, 0, sizeof *l);
	l->base = event_base_new();
	l->tick = event_new(l->base, -1, EV_PERSIST, on_tick, l);
	struct timeval tv = { 0, 50000 };
	event_add(l->tick, &tv);
}

static void loop_free(struct loop *l)
{
	event_free(l->tick);
	event_base_free(l->base);
}

#define RUN_UNTIL(l, cond, ms, ...)                                          \
	do {                                                                 \
		int64_t ru_deadline_ = clock_mono_ms() + (ms);               \
		while (!(cond)) {                                            \
			if (clock_mono_ms() > ru_deadline_)                  \
				t_fail(__FILE__, __LINE__, __VA_ARGS__);     \
			event_base_loop((l)->base, EVLOOP_ONCE);             \
		}                                                            \
	} while (0)

static void rc_close(void *arg)
{
	redisFree(arg);
}

static redisContext *sync_open(const struct h_redis *r)
{
	redisContext *c = redisConnectUnix(r->sock);
	CHECKF(c && !c->err, "connect: %s", c ? c->errstr : "?");
	t_defer(rc_close, c);
	return c;
}

static long long rint_(redisContext *c, const char *cmd)
{
	redisReply *r = redisCommand(c, cmd);
	CHECK(r != NULL);
	long long v = r->type == REDIS_REPLY_INTEGER ? r->integer
		      : r->type == REDIS_REPLY_ARRAY && r->elements ? r->element[0]->integer
								     : -1;
	freeReplyObject(r);
	return v;
}

static struct q_intent intent_n(int64_t n)
{
	struct q_intent in;
	memset(&in, 0, sizeof in);
	in.id = n;
	snprintf(in.kind, sizeof in.kind, "create");
	snprintf(in.task, sizeof in.task, "t-%010lld", (long long)n);
	snprintf(in.job, sizeof in.job, "gwb-%s", in.task);
	snprintf(in.team, sizeof in.team, "alpha");
	in.attempt = 1;
	snprintf(in.name, sizeof in.name, "n");
	snprintf(in.qos, sizeof in.qos, "LS");
	snprintf(in.experiment, sizeof in.experiment, "normal");
	return in;
}

/* XADDs intent n with synchronous hiredis; returns its id in id (64 bytes). */
static void add_entry(redisContext *c, int64_t n, char *id)
{
	struct q_intent in = intent_n(n);
	char body[Q_BODY_MAX];
	size_t len;
	CHECK_INT(q_intent_encode(&in, body, sizeof body, &len), 0);
	redisReply *r = redisCommand(c, "XADD gwb:intents * kind create task %s job %s team alpha "
					"attempt 1 body %b",
				     in.task, in.job, body, len);
	CHECK(r && r->type == REDIS_REPLY_STRING);
	snprintf(id, 64, "%s", r->str);
	freeReplyObject(r);
}

/* ---- connection ---- */

struct cmd_result {
	int done;
	int had_reply;
	char err[160];
};

static void on_result(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	(void)c;
	struct cmd_result *r = arg;
	r->done = 1;
	r->had_reply = reply != NULL;
	snprintf(r->err, sizeof r->err, "%s", err ? err : "");
}

TEST_T(queue_conn_timeout_drops_then_reconnects, 30)
{
	struct h_redis r;
	h_redis_start(&r);
	struct loop l;
	loop_init(&l);
	struct q_addr a;
	char err[160];
	CHECK_INT(q_addr_parse(r.url, &a, err, sizeof err), 0);
	struct q_conn *c = q_conn_new(l.base, &a, "test", 200, NULL, NULL);
	struct cmd_result res = { 0 };
	const char *ping[] = { "PING" };
	CHECK_INT(q_conn_cmd(c, on_result, &res, 0, 1, ping, NULL), GWB_EUNAVAIL);
	q_conn_start(c);
	RUN_UNTIL(&l, q_conn_state(c) == Q_CONN_CONNECTED, 5000, "never connected");
	/* BLPOP blocks for 5 s: the 200 ms time-out must fire first. */
	const char *blpop[] = { "BLPOP", "nothing", "5" };
	CHECK_INT(q_conn_cmd(c, on_result, &res, 0, 3, blpop, NULL), 0);
	int64_t t0 = clock_mono_ms();
	RUN_UNTIL(&l, res.done, 3000, "the command never timed out");
	CHECK(!res.had_reply);
	CHECK_STR(res.err, "command timed out");
	CHECKF(clock_mono_ms() - t0 < 1500, "took %lld ms", (long long)(clock_mono_ms() - t0));
	CHECK_INT(q_conn_drops(c), 1);
	RUN_UNTIL(&l, q_conn_state(c) == Q_CONN_CONNECTED, 5000, "never reconnected");
	memset(&res, 0, sizeof res);
	CHECK_INT(q_conn_cmd(c, on_result, &res, 0, 1, ping, NULL), 0);
	RUN_UNTIL(&l, res.done, 2000, "no PONG");
	CHECK(res.had_reply);
	/* Freeing answers what is in flight with "closed". */
	memset(&res, 0, sizeof res);
	CHECK_INT(q_conn_cmd(c, on_result, &res, 0, 3, blpop, NULL), 0);
	q_conn_free(c);
	CHECK(res.done);
	CHECK_STR(res.err, "closed");
	loop_free(&l);
}

TEST_T(queue_conn_waits_for_redis_and_follows_restarts, 30)
{
	struct loop l;
	loop_init(&l);
	struct q_addr a;
	char err[160];
	char url[PATH_MAX + 16];
	snprintf(url, sizeof url, "unix://%s", h_path("redis.sock"));
	CHECK_INT(q_addr_parse(url, &a, err, sizeof err), 0);
	struct q_conn *c = q_conn_new(l.base, &a, "test", 500, NULL, NULL);
	q_conn_start(c);
	CHECK_STR(q_conn_state_name(q_conn_state(c)), "disconnected");
	CHECK(strstr(q_conn_last_error(c), "connect") != NULL);
	struct h_redis r;
	h_redis_start(&r); /* the same socket path */
	RUN_UNTIL(&l, q_conn_state(c) == Q_CONN_CONNECTED, 10000, "never connected");
	CHECK(h_proc_stop(&r.proc, SIGTERM, 5000) == 0);
	RUN_UNTIL(&l, q_conn_state(c) == Q_CONN_BACKOFF, 5000, "did not notice");
	h_redis_restart(&r);
	RUN_UNTIL(&l, q_conn_state(c) == Q_CONN_CONNECTED, 10000, "never reconnected");
	q_conn_free(c);
	loop_free(&l);
}

/* ---- relay ---- */

struct outbox {
	struct q_intent rows[200];
	char sids[200][Q_ID_MAX];
	int n;
	int fetches, records;
};

static int ob_fetch(void *arg, struct q_intent *out, int max)
{
	struct outbox *o = arg;
	int k = 0;
	o->fetches++;
	for (int i = 0; i < o->n && k < max; i++)
		if (!o->sids[i][0])
			out[k++] = o->rows[i];
	return k;
}

static int ob_published(void *arg, const int64_t *ids, const char (*sids)[Q_ID_MAX], int n)
{
	struct outbox *o = arg;
	o->records++;
	for (int i = 0; i < n; i++)
		snprintf(o->sids[ids[i] - 1], Q_ID_MAX, "%s", sids[i]);
	return 0;
}

static int ob_unpublished(const struct outbox *o)
{
	int k = 0;
	for (int i = 0; i < o->n; i++)
		k += !o->sids[i][0];
	return k;
}

TEST_T(queue_relay_batches_and_trim_keeps_unacked, 30)
{
	struct h_redis r;
	h_redis_start(&r);
	redisContext *sc = sync_open(&r);
	struct loop l;
	loop_init(&l);
	struct q_addr a;
	char err[160];
	CHECK_INT(q_addr_parse(r.url, &a, err, sizeof err), 0);
	struct q_conn *c = q_conn_new(l.base, &a, "relay", 2000, NULL, NULL);
	static struct outbox ob;
	memset(&ob, 0, sizeof ob);
	ob.n = 150;
	for (int i = 0; i < ob.n; i++)
		ob.rows[i] = intent_n(i + 1);
	struct q_keys keys;
	q_keys_init(&keys, "gwb");
	struct q_relay_ops ops = { ob_fetch, ob_published };
	struct q_relay *rel = q_relay_new(l.base, c, &keys, 5, &ops, &ob);
	l.relay = rel;
	q_conn_start(c);
	RUN_UNTIL(&l, q_conn_state(c) == Q_CONN_CONNECTED, 5000, "never connected");
	q_relay_kick(rel);
	RUN_UNTIL(&l, ob_unpublished(&ob) == 0, 5000, "%d left", ob_unpublished(&ob));
	CHECK_INT(ob.records, 3); /* 64 + 64 + 22: one record per pipelined batch */
	CHECK_INT(rint_(sc, "XLEN gwb:intents"), 150);
	/* Stream order is outbox order. */
	redisReply *x = redisCommand(sc, "XRANGE gwb:intents - + COUNT 1");
	CHECK_STR(x->element[0]->element[0]->str, ob.sids[0]);
	freeReplyObject(x);

	/* No group yet: nothing may be trimmed, however long the stream. */
	l.fake_now += 60000;
	q_relay_tick(rel, l.fake_now);
	for (int i = 0; i < 20; i++)
		event_base_loop(l.base, EVLOOP_ONCE);
	CHECK_INT(rint_(sc, "XLEN gwb:intents"), 150);

	/* Group: 100 delivered, of which the first 40 acknowledged; 50 never delivered. */
	freeReplyObject(redisCommand(sc, "XGROUP CREATE gwb:intents reconcilers 0"));
	freeReplyObject(redisCommand(sc, "XREADGROUP GROUP reconcilers x COUNT 100 STREAMS "
					 "gwb:intents >"));
	for (int i = 0; i < 40; i++)
		freeReplyObject(redisCommand(sc, "XACK gwb:intents reconcilers %s", ob.sids[i]));
	/* Trim steps until nothing moves: only the 40 acknowledged go. */
	for (int round = 0; round < 5; round++) {
		l.fake_now += 60000;
		q_relay_tick(rel, l.fake_now);
		for (int i = 0; i < 20; i++)
			event_base_loop(l.base, EVLOOP_NONBLOCK);
		h_sleep_ms(20);
		for (int i = 0; i < 20; i++)
			event_base_loop(l.base, EVLOOP_NONBLOCK);
	}
	CHECK_INT(rint_(sc, "XLEN gwb:intents"), 110);
	CHECK_INT(rint_(sc, "XPENDING gwb:intents reconcilers"), 60);
	x = redisCommand(sc, "XRANGE gwb:intents - + COUNT 1");
	CHECK_STR(x->element[0]->element[0]->str, ob.sids[40]);
	freeReplyObject(x);

	/* Everything read and acknowledged: trimmed towards maxlen (5), step by step. */
	freeReplyObject(redisCommand(sc, "XREADGROUP GROUP reconcilers x COUNT 100 STREAMS "
					 "gwb:intents >"));
	for (int i = 40; i < 150; i++)
		freeReplyObject(redisCommand(sc, "XACK gwb:intents reconcilers %s", ob.sids[i]));
	for (int round = 0; round < 5; round++) {
		l.fake_now += 60000;
		q_relay_tick(rel, l.fake_now);
		for (int i = 0; i < 20; i++)
			event_base_loop(l.base, EVLOOP_NONBLOCK);
		h_sleep_ms(20);
		for (int i = 0; i < 20; i++)
			event_base_loop(l.base, EVLOOP_NONBLOCK);
	}
	CHECK_INT(rint_(sc, "XLEN gwb:intents"), 5);
	struct q_relay_stats st;
	q_relay_stats(rel, &st);
	CHECK_INT(st.trimmed, 145);
	CHECK_INT(st.published, 150);
	q_conn_free(c);
	q_relay_free(rel);
	loop_free(&l);
}

/* ---- consumer ---- */

struct seen {
	char ids[32][64];
	int64_t counts[32];
	int n;
	enum q_outcome answer;
};

static void handler(void *arg, struct q_delivery *d)
{
	struct seen *s = arg;
	if (s->n < 32) {
		snprintf(s->ids[s->n], 64, "%s", q_delivery_id(d));
		s->counts[s->n] = q_delivery_count(d);
		s->n++;
	}
	q_delivery_done(d, s->answer, "handler said no");
}

static struct q_consumer *start_consumer(struct loop *l, const struct h_redis *r,
					 struct q_conn **cmd, struct q_conn **rd,
					 int64_t claim_idle, struct seen *s)
{
	struct q_addr a;
	char err[160];
	CHECK_INT(q_addr_parse(r->url, &a, err, sizeof err), 0);
	*cmd = q_conn_new(l->base, &a, "cmd", 2000, NULL, NULL);
	*rd = q_conn_new(l->base, &a, "rd", 2000, NULL, NULL);
	struct q_keys keys;
	q_keys_init(&keys, "gwb");
	struct q_consumer_cfg cfg = { "me", claim_idle, 100, 1000 };
	struct q_consumer *c = q_consumer_new(l->base, *cmd, *rd, &keys, &cfg, handler, s);
	l->cons = c;
	q_conn_start(*cmd);
	q_conn_start(*rd);
	RUN_UNTIL(l, q_conn_state(*cmd) == Q_CONN_CONNECTED && q_conn_state(*rd) ==
							 Q_CONN_CONNECTED,
		  5000, "never connected");
	q_consumer_on_conn(c);
	return c;
}

TEST_T(queue_consumer_own_pending_then_claimed_then_new, 30)
{
	struct h_redis r;
	h_redis_start(&r);
	redisContext *sc = sync_open(&r);
	freeReplyObject(redisCommand(sc, "XGROUP CREATE gwb:intents reconcilers 0 MKSTREAM"));
	char own[64], ghost[64], fresh[64];
	add_entry(sc, 1, own);
	freeReplyObject(redisCommand(sc, "XREADGROUP GROUP reconcilers me COUNT 1 STREAMS "
					 "gwb:intents >"));
	add_entry(sc, 2, ghost);
	freeReplyObject(redisCommand(sc, "XREADGROUP GROUP reconcilers ghost COUNT 1 STREAMS "
					 "gwb:intents >"));
	add_entry(sc, 3, fresh);
	h_sleep_ms(150); /* the ghost's entry is now idle longer than the claim time */

	struct loop l;
	loop_init(&l);
	static struct seen s;
	memset(&s, 0, sizeof s);
	s.answer = Q_ACK;
	struct q_conn *cmd, *rd;
	struct q_consumer *c = start_consumer(&l, &r, &cmd, &rd, 100, &s);
	RUN_UNTIL(&l, s.n == 3, 5000, "handled %d of 3", s.n);
	CHECK_STR(s.ids[0], own);
	CHECK_INT(s.counts[0], 2);
	CHECK_STR(s.ids[1], ghost);
	CHECK_INT(s.counts[1], 2);
	CHECK_STR(s.ids[2], fresh);
	CHECK_INT(s.counts[2], 1);
	RUN_UNTIL(&l, rint_(sc, "XPENDING gwb:intents reconcilers") == 0, 3000, "not acked");
	struct q_consumer_stats st;
	RUN_UNTIL(&l, (q_consumer_stats(c, &st), st.acked == 3), 3000, "acked %lld",
		  (long long)st.acked);
	CHECK_STR(q_consumer_state_name(st.state), "reading_new");
	/* Live: a new entry arrives while the read is blocked. */
	char later[64];
	add_entry(sc, 4, later);
	RUN_UNTIL(&l, s.n == 4, 3000, "live entry not handled");
	CHECK_STR(s.ids[3], later);
	q_conn_free(cmd);
	q_conn_free(rd);
	q_consumer_free(c);
	loop_free(&l);
}

TEST_T(queue_consumer_redeliveries_never_dead_letter, 30)
{
	struct h_redis r;
	h_redis_start(&r);
	redisContext *sc = sync_open(&r);
	struct loop l;
	loop_init(&l);
	static struct seen s;
	memset(&s, 0, sizeof s);
	s.answer = Q_RETRY;
	struct q_conn *cmd, *rd;
	struct q_consumer *c = start_consumer(&l, &r, &cmd, &rd, 100, &s);
	RUN_UNTIL(&l, rint_(sc, "EXISTS gwb:intents") == 1, 3000, "no MKSTREAM");
	char id[64];
	add_entry(sc, 7, id);
	/* Delivered, then again and again by the sweep: the count grows, nothing goes dead. */
	RUN_UNTIL(&l, s.n >= 6, 10000, "delivered %d times", s.n);
	for (int i = 0; i < 6; i++)
		CHECK_INT(s.counts[i], i + 1);
	CHECK_INT(rint_(sc, "XLEN gwb:intents:dead"), 0);
	/* The handler succeeds at last: acknowledged. */
	s.answer = Q_ACK;
	RUN_UNTIL(&l, rint_(sc, "XPENDING gwb:intents reconcilers") == 0, 5000, "not acked");
	CHECK_INT(rint_(sc, "XLEN gwb:intents:dead"), 0);

	/* Only a handler's own Q_DEAD makes a valid entry dead, with its reason. */
	s.answer = Q_DEAD;
	add_entry(sc, 8, id);
	RUN_UNTIL(&l, rint_(sc, "XLEN gwb:intents:dead") == 1, 5000, "not dead-lettered");
	redisReply *x;
	const redisReply *fv;
	x = redisCommand(sc, "XREVRANGE gwb:intents:dead + - COUNT 1");
	fv = x->element[0]->element[1];
	int found = 0;
	for (size_t i = 0; i + 1 < fv->elements; i += 2)
		found |= strcmp(fv->element[i]->str, "reason") == 0 &&
			 strcmp(fv->element[i + 1]->str, "handler said no") == 0;
	freeReplyObject(x);
	CHECK(found);
	q_conn_free(cmd);
	q_conn_free(rd);
	q_consumer_free(c);
	loop_free(&l);
}

/* Runs the loop for about ms (several of the consumer's blocking reads). */
static void run_for(struct loop *l, int64_t ms)
{
	int64_t end = clock_mono_ms() + ms;
	while (clock_mono_ms() < end)
		event_base_loop(l->base, EVLOOP_ONCE);
}

/* A handler that holds its deliveries, with a capacity the test sets. */
struct holder {
	struct q_delivery *held[64];
	int n;
	int capacity;
};

static void hold_handler(void *arg, struct q_delivery *d)
{
	struct holder *h = arg;
	CHECK(h->n < 64);
	h->held[h->n++] = d;
}

static int hold_capacity(void *arg)
{
	struct holder *h = arg;
	return h->capacity - h->n;
}

TEST_T(queue_consumer_takes_no_more_than_capacity, 30)
{
	struct h_redis r;
	h_redis_start(&r);
	redisContext *sc = sync_open(&r);
	freeReplyObject(redisCommand(sc, "XGROUP CREATE gwb:intents reconcilers 0 MKSTREAM"));
	char id[64];
	for (int i = 0; i < 20; i++)
		add_entry(sc, 100 + i, id);
	struct loop l;
	loop_init(&l);
	static struct holder h;
	memset(&h, 0, sizeof h);
	h.capacity = 3;
	struct q_addr a;
	char err[160];
	CHECK_INT(q_addr_parse(r.url, &a, err, sizeof err), 0);
	struct q_conn *cmd = q_conn_new(l.base, &a, "cmd", 2000, NULL, NULL);
	struct q_conn *rd = q_conn_new(l.base, &a, "rd", 2000, NULL, NULL);
	struct q_keys keys;
	q_keys_init(&keys, "gwb");
	struct q_consumer_cfg cfg = { "me", 60000, 50, 1000 };
	struct q_consumer *c = q_consumer_new(l.base, cmd, rd, &keys, &cfg, hold_handler, &h);
	q_consumer_set_capacity(c, hold_capacity, &h);
	l.cons = c;
	q_conn_start(cmd);
	q_conn_start(rd);
	RUN_UNTIL(&l, q_conn_state(cmd) == Q_CONN_CONNECTED && q_conn_state(rd) == Q_CONN_CONNECTED,
		  5000, "never connected");
	q_consumer_on_conn(c);
	struct q_consumer_stats st;
	RUN_UNTIL(&l, (q_consumer_stats(c, &st), st.state == Q_CONS_LIVE), 5000, "not live");
	RUN_UNTIL(&l, h.n == 3, 5000, "handed %d", h.n);
	/* Several blocking reads later, still 3 handed out and 3 pending: 17 wait as new. */
	run_for(&l, 300);
	CHECK_INT(h.n, 3);
	CHECK_INT(rint_(sc, "XPENDING gwb:intents reconcilers"), 3);
	/* Two answered and capacity up to 5 (held 1): up to 4 more, after a poke. */
	q_delivery_done(h.held[0], Q_ACK, NULL);
	q_delivery_done(h.held[1], Q_ACK, NULL);
	h.held[0] = h.held[2];
	h.n = 1;
	h.capacity = 5;
	q_consumer_poke(c);
	RUN_UNTIL(&l, h.n == 5, 5000, "handed %d", h.n);
	run_for(&l, 300);
	CHECK_INT(h.n, 5);
	RUN_UNTIL(&l, rint_(sc, "XPENDING gwb:intents reconcilers") == 5, 3000, "pending");
	for (int i = 0; i < h.n; i++)
		q_delivery_done(h.held[i], Q_ACK, NULL);
	h.n = 0;
	h.capacity = 64;
	q_consumer_poke(c);
	RUN_UNTIL(&l, h.n == 13, 5000, "handed %d of the last 13", h.n);
	for (int i = 0; i < h.n; i++)
		q_delivery_done(h.held[i], Q_ACK, NULL);
	RUN_UNTIL(&l, rint_(sc, "XPENDING gwb:intents reconcilers") == 0, 3000, "not acked");
	q_conn_free(cmd);
	q_conn_free(rd);
	q_consumer_free(c);
	loop_free(&l);
}

TEST_T(queue_consumer_recreates_group_after_redis_loses_it, 30)
{
	struct h_redis r;
	h_redis_start(&r);
	struct loop l;
	loop_init(&l);
	static struct seen s;
	memset(&s, 0, sizeof s);
	s.answer = Q_ACK;
	struct q_conn *cmd, *rd;
	struct q_consumer *c = start_consumer(&l, &r, &cmd, &rd, 1000, &s);
	redisContext *sc = sync_open(&r);
	RUN_UNTIL(&l, rint_(sc, "EXISTS gwb:intents") == 1, 3000, "no MKSTREAM");
	/* The stream and its group vanish under a live consumer (FLUSHALL, a failover...). */
	freeReplyObject(redisCommand(sc, "DEL gwb:intents"));
	char id[64];
	add_entry(sc, 9, id);
	RUN_UNTIL(&l, s.n == 1, 10000, "the entry after the loss was not handled");
	CHECK_STR(s.ids[0], id);
	q_conn_free(cmd);
	q_conn_free(rd);
	q_consumer_free(c);
	loop_free(&l);
}
