/* Job intents in gwb-server: the relay's store callbacks, the consumer's handler (built-in or
 * plugged in), group commit of received intents at the loop's safe point, housekeeping and
 * the /readyz entry. */
#include "server/intents.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "queue/consumer.h"
#include "queue/relay.h"

struct held {
	struct q_delivery *d;
	int64_t ready_ms; /* monotonic */
};

struct intents {
	struct intents_ctx c;
	char url[CONFIG_STR_MAX];
	struct q_keys keys;
	char consumer[128];
	struct q_conn *pub, *sub;
	struct q_relay *relay;
	struct q_consumer *cons;
	intents_handler_fn fn;
	void *fn_arg;
	/* Deliveries for the built-in handler, recorded together at the next safe point. */
	struct held held[Q_INFLIGHT_MAX];
	int nheld;
	struct event *flush;
	struct plug *plugs; /* intents held by a plugged-in handler */
	int nplugs;
	intents_capacity_fn cap_fn;
	void *cap_arg;
	intents_lost_fn lost_fn;
	void *lost_arg;
	int64_t groups_seen; /* the consumer's groups_created already told */
};

/* ---- relay <-> store ---- */

static int relay_fetch(void *arg, struct q_intent *out, int max)
{
	struct intents *it = arg;
	return store_outbox_unpublished(it->c.store, out, max);
}

static int relay_published(void *arg, const int64_t *ids, const char (*sids)[Q_ID_MAX], int n)
{
	struct intents *it = arg;
	return store_outbox_published(it->c.store, ids, sids, n, clock_now_ms());
}

static void on_outbox_insert(void *arg)
{
	struct intents *it = arg;
	q_relay_kick(it->relay); /* runs at the next loop turn, after the commit */
}

/* ---- the built-in handler: group commit ---- */

static void rx_of(struct intents *it, struct q_delivery *d, struct intent_rx *rx)
{
	const struct q_intent *in = q_delivery_intent(d);
	rx->intent_id = in->id;
	rx->kind = in->kind;
	rx->task = in->task;
	rx->stream_id = q_delivery_id(d);
	rx->consumer = it->consumer;
	rx->deliveries = q_delivery_count(d);
}

static void schedule_flush(struct intents *it)
{
	if (!it->nheld)
		return;
	int64_t first = it->held[0].ready_ms;
	for (int i = 1; i < it->nheld; i++)
		if (it->held[i].ready_ms < first)
			first = it->held[i].ready_ms;
	int64_t left = first - clock_mono_ms();
	if (left < 0)
		left = 0;
	struct timeval tv = { (time_t)(left / 1000), (suseconds_t)((left % 1000) * 1000) };
	evtimer_add(it->flush, &tv);
}

/* Records every held delivery that is due, in one transaction, then answers them. */
static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct intents *it = arg;
	int64_t now = clock_mono_ms();
	struct q_delivery *due[Q_INFLIGHT_MAX];
	struct intent_rx rx[Q_INFLIGHT_MAX];
	int results[Q_INFLIGHT_MAX];
	int n = 0, keep = 0;
	for (int i = 0; i < it->nheld; i++) {
		if (it->held[i].ready_ms <= now)
			due[n++] = it->held[i].d;
		else
			it->held[keep++] = it->held[i];
	}
	it->nheld = keep;
	for (int i = 0; i < n; i++)
		rx_of(it, due[i], &rx[i]);
	int rc = n ? store_intents_receive(it->c.store, rx, n, clock_now_ms(), results) : 0;
	for (int i = 0; i < n; i++) {
		char why[96];
		if (rc) {
			q_delivery_done(due[i], Q_RETRY, NULL);
		} else if (results[i] == GWB_ENOTFOUND) {
			snprintf(why, sizeof why, "no such task: %s", rx[i].task);
			q_delivery_done(due[i], Q_DEAD, why);
		} else {
			if (results[i] == 1)
				log_info("intents", "duplicate_intent", "intent=%" PRId64 " task=%s",
					 rx[i].intent_id, rx[i].task);
			q_delivery_done(due[i], Q_ACK, NULL);
		}
	}
	if (rc)
		log_warn("intents", "record_failed", "count=%d error=%s db=%s", n, err_name(rc),
			 log_q(store_errmsg(it->c.store)));
	else if (n)
		log_debug("intents", "recorded", "count=%d", n);
	schedule_flush(it);
}

