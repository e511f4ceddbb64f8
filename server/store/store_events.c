/* Task events: a task's history, appended inside the caller's transaction. */
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "server/store/store_internal.h"

/* store_event_add with the detail already as JSON text (NULL for none). */
static int event_add_text(struct store *s, const char *task_id, int64_t now_ms, const char *type,
			  const char *from_state, const char *to_state, const char *detail)
{
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO task_events (task_id, ts, type, from_state, "
					 "to_state, detail) VALUES (?, ?, ?, ?, ?, ?)");
	if (!st)
		return GWB_EDB;
	/* The texts are the caller's and live until this returns: SQLite need not copy them. */
	store_bind_text_until_step(st, 1, task_id);
	sqlite3_bind_int64(st, 2, now_ms);
	store_bind_text_until_step(st, 3, type);
	store_bind_text_until_step(st, 4, from_state);
	store_bind_text_until_step(st, 5, to_state);
	store_bind_text_until_step(st, 6, detail);
	return store_step_done(s, st);
}

int store_event_add(struct store *s, const char *task_id, int64_t now_ms, const char *type,
		    const char *from_state, const char *to_state, const json_t *detail)
{
	/* The text jx_dump gives, in one pass into a buffer on the stack when it fits (every
	 * event's detail but the scheduler's longest messages); jx_dump sizes it first. */
	char small[512], *d = NULL, *heap = NULL;
	if (detail) {
		size_t n = json_dumpb(detail, small, sizeof small,
				      JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
		if (n > 0 && n < sizeof small) {
			small[n] = '\0';
			d = small;
		} else {
			d = heap = jx_dump(detail);
		}
	}
	int rc = event_add_text(s, task_id, now_ms, type, from_state, to_state, d);
	gwb_free(heap);
	return rc;
}
