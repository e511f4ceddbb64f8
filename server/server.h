/* What gwb-server's process offers its modules: the version, and the two extension points a
 * module plugs into, readiness reporters for /readyz and the housekeeping tick, reached
 * through a small table of callbacks. The process struct itself is private to main.c: each
 * module gets a narrow context of what it needs (api.h's api_ctx, intents.h's intents_ctx,
 * reconciler.h's reconciler_ctx). */
#ifndef GWB_SERVER_H
#define GWB_SERVER_H

#include <jansson.h>
#include <stdint.h>

#define GWB_VERSION "0.1.0"

/* Reports one dependency's state for /readyz: returns a short state name ("ok", "connected",
 * "disconnected", "not_configured", ...) and may add fields to detail. *ready is set to 0 when
 * the dependency keeps the server from serving. */
typedef const char *(*server_health_fn)(void *arg, json_t *detail, int *ready);
/* Runs on every housekeeping tick, on the loop. now_ms is the wall clock. */
typedef void (*server_cron_fn)(void *arg, int64_t now_ms);

/* How a module registers with the process (main.c fills it). */
struct server_hooks {
	/* Adds a dependency to /readyz. name is static. 0, or GWB_ETOOBIG when full. */
	int (*health_add)(void *host, const char *name, server_health_fn fn, void *arg);
	/* Adds a housekeeping callback. 0, or GWB_ETOOBIG when full. */
	int (*cron_add)(void *host, server_cron_fn fn, void *arg);
	void *host;
};

#endif
