/* The drain: passes over each team's task list (newest first, stopping once every unended
 * task of the run was seen), then the histories of the tasks, a few requests at a time over
 * the run's connections. */
#include "tools/gwb-load/drain.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"

#define PAGE_LIMIT 500
/* History requests in flight at most: the drain must not become a load of its own. */
#define EVENTS_INFLIGHT_MAX 4

static const char *jstr(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int64_t jtime(const json_t *o, const char *k)
{
	const char *s = jstr(o, k);
	int64_t ms;
	return s && clock_parse_rfc3339(s, &ms) == 0 ? ms : 0;
}

static int is_one_of(const char *s, const char *const *set)
{
	for (; s && *set; set++)
		if (strcmp(s, *set) == 0)
			return 1;
	return 0;
}

int drain_events_read(const json_t *events, struct drain_figures *f)
{
	static const char *const before_job[] = {"queued", "creating", "unknown", NULL};
	static const char *const with_job[] = {"pending", "running", "succeeded", "failed", NULL};
	memset(f, 0, sizeof *f);
	if (!json_is_array(events))
		return -1;
	int64_t running_ms = 0;
	size_t i;
	const json_t *e;
	json_array_foreach (events, i, e) {
		const char *type = jstr(e, "type"), *from = jstr(e, "from"), *to = jstr(e, "to");
		const json_t *d = json_object_get(e, "detail");
		int64_t ts = jtime(e, "ts");
		if (!type || !ts)
			continue;
		if (strcmp(type, "submitted") == 0 && !f->submitted_ms) {
			f->submitted_ms = ts;
		} else if (strcmp(type, "state") == 0) {
			if (to && strcmp(to, "unknown") == 0)
				f->unknown_transitions++;
			if (!f->job_ms && (jstr(d, "job_uid") || (is_one_of(from, before_job) &&
			                                          is_one_of(to, with_job))))
				f->job_ms = ts;
			if (!running_ms && to && strcmp(to, "running") == 0)
				running_ms = ts;
		} else if (strcmp(type, "scheduler_event") == 0 && !f->bound_ms) {
			const char *reason = jstr(d, "reason");
			if (reason && strcmp(reason, "Scheduled") == 0)
				f->bound_ms = ts;
		}
	}
	if (!f->bound_ms)
		f->bound_ms = running_ms;
	return 0;
}

/* ---- histories ---- */

struct evq {
	struct load *l;
	long *q; /* task indexes waiting for their history */
	long head, tail;
	int inflight;
	int next_conn;
};

struct ev_call {
	struct evq *e;
	long task;
};

static void ev_pump(struct evq *e);

static void ev_record(struct load *l, struct load_task *t, const json_t *events)
{
	struct load_drain *d = &l->drain;
	struct drain_figures f;
	if (drain_events_read(events, &f) < 0) {
		t->events = 3;
		d->events_failed++;
		return;
	}
	t->events = 2;
	d->events_read++;
	if (f.unknown_transitions) {
		t->ever_unknown = 1;
		d->ever_unknown++;
		d->unknown_transitions += f.unknown_transitions;
	}
	if (f.submitted_ms && f.job_ms >= f.submitted_ms)
		hist_add(&d->intent_to_job, f.job_ms - f.submitted_ms);
	if (f.job_ms && f.bound_ms >= f.job_ms)
		hist_add(&d->job_to_pod, f.bound_ms - f.job_ms);
}

static void on_events(const struct client_result *res, void *arg)
{
	struct ev_call *c = arg;
	struct evq *e = c->e;
	struct load_task *t = &e->l->tasks[c->task];
	e->inflight--;
	if (res->status == 200) {
		ev_record(e->l, t, json_object_get(res->json, "events"));
	} else {
		t->events = 3;
		e->l->drain.events_failed++;
	}
	gwb_free(c);
	ev_pump(e);
}

static void ev_pump(struct evq *e)
{
	struct load *l = e->l;
	int max = l->nconns < EVENTS_INFLIGHT_MAX ? l->nconns : EVENTS_INFLIGHT_MAX;
	while (e->inflight < max && e->head < e->tail) {
		long i = e->q[e->head++];
		char path[96];
		snprintf(path, sizeof path, "/v1/tasks/%s/events", l->tasks[i].id);
		struct ev_call *c = gwb_malloc(sizeof *c);
		c->e = e;
		c->task = i;
		struct client *conn = l->conns[e->next_conn++ % max];
		if (client_send(conn, "GET", path, NULL, NULL, on_events, c) < 0) {
			gwb_free(c);
			l->tasks[i].events = 3;
			l->drain.events_failed++;
			continue;
		}
		e->inflight++;
	}
}

static void ev_push(struct evq *e, long i)
{
	struct load_task *t = &e->l->tasks[i];
	if (t->events)
		return;
	t->events = 1;
	e->q[e->tail++] = i;
	ev_pump(e);
}

/* ---- passes over the task lists ---- */

static void task_seen(struct load *l, struct evq *e, long i, const json_t *task)
{
	struct load_task *t = &l->tasks[i];
	struct load_drain *d = &l->drain;
	const char *state = jstr(task, "state");
	const json_t *res = json_object_get(task, "reservation");
	t->seen = 1;
	if (state)
		snprintf(t->state, sizeof t->state, "%s", state);
	if (t->ended || !load_state_final(state) || !json_is_true(json_object_get(res, "released")))
		return;
	t->ended = 1;
	t->created_ms = jtime(task, "created_at");
	t->ended_ms = jtime(res, "released_at");
	d->ended++;
	int si = load_state_index(state);
	if (si >= 0)
		d->states[si]++;
	if (t->created_ms && (!d->first_created_ms || t->created_ms < d->first_created_ms))
		d->first_created_ms = t->created_ms;
	if (t->ended_ms > d->last_ended_ms)
		d->last_ended_ms = t->ended_ms;
	ev_push(e, i);
}

/* One pass over a team's list. Returns 0, or -1 when a page could not be read. */
static int pass_team(struct load *l, struct evq *e, int team)
{
	long want = 0, seen = 0;
	for (long i = 0; i < l->ntasks; i++) {
		l->tasks[i].seen = 0;
		if (l->tasks[i].team == team && !l->tasks[i].ended)
			want++;
	}
	char cursor[32] = "";
	while (want > seen) {
		char path[256];
		snprintf(path, sizeof path, "/v1/tasks?team=%s&limit=%d%s%s", l->o->teams[team],
		         PAGE_LIMIT, cursor[0] ? "&cursor=" : "", cursor);
		struct load_answer a;
		l->drain.list_requests++;
		if (load_call(l, l->ctl, "GET", path, NULL, &a) < 0 || a.status != 200) {
			l->drain.list_errors++;
			fprintf(stderr, "gwb-load: drain: GET %s: %d %s\n", path, a.status, a.err);
			load_answer_clear(&a);
			return -1;
		}
		size_t k;
		json_t *task;
		json_array_foreach (json_object_get(a.json, "tasks"), k, task) {
			const char *id = jstr(task, "id");
			long i = id ? load_task_find(l, id) : -1;
			if (i < 0 || l->tasks[i].team != team || l->tasks[i].ended ||
			    l->tasks[i].seen)
				continue;
			seen++;
			task_seen(l, e, i, task);
		}
		const char *next = jstr(a.json, "next_cursor");
		snprintf(cursor, sizeof cursor, "%s", next ? next : "");
		load_answer_clear(&a);
		if (!cursor[0])
			break;
	}
	return 0;
}

static void follow(struct load *l, struct evq *e)
{
	struct load_drain *d = &l->drain;
	int64_t deadline = d->start_us + (int64_t)(l->o->drain_timeout_s * 1e6);
	for (;;) {
		int64_t pass_start = load_now_us();
		d->passes++;
		for (int team = 0; team < l->o->nteams; team++)
			pass_team(l, e, team);
		int64_t now = load_now_us();
		if (d->ended == l->ntasks) {
			d->end_us = now;
			return;
		}
		if (now >= deadline || l->interrupted) {
			d->timed_out = !l->interrupted;
			d->end_us = now;
			return;
		}
		/* Passes start at least --poll-ms apart, and the pause is never shorter than the
		 * pass: following the tasks takes at most half of the server's attention. */
		int64_t took = now - pass_start;
		int64_t pause_us = (int64_t)l->o->poll_ms * 1000 - took;
		if (pause_us < took)
			pause_us = took;
		if (pause_us > deadline - now)
			pause_us = deadline - now;
		if (pause_us > 0)
			load_sleep_ms(l, (int)((pause_us + 999) / 1000));
	}
}

void drain_run(struct load *l)
{
	struct load_drain *d = &l->drain;
	struct evq e;
	memset(&e, 0, sizeof e);
	e.l = l;
	e.q = gwb_calloc((size_t)(l->ntasks ? l->ntasks : 1), sizeof *e.q);
	d->run = 1;
	l->phase = PHASE_DRAIN;
	d->start_us = load_now_us();
	follow(l, &e);
	d->not_ended = l->ntasks - d->ended;
	/* The histories of the tasks that did not end tell whether they went through unknown. */
	for (long i = 0; i < l->ntasks && !l->interrupted; i++)
		ev_push(&e, i);
	while (e.inflight || e.head < e.tail)
		if (event_base_loop(l->base, EVLOOP_ONCE) < 0)
			break;
	gwb_free(e.q);
}
