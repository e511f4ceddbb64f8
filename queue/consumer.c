/* The consumer-group reader: the start-up sequence (group, own pending, claim, new), the
 * periodic claim sweep, deliveries and their answers (XACK, dead-letter), and the in-flight
 * cap. One function, pump(), decides the next command from the state and the busy flags. */
#include "queue/consumer.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"

#define ID_MAX 48

struct q_delivery {
	struct q_consumer *c;
	char id[ID_MAX];
	int64_t count;
	struct q_intent in;
	int answered;
	struct q_delivery *next, *prev; /* in flight, or waiting to be freed */
};

/* A phase command's context: which restart it belongs to, so late answers are ignored. */
enum ckind { C_GROUP, C_OWN, C_CLAIM, C_COUNT, C_LIVE };
struct ccmd {
	struct q_consumer *c;
	uint64_t seq;
	enum ckind kind;
	int sweep; /* a claim (or its count) of the periodic sweep */
};

/* A dead-letter in progress: XACK follows a successful XADD. */
struct dcmd {
	struct q_consumer *c;
	char id[ID_MAX];
};

struct q_consumer {
	struct event_base *base;
	struct q_conn *cmd, *rd;
	struct q_keys keys;
	char name[128];
	int64_t claim_idle_ms, block_ms, dead_maxlen;
	q_handler_fn fn;
	void *arg;
	q_capacity_fn cap_fn;
	void *cap_arg;
	enum q_consumer_state state;
	uint64_t seq;          /* bumped on every restart */
	int cmd_busy;          /* a phase command is in flight on cmd */
	int read_busy;         /* a blocking read is in flight on rd */
	int sweep_due, sweeping;
	char cursor[ID_MAX];   /* own-pending or claim cursor */
	char sweep_cursor[ID_MAX];
	int64_t last_sweep_ms, retry_at_ms;
	/* An own-pending or claim batch waiting for its delivery counts. */
	struct q_delivery *batch[Q_READ_BATCH];
	int nbatch;
	struct q_delivery *inflight, *zombies;
	int ninflight;
	struct event *kick;
	int64_t delivered, acked, dead, retried, claimed, groups_created;
	char last_error[160];
};

const char *q_consumer_state_name(enum q_consumer_state s)
{
	switch (s) {
#define Q_CONS_NAME(id, str) \
	case Q_CONS_##id:    \
		return str;
		Q_CONSUMER_STATES(Q_CONS_NAME)
#undef Q_CONS_NAME
	}
	return "?";
}

static void pump(struct q_consumer *c);

static void set_state(struct q_consumer *c, enum q_consumer_state st)
{
	if (c->state == st)
		return;
	log_info("queue", "consumer_state", "consumer=%s from=%s to=%s", log_q(c->name),
		 q_consumer_state_name(c->state), q_consumer_state_name(st));
	c->state = st;
}

static void set_error(struct q_consumer *c, const char *what, const char *err)
{
	snprintf(c->last_error, sizeof c->last_error, "%s: %s", what, err ? err : "?");
	log_warn("queue", "consumer_error", "consumer=%s step=%s error=%s", log_q(c->name), what,
		 log_q(err));
}

/* ---- deliveries ---- */

static void list_remove(struct q_delivery **head, struct q_delivery *d)
{
	if (d->prev)
		d->prev->next = d->next;
	else
		*head = d->next;
	if (d->next)
		d->next->prev = d->prev;
	d->next = d->prev = NULL;
}

static void list_push(struct q_delivery **head, struct q_delivery *d)
{
	d->prev = NULL;
	d->next = *head;
	if (*head)
		(*head)->prev = d;
	*head = d;
}

static int is_inflight(const struct q_consumer *c, const char *id)
{
	for (const struct q_delivery *d = c->inflight; d; d = d->next)
		if (strcmp(d->id, id) == 0)
			return 1;
	for (int i = 0; i < c->nbatch; i++)
		if (strcmp(c->batch[i]->id, id) == 0)
			return 1;
	return 0;
}

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct q_consumer *c = arg;
	/* The safe point: answered deliveries are freed here, outside any callback. */
	while (c->zombies) {
		struct q_delivery *d = c->zombies;
		list_remove(&c->zombies, d);
		gwb_free(d);
	}
	pump(c);
}

