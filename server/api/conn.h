/* The connection guard: what the front door does below HTTP requests. It pauses the listener
 * when the process runs out of descriptors, caps connections (in all and per address), reads
 * every request's framing before libevent does (lib/framing.h) and holds each head
 * and body to a deadline that does not restart with every byte. */
#ifndef GWB_SERVER_API_CONN_H
#define GWB_SERVER_API_CONN_H

#include <event2/event.h>
#include <event2/http.h>

struct gwb_config;
struct conn_guard;

/* Guards the listener of bs (bound on evh) and every connection evh accepts. Returns the
 * guard (freed by conn_guard_stop), or NULL when out of memory. Call before evh accepts. */
struct conn_guard *conn_guard_start(struct event_base *base, struct evhttp *evh,
				    struct evhttp_bound_socket *bs,
				    const struct gwb_config *cfg);
/* Frees g (NULL is fine); call after evhttp_free, which closes the connections it guards. */
void conn_guard_stop(struct conn_guard *g);

/* evhttp_connection_set_closecb for a guarded connection: the guard keeps the connection's
 * own close callback, so others set theirs through this one. */
void conn_set_closecb(struct evhttp_connection *evcon,
		      void (*cb)(struct evhttp_connection *, void *), void *arg);

struct evbuffer;
/* /metrics' lines: connections open, and those refused by code since the start. */
void conn_guard_metrics(const struct conn_guard *g, struct evbuffer *out);

#endif
