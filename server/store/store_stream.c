/* The store's reads for the live stream: task events after an id, with the state each one left
 * the task in. Read-only; uses the store's statement cache like every store file. */
#include "server/store/store_stream.h"

#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "server/store/store_internal.h"

int store_stream_events(struct store *s, int64_t after, const char *team, struct store_stream_row *out,
			int max)
{
	/* The state as of an event is the last to_state recorded at or before it for that task
	 * (index task_events_task), so a replay shows each change in order, never a later
	 * state early. */
	sqlite3_stmt *st = store_stmt(
		s, "SELECT e.id, e.ts, e.task_id, t.team, e.type,"
		   " (SELECT e2.to_state FROM task_events e2 WHERE e2.task_id = e.task_id"
		   "  AND e2.id <= e.id AND e2.to_state IS NOT NULL ORDER BY e2.id DESC LIMIT 1),"
		   " t.state, t.reason, t.name, t.gpu_memory_mib, t.gpu_core_percent, t.gpu_count,"
		   " t.created_at"
		   " FROM task_events e JOIN tasks t ON " STORE_SQL_TASK_IS("t.", "e.task_id")
		   " WHERE e.id > ?1 AND (?2 IS NULL OR t.team = ?2) ORDER BY e.id LIMIT ?3");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, after);
	store_bind_text(st, 2, team);
	sqlite3_bind_int(st, 3, max);
	int n = 0, rc = SQLITE_DONE;
	while (n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_stream_row *row = &out[n++];
		memset(row, 0, sizeof *row);
		row->id = sqlite3_column_int64(st, 0);
		row->ts_ms = sqlite3_column_int64(st, 1);
		store_col_copy(st, 2, row->task, sizeof row->task);
		store_col_copy(st, 3, row->team, sizeof row->team);
		store_col_copy(st, 4, row->type, sizeof row->type);
		store_col_copy(st, 5, row->state, sizeof row->state);
		const char *now_state = store_col_text(st, 6);
		if (now_state && strcmp(now_state, row->state) == 0)
			store_col_copy(st, 7, row->reason, sizeof row->reason);
		store_col_copy(st, 8, row->name, sizeof row->name);
		row->gpu_memory_mib = sqlite3_column_int64(st, 9);
		row->gpu_core_percent = sqlite3_column_int64(st, 10);
		row->gpu_count = sqlite3_column_int64(st, 11);
		row->created_ms = sqlite3_column_int64(st, 12);
	}
	if (n < max)
		rc = rc == SQLITE_DONE ? 0 : GWB_EDB;
	else
		rc = 0;
	sqlite3_reset(st);
	return rc ? rc : n;
}

int store_stream_head(struct store *s, int64_t *head)
{
	return store_one_int(store_stmt(s, "SELECT COALESCE(MAX(id), 0) FROM task_events"), head);
}
