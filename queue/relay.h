/* The outbox relay (the producer side of the intent stream): reads committed, unpublished
 * intents through a callback, publishes them with pipelined XADDs, and reports each stream id
 * back so it is recorded on its row. It also trims the stream, never past an entry that the
 * group has not acknowledged. It knows nothing of SQLite: the store is behind the callbacks. */
#ifndef GWB_QUEUE_RELAY_H
#define GWB_QUEUE_RELAY_H

#include <event2/event.h>
#include <stdint.h>

#include "queue/codec.h"
#include "queue/conn.h"

/* Intents published per batch: one pipelined round trip and one store transaction each. */
#define Q_RELAY_BATCH 64
/* Room for "ms-seq" of a stream id. */
#define Q_ID_MAX 48
/* Entries removed by one trim step at most (bounds the XRANGE reply it reads). */
#define Q_TRIM_STEP 256

struct q_relay_ops {
	/* Fills out with up to max unpublished intents, oldest first (out[i].id is the outbox
	 * id). Returns how many (>= 0), or a negative error (the relay tries again later). */
	int (*fetch)(void *arg, struct q_intent *out, int max);
	/* Records that intent ids[i] was published as stream_ids[i], for i < n, in one durable
	 * step. 0, or a negative error (the relay keeps the ids and tries again). */
	int (*published)(void *arg, const int64_t *ids, const char (*stream_ids)[Q_ID_MAX], int n);
};

struct q_relay;

/* Makes a relay publishing to keys->stream on conn (borrowed: free the relay after the
 * connection, since closing the connection answers the relay's commands). ops is copied.
 * maxlen is the length the stream is trimmed towards (0: never trim). */
struct q_relay *q_relay_new(struct event_base *base, struct q_conn *conn,
			    const struct q_keys *keys, int64_t maxlen,
			    const struct q_relay_ops *ops, void *arg);
/* Accepts NULL. */
void q_relay_free(struct q_relay *r);
/* Asks for a publishing round at the loop's next turn (after the current callback, so after
 * the transaction that wrote the outbox row has committed). Cheap; calls coalesce. */
void q_relay_kick(struct q_relay *r);
/* Housekeeping: a publishing round (rows written by other processes, retries after
 * failures) and, every few seconds, a trim step. */
void q_relay_tick(struct q_relay *r, int64_t now_ms);

struct q_relay_stats {
	int64_t published;     /* entries added since start */
	int64_t failed;        /* XADDs that failed */
	int64_t trimmed;       /* entries removed by trimming */
	int inflight;          /* XADDs in flight */
	int unrecorded;        /* published, stream id not yet recorded */
	const char *last_error;
};
void q_relay_stats(const struct q_relay *r, struct q_relay_stats *st);

#endif
