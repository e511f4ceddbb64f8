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

#endif
