/* One asynchronous Redis connection on the caller's event base: an explicit state machine
 * (idle -> connecting -> connected -> backoff -> connecting ... -> closed) with reconnection
 * back-off, a handshake (SELECT db, or PING), and per-command time-outs kept by its own timer,
 * since hiredis 0.14 has none. It owns the hiredis context and every command in flight. */
#ifndef GWB_QUEUE_CONN_H
#define GWB_QUEUE_CONN_H

#include <event2/event.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/* Where Redis is: parsed from redis://host[:port][/N] (port 6379 and db 0 by default) or
 * unix:///path. */
struct q_addr {
	int is_unix;
	char path[108];   /* sun_path size */
	char host[256];
	int port;
	int db;
};
/* Parses url with lib/addr.h (the grammar every binary shares). 0, or GWB_EINVAL with the
 * reason in err. */
int q_addr_parse(const char *url, struct q_addr *a, char *err, size_t errlen);

#define Q_CONN_STATES(X) \
	X(IDLE, "idle") X(CONNECTING, "connecting") X(CONNECTED, "connected") \
	X(BACKOFF, "disconnected") X(CLOSED, "closed")
enum q_conn_state {
#define Q_CONN_ENUM(id, str) Q_CONN_##id,
	Q_CONN_STATES(Q_CONN_ENUM)
#undef Q_CONN_ENUM
};
/* Short name of a state, for logs and /readyz. */
const char *q_conn_state_name(enum q_conn_state s);

struct q_conn;

/* A command's answer. reply is Redis' answer (an error reply too: type REDIS_REPLY_ERROR,
 * with err = its text), or NULL when none came: err then says why (time-out, connection
 * lost, closed). reply belongs to hiredis and lives only during the callback: copy what you
 * keep. Never free the connection from inside a callback. */
typedef void (*q_reply_fn)(struct q_conn *c, const redisReply *reply, const char *err,
			   void *arg);
/* Called after the state changed (to CONNECTED, or from it to BACKOFF / CLOSED). It may send
 * commands when st is CONNECTED; it must not free the connection. */
typedef void (*q_state_fn)(struct q_conn *c, enum q_conn_state st, void *arg);

/* Makes a connection (not yet connecting). name is for logs (copied). timeout_ms bounds the
 * connect + handshake and each command. fn may be NULL. The caller frees it with
 * q_conn_free. */
struct q_conn *q_conn_new(struct event_base *base, const struct q_addr *addr, const char *name,
			  int64_t timeout_ms, q_state_fn fn, void *arg);
/* Starts connecting (from IDLE); later failures reconnect with back-off on their own. */
void q_conn_start(struct q_conn *c);
/* Closes the connection: every command in flight gets its callback with reply NULL and
 * err "closed" before this returns; the state callback is not called. Accepts NULL. Must not
 * be called from inside one of this connection's callbacks. */
void q_conn_free(struct q_conn *c);

/* Sends one command (argv/lens are copied). extra_ms adds to the time-out (a blocking read's
 * BLOCK time). Returns 0 (fn fires exactly once later), or GWB_EUNAVAIL when the connection is
 * not CONNECTED (fn never fires). A command that times out drops the connection (the answer
 * of a later command could otherwise be taken for its answer) and reconnects. */
int q_conn_cmd(struct q_conn *c, q_reply_fn fn, void *arg, int64_t extra_ms, int argc,
	       const char **argv, const size_t *lens);

enum q_conn_state q_conn_state(const struct q_conn *c);
/* The last connection error ("" when none), valid until the next call into c. */
const char *q_conn_last_error(const struct q_conn *c);
/* Commands sent and not yet answered. */
int q_conn_inflight(const struct q_conn *c);
/* How many times the connection was lost since it was made. */
int64_t q_conn_drops(const struct q_conn *c);

/* Reply helpers: they accept NULL and wrong types (returning NULL / 0 / -1). */
/* The element i of an array reply, or NULL. */
const redisReply *q_reply_elem(const redisReply *r, size_t i);
/* 1 when r is a bulk or status string. */
int q_reply_is_str(const redisReply *r);
/* 1 when r is an error reply whose text starts with prefix (e.g. "NOGROUP"). */
int q_reply_is_error(const redisReply *r, const char *prefix);

#endif