static void kick(struct q_consumer *c)
{
	static const struct timeval zero = { 0, 0 };
	if (!evtimer_pending(c->kick, NULL))
		evtimer_add(c->kick, &zero);
}

const struct q_intent *q_delivery_intent(const struct q_delivery *d)
{
	return &d->in;
}

const char *q_delivery_id(const struct q_delivery *d)
{
	return d->id;
}

int64_t q_delivery_count(const struct q_delivery *d)
{
	return d->count;
}

static void on_ack(struct q_conn *cn, const redisReply *reply, const char *err, void *arg)
{
	(void)cn;
	struct q_consumer *c = arg;
	if (reply && reply->type == REDIS_REPLY_INTEGER)
		c->acked += reply->integer;
	else
		set_error(c, "XACK", err); /* it stays pending and comes back: harmless */
}

static void send_ack(struct q_consumer *c, const char *id)
{
	const char *argv[] = { "XACK", c->keys.stream, Q_GROUP, id };
	if (q_conn_cmd(c->cmd, on_ack, c, 0, 4, argv, NULL))
		log_warn("queue", "ack_deferred", "id=%s reason=%s", id, "redis unavailable");
}

static void on_dead_xadd(struct q_conn *cn, const redisReply *reply, const char *err, void *arg)
{
	(void)cn;
	struct dcmd *dc = arg;
	struct q_consumer *c = dc->c;
	if (q_reply_is_str(reply)) {
		c->dead++;
		send_ack(c, dc->id);
	} else {
		set_error(c, "dead-letter XADD", err);
	}
	gwb_free(dc);
}

/* Adds an entry to the dead-letter stream: our fields, then the original ones (nfields
 * name/value pairs in f/flen), then acknowledges it once the XADD succeeded. */
static void dead_letter(struct q_consumer *c, const char *id, int64_t count, const char *reason,
			const char **f, const size_t *flen, int nfields)
{
	const char *argv[16 + Q_ENTRY_MAX_FIELDS];
	size_t lens[16 + Q_ENTRY_MAX_FIELDS];
	char maxlen[24], deliveries[24], at[24];
	snprintf(maxlen, sizeof maxlen, "%" PRId64, c->dead_maxlen);
	snprintf(deliveries, sizeof deliveries, "%" PRId64, count);
	snprintf(at, sizeof at, "%" PRId64, clock_now_ms());
	const char *head[] = { "XADD",	     c->keys.dead, "MAXLEN",	 "~",	     maxlen,
			       "*",	     "source_id",  id,		 "reason",   reason,
			       "deliveries", deliveries,   "consumer",	 c->name,    "dead_at",
			       at };
	int n = 0;
	for (; n < (int)(sizeof head / sizeof head[0]); n++) {
		argv[n] = head[n];
		lens[n] = strlen(head[n]);
	}
	for (int i = 0; i < nfields && i < Q_ENTRY_MAX_FIELDS; i++) {
		argv[n] = f[i];
		lens[n++] = flen[i];
	}
	struct dcmd *dc = gwb_calloc(1, sizeof *dc);
	dc->c = c;
	snprintf(dc->id, sizeof dc->id, "%s", id);
	log_warn("queue", "dead_lettered", "id=%s deliveries=%" PRId64 " reason=%s", id, count,
		 log_q(reason));
	if (q_conn_cmd(c->cmd, on_dead_xadd, dc, 0, n, argv, lens)) {
		set_error(c, "dead-letter", "redis unavailable");
		gwb_free(dc);
	}
}

static void dead_letter_intent(struct q_consumer *c, const char *id, int64_t count,
			       const struct q_intent *in, const char *reason)
{
	char body[Q_BODY_MAX], attempt[24];
	size_t blen = 0;
	if (q_intent_encode(in, body, sizeof body, &blen))
		blen = 0;
	snprintf(attempt, sizeof attempt, "%" PRId64, in->attempt);
	const char *f[] = { "kind", in->kind, "task", in->task, "job",	   in->job,
			    "team", in->team, "attempt", attempt, "body", body };
	size_t flen[12];
	for (int i = 0; i < 11; i++)
		flen[i] = strlen(f[i]);
	flen[11] = blen;
	dead_letter(c, id, count, reason, f, flen, 12);
}

