/* The parts of the store, registered with the core: what each reads from the file when the
 * store opens and frees when it closes (store.c), and the hooks of those that keep state
 * across a batch's units (store_batch.c). The core knows none of them by name. */
#include "lib/alloc.h"
#include "server/store/store_internal.h"

/* The outbox's positions are read at open; the update hook is installed after them. */
static int outbox_open(struct store *s)
{
	int rc = store_outbox_low_find(s);
	if (rc == 0)
		store_outbox_hook(s);
	return rc;
}

static void outbox_close(struct store *s)
{
	gwb_free(s->outbox.ic_fetched);
}

/* Closed in this order: the threads first, which may still commit or count. */
const struct store_open_hooks store_open_parts[] = {
	{ NULL, NULL, store_sync_stop },
	{ NULL, NULL, store_ckpt_stop },
	{ store_ids_open, "cannot read the task ids", NULL },
	{ store_counts_open, "cannot count the tasks", NULL },
	{ outbox_open, "cannot read the outbox", outbox_close },
	{ NULL, NULL, store_rows_close },
	{ NULL, NULL, store_gate_close },
	{ NULL, NULL, NULL },
};

const struct store_batch_hooks *const store_batch_parts[] = {
	&store_team_batch_hooks,
	NULL,
};
