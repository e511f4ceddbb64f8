/* The batch answers' helper thread: see http_prep.h. */
#include "server/http_prep.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/log.h"

struct http_prep {
	pthread_t thread;
	int jobs[2]; /* loop -> thread: a job's pointer; the write end closed to stop */
	int back[2]; /* thread -> loop: the same pointer once run */
	struct event *back_ev;
	void (*back_fn)(void *arg);
	void *back_arg;
};

/* Reads one pointer from fd (blocking or not): 1, or 0 at the end or when none is there. */
static int read_ptr(int fd, struct http_prep_job **job)
{
	for (;;) {
		ssize_t n = read(fd, job, sizeof *job);
		if (n == (ssize_t)sizeof *job)
			return 1;
		if (n < 0 && errno == EINTR)
			continue;
		/* A pipe write of a pointer is atomic (PIPE_BUF): never a part of one. */
		return 0;
	}
}

static int write_ptr(int fd, struct http_prep_job *job)
{
	ssize_t n;
	do
		n = write(fd, &job, sizeof job);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)sizeof job ? 0 : -1;
}

static void *prep_main(void *arg)
{
	struct http_prep *p = arg;
	struct http_prep_job *job;
	while (read_ptr(p->jobs[0], &job)) {
		job->run(job);
		/* The loop reads every pointer back before it could fill the pipe (it holds a
		 * few batches at a time); a failed write would leave a batch unanswered. */
		if (write_ptr(p->back[1], job) < 0) {
			log_error("http", "prep_back_failed", "error=%s", log_q(strerror(errno)));
			break;
		}
	}
	return NULL;
}

/* Marks what came back done; 1 when anything did. */
static int take_back(struct http_prep *p)
{
	struct http_prep_job *job;
	int any = 0;
	while (read_ptr(p->back[0], &job)) {
		job->done = 1;
		any = 1;
	}
	return any;
}

static void on_back(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct http_prep *p = arg;
	if (take_back(p))
		p->back_fn(p->back_arg);
}

static void pipes_close(struct http_prep *p)
{
	for (int i = 0; i < 2; i++) {
		if (p->jobs[i] >= 0)
			close(p->jobs[i]);
		if (p->back[i] >= 0)
			close(p->back[i]);
		p->jobs[i] = p->back[i] = -1;
	}
}

struct http_prep *http_prep_start(struct event_base *base, void (*back)(void *arg), void *arg)
{
	struct http_prep *p = gwb_calloc(1, sizeof *p);
	p->jobs[0] = p->jobs[1] = p->back[0] = p->back[1] = -1;
	p->back_fn = back;
	p->back_arg = arg;
	/* The loop's ends never block it: a full job pipe makes the caller run the job. */
	if (pipe2(p->jobs, O_CLOEXEC) < 0 || pipe2(p->back, O_CLOEXEC) < 0 ||
	    fcntl(p->jobs[1], F_SETFL, O_NONBLOCK) < 0 ||
	    fcntl(p->back[0], F_SETFL, O_NONBLOCK) < 0)
		goto fail;
	p->back_ev = event_new(base, p->back[0], EV_READ | EV_PERSIST, on_back, p);
	if (!p->back_ev || event_add(p->back_ev, NULL) < 0)
		goto fail;
	/* The thread takes no signal: they stay the loop's. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&p->thread, NULL, prep_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc == 0)
		return p;
fail:
	if (p->back_ev)
		event_free(p->back_ev);
	pipes_close(p);
	gwb_free(p);
	return NULL;
}

int http_prep_submit(struct http_prep *p, struct http_prep_job *job)
{
	job->done = 0;
	return write_ptr(p->jobs[1], job);
}

void http_prep_stop(struct http_prep *p)
{
	if (!p)
		return;
	event_free(p->back_ev);
	/* The thread runs what is in the pipe, then reads its end and stops. */
	close(p->jobs[1]);
	p->jobs[1] = -1;
	pthread_join(p->thread, NULL);
	take_back(p);
	pipes_close(p);
	gwb_free(p);
}