void q_delivery_done(struct q_delivery *d, enum q_outcome o, const char *reason)
{
	struct q_consumer *c = d->c;
	if (d->answered)
		return;
	d->answered = 1;
	list_remove(&c->inflight, d);
	c->ninflight--;
	if (o == Q_ACK)
		send_ack(c, d->id);
	else if (o == Q_DEAD)
		dead_letter_intent(c, d->id, d->count, &d->in, reason ? reason : "rejected");
	else
		c->retried++;
	list_push(&c->zombies, d);
	kick(c);
}

/* ---- reading entries ---- */

static const char *field_value(const redisReply *fv, const char *name, size_t *len)
{
	for (size_t i = 0; i + 1 < fv->elements; i += 2) {
		const redisReply *k = fv->element[i], *v = fv->element[i + 1];
		if (q_reply_is_str(k) && q_reply_is_str(v) && strcmp(k->str, name) == 0) {
			*len = v->len;
			return v->str;
		}
	}
	return NULL;
}

/* Parses one entry's fields into d->in. 0, or GWB_EPROTO with the reason. */
static int parse_entry(const redisReply *fv, struct q_intent *in, char *why, size_t whylen)
{
	if (fv->type != REDIS_REPLY_ARRAY || fv->elements % 2 ||
	    fv->elements > 2 * Q_ENTRY_MAX_FIELDS) {
		snprintf(why, whylen, "malformed entry: not 1 to %d field pairs", Q_ENTRY_MAX_FIELDS);
		return GWB_EPROTO;
	}
	size_t blen;
	const char *body = field_value(fv, "body", &blen);
	if (!body) {
		snprintf(why, whylen, "malformed entry: no body field");
		return GWB_EPROTO;
	}
	char err[160];
	if (q_intent_decode(body, blen, in, err, sizeof err)) {
		snprintf(why, whylen, "malformed body: %s", err);
		return GWB_EPROTO;
	}
	/* The readable fields are for people, the body for programs: they must agree. */
	static const char *const names[] = { "kind", "task", "team" };
	const char *vals[] = { in->kind, in->task, in->team };
	for (int i = 0; i < 3; i++) {
		size_t vl;
		const char *v = field_value(fv, names[i], &vl);
		if (!v || vl != strlen(vals[i]) || memcmp(v, vals[i], vl) != 0) {
			snprintf(why, whylen, "malformed entry: field %s disagrees with the body",
				 names[i]);
			return GWB_EPROTO;
		}
	}
	return 0;
}

static void dead_letter_raw(struct q_consumer *c, const char *id, const redisReply *fv,
			    const char *reason)
{
	const char *f[Q_ENTRY_MAX_FIELDS];
	size_t flen[Q_ENTRY_MAX_FIELDS];
	int n = 0;
	for (size_t i = 0; fv && fv->type == REDIS_REPLY_ARRAY && i + 1 < fv->elements &&
			   n + 2 <= Q_ENTRY_MAX_FIELDS; i += 2) {
		const redisReply *k = fv->element[i], *v = fv->element[i + 1];
		if (!q_reply_is_str(k) || !q_reply_is_str(v))
			continue;
		/* Original values are kept whole only up to a cap: the reason is what matters. */
		f[n] = k->str;
		flen[n++] = k->len > Q_FIELD_MAX ? Q_FIELD_MAX : k->len;
		f[n] = v->str;
		flen[n++] = v->len > Q_BODY_MAX ? Q_BODY_MAX : v->len;
	}
	dead_letter(c, id, 1, reason, f, flen, n);
}

/* Turns one [id, fields] entry into a delivery (NULL when it was handled on the spot:
 * deleted, malformed, or already in flight). count is 0 when not known yet. */
