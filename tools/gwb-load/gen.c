/* The request generator. Each request carries its scheduled start: in the closed loop the
 * moment it was sent, in the open loop its slot in the schedule, so a server that queues shows
 * it in the latency instead of slowing the generator down (coordinated omission). */
#include "tools/gwb-load/gen.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"

/* Requests the open loop keeps in flight at most; later slots wait here, keeping their
 * scheduled start, so memory stays bounded when the server falls behind. */
#define OPEN_INFLIGHT_MAX 20000
/* A connection of the closed loop whose request got no answer waits this long before its
 * next one, so a server that is gone is not hammered with connection attempts. */
#define RETRY_PAUSE_MS 100
/* Unexpected answers printed on stderr (all are counted). */
#define ERRORS_SHOWN 5

struct gen {
	struct load *l;
	struct event *timer; /* open loop: next slot */
	uint32_t next_seq;
	long slot;   /* open loop: next slot number */
	int stopped; /* no more requests will be started */
	int done;
	int paused; /* closed loop: connections waiting RETRY_PAUSE_MS */
	long shown;
};

struct rq {
	struct gen *g;
	struct client *conn;
	int op;
	long task;    /* replay, cancel: index into l->tasks */
	uint32_t seq; /* submit */
	int team;
	int64_t sched_us;
};

