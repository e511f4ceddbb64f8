/* The connection guard (server/api/conn.h): the listener's pause and resume when accept()
 * fails for want of descriptors, so the loop waits instead of spinning on the backlog. */
#include "server/api/conn.h"

#include <errno.h>
#include <event2/listener.h>
#include <string.h>

#include "config/config.h"
#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/log.h"

/* How long the listener stays paused after running out of descriptors, and how often at
 * most that is logged (ms). */
#define CONN_PAUSE_MS 250
#define CONN_LOG_EVERY_MS 10000

struct conn_guard {
	struct conn_guard *next;         /* the process's guards (the error callback finds its own) */
	struct evconnlistener *lev;
	struct event *resume;            /* re-enables lev after a pause */
	int64_t accept_failed;           /* accept() failures since the last log line */
	int64_t pauses;                  /* pauses since the last log line */
	int64_t logged_ms;               /* when the last line was logged (0: never) */
	int paused;
};

/* evconnlistener's error callback gets the listener's own argument (evhttp's), not ours: the
 * guards are found by their listener. Only the loop's thread touches this list. */
static struct conn_guard *conn_guards;

static struct conn_guard *conn_guard_find(struct evconnlistener *lev)
{
	for (struct conn_guard *g = conn_guards; g; g = g->next)
		if (g->lev == lev)
			return g;
	return NULL;
}

static void conn_guard_on_resume(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct conn_guard *g = arg;
	g->paused = 0;
	evconnlistener_enable(g->lev);
}

static void conn_guard_on_accept_error(struct evconnlistener *lev, void *arg)
{
	(void)arg;
	int err = errno;
	struct conn_guard *g = conn_guard_find(lev);
	if (!g)
		return;
	g->accept_failed++;
	if (g->paused)
		return;
	/* Out of descriptors (EMFILE, ENFILE; libevent already retries the transient errors):
	 * the pending connection stays in the backlog and would wake the loop at once again,
	 * so the listener waits for some to close. */
	evconnlistener_disable(lev);
	g->paused = 1;
	g->pauses++;
	int64_t now = clock_mono_ms();
	if (g->logged_ms == 0 || now - g->logged_ms >= CONN_LOG_EVERY_MS) {
		log_warn("http", "accept_paused",
			 "errno=%d error=%s failed=%lld pauses=%lld pause_ms=%d", err,
			 log_q(strerror(err)), (long long)g->accept_failed, (long long)g->pauses,
			 CONN_PAUSE_MS);
		g->accept_failed = 0;
		g->pauses = 0;
		g->logged_ms = now;
	}
	struct timeval tv = { CONN_PAUSE_MS / 1000, (CONN_PAUSE_MS % 1000) * 1000 };
	evtimer_add(g->resume, &tv);
}

struct conn_guard *conn_guard_start(struct event_base *base, struct evhttp *evh,
				    struct evhttp_bound_socket *bs,
				    const struct gwb_config *cfg)
{
	(void)evh;
	(void)cfg;
	struct conn_guard *g = gwb_calloc(1, sizeof *g);
	if (!g)
		return NULL;
	g->lev = evhttp_bound_socket_get_listener(bs);
	g->resume = evtimer_new(base, conn_guard_on_resume, g);
	if (!g->resume) {
		gwb_free(g);
		return NULL;
	}
	evconnlistener_set_error_cb(g->lev, conn_guard_on_accept_error);
	g->next = conn_guards;
	conn_guards = g;
	return g;
}

void conn_guard_stop(struct conn_guard *g)
{
	if (!g)
		return;
	for (struct conn_guard **p = &conn_guards; *p; p = &(*p)->next)
		if (*p == g) {
			*p = g->next;
			break;
		}
	event_free(g->resume);
	gwb_free(g);
}