/* ---- a plugged-in handler ---- */

struct plug {
	struct intents *it;
	struct q_delivery *d;
	struct plug *next, *prev; /* handed out, not yet answered */
};

static void plug_unlink(struct intents *it, struct plug *p)
{
	it->nplugs--;
	if (p->prev)
		p->prev->next = p->next;
	else
		it->plugs = p->next;
	if (p->next)
		p->next->prev = p->prev;
}

/* The handler failed on a valid intent: the attempt is counted in SQLite, and only past
 * queue.max_failures counted attempts is the intent dead. An attempt that cannot even be
 * counted (the database is away) is not held against it. */
static void plug_failed(struct intents *it, struct q_delivery *d, int rc)
{
	struct intent_rx rx;
	rx_of(it, d, &rx);
	int64_t failures = 0;
	int64_t max = it->c.cfg->queue_max_failures;
	int src = store_intent_failure_add(it->c.store, &rx, err_name(rc), clock_now_ms(),
					   &failures);
	log_warn("intents", "handling_failed", "intent=%" PRId64 " task=%s error=%s failures=%" PRId64
		 " counted=%d",
		 rx.intent_id, rx.task, err_name(rc), failures, src == 0);
	if (src == 0 && failures >= max) {
		char why[128];
		snprintf(why, sizeof why, "handling failed %" PRId64 " times (max %" PRId64 "): %s",
			 failures, max, err_name(rc));
		q_delivery_done(d, Q_DEAD, why);
		return;
	}
	q_delivery_done(d, Q_RETRY, NULL);
}

static void plug_done(void *ctx, int rc)
{
	struct plug *p = ctx;
	struct intents *it = p->it;
	plug_unlink(it, p);
	if (rc == 0) {
		struct intent_rx rx;
		rx_of(it, p->d, &rx);
		if (store_intent_outcome_add(it->c.store, &rx, "handled", clock_now_ms()))
			log_warn("intents", "outcome_not_recorded", "intent=%" PRId64,
				 rx.intent_id); /* a redelivery asks the handler again */
		q_delivery_done(p->d, Q_ACK, NULL);
	} else if (rc == GWB_ENOTFOUND) {
		q_delivery_done(p->d, Q_DEAD, "no such task");
	} else {
		plug_failed(it, p->d, rc);
	}
	gwb_free(p);
}

static void on_delivery(void *arg, struct q_delivery *d)
{
	struct intents *it = arg;
	const struct q_intent *in = q_delivery_intent(d);
	log_debug("intents", "delivery", "id=%s intent=%" PRId64 " kind=%s task=%s deliveries=%" PRId64,
		  q_delivery_id(d), in->id, in->kind, in->task, q_delivery_count(d));
	if (!it->fn) {
		/* The consumer never has more than Q_INFLIGHT_MAX deliveries out; checked anyway,
		 * since overrunning held[] would corrupt memory. */
		if (it->nheld == Q_INFLIGHT_MAX)
			return q_delivery_done(d, Q_RETRY, NULL);
		int64_t delay = it->c.cfg->queue_handler_delay_ms;
		it->held[it->nheld].d = d;
		it->held[it->nheld].ready_ms = clock_mono_ms() + delay;
		it->nheld++;
		schedule_flush(it);
		return;
	}
	int seen = store_intent_outcome_exists(it->c.store, in->id);
	if (seen == 1)
		return q_delivery_done(d, Q_ACK, NULL);
	if (seen < 0)
		return q_delivery_done(d, Q_RETRY, NULL);
	struct plug *p = gwb_calloc(1, sizeof *p);
	p->it = it;
	p->d = d;
	p->next = it->plugs;
	if (it->plugs)
		it->plugs->prev = p;
	it->plugs = p;
	it->nplugs++;
	it->fn(it->fn_arg, in, plug_done, p);
}