char *gen_submit_body(const struct load *l, uint32_t seq, int team)
{
	char name[48];
	snprintf(name, sizeof name, "load-%u", (unsigned)seq);
	json_t *b = json_pack("{s:s, s:s, s:I, s:I, s:i, s:I}", "team", l->o->teams[team], "name",
	                      name, "gpu_memory_mib", (json_int_t)l->o->mem_mib, "gpu_core_percent",
	                      (json_int_t)l->o->core_pct, "gpu_count", 1, "duration_seconds",
	                      (json_int_t)l->o->task_seconds);
	char *s = json_dumps(b, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(b);
	return s; /* jansson allocates through gwb_malloc (gwb_alloc_init) */
}

static void key_of(const struct load *l, uint32_t seq, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%u", l->run_id, (unsigned)seq);
}

static int may_start(struct gen *g, int64_t sched_us)
{
	struct load *l = g->l;
	if (g->stopped)
		return 0;
	if (l->interrupted) {
		g->stopped = 1;
		return 0;
	}
	if ((l->o->count && l->sent >= l->o->count) || l->sent >= OPTS_REQUESTS_MAX ||
	    (!l->o->count && sched_us >= l->t0_us + (int64_t)(l->o->duration_s * 1e6))) {
		g->stopped = 1;
		return 0;
	}
	return 1;
}

static void check_done(struct gen *g)
{
	struct load *l = g->l;
	if (g->stopped && l->answered == l->sent && !g->paused && !g->done) {
		g->done = 1;
		l->send_end_us = load_now_us();
	}
}

static const char *jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *err_code(const json_t *o)
{
	return jstr(json_object_get(o, "error"), "code");
}

static void unexpected(struct gen *g, struct rq *q, const struct client_result *res,
                       const char *why)
{
	struct load *l = g->l;
	l->errors++;
	l->ops[q->op].errors++;
	if (g->shown++ < ERRORS_SHOWN)
		fprintf(stderr, "gwb-load: %s: %s: status %d %.200s\n", opts_op_name(q->op), why,
		        res->status, res->status ? res->body : res->err);
}

/* Checks one answer; returns 1 when it was what the operation expects. */
static int check(struct gen *g, struct rq *q, const struct client_result *res)
{
	struct load *l = g->l;
	const char *id = jstr(res->json, "id");
	if (q->op == OP_SUBMIT) {
		if (res->status == 201 && id) {
			load_task_add(l, id, q->seq, q->team, 0);
			return 1;
		}
		if (res->status == 403 && err_code(res->json) &&
		    strcmp(err_code(res->json), "quota_exceeded") == 0) {
			l->refused_quota++;
			return 1;
		}
		unexpected(g, q, res, "not accepted");
		return 0;
	}
	const char *want = l->tasks[q->task].id;
	if (q->op == OP_REPLAY) {
		if (res->status == 200 && res->replayed && id && strcmp(id, want) == 0) {
			l->replay_same++;
			return 1;
		}
		if (res->status == 0 || res->status >= 500) {
			unexpected(g, q, res, "no answer to a replay");
			return 0;
		}
		/* An answer that is not the first task: the idempotency promise is broken. */
		l->replay_mismatch++;
		if (res->status == 201 && id && load_task_find(l, id) < 0) {
			load_task_add(l, id, q->seq, q->team, 1);
			l->strays++;
		}
		char why[96];
		snprintf(why, sizeof why, "replay of %s answered with another task or status",
		         want);
		unexpected(g, q, res, why);
		return 0;
	}
	if ((res->status == 202 || res->status == 200) && id && strcmp(id, want) == 0)
		return 1;
	unexpected(g, q, res, "cancel not taken");
	return 0;
}

static void start(struct gen *g, struct client *conn, int64_t sched_us);

struct pause {
	struct gen *g;
	struct client *conn;
};

static void on_pause_end(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct pause *p = arg;
	struct gen *g = p->g;
	struct client *conn = p->conn;
	gwb_free(p);
	g->paused--;
	int64_t now = load_now_us();
	if (may_start(g, now))
		start(g, conn, now);
	check_done(g);
}

/* The next request of conn starts after RETRY_PAUSE_MS. gen_run does not return while a
 * pause is pending (check_done counts them), so g outlives the timer. */
static void pause_conn(struct gen *g, struct client *conn)
{
	struct pause *p = gwb_malloc(sizeof *p);
	p->g = g;
	p->conn = conn;
	struct timeval tv = {0, RETRY_PAUSE_MS * 1000};
	if (event_base_once(g->l->base, -1, EV_TIMEOUT, on_pause_end, p, &tv) < 0) {
		gwb_free(p);
		int64_t now = load_now_us();
		if (may_start(g, now))
			start(g, conn, now);
		return;
	}
	g->paused++;
}

static void on_answer(const struct client_result *res, void *arg)
{
	struct rq *q = arg;
	struct gen *g = q->g;
	struct load *l = g->l;
	struct load_op_stats *s = &l->ops[q->op];
	int64_t now = load_now_us();
	l->answered++;
	s->answered++;
	s->status[res->status > 0 && res->status < 600 ? res->status : 0]++;
	hist_add(&s->lat, now - q->sched_us);
	if (check(g, q, res))
		s->ok++;
	struct client *conn = q->conn;
	gwb_free(q);
	if (l->o->closed && res->status == 0 && !g->stopped) {
		pause_conn(g, conn);
	} else if (l->o->closed) {
		if (may_start(g, now))
			start(g, conn, now);
	} else if (!g->stopped && l->sent - l->answered < OPEN_INFLIGHT_MAX) {
		event_active(g->timer, EV_TIMEOUT, 0); /* slots may be waiting for room */
	}
	check_done(g);
}

/* A task of this run to replay or cancel (not a stray; for a cancel, not cancelled yet), or
 * -1 when there is none yet. */
static long pick_task(struct gen *g, int for_cancel)
{
	struct load *l = g->l;
	for (int tries = 0; l->ntasks && tries < 16; tries++) {
		long i = (long)load_rand(l, (uint64_t)l->ntasks);
		if (!l->tasks[i].stray && !(for_cancel && l->tasks[i].cancel_sent))
			return i;
	}
	return -1;
}

static int pick_op(struct gen *g)
{
	const int *w = g->l->o->mix;
	uint64_t total = (uint64_t)w[OP_SUBMIT] + (uint64_t)w[OP_REPLAY] + (uint64_t)w[OP_CANCEL];
	uint64_t r = load_rand(g->l, total);
	if (r < (uint64_t)w[OP_SUBMIT])
		return OP_SUBMIT;
	return r < (uint64_t)w[OP_SUBMIT] + (uint64_t)w[OP_REPLAY] ? OP_REPLAY : OP_CANCEL;
}

static void start(struct gen *g, struct client *conn, int64_t sched_us)
{
	struct load *l = g->l;
	struct rq *q = gwb_calloc(1, sizeof *q);
	q->g = g;
	q->conn = conn;
	q->sched_us = sched_us;
	q->op = pick_op(g);
	q->task = -1;
	if (q->op != OP_SUBMIT && (q->task = pick_task(g, q->op == OP_CANCEL)) < 0) {
		q->op = OP_SUBMIT; /* nothing to act on yet */
		l->fallbacks++;
	}
	char path[96], key[64], *body = NULL;
	int rc;
	if (q->op == OP_CANCEL) {
		l->tasks[q->task].cancel_sent = 1;
		snprintf(path, sizeof path, "/v1/tasks/%s/cancel", l->tasks[q->task].id);
		rc = client_send(conn, "POST", path, NULL, NULL, on_answer, q);
	} else {
		if (q->op == OP_REPLAY) {
			q->seq = l->tasks[q->task].seq;
			q->team = l->tasks[q->task].team;
		} else {
			q->seq = g->next_seq++;
			q->team = (int)(q->seq % (uint32_t)l->o->nteams);
		}
		body = gen_submit_body(l, q->seq, q->team);
		key_of(l, q->seq, key, sizeof key);
		rc = client_send(conn, "POST", "/v1/tasks", body, key, on_answer, q);
	}
	gwb_free(body);
	l->sent++;
	l->ops[q->op].sent++;
	if (rc < 0) {
		/* Counted as a request without an answer; the loop goes on with the others. */
		struct client_result none = {0, "the request could not be made", "", NULL, 0};
		l->answered++;
		l->ops[q->op].answered++;
		l->ops[q->op].status[0]++;
		unexpected(g, q, &none, "not sent");
		gwb_free(q);
	}
}

static struct client *least_busy(struct load *l)
{
	struct client *best = l->conns[0];
	for (int i = 1; i < l->nconns; i++)
		if (client_inflight(l->conns[i]) < client_inflight(best))
			best = l->conns[i];
	return best;
}

static void on_slot(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct gen *g = arg;
	struct load *l = g->l;
	double interval_us = 1e6 / l->o->rate;
	int64_t now = load_now_us();
	for (;;) {
		int64_t due = l->t0_us + (int64_t)((double)g->slot * interval_us);
		if (!may_start(g, due))
			break;
		if (due > now) {
			int64_t wait = due - now;
			struct timeval tv = {(time_t)(wait / 1000000),
			                     (suseconds_t)(wait % 1000000)};
			evtimer_add(g->timer, &tv);
			return;
		}
		if (l->sent - l->answered >= OPEN_INFLIGHT_MAX)
			return; /* an answer wakes us up */
		g->slot++;
		start(g, least_busy(l), due);
	}
	check_done(g);
}

void gen_run(struct load *l)
{
	struct gen g;
	memset(&g, 0, sizeof g);
	g.l = l;
	l->phase = PHASE_SEND;
	l->t0_us = load_now_us();
	if (l->o->closed) {
		for (int i = 0; i < l->nconns && may_start(&g, l->t0_us); i++)
			start(&g, l->conns[i], load_now_us());
	} else {
		g.timer = evtimer_new(l->base, on_slot, &g);
		l->wake_on_interrupt = g.timer;
		event_active(g.timer, EV_TIMEOUT, 0);
	}
	check_done(&g);
	load_wait_flag(l, &g.done);
	l->wake_on_interrupt = NULL;
	if (g.timer)
		event_free(g.timer);
	if (!l->send_end_us)
		l->send_end_us = load_now_us();
}
