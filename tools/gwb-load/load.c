/* The run's shared services: set-up and tear-down, the task registry, calls that wait for
 * their answer on the running loop, and the one-second tick that prints progress and samples
 * every team's quota. */
#include "tools/gwb-load/load.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "tools/gwb-load/verify.h"

static const char *const states[] = {"queued", "creating",   "pending",   "running", "succeeded",
                                     "failed", "cancelling", "cancelled", "unknown"};

int load_state_index(const char *state)
{
	for (int i = 0; state && i < (int)(sizeof states / sizeof states[0]); i++)
		if (strcmp(states[i], state) == 0)
			return i;
	return -1;
}

const char *load_state_name(int i)
{
	return i >= 0 && i < (int)(sizeof states / sizeof states[0]) ? states[i] : "?";
}

int load_state_final(const char *s)
{
	return s && (strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
	             strcmp(s, "cancelled") == 0);
}

int64_t load_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t load_rand(struct load *l, uint64_t n)
{
	/* xorshift64*: quality enough to pick operations and tasks. */
	l->rng ^= l->rng >> 12;
	l->rng ^= l->rng << 25;
	l->rng ^= l->rng >> 27;
	return (l->rng * 0x2545F4914F6CDD1DULL) % n;
}

long load_task_add(struct load *l, const char *id, uint32_t seq, int team, int stray)
{
	if (l->ntasks == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->tasks = gwb_realloc(l->tasks, sizeof *l->tasks * (size_t)l->cap);
	}
	struct load_task *t = &l->tasks[l->ntasks];
	memset(t, 0, sizeof *t);
	snprintf(t->id, sizeof t->id, "%s", id);
	t->seq = seq;
	t->team = (uint16_t)team;
	t->stray = (uint8_t)stray;
	snprintf(t->state, sizeof t->state, "queued");
	json_object_set_new(l->index, t->id, json_integer(l->ntasks));
	if (l->acked && !stray) {
		/* Written at once: a run cut short (or a server killed) still leaves the list. */
		fprintf(l->acked, "%s\n", t->id);
		fflush(l->acked);
	}
	return l->ntasks++;
}

long load_task_find(const struct load *l, const char *id)
{
	json_t *v = json_object_get(l->index, id);
	return v ? (long)json_integer_value(v) : -1;
}

/* ---- waiting for an answer ---- */

struct wait {
	struct load_answer *a;
	int done;
};

static void on_answer(const struct client_result *res, void *arg)
{
	struct wait *w = arg;
	w->a->status = res->status;
	snprintf(w->a->err, sizeof w->a->err, "%s", res->err ? res->err : "");
	w->a->json = json_incref(res->json);
	w->a->body = gwb_strdup(res->body ? res->body : "");
	w->a->replayed = res->replayed;
	w->done = 1;
}

void load_wait_flag(struct load *l, const int *flag)
{
	while (!*flag)
		if (event_base_loop(l->base, EVLOOP_ONCE) < 0)
			break;
}

void load_quiesce(struct load *l)
{
	for (;;) {
		int busy = client_inflight(l->ctl) + client_inflight(l->sampler);
		for (int i = 0; i < l->nconns; i++)
			busy += client_inflight(l->conns[i]);
		if (!busy || event_base_loop(l->base, EVLOOP_ONCE) < 0)
			return;
	}
}

int load_call(struct load *l, struct client *c, const char *method, const char *path,
              const char *body, struct load_answer *a)
{
	memset(a, 0, sizeof *a);
	struct wait w = {a, 0};
	if (client_send(c, method, path, body, NULL, on_answer, &w) < 0) {
		snprintf(a->err, sizeof a->err, "the request could not be made");
		return -1;
	}
	load_wait_flag(l, &w.done);
	return a->status ? 0 : -1;
}

void load_answer_clear(struct load_answer *a)
{
	json_decref(a->json);
	a->json = NULL;
	gwb_free(a->body);
	a->body = NULL;
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	*(int *)arg = 1;
}

