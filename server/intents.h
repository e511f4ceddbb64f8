/* Job intents in gwb-server: wires the store's outbox to the queue's relay, the queue's
 * consumer to an intent handler, and both to the event loop (connections, housekeeping,
 * /readyz "redis"). It owns the two Redis connections, the relay and the consumer. Until the
 * reconciler plugs in its handler, the built-in one records "intent received" in the task's
 * events and moves a queued task to "creating". */
#ifndef GWB_INTENTS_H
#define GWB_INTENTS_H

#include <stddef.h>

#include "config/config.h"
#include "queue/codec.h"
#include "server/server.h"
#include "server/store/store.h"

struct intents;

/* What the queue side needs; copied by intents_start, pointers borrowed for its life. */
struct intents_ctx {
	struct event_base *base;
	const struct gwb_config *cfg;
	struct store *store;
	struct server_hooks hooks;
};

/* Starts the queue side when cfg->redis is set (otherwise *out is NULL and it returns 0):
 * connects (with back-off, in the background), registers the housekeeping callback and the
 * /readyz entry "redis", and watches the store's outbox. 0 and *out, or a negative error
 * with err filled. */
int intents_start(struct intents **out, const struct intents_ctx *ctx, char *err,
		  size_t errlen);
/* Stops everything; entries being handled stay pending in Redis and are handled again after
 * a restart. A plugged-in handler must be stopped first. Accepts NULL. */
void intents_stop(struct intents *it);

/* Answer of an intent handler: rc 0 once the intent's outcome is durably recorded (the entry
 * is then acknowledged); GWB_ENOTFOUND when it can never be handled (dead-lettered); any other
 * negative error to have it delivered again later: such a failed attempt is counted in SQLite
 * (table intent_failures) and the intent is dead-lettered at queue.max_failures of them. How
 * often an intent was delivered (restarts, claims) never counts. */
typedef void (*intents_done_fn)(void *ctx, int rc);
/* Handles one intent (in is valid during the call only). done(ctx, rc) must be called exactly
 * once, possibly before this returns. The same intent may arrive again after a crash or a
 * lost acknowledgement: a handler must treat it as already done when it is. */
typedef void (*intents_handler_fn)(void *arg, const struct q_intent *in, intents_done_fn done,
				   void *ctx);
/* Replaces the built-in handler (fn NULL restores it). Intents whose outcome is already
 * recorded are acknowledged without reaching fn. */
void intents_set_handler(struct intents *it, intents_handler_fn fn, void *arg);

/* How many more intents the plugged-in handler can start now (<= 0: none), given that it
 * holds held of them (handed over, not yet answered). */
typedef int (*intents_capacity_fn)(void *arg, int held);
/* Back-pressure: the consumer reads no more intents than fn allows, so the rest wait in the
 * stream as new entries (fn NULL: only the consumer's own cap). */
void intents_set_capacity(struct intents *it, intents_capacity_fn fn, void *arg);
/* The handler's capacity grew: reading resumes at the loop's next turn, never inside this
 * call. Accepts NULL. */
void intents_poke(struct intents *it);
/* Redis lost the stream (its consumer group had to be made again): the intents it held are
 * gone, and the tasks queued before now_ms (wall clock) will not get theirs. */
typedef void (*intents_lost_fn)(void *arg, int64_t now_ms);
/* Sets (fn not NULL) or clears what is told when the stream was lost. */
void intents_on_lost(struct intents *it, intents_lost_fn fn, void *arg);
/* Entries moved to the dead-letter stream since the start. */
int64_t intents_dead_lettered(const struct intents *it);

#endif
