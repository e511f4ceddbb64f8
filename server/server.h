/* The gwb-server process context: one event base and the modules hanging off it (config,
 * store, HTTP, and later the queue and the Kubernetes side), plus the two extension points
 * other modules plug into: readiness reporters and the housekeeping timer. */
#ifndef GWB_SERVER_H
#define GWB_SERVER_H

#include <event2/event.h>
#include <jansson.h>
#include <stdint.h>

#include "config/config.h"
#include "server/store.h"

#define GWB_VERSION "0.1.0"
#define SERVER_MAX_DEPS 8
#define SERVER_MAX_CRON 16

/* Reports one dependency's state for /readyz: returns a short state name ("ok", "connected",
 * "disconnected", "not_configured", ...) and may add fields to detail. *ready is set to 0 when
 * the dependency keeps the server from serving. */
typedef const char *(*server_health_fn)(void *arg, json_t *detail, int *ready);
/* Runs on every housekeeping tick, on the loop. now_ms is the wall clock. */
typedef void (*server_cron_fn)(void *arg, int64_t now_ms);

struct server {
	struct event_base *base;
	const struct gwb_config *cfg;
	struct store *store;
	struct intents *intents;         /* the Redis side (server/intents.c); NULL without Redis */
	struct evhttp *http;
	struct reconciler *recon;        /* NULL when no Kubernetes API is configured */
	struct event *cron_timer;
	struct event *sig_term, *sig_int;
	int64_t started_ms;
	int64_t idem_purged_ms;          /* last idempotency-key purge */
	unsigned char admin_hash[32];    /* SHA-256 of the admin token */
	int has_admin;
	char url[300];                   /* http://HOST:PORT actually bound */
	int64_t http_replies[6];         /* replies by status class: [2] = 2xx ... [5] = 5xx */
	struct {
		const char *name;
		server_health_fn fn;
		void *arg;
	} deps[SERVER_MAX_DEPS];
	int ndeps;
	struct {
		server_cron_fn fn;
		void *arg;
	} cron[SERVER_MAX_CRON];
	int ncron;
};

/* Adds a dependency to /readyz. name is static. Returns 0 or GWB_ETOOBIG when full. */
int server_health_add(struct server *srv, const char *name, server_health_fn fn, void *arg);
/* Adds a housekeeping callback. Returns 0 or GWB_ETOOBIG when full. */
int server_cron_add(struct server *srv, server_cron_fn fn, void *arg);

/* Binds the HTTP API on cfg->listen and fills srv->url with the real address. 0, or a negative
 * error with the reason in err. */
int http_start(struct server *srv, char *err, size_t errlen);
/* Stops accepting and frees the HTTP server. Accepts a server that never started. */
void http_stop(struct server *srv);

#endif
