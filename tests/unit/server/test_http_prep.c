/* server/http_prep.c, the helper that builds a batch's answers off the loop: every job runs
 * once, on another thread, and comes back done on the loop in the order handed over; stopping
 * waits for every job still in the pipe. */
#include <event2/event.h>
#include <pthread.h>
#include <string.h>

#include "server/http_prep.h"
#include "tests/harness/t.h"

#define NJOBS 200

struct job {
	struct http_prep_job j; /* first */
	int runs;
	pthread_t ran_on;
};

struct state {
	struct event_base *base;
	struct job jobs[NJOBS];
	int backs;     /* back() calls */
	int done_seen; /* jobs seen done, in order, by back() */
	int out_of_order;
};

static void run(struct http_prep_job *job)
{
	struct job *x = (struct job *)job;
	x->runs++;
	x->ran_on = pthread_self();
}

static void back(void *arg)
{
	struct state *s = arg;
	s->backs++;
	/* Done ones form a prefix: the helper runs its jobs in order. */
	while (s->done_seen < NJOBS && s->jobs[s->done_seen].j.done)
		s->done_seen++;
	for (int i = s->done_seen; i < NJOBS; i++)
		if (s->jobs[i].j.done)
			s->out_of_order++;
	if (s->done_seen == NJOBS)
		event_base_loopexit(s->base, NULL);
}

TEST(http_prep_runs_each_job_once_off_the_loop_and_in_order)
{
	static struct state s;
	memset(&s, 0, sizeof s);
	s.base = event_base_new();
	struct http_prep *p = http_prep_start(s.base, back, &s);
	CHECK(p != NULL);
	for (int i = 0; i < NJOBS; i++) {
		s.jobs[i].j.run = run;
		s.jobs[i].j.done = 1; /* submit clears it */
		CHECK_INT(http_prep_submit(p, &s.jobs[i].j), 0);
	}
	struct timeval limit = { 10, 0 };
	event_base_loopexit(s.base, &limit);
	event_base_dispatch(s.base);
	CHECK_INT(s.done_seen, NJOBS);
	CHECK_INT(s.out_of_order, 0);
	CHECK(s.backs >= 1);
	for (int i = 0; i < NJOBS; i++) {
		CHECK_INT(s.jobs[i].runs, 1);
		CHECK(!pthread_equal(s.jobs[i].ran_on, pthread_self()));
	}
	http_prep_stop(p);
	event_base_free(s.base);
}

TEST(http_prep_stop_waits_for_the_jobs_still_handed_over)
{
	static struct state s;
	memset(&s, 0, sizeof s);
	s.base = event_base_new();
	struct http_prep *p = http_prep_start(s.base, back, &s);
	CHECK(p != NULL);
	for (int i = 0; i < NJOBS; i++) {
		s.jobs[i].j.run = run;
		CHECK_INT(http_prep_submit(p, &s.jobs[i].j), 0);
	}
	/* No loop turn: stop itself takes every job back, done. */
	http_prep_stop(p);
	for (int i = 0; i < NJOBS; i++) {
		CHECK_INT(s.jobs[i].runs, 1);
		CHECK_INT(s.jobs[i].j.done, 1);
	}
	CHECK_INT(s.backs, 0);
	event_base_free(s.base);
}
