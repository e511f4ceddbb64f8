/* The outbox's part of struct store (store_outbox.c): the relay's read positions and the
 * insert watcher. */
#ifndef GWB_STORE_OUTBOX_H
#define GWB_STORE_OUTBOX_H

#include <stdint.h>

#include "server/store/store.h"

struct store_outbox_part {
	/* The outbox insert watcher (store_outbox_watch): the connection's only update hook. */
	store_outbox_fn fn;
	void *arg;
	/* Every outbox row with a smaller id is published: the relay's reads start from it. */
	int64_t low;
	/* Every task with a seq at or below it has had its create intent published (or, for
	 * the tasks made before migration 15, written to the outbox): intent_cursor's row, read
	 * at open and moved by each publication's commit. A task above it is its own create
	 * intent, whose id is its seq. */
	int64_t ic_cursor;
	/* The create intents the relay's last read handed out, in seq order: the first of them
	 * are the tasks right above ic_cursor (store_outbox_published moves it over those). */
	int64_t *ic_fetched;
	int ic_nfetched, ic_cap;
};

/* Installs the connection's update hook (store_open does). */
void store_outbox_hook(struct store *s);
/* Sets low from the file: the first unpublished outbox row, or the next id when none is
 * (one scan of the outbox, when the store opens); reads ic_cursor; counts the intents not
 * published (counters.unpub). 0 or GWB_EDB. */
int store_outbox_low_find(struct store *s);

#endif
