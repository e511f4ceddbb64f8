/* The durability's parts of struct store (store_sync.c): which commits are on the disk, the
 * sync thread, and the commits not yet durable whose intents the relay must not see yet. */
#ifndef GWB_STORE_SYNC_H
#define GWB_STORE_SYNC_H

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

/* Frees the held commits (store_close). */
void store_gate_close(struct store *s);

#endif