void load_sleep_ms(struct load *l, int ms)
{
	int done = 0;
	struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
	struct event *ev = evtimer_new(l->base, on_wake, &done);
	evtimer_add(ev, &tv);
	load_wait_flag(l, &done);
	event_free(ev);
}

/* ---- quota samples ---- */

static long jint(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(json_object_get(o, a), b);
	return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

int load_team_sample(struct load_team *t, const json_t *team)
{
	long qm = jint(team, "quota", "gpu_memory_mib"),
	     qc = jint(team, "quota", "gpu_core_percent");
	long rm = jint(team, "reserved", "gpu_memory_mib");
	long rc = jint(team, "reserved", "gpu_core_percent");
	if (qm < 0 || qc < 0 || rm < 0 || rc < 0)
		return -1;
	t->quota_mem = qm;
	t->quota_core = qc;
	if (rm > t->max_mem)
		t->max_mem = rm;
	if (rc > t->max_core)
		t->max_core = rc;
	t->samples++;
	if (rm > qm || rc > qc) {
		t->over++;
		return 0;
	}
	return 1;
}

struct sample_call {
	struct load *l;
	int team;
};

static void on_sample(const struct client_result *res, void *arg)
{
	struct sample_call *s = arg;
	struct load *l = s->l;
	struct load_team *t = &l->teams[s->team];
	t->sample_inflight = 0;
	int rc = res->status == 200 ? load_team_sample(t, res->json) : -1;
	if (rc < 0)
		l->quota_sample_errors++;
	else if (rc == 0)
		fprintf(stderr, "gwb-load: team %s over its quota: %s\n", l->o->teams[s->team],
		        res->body);
	gwb_free(s);
}

static void sample_quota(struct load *l)
{
	for (int i = 0; i < l->o->nteams; i++) {
		if (l->teams[i].sample_inflight)
			continue; /* the last one has not come back: one at a time per team */
		char path[128];
		snprintf(path, sizeof path, "/v1/teams/%s", l->o->teams[i]);
		struct sample_call *s = gwb_malloc(sizeof *s);
		s->l = l;
		s->team = i;
		if (client_send(l->sampler, "GET", path, NULL, NULL, on_sample, s) < 0) {
			gwb_free(s);
			l->quota_sample_errors++;
			continue;
		}
		l->teams[i].sample_inflight = 1;
	}
}

static void on_metrics(const struct client_result *res, void *arg)
{
	struct load *l = arg;
	l->metrics_inflight = 0;
	if (res->status != 200)
		return;
	l->metrics_samples++;
	long inflight = verify_metric_sum(res->body, "gwb_kube_requests_inflight");
	long depth = verify_metric_sum(res->body, "gwb_kube_request_queue_depth");
	if (inflight > l->kube_inflight_max)
		l->kube_inflight_max = inflight;
	if (depth > l->kube_queue_max)
		l->kube_queue_max = depth;
}

static void sample_metrics(struct load *l)
{
	if (l->metrics_inflight)
		return;
	if (client_send(l->sampler, "GET", "/metrics", NULL, NULL, on_metrics, l) == 0)
		l->metrics_inflight = 1;
}

/* ---- the tick ---- */

static void progress(struct load *l)
{
	int64_t now = load_now_us();
	if (l->phase == PHASE_SEND) {
		long rps = l->answered - l->last_tick_answered;
		l->last_tick_answered = l->answered;
		fprintf(stderr,
		        "gwb-load %5.0fs  sent %ld  done %ld  in flight %ld  rps %ld  errors %ld\n",
		        (double)(now - l->t0_us) / 1e6, l->sent, l->answered, l->sent - l->answered,
		        rps, l->errors);
	} else if (l->phase == PHASE_DRAIN) {
		long tracked = l->ntasks;
		fprintf(stderr, "gwb-load drain %5.0fs  ended %ld of %ld  events read %ld\n",
		        (double)(now - l->drain.start_us) / 1e6, l->drain.ended, tracked,
		        l->drain.events_read);
	}
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct load *l = arg;
	if (l->phase != PHASE_SEND && l->phase != PHASE_DRAIN)
		return;
	progress(l);
	sample_quota(l);
	sample_metrics(l);
}

static void on_sigint(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct load *l = arg;
	l->interrupted = 1;
	/* Deleting the event gives SIGINT its default back: a second Ctrl-C ends the process. */
	event_del(l->sigint);
	if (l->wake_on_interrupt)
		event_active(l->wake_on_interrupt, EV_TIMEOUT, 0);
	fprintf(stderr, "gwb-load: interrupted: no more requests; waiting for the answers in "
	                "flight, then the summary (Ctrl-C again to quit at once)\n");
}

/* ---- set-up ---- */

int load_init(struct load *l, const struct load_opts *o, char *err, size_t errlen)
{
	memset(l, 0, sizeof *l);
	l->o = o;
	l->rng = o->seed ? o->seed : 0x9E3779B97F4A7C15ULL;
	if (client_target_parse(&l->target, o->url, o->token, err, errlen) < 0)
		return -2;
	if (o->metrics_token && strlen(o->metrics_token) <= 512)
		snprintf(l->target.metrics_auth, sizeof l->target.metrics_auth, "Bearer %s",
		         o->metrics_token);
	l->base = event_base_new();
	if (!l->base) {
		snprintf(err, errlen, "cannot create the event loop");
		return -1;
	}
	/* Keys must not collide with an earlier run's within idempotency.ttl_seconds. */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(l->run_id, sizeof l->run_id, "gwbload-%lx%04x", (unsigned long)ts.tv_sec,
	         (unsigned)((ts.tv_nsec / 1000) ^ (unsigned)getpid()) & 0xffffu);
	l->index = json_object();
	if (o->acked && !(l->acked = fopen(o->acked, "a"))) {
		snprintf(err, errlen, "--acked %s: %s", o->acked, strerror(errno));
		return -2;
	}
	l->kube_inflight_max = l->kube_queue_max = -1;
	for (int i = 0; i < OP_COUNT; i++)
		hist_init(&l->ops[i].lat);
	hist_init(&l->drain.intent_to_job);
	hist_init(&l->drain.job_to_pod);
	l->conns = gwb_calloc((size_t)o->connections, sizeof *l->conns);
	l->nconns = o->connections;
	for (int i = 0; i < o->connections; i++)
		if (!(l->conns[i] = client_new(l->base, &l->target, o->timeout_s)))
			goto fail;
	if (!(l->ctl = client_new(l->base, &l->target, o->timeout_s)) ||
	    !(l->sampler = client_new(l->base, &l->target, o->timeout_s)))
		goto fail;
	l->tick = event_new(l->base, -1, EV_PERSIST, on_tick, l);
	struct timeval one = {1, 0};
	event_add(l->tick, &one);
	l->sigint = evsignal_new(l->base, SIGINT, on_sigint, l);
	event_add(l->sigint, NULL);
	return 0;
fail:
	snprintf(err, errlen, "cannot set up a connection to %s:%d", l->target.host,
	         l->target.port);
	return -1;
}

void load_fini(struct load *l)
{
	if (l->tick)
		event_free(l->tick);
	if (l->sigint)
		event_free(l->sigint);
	for (int i = 0; i < l->nconns; i++)
		client_free(l->conns[i]);
	gwb_free(l->conns);
	client_free(l->ctl);
	client_free(l->sampler);
	gwb_free(l->tasks);
	json_decref(l->index);
	if (l->acked)
		fclose(l->acked);
	if (l->base)
		event_base_free(l->base);
	memset(l, 0, sizeof *l);
}