static struct q_delivery *take_entry(struct q_consumer *c, const redisReply *e, int64_t count)
{
	const redisReply *id = q_reply_elem(e, 0), *fv = q_reply_elem(e, 1);
	if (!q_reply_is_str(id) || id->len >= ID_MAX)
		return NULL;
	if (is_inflight(c, id->str))
		return NULL;
	if (!fv || fv->type == REDIS_REPLY_NIL) {
		/* Deleted (trimmed) while pending: there is nothing left to act on. */
		send_ack(c, id->str);
		return NULL;
	}
	struct q_delivery *d = gwb_calloc(1, sizeof *d);
	d->c = c;
	d->count = count;
	snprintf(d->id, sizeof d->id, "%s", id->str);
	char why[240];
	if (parse_entry(fv, &d->in, why, sizeof why)) {
		/* A poison entry can never succeed: dead-letter it now, with the reason. */
		dead_letter_raw(c, id->str, fv, why);
		gwb_free(d);
		return NULL;
	}
	return d;
}

/* Hands a delivery to the handler. However often it was delivered (a restart, a claim), a
 * valid entry goes to the handler: only the handler's own failures make it dead. */
static void dispatch(struct q_consumer *c, struct q_delivery *d)
{
	c->delivered++;
	if (c->ninflight >= Q_INFLIGHT_MAX) {
		/* A live read and a sweep can both be answered at the cap; the extra entry stays
		 * pending and comes back with a later sweep. */
		gwb_free(d);
		return;
	}
	list_push(&c->inflight, d);
	c->ninflight++;
	c->fn(c->arg, d); /* may answer d at once; d is not touched after this */
}

/* The entries array of a one-stream XREADGROUP reply [[key, entries]], or NULL. */
static const redisReply *xread_entries(const redisReply *r)
{
	return q_reply_elem(q_reply_elem(r, 0), 1);
}

/* ---- commands ---- */

static struct ccmd *ccmd_new(struct q_consumer *c, enum ckind kind, int sweep)
{
	struct ccmd *k = gwb_calloc(1, sizeof *k);
	k->c = c;
	k->seq = c->seq;
	k->kind = kind;
	k->sweep = sweep;
	return k;
}

/* After a failed phase command: NOGROUP (Redis lost the stream) restarts at the group step;
 * anything else waits for the next tick. */
static void phase_failed(struct q_consumer *c, const redisReply *reply, const char *what,
			 const char *err)
{
	set_error(c, what, err);
	if (q_reply_is_error(reply, "NOGROUP")) {
		c->seq++;
		c->cmd_busy = c->read_busy = c->sweeping = 0;
		set_state(c, Q_CONS_GROUP);
		kick(c);
		return;
	}
	c->retry_at_ms = clock_mono_ms() + 1000;
}

static void on_phase(struct q_conn *cn, const redisReply *reply, const char *err, void *arg);

static int send_phase(struct q_consumer *c, struct q_conn *cn, enum ckind kind, int sweep,
		      int64_t extra_ms, int argc, const char **argv)
{
	struct ccmd *k = ccmd_new(c, kind, sweep);
	if (q_conn_cmd(cn, on_phase, k, extra_ms, argc, argv, NULL)) {
		gwb_free(k);
		return -1;
	}
	return 0;
}

/* Asks for the delivery counts of the batch (own entries or claimed ones). */
static void send_count(struct q_consumer *c, int sweep)
{
	char cnt[16];
	snprintf(cnt, sizeof cnt, "%d", Q_READ_BATCH + Q_INFLIGHT_MAX);
	const char *argv[] = { "XPENDING", c->keys.stream, Q_GROUP, c->batch[0]->id,
			       c->batch[c->nbatch - 1]->id, cnt, c->name };
	if (send_phase(c, c->cmd, C_COUNT, sweep, 0, 7, argv) < 0) {
		c->cmd_busy = 0; /* the batch is dropped: it stays pending and is read again */
		for (int i = 0; i < c->nbatch; i++)
			gwb_free(c->batch[i]);
		c->nbatch = 0;
	}
}

static void collect_batch(struct q_consumer *c, const redisReply *entries)
{
	for (size_t i = 0; entries && entries->type == REDIS_REPLY_ARRAY && i < entries->elements;
	     i++) {
		struct q_delivery *d = take_entry(c, entries->element[i], 0);
		if (d && c->nbatch < Q_READ_BATCH)
			c->batch[c->nbatch++] = d;
		else
			gwb_free(d);
	}
}

