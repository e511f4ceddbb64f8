/* The answers of a committed batch, built off the loop: a helper thread runs each deferred
 * request's prepare callback (the 201's body of a submission) while the disk syncs the batch,
 * so the loop spends that time on other requests. The batch is answered on the loop, as
 * always, once it is both durable and prepared.
 *
 * A job goes to the thread as a pointer down a pipe and comes back the same way: the loop
 * hands over nothing else, and touches neither the job nor what its run function writes
 * until the job is back (job->done). The run function must therefore use only what the job
 * owns and what is safe from any thread (gwb_alloc, the pool, pure formatting). */
#ifndef GWB_HTTP_PREP_H
#define GWB_HTTP_PREP_H

struct event_base;

struct http_prep_job {
	void (*run)(struct http_prep_job *job); /* on the helper thread */
	int done;                               /* set on the loop when run has returned */
};

struct http_prep;

/* Starts the helper; back(arg) runs on base's loop each time jobs came back (their done
 * set). NULL when it cannot start: the caller then runs its jobs itself. */
struct http_prep *http_prep_start(struct event_base *base, void (*back)(void *arg), void *arg);
/* Hands job to the helper: 0, or -1 when it cannot take it now (the caller runs it). */
int http_prep_submit(struct http_prep *p, struct http_prep_job *job);
/* Waits for every job handed over (each comes back done), then stops the helper and frees p.
 * back is not called: the caller answers what is done itself. */
void http_prep_stop(struct http_prep *p);

#endif
