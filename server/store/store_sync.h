/* The durability's parts of struct store (store_sync.c): which commits are on the disk, the
 * sync thread, and the commits not yet durable whose intents the relay must not see yet. */
#ifndef GWB_STORE_SYNC_H
#define GWB_STORE_SYNC_H

#include <pthread.h>
#include <stdint.h>

struct store;
struct store_sync;

/* commit_seq counts the commits; durable_seq is the last one known to be on the disk: a
 * commit with synchronous=FULL makes every commit up to it durable, a batch committed by
 * store_batch_begin_later waits for the sync thread. */
struct store_sync_part {
	struct store_sync *thread; /* NULL until store_sync_start */
	uint64_t commit_seq, durable_seq;
	uint64_t error_upto; /* commits up to it were covered by a sync that failed */
	int batch_later;     /* the open batch is store_batch_begin_later's */
};

/* The commits not yet durable that wrote outbox rows or new tasks (each its own create
 * intent), oldest first, each with its smallest row id and seq (0: none): the relay sees no
 * row from the oldest one's on (store_outbox_gate, store_create_gate). Entries [head, n) are
 * live. ob_txn_min and tk_txn_min: the smallest outbox row id and task seq written by the open
 * transaction (the update hook), 0 for none. */
struct store_gate {
	struct store_held {
		uint64_t seq;
		int64_t ob_min, tk_min;
	} *held;
	int n, head, cap;
	int64_t ob_txn_min, tk_txn_min;
};

/* Remembers that commit seq, not yet durable, wrote outbox rows from id ob_min on and new
 * tasks from seq tk_min on (0: none of that kind). */
void store_held_push(struct store *s, uint64_t seq, int64_t ob_min, int64_t tk_min);
/* Forgets the held commits up to sync.durable_seq: 1 when it forgot any (the relay may have
 * rows to publish now), 0 otherwise. */
int store_held_settle(struct store *s);
/* Starts one of the store's threads (the sync thread, the checkpoint thread) with every
 * signal blocked, so that signals stay the loop's, and names it: pthread_create's result. */
int store_thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg);
/* Marks every commit so far durable (a FULL commit, or a sync that covered them all). */
void store_durable_all(struct store *s);
/* The outbox row id from which rows wait for a sync (INT64_MAX: none wait). */
int64_t store_outbox_gate(const struct store *s);
/* The task seq from which new tasks' create intents wait for a sync (INT64_MAX: none). */
int64_t store_create_gate(const struct store *s);
/* Closes a batch of store_batch_begin_later: commits sync in their COMMIT again, and a sync
 * is asked of the thread when it committed. Nothing for another batch. */
void store_batch_later_end(struct store *s, int committed);
/* The loop's WAL syncs so far: passed on to the disk, and left to the sync thread (tests). */
void store_wal_syncs(struct store *s, int64_t *passed, int64_t *left);
/* Frees the held commits (store_close). */
void store_gate_close(struct store *s);

#endif