static void on_counts(struct q_consumer *c, const redisReply *reply)
{
	/* Extended XPENDING: [[id, consumer, idle, deliveries], ...]. */
	for (int i = 0; i < c->nbatch; i++) {
		struct q_delivery *d = c->batch[i];
		for (size_t j = 0; reply && reply->type == REDIS_REPLY_ARRAY && j < reply->elements;
		     j++) {
			const redisReply *id = q_reply_elem(reply->element[j], 0);
			const redisReply *n = q_reply_elem(reply->element[j], 3);
			if (q_reply_is_str(id) && strcmp(id->str, d->id) == 0 && n &&
			    n->type == REDIS_REPLY_INTEGER)
				d->count = n->integer;
		}
	}
	int n = c->nbatch;
	c->nbatch = 0;
	for (int i = 0; i < n; i++) {
		if (c->batch[i]->count == 0) {
			/* No longer ours (acknowledged or claimed meanwhile). */
			gwb_free(c->batch[i]);
			continue;
		}
		dispatch(c, c->batch[i]);
	}
}

static void phase_answer(struct q_consumer *c, struct ccmd *k, const redisReply *reply,
			 const char *err)
{
	switch (k->kind) {
	case C_GROUP:
		c->cmd_busy = 0;
		if (!q_reply_is_str(reply) && !q_reply_is_error(reply, "BUSYGROUP"))
			return phase_failed(c, reply, "XGROUP CREATE", err);
		if (q_reply_is_str(reply))
			c->groups_created++;
		snprintf(c->cursor, sizeof c->cursor, "0");
		set_state(c, Q_CONS_OWN);
		return;
	case C_OWN: {
		if (!reply || reply->type == REDIS_REPLY_ERROR) {
			c->cmd_busy = 0;
			return phase_failed(c, reply, "XREADGROUP own", err);
		}
		const redisReply *entries = xread_entries(reply);
		if (!entries || entries->elements == 0) {
			c->cmd_busy = 0;
			snprintf(c->cursor, sizeof c->cursor, "0-0");
			set_state(c, Q_CONS_CLAIM);
			return;
		}
		const redisReply *last = q_reply_elem(entries->element[entries->elements - 1], 0);
		if (q_reply_is_str(last))
			snprintf(c->cursor, sizeof c->cursor, "%s", last->str);
		collect_batch(c, entries);
		if (c->nbatch)
			send_count(c, 0);
		else
			c->cmd_busy = 0;
		return;
	}
	case C_CLAIM: {
		/* [next cursor, entries, deleted ids] (Redis 7; 6.2 has no third part). */
		const redisReply *next = q_reply_elem(reply, 0);
		if (!q_reply_is_str(next)) {
			c->cmd_busy = 0;
			c->sweeping = 0;
			return phase_failed(c, reply, "XAUTOCLAIM", err);
		}
		char *cur = k->sweep ? c->sweep_cursor : c->cursor;
		snprintf(cur, ID_MAX, "%s", next->str);
		const redisReply *entries = q_reply_elem(reply, 1);
		if (entries && entries->elements)
			c->claimed += (int64_t)entries->elements;
		collect_batch(c, entries);
		if (c->nbatch)
			send_count(c, k->sweep);
		else
			c->cmd_busy = 0;
		if (strcmp(cur, "0-0") == 0 && !c->nbatch) {
			if (k->sweep)
				c->sweeping = 0;
			else
				set_state(c, Q_CONS_LIVE);
		}
		return;
	}
	case C_COUNT: {
		c->cmd_busy = 0;
		on_counts(c, reply && reply->type == REDIS_REPLY_ARRAY ? reply : NULL);
		const char *cur = k->sweep ? c->sweep_cursor : c->cursor;
		if ((k->sweep || c->state == Q_CONS_CLAIM) && strcmp(cur, "0-0") == 0) {
			if (k->sweep)
				c->sweeping = 0;
			else
				set_state(c, Q_CONS_LIVE);
		}
		return;
	}
	case C_LIVE:
		c->read_busy = 0;
		if (reply && reply->type == REDIS_REPLY_NIL)
			return; /* BLOCK ran out with nothing new */
		if (!reply || reply->type == REDIS_REPLY_ERROR)
			return phase_failed(c, reply, "XREADGROUP new", err);
		return;
	}
}

