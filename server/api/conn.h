/* The connection guard: what the front door does below HTTP requests (the listener's pause
 * when the process runs out of descriptors). */
#ifndef GWB_SERVER_API_CONN_H
#define GWB_SERVER_API_CONN_H

#include <event2/event.h>
#include <event2/http.h>

struct gwb_config;
struct conn_guard;

/* Guards the listener of bs (bound on evh): on EMFILE/ENFILE from accept() the listener is
 * paused and a timer resumes it, with one log line per pause and the count of failed
 * accepts. Returns the guard (freed by conn_guard_stop), or NULL when out of memory. */
struct conn_guard *conn_guard_start(struct event_base *base, struct evhttp *evh,
				    struct evhttp_bound_socket *bs,
				    const struct gwb_config *cfg);
/* Stops its timer and frees g (NULL is fine); call before the evhttp is freed. */
void conn_guard_stop(struct conn_guard *g);

#endif