void intents_set_handler(struct intents *it, intents_handler_fn fn, void *arg)
{
	it->fn = fn;
	it->fn_arg = arg;
}

static int consumer_capacity(void *arg)
{
	struct intents *it = arg;
	return it->cap_fn(it->cap_arg, it->nplugs);
}

void intents_set_capacity(struct intents *it, intents_capacity_fn fn, void *arg)
{
	it->cap_fn = fn;
	it->cap_arg = arg;
	q_consumer_set_capacity(it->cons, fn ? consumer_capacity : NULL, it);
}

void intents_poke(struct intents *it)
{
	if (it)
		q_consumer_poke(it->cons);
}

int64_t intents_dead_lettered(const struct intents *it)
{
	struct q_consumer_stats cs;
	q_consumer_stats(it->cons, &cs);
	return cs.dead;
}

/* ---- loop wiring ---- */

static void on_conn_state(struct q_conn *c, enum q_conn_state st, void *arg)
{
	(void)c;
	struct intents *it = arg;
	if (st == Q_CONN_CONNECTED)
		q_relay_kick(it->relay);
	q_consumer_on_conn(it->cons);
}

void intents_on_lost(struct intents *it, intents_lost_fn fn, void *arg)
{
	it->lost_fn = fn;
	it->lost_arg = arg;
}

static void on_cron(void *arg, int64_t now_ms)
{
	struct intents *it = arg;
	q_relay_tick(it->relay, now_ms);
	q_consumer_tick(it->cons, now_ms);
	/* A group made anew means the stream did not exist: at the first start of a queue, or
	 * after Redis lost its data. Either way no intent published before now will come. */
	struct q_consumer_stats cs;
	q_consumer_stats(it->cons, &cs);
	if (cs.groups_created != it->groups_seen) {
		/* A warning only when this server had the group before: a first start makes it
		 * as a matter of course. */
		if (it->groups_seen)
			log_warn("intents", "stream_lost",
				 "stream=%s detail=%s", log_q(it->keys.stream),
				 log_q("Redis lost the stream; queued tasks are taken without "
				       "their intents"));
		else
			log_info("intents", "group_created", "stream=%s", log_q(it->keys.stream));
		it->groups_seen = cs.groups_created;
		if (it->lost_fn)
			it->lost_fn(it->lost_arg, clock_now_ms());
	}
}

static const char *on_health(void *arg, json_t *detail, int *ready)
{
	struct intents *it = arg;
	/* Submissions do not need Redis (the outbox holds intents until it is back), so a
	 * disconnected Redis is reported but does not make the server unready. */
	(void)ready;
	enum q_conn_state a = q_conn_state(it->pub), b = q_conn_state(it->sub);
	const char *state = a == Q_CONN_CONNECTED && b == Q_CONN_CONNECTED ? "connected"
			    : a == Q_CONN_CONNECTED				? q_conn_state_name(b)
										: q_conn_state_name(a);
	struct q_relay_stats rs;
	struct q_consumer_stats cs;
	q_relay_stats(it->relay, &rs);
	q_consumer_stats(it->cons, &cs);
	int64_t unpublished = -1;
	store_outbox_unpublished_count(it->c.store, &unpublished);
	const char *err = q_conn_last_error(it->pub)[0]	  ? q_conn_last_error(it->pub)
			  : q_conn_last_error(it->sub)[0] ? q_conn_last_error(it->sub)
			  : cs.last_error[0]		  ? cs.last_error
							  : rs.last_error;
	json_object_set_new(detail, "url", json_string(it->url));
	json_object_set_new(detail, "stream", json_string(it->keys.stream));
	json_object_set_new(detail, "group", json_string(Q_GROUP));
	json_object_set_new(detail, "consumer", json_string(it->consumer));
	json_object_set_new(detail, "consumer_state", json_string(q_consumer_state_name(cs.state)));
	json_object_set_new(detail, "outbox_unpublished", json_integer(unpublished));
	json_object_set_new(detail, "published", json_integer(rs.published));
	json_object_set_new(detail, "delivered", json_integer(cs.delivered));
	json_object_set_new(detail, "acknowledged", json_integer(cs.acked));
	json_object_set_new(detail, "dead_lettered", json_integer(cs.dead));
	json_object_set_new(detail, "in_flight", json_integer(cs.inflight));
	json_object_set_new(detail, "last_error", err[0] ? json_string(err) : json_null());
	return state;
}