static void on_phase(struct q_conn *cn, const redisReply *reply, const char *err, void *arg)
{
	(void)cn;
	struct ccmd *k = arg;
	struct q_consumer *c = k->c;
	if (k->kind == C_LIVE && reply && reply->type == REDIS_REPLY_ARRAY) {
		/* New entries are ours now, even if the consumer restarted meanwhile: hand them
		 * out (count 1: a ">" read is always the first delivery). */
		const redisReply *entries = xread_entries(reply);
		for (size_t i = 0; entries && i < entries->elements; i++) {
			struct q_delivery *d = take_entry(c, entries->element[i], 1);
			if (d)
				dispatch(c, d);
		}
	}
	if (k->seq == c->seq && c->state != Q_CONS_CLOSED)
		phase_answer(c, k, reply, err);
	gwb_free(k);
	kick(c);
}

static void send_claim(struct q_consumer *c, int sweep, int count)
{
	char idle[24], cnt[16];
	snprintf(idle, sizeof idle, "%" PRId64, c->claim_idle_ms);
	snprintf(cnt, sizeof cnt, "%d", count);
	const char *argv[] = { "XAUTOCLAIM", c->keys.stream, Q_GROUP, c->name, idle,
			       sweep ? c->sweep_cursor : c->cursor, "COUNT", cnt };
	if (send_phase(c, c->cmd, C_CLAIM, sweep, 0, 8, argv) == 0)
		c->cmd_busy = 1;
}

/* Decides and sends the next command. Called at the loop's safe point and from ticks. */
static void pump(struct q_consumer *c)
{
	if (c->state == Q_CONS_CLOSED || c->state == Q_CONS_WAITING)
		return;
	if (c->retry_at_ms && clock_mono_ms() < c->retry_at_ms)
		return;
	c->retry_at_ms = 0;
	int room = Q_INFLIGHT_MAX - c->ninflight;
	if (c->cap_fn) {
		int cap = c->cap_fn(c->cap_arg);
		if (cap < room)
			room = cap;
	}
	/* Every read asks for at most room entries: the rest wait in the stream. */
	int batch = room < Q_READ_BATCH ? room : Q_READ_BATCH;
	char cnt[16];
	if (!c->cmd_busy) {
		if (c->state == Q_CONS_GROUP) {
			const char *argv[] = { "XGROUP", "CREATE", c->keys.stream, Q_GROUP, "0",
					       "MKSTREAM" };
			/* "0": a group made after entries were added (or after Redis lost its
			 * data and the relay published again) must still deliver them. */
			if (send_phase(c, c->cmd, C_GROUP, 0, 0, 6, argv) == 0)
				c->cmd_busy = 1;
		} else if (c->state == Q_CONS_OWN && batch > 0) {
			snprintf(cnt, sizeof cnt, "%d", batch);
			const char *argv[] = { "XREADGROUP", "GROUP", Q_GROUP, c->name, "COUNT",
					       cnt, "STREAMS", c->keys.stream, c->cursor };
			if (send_phase(c, c->cmd, C_OWN, 0, 0, 9, argv) == 0)
				c->cmd_busy = 1;
		} else if (c->state == Q_CONS_CLAIM && batch > 0) {
			send_claim(c, 0, batch);
		} else if (c->state == Q_CONS_LIVE && c->sweep_due && batch > 0) {
			c->sweep_due = 0;
			c->sweeping = 1;
			snprintf(c->sweep_cursor, sizeof c->sweep_cursor, "0-0");
			send_claim(c, 1, batch);
		} else if (c->state == Q_CONS_LIVE && c->sweeping && batch > 0) {
			send_claim(c, 1, batch);
		}
	}
	if (c->state == Q_CONS_LIVE && !c->read_busy && batch > 0) {
		snprintf(cnt, sizeof cnt, "%d", batch);
		char block[24];
		snprintf(block, sizeof block, "%" PRId64, c->block_ms);
		const char *argv[] = { "XREADGROUP", "GROUP", Q_GROUP, c->name, "COUNT", cnt,
				       "BLOCK", block, "STREAMS", c->keys.stream, ">" };
		if (send_phase(c, c->rd, C_LIVE, 0, c->block_ms, 11, argv) == 0)
			c->read_busy = 1;
	}
}

