/* The outbox relay: batches of pipelined XADDs, stream ids reported back to the outbox, and
 * the safe trim (XTRIM MINID below the oldest entry the group still owes an XACK for). */
#include "queue/relay.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"

/* A trim step at most this often: trimming is bookkeeping, not urgent. */
#define TRIM_EVERY_MS 5000

struct slot {
	struct q_relay *r;
	int i;
};

struct q_relay {
	struct event_base *base;
	struct q_conn *conn;
	struct q_keys keys;
	int64_t maxlen;
	struct q_relay_ops ops;
	void *arg;
	struct event *kick;
	/* The batch in flight: XADDs sent, answers counted. */
	int busy;
	int n, answered;
	struct q_intent items[Q_RELAY_BATCH];
	struct slot slots[Q_RELAY_BATCH];
	int ok[Q_RELAY_BATCH];
	char sids[Q_RELAY_BATCH][Q_ID_MAX];
	/* Published and not yet recorded (kept across rounds until the store takes them). */
	int nrec;
	int64_t rec_ids[Q_RELAY_BATCH];
	char rec_sids[Q_RELAY_BATCH][Q_ID_MAX];
	/* Trim state: the answers of one pipelined XLEN / XINFO GROUPS / XPENDING round. */
	int trim_busy;
	int64_t trim_last_ms;
	long long t_len;
	int t_group;                 /* the group exists */
	struct q_id t_delivered;     /* its last-delivered-id */
	int t_has_pending;
	struct q_id t_pending_min;
	int64_t published, failed, trimmed;
	char last_error[160];
	/* Records the store refused in a row (a full disk refuses every one until space
	 * returns), and when that was last logged: one line per RECORD_LOG_MS, not per try. */
	int64_t record_failures, record_logged_ms;
};

#define RECORD_LOG_MS 10000

static void relay_run(struct q_relay *r);

static void on_kick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	relay_run(arg);
}

struct q_relay *q_relay_new(struct event_base *base, struct q_conn *conn,
			    const struct q_keys *keys, int64_t maxlen,
			    const struct q_relay_ops *ops, void *arg)
{
	struct q_relay *r = gwb_calloc(1, sizeof *r);
	r->base = base;
	r->conn = conn;
	r->keys = *keys;
	r->maxlen = maxlen;
	r->ops = *ops;
	r->arg = arg;
	r->kick = evtimer_new(base, on_kick, r);
	for (int i = 0; i < Q_RELAY_BATCH; i++) {
		r->slots[i].r = r;
		r->slots[i].i = i;
	}
	return r;
}

void q_relay_free(struct q_relay *r)
{
	if (!r)
		return;
	event_free(r->kick);
	gwb_free(r);
}

void q_relay_kick(struct q_relay *r)
{
	static const struct timeval zero = { 0, 0 };
	if (!evtimer_pending(r->kick, NULL))
		evtimer_add(r->kick, &zero);
}

static void set_error(struct q_relay *r, const char *what, const char *err)
{
	snprintf(r->last_error, sizeof r->last_error, "%s: %s", what, err ? err : "?");
}

/* Hands the published ids to the store. Returns 0 when nothing is left to record. */
static int record(struct q_relay *r)
{
	if (!r->nrec)
		return 0;
	int rc = r->ops.published(r->arg, r->rec_ids, (const char(*)[Q_ID_MAX])r->rec_sids,
				  r->nrec);
	if (rc) {
		set_error(r, "record", err_str(rc));
		int64_t now = clock_mono_ms();
		if (r->record_failures++ == 0 || now - r->record_logged_ms >= RECORD_LOG_MS) {
			log_warn("queue", "relay_record_failed",
				 "count=%d error=%s failures_in_a_row=%lld", r->nrec, err_name(rc),
				 (long long)r->record_failures);
			r->record_logged_ms = now;
		}
		return rc;
	}
	if (r->record_failures) {
		log_info("queue", "relay_record_recovered", "failures_in_a_row=%lld",
			 (long long)r->record_failures);
		r->record_failures = 0;
	}
	r->nrec = 0;
	return 0;
}

static void batch_done(struct q_relay *r)
{
	int full = r->n == Q_RELAY_BATCH, ok = 0;
	for (int i = 0; i < r->n; i++) {
		if (!r->ok[i])
			continue;
		ok++;
		r->rec_ids[r->nrec] = r->items[i].id;
		memcpy(r->rec_sids[r->nrec], r->sids[i], Q_ID_MAX);
		r->nrec++;
	}
	r->busy = 0;
	log_debug("queue", "relay_batch", "sent=%d published=%d", r->n, ok);
	if (record(r) == 0 && full && ok == r->n)
		q_relay_kick(r); /* a full batch: more may be waiting */
}

