/* The ids' part of struct store (store_ids.c): where new seqs are drawn from. */
#ifndef GWB_STORE_IDS_H
#define GWB_STORE_IDS_H

#include <stdint.h>

struct store;

struct store_ids {
	/* The next free seq (0: not read in this batch or transaction). */
	int64_t next_seq;
	/* task_legacy_ids has rows: a new seq's id is checked against them. */
	int has_legacy;
};

/* Registers the gwb_task_seq SQL function on the connection (before the migrations): 0 or
 * GWB_EDB. */
int store_ids_setup(struct store *s);
/* Reads whether task_legacy_ids has any row (a file made before schema 13 with tasks in it):
 * 0 or GWB_EDB. */
int store_ids_open(struct store *s);
/* Forgets next_seq, which the next new seq reads again (a batch begins). */
void store_ids_forget(struct store *s);

/* The seq of a new task (its id: store_task_id_encode, and its create intent's id), never one
 * handed out before, above every outbox id, and never one whose id is a legacy task's: 0, or
 * GWB_EDB when the file cannot be read. next_seq, the next free one, is read again at each
 * batch's start (0). */
int store_task_seq_new(struct store *s, int64_t now_ms, int64_t *seq);
/* A new intent id, for a cancel's outbox row (store_task_seq_new draws task seqs from the same
 * counter): above every task seq and outbox id there is, so that no two intents, old or new,
 * share an id. 0, or GWB_EDB. */
int store_intent_id_new(struct store *s, int64_t *id);

#endif