/* ---- life cycle ---- */

struct q_consumer *q_consumer_new(struct event_base *base, struct q_conn *cmd, struct q_conn *rd,
				  const struct q_keys *keys, const struct q_consumer_cfg *cfg,
				  q_handler_fn fn, void *arg)
{
	struct q_consumer *c = gwb_calloc(1, sizeof *c);
	c->base = base;
	c->cmd = cmd;
	c->rd = rd;
	c->keys = *keys;
	snprintf(c->name, sizeof c->name, "%s", cfg->consumer);
	c->claim_idle_ms = cfg->claim_idle_ms;
	c->block_ms = cfg->block_ms;
	c->dead_maxlen = cfg->dead_maxlen;
	c->fn = fn;
	c->arg = arg;
	c->state = Q_CONS_WAITING;
	c->kick = evtimer_new(base, on_kick, c);
	return c;
}

void q_consumer_free(struct q_consumer *c)
{
	if (!c)
		return;
	c->state = Q_CONS_CLOSED;
	for (int i = 0; i < c->nbatch; i++)
		gwb_free(c->batch[i]);
	struct q_delivery **lists[] = { &c->inflight, &c->zombies };
	for (int i = 0; i < 2; i++) {
		while (*lists[i]) {
			struct q_delivery *d = *lists[i];
			list_remove(lists[i], d);
			gwb_free(d);
		}
	}
	event_free(c->kick);
	gwb_free(c);
}

void q_consumer_set_capacity(struct q_consumer *c, q_capacity_fn fn, void *arg)
{
	c->cap_fn = fn;
	c->cap_arg = arg;
}

void q_consumer_poke(struct q_consumer *c)
{
	if (c->state != Q_CONS_CLOSED)
		kick(c);
}

void q_consumer_on_conn(struct q_consumer *c)
{
	if (c->state == Q_CONS_CLOSED)
		return;
	int up = q_conn_state(c->cmd) == Q_CONN_CONNECTED && q_conn_state(c->rd) == Q_CONN_CONNECTED;
	if (!up) {
		if (c->state != Q_CONS_WAITING) {
			c->seq++;
			c->cmd_busy = c->read_busy = c->sweeping = 0;
			for (int i = 0; i < c->nbatch; i++)
				gwb_free(c->batch[i]);
			c->nbatch = 0;
			set_state(c, Q_CONS_WAITING);
		}
		return;
	}
	if (c->state == Q_CONS_WAITING) {
		/* After every reconnection the whole start-up sequence runs again: Redis may
		 * have restarted, and our own pending entries are re-read first. */
		c->seq++;
		c->cmd_busy = c->read_busy = c->sweeping = 0;
		set_state(c, Q_CONS_GROUP);
		kick(c);
	}
}

void q_consumer_tick(struct q_consumer *c, int64_t now_ms)
{
	if (c->state == Q_CONS_CLOSED)
		return;
	/* Sweep about twice per idle period, so an abandoned entry waits at most ~1.5x it. */
	int64_t every = c->claim_idle_ms / 2;
	if (c->state == Q_CONS_LIVE && !c->sweeping && now_ms - c->last_sweep_ms >= every) {
		c->last_sweep_ms = now_ms;
		c->sweep_due = 1;
	}
	pump(c);
}

void q_consumer_stats(const struct q_consumer *c, struct q_consumer_stats *st)
{
	st->state = c->state;
	st->inflight = c->ninflight;
	st->delivered = c->delivered;
	st->acked = c->acked;
	st->dead = c->dead;
	st->retried = c->retried;
	st->claimed = c->claimed;
	st->groups_created = c->groups_created;
	st->last_error = c->last_error;
}