static void on_xadd(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	(void)c;
	struct slot *s = arg;
	struct q_relay *r = s->r;
	/* reply lives only during this callback: the id is copied out now. */
	if (q_reply_is_str(reply) && reply->len < Q_ID_MAX) {
		r->ok[s->i] = 1;
		snprintf(r->sids[s->i], Q_ID_MAX, "%s", reply->str);
		r->published++;
	} else {
		r->failed++;
		set_error(r, "XADD", err ? err : "unexpected reply");
	}
	if (++r->answered == r->n)
		batch_done(r);
}

static int send_xadd(struct q_relay *r, int i)
{
	const struct q_intent *in = &r->items[i];
	char body[Q_BODY_MAX], attempt[24];
	size_t blen;
	int rc = q_intent_encode(in, body, sizeof body, &blen);
	if (rc)
		return rc;
	snprintf(attempt, sizeof attempt, "%" PRId64, in->attempt);
	const char *argv[] = { "XADD", r->keys.stream, "*", "kind", in->kind, "task", in->task,
			       "job", in->job, "team", in->team, "attempt", attempt, "body", body };
	size_t lens[15];
	for (int k = 0; k < 14; k++)
		lens[k] = strlen(argv[k]);
	lens[14] = blen;
	return q_conn_cmd(r->conn, on_xadd, &r->slots[i], 0, 15, argv, lens);
}

static void relay_run(struct q_relay *r)
{
	if (r->busy || q_conn_state(r->conn) != Q_CONN_CONNECTED)
		return;
	if (record(r))
		return; /* the store is not taking ids now: publish nothing new */
	int n = r->ops.fetch(r->arg, r->items, Q_RELAY_BATCH);
	if (n < 0) {
		set_error(r, "fetch", err_str(n));
		return;
	}
	if (n == 0)
		return;
	r->busy = 1;
	r->n = n;
	r->answered = 0;
	memset(r->ok, 0, sizeof r->ok);
	/* Every XADD goes out before any answer is read: one round trip for the batch. Once one
	 * cannot be sent, the rest are counted as answered-and-failed. */
	for (int i = 0; i < n; i++) {
		int rc = send_xadd(r, i);
		if (rc == 0)
			continue;
		if (rc == GWB_EINVAL || rc == GWB_ETOOBIG)
			log_error("queue", "relay_unencodable", "intent_id=%" PRId64 " error=%s",
				  r->items[i].id, err_name(rc));
		set_error(r, "XADD", err_str(rc));
		r->failed += n - i;
		r->answered += n - i;
		if (r->answered == r->n)
			batch_done(r);
		return;
	}
}

/* ---- trimming ---- */

static void trim_fail(struct q_relay *r, const char *what, const char *err)
{
	r->trim_busy = 0;
	if (err)
		log_debug("queue", "trim_skipped", "step=%s error=%s", what, log_q(err));
}

static void on_xtrim(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	(void)c;
	struct q_relay *r = arg;
	r->trim_busy = 0;
	if (reply && reply->type == REDIS_REPLY_INTEGER) {
		r->trimmed += reply->integer;
		if (reply->integer)
			log_info("queue", "stream_trimmed", "key=%s removed=%lld", r->keys.stream,
				 (long long)reply->integer);
	} else {
		trim_fail(r, "XTRIM", err);
	}
}

/* XRANGE answered: the (k+1)-th entry is where a maxlen trim would start; never start past
 * the oldest entry the group has not acknowledged. */
static void on_trim_range(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	struct q_relay *r = arg;
	if (!reply || reply->type != REDIS_REPLY_ARRAY || reply->elements == 0)
		return trim_fail(r, "XRANGE", err);
	long long k = r->t_len - r->maxlen;
	if (k > Q_TRIM_STEP)
		k = Q_TRIM_STEP;
	struct q_id at;
	size_t idx = (size_t)k < reply->elements ? (size_t)k : reply->elements - 1;
	const redisReply *id = q_reply_elem(q_reply_elem(reply, idx), 0);
	if (!q_reply_is_str(id) || q_id_parse(id->str, &at))
		return trim_fail(r, "XRANGE", "unexpected reply");
	if ((size_t)k >= reply->elements)
		at = q_id_next(at);
	struct q_id safe = q_id_next(r->t_delivered);
	if (r->t_has_pending && q_id_cmp(r->t_pending_min, safe) < 0)
		safe = r->t_pending_min;
	if (q_id_cmp(safe, at) < 0)
		at = safe;
	char minid[Q_ID_MAX];
	q_id_fmt(at, minid, sizeof minid);
	/* Exact MINID: removes only entries strictly below it, all of them acknowledged. */
	const char *argv[] = { "XTRIM", r->keys.stream, "MINID", minid };
	if (q_conn_cmd(c, on_xtrim, r, 0, 4, argv, NULL))
		trim_fail(r, "XTRIM", NULL);
}

