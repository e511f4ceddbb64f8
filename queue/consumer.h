/* The consumer side of the intent stream: one member of group "reconcilers". On start (and
 * after every reconnection) it creates the group if needed (MKSTREAM), re-reads its own
 * pending entries (ID 0), claims entries idle too long from other consumers (XAUTOCLAIM),
 * then reads new ones (">"). Each entry becomes a delivery handed to a handler, which answers
 * later: XACK only then. It reads no more entries than the handler's capacity allows, so a
 * burst waits in the stream as new entries. Malformed entries, and those the handler calls
 * dead, go to the dead-letter stream with the reason, and are acknowledged; how often an
 * entry was delivered (restarts, claims) never makes it dead. It owns its deliveries. */
#ifndef GWB_QUEUE_CONSUMER_H
#define GWB_QUEUE_CONSUMER_H

#include <event2/event.h>
#include <stdint.h>

#include "queue/codec.h"
#include "queue/conn.h"

/* Entries read per command. */
#define Q_READ_BATCH 64
/* Deliveries handed out and not yet answered, at most: reading pauses at this many. */
#define Q_INFLIGHT_MAX 256
/* Fields of one stream entry, at most (ours has 6 pairs); a bigger entry is malformed. */
#define Q_ENTRY_MAX_FIELDS 32
/* Bytes of one readable (non-body) field value, at most. */
#define Q_FIELD_MAX 128

#define Q_CONSUMER_STATES(X) \
	X(WAITING, "waiting") X(GROUP, "creating_group") X(OWN, "reading_own_pending") \
	X(CLAIM, "claiming") X(LIVE, "reading_new") X(CLOSED, "closed")
enum q_consumer_state {
#define Q_CONS_ENUM(id, str) Q_CONS_##id,
	Q_CONSUMER_STATES(Q_CONS_ENUM)
#undef Q_CONS_ENUM
};
const char *q_consumer_state_name(enum q_consumer_state s);

/* What the handler decided about a delivery. */
enum q_outcome {
	Q_ACK,   /* the outcome is durably recorded: acknowledge */
	Q_RETRY, /* not now (a busy database, say): leave it pending, it comes back later */
	Q_DEAD,  /* it can never succeed: dead-letter it with the reason, then acknowledge */
};

struct q_delivery;
struct q_consumer;

/* Receives one delivery. The handler must call q_delivery_done(d) exactly once, now or from
 * a later callback; d stays valid until then (or until q_consumer_free). */
typedef void (*q_handler_fn)(void *arg, struct q_delivery *d);

/* The decoded intent of a delivery (valid while d is). */
const struct q_intent *q_delivery_intent(const struct q_delivery *d);
/* The stream entry id. */
const char *q_delivery_id(const struct q_delivery *d);
/* How many times Redis has delivered this entry (1 for the first time). */
int64_t q_delivery_count(const struct q_delivery *d);
/* Answers a delivery: Q_ACK sends XACK; Q_DEAD dead-letters it with reason (copied) then
 * acknowledges; Q_RETRY leaves it pending. d is invalid afterwards (freed at the loop's next
 * turn, not inside this call). If Redis is unreachable the entry simply stays pending and is
 * delivered again later, so a handler must treat a repeated intent as already done. */
void q_delivery_done(struct q_delivery *d, enum q_outcome o, const char *reason);

struct q_consumer_cfg {
	const char *consumer;      /* this member's name (copied) */
	int64_t claim_idle_ms;     /* claim entries idle longer than this */
	int64_t block_ms;          /* BLOCK of a read of new entries */
	int64_t dead_maxlen;       /* approximate length the dead-letter stream is kept to */
};

/* Makes a consumer. cmd carries the group commands and acknowledgements; rd only the
 * blocking reads (so a read waiting for new entries never delays an XACK). Both are
 * borrowed: free the consumer after them (closing them answers its commands). It starts when
 * both are connected; call q_consumer_on_conn whenever either changes state. */
struct q_consumer *q_consumer_new(struct event_base *base, struct q_conn *cmd, struct q_conn *rd,
				  const struct q_keys *keys, const struct q_consumer_cfg *cfg,
				  q_handler_fn fn, void *arg);
/* How many more deliveries the handler can take now (<= 0: none). */
typedef int (*q_capacity_fn)(void *arg);
/* Sets (fn not NULL) or clears the handler's capacity: reads ask for at most that many
 * entries (and at most Q_INFLIGHT_MAX deliveries are out in any case). A read already waiting
 * in Redis may still bring up to its count. Without it, only Q_INFLIGHT_MAX limits. */
void q_consumer_set_capacity(struct q_consumer *c, q_capacity_fn fn, void *arg);
/* The handler's capacity grew: reading resumes at the loop's next turn (never inside this
 * call). */
void q_consumer_poke(struct q_consumer *c);
/* Frees the consumer and every delivery not yet answered (they stay pending in Redis and are
 * delivered again later). The handler must drop its references first. Accepts NULL. */
void q_consumer_free(struct q_consumer *c);
/* Re-evaluates the connections: starts (or restarts from the group step) when both are
 * connected, waits otherwise. */
void q_consumer_on_conn(struct q_consumer *c);
/* Housekeeping: the periodic XAUTOCLAIM sweep (which also retries this consumer's own
 * entries whose handler answered Q_RETRY) and restarts after errors. */
void q_consumer_tick(struct q_consumer *c, int64_t now_ms);

struct q_consumer_stats {
	enum q_consumer_state state;
	int inflight;
	int64_t delivered, acked, dead, retried, claimed;
	/* XGROUP CREATE made the group: the stream was new, or Redis lost it (a restart without
	 * persistence, FLUSHALL) with every entry it held. */
	int64_t groups_created;
	const char *last_error;
};
void q_consumer_stats(const struct q_consumer *c, struct q_consumer_stats *st);

#endif