/* A consumer name stable for this instance: the host, and a hash of the database path (two
 * servers on one host have two databases). */
static void default_consumer(const char *db, char *out, size_t len)
{
	char host[64] = "host";
	if (gethostname(host, sizeof host) < 0)
		snprintf(host, sizeof host, "host");
	host[sizeof host - 1] = '\0';
	char path[CONFIG_STR_MAX * 2];
	char *abs = realpath(db, NULL);
	snprintf(path, sizeof path, "%s", abs ? abs : db);
	free(abs); /* banned-ok: realpath allocates with the C library */
	uint32_t h = 2166136261u; /* FNV-1a */
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 16777619u;
	snprintf(out, len, "%s-%08x", host, h);
}

int intents_start(struct intents **out, const struct intents_ctx *ctx, char *err, size_t errlen)
{
	const struct gwb_config *cfg = ctx->cfg;
	*out = NULL;
	if (!cfg->redis[0])
		return 0;
	struct q_addr addr;
	char why[160];
	if (q_addr_parse(cfg->redis, &addr, why, sizeof why)) {
		snprintf(err, errlen, "redis: %s", why);
		return GWB_EINVAL;
	}
	struct intents *it = gwb_calloc(1, sizeof *it);
	it->c = *ctx;
	snprintf(it->url, sizeof it->url, "%s", cfg->redis);
	q_keys_init(&it->keys, cfg->queue_prefix);
	if (cfg->queue_consumer[0])
		snprintf(it->consumer, sizeof it->consumer, "%s", cfg->queue_consumer);
	else
		default_consumer(cfg->db, it->consumer, sizeof it->consumer);
	it->pub = q_conn_new(ctx->base, &addr, "commands", cfg->queue_command_timeout_ms,
			     on_conn_state, it);
	it->sub = q_conn_new(ctx->base, &addr, "reads", cfg->queue_command_timeout_ms,
			     on_conn_state, it);
	struct q_relay_ops ops = { relay_fetch, relay_published };
	it->relay = q_relay_new(ctx->base, it->pub, &it->keys, cfg->queue_stream_maxlen, &ops, it);
	struct q_consumer_cfg cc = { it->consumer, cfg->queue_claim_idle_ms, cfg->queue_block_ms,
				     cfg->queue_stream_maxlen };
	it->cons = q_consumer_new(ctx->base, it->pub, it->sub, &it->keys, &cc, on_delivery, it);
	it->flush = evtimer_new(ctx->base, on_flush, it);
	const struct server_hooks *h = &ctx->hooks;
	if (h->cron_add(h->host, on_cron, it) || h->health_add(h->host, "redis", on_health, it)) {
		snprintf(err, errlen, "redis: no room for another housekeeping or health entry");
		intents_stop(it);
		return GWB_ETOOBIG;
	}
	store_outbox_watch(ctx->store, on_outbox_insert, it);
	*out = it;
	log_info("intents", "started", "redis=%s stream=%s consumer=%s", log_q(cfg->redis),
		 it->keys.stream, log_q(it->consumer));
	q_conn_start(it->pub);
	q_conn_start(it->sub);
	return 0;
}

void intents_stop(struct intents *it)
{
	if (!it)
		return;
	store_outbox_watch(it->c.store, NULL, NULL);
	/* Held deliveries are simply forgotten: unacknowledged, they are handled after the
	 * restart. The connections go first (their commands answer into the relay and the
	 * consumer), then the relay and the consumer. */
	it->nheld = 0;
	while (it->plugs) {
		struct plug *p = it->plugs;
		plug_unlink(it, p);
		gwb_free(p);
	}
	event_free(it->flush);
	q_conn_free(it->pub);
	q_conn_free(it->sub);
	q_relay_free(it->relay);
	q_consumer_free(it->cons);
	gwb_free(it);
}