static void on_trim_xlen(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	(void)c;
	(void)err;
	struct q_relay *r = arg;
	r->t_len = reply && reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
}

static void on_trim_groups(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	(void)c;
	(void)err;
	struct q_relay *r = arg;
	r->t_group = 0;
	/* RESP2: an array of groups, each a flat name/value array. */
	for (size_t g = 0; reply && reply->type == REDIS_REPLY_ARRAY && g < reply->elements; g++) {
		const redisReply *grp = reply->element[g];
		const char *name = NULL, *last = NULL;
		for (size_t i = 0; grp && grp->type == REDIS_REPLY_ARRAY && i + 1 < grp->elements;
		     i += 2) {
			const redisReply *k = grp->element[i], *v = grp->element[i + 1];
			if (!q_reply_is_str(k) || !q_reply_is_str(v))
				continue;
			if (strcmp(k->str, "name") == 0)
				name = v->str;
			else if (strcmp(k->str, "last-delivered-id") == 0)
				last = v->str;
		}
		if (name && last && strcmp(name, Q_GROUP) == 0 &&
		    q_id_parse(last, &r->t_delivered) == 0)
			r->t_group = 1;
	}
}

static void on_trim_pending(struct q_conn *c, const redisReply *reply, const char *err, void *arg)
{
	struct q_relay *r = arg;
	/* Summary form: [count, smallest id, greatest id, consumers]. */
	const redisReply *count = q_reply_elem(reply, 0), *min = q_reply_elem(reply, 1);
	if (!count || count->type != REDIS_REPLY_INTEGER)
		return trim_fail(r, "XPENDING", err ? err : "unexpected reply");
	r->t_has_pending = count->integer > 0;
	if (r->t_has_pending && (!q_reply_is_str(min) || q_id_parse(min->str, &r->t_pending_min)))
		return trim_fail(r, "XPENDING", "unexpected reply");
	/* No group: nobody has read anything yet, so nothing may go. */
	if (!r->t_group || r->t_len <= r->maxlen)
		return trim_fail(r, "check", NULL);
	long long k = r->t_len - r->maxlen;
	if (k > Q_TRIM_STEP)
		k = Q_TRIM_STEP;
	char cnt[24];
	snprintf(cnt, sizeof cnt, "%lld", k + 1);
	const char *argv[] = { "XRANGE", r->keys.stream, "-", "+", "COUNT", cnt };
	if (q_conn_cmd(c, on_trim_range, r, 0, 6, argv, NULL))
		trim_fail(r, "XRANGE", NULL);
}

static void trim_start(struct q_relay *r)
{
	const char *xlen[] = { "XLEN", r->keys.stream };
	const char *groups[] = { "XINFO", "GROUPS", r->keys.stream };
	const char *pending[] = { "XPENDING", r->keys.stream, Q_GROUP };
	r->trim_busy = 1;
	r->t_len = -1;
	r->t_group = 0;
	/* Pipelined; answers come in order, so the XPENDING callback sees the other two. If a
	 * later send fails, the earlier callbacks still fire and the last one never does, so
	 * trim_busy is cleared here instead. */
	if (q_conn_cmd(r->conn, on_trim_xlen, r, 0, 2, xlen, NULL) ||
	    q_conn_cmd(r->conn, on_trim_groups, r, 0, 3, groups, NULL) ||
	    q_conn_cmd(r->conn, on_trim_pending, r, 0, 3, pending, NULL))
		r->trim_busy = 0;
}

void q_relay_tick(struct q_relay *r, int64_t now_ms)
{
	q_relay_kick(r);
	if (r->maxlen <= 0 || r->trim_busy || q_conn_state(r->conn) != Q_CONN_CONNECTED)
		return;
	if (now_ms - r->trim_last_ms < TRIM_EVERY_MS)
		return;
	r->trim_last_ms = now_ms;
	trim_start(r);
}

void q_relay_stats(const struct q_relay *r, struct q_relay_stats *st)
{
	st->published = r->published;
	st->failed = r->failed;
	st->trimmed = r->trimmed;
	st->inflight = r->busy ? r->n - r->answered : 0;
	st->unrecorded = r->nrec;
	st->last_error = r->last_error;
}
