/* The store's reconciler side. */
#include "server/store/store_recon.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "server/store/store_internal.h"

int store_tasks_active(struct store *s, json_t **ids)
{
	/* The active tasks and the ones holding their reservation. Every state that is not
	 * final is active, so the second half needs only the final ones. Both halves use an
	 * index (tasks_state_team, tasks_final_unreleased), so the pass costs what is active,
	 * not what the history holds. */
	sqlite3_stmt *st = store_stmt(
		s, "SELECT t.id FROM tasks t WHERE t.seq IN (SELECT seq FROM tasks WHERE state IN "
		   "(SELECT value FROM json_each(?1)) UNION " STORE_SQL_FINAL_UNRELEASED("seq") ") "
		   "ORDER BY t.seq");
	if (!st)
		return GWB_EDB;
	store_bind_states(st, 1, TASK_ACTIVE, 0);
	json_t *arr = json_array();
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		json_array_append_new(arr, json_string(store_col_text(st, 0)));
	sqlite3_reset(st);
	if (rc != SQLITE_DONE) {
		json_decref(arr);
		return GWB_EDB;
	}
	*ids = arr;
	return 0;
}

int store_task_note(struct store *s, const char *id, const char *type, const json_t *detail,
		    int64_t now_ms)
{
	int rc = store_unit_begin(s);
	if (rc)
		return rc;
	return store_unit_end(s, store_event_add(s, id, now_ms, type, NULL, NULL, detail));
}

/* The release's move to final_state with task_reason, through the door, for the row of id
 * in the open transaction. */
static int release_move(struct store *s, const char *id, enum task_state final_state,
			enum task_reason task_reason, int64_t now_ms)
{
	struct task *t = gwb_malloc(sizeof *t);
	int rc = store_task_load(s, id, t);
	if (rc == 0) {
		struct task_move m = { final_state, task_reason, TASK_EVENT_STATE, NULL };
		rc = store_move_write(s, t, &m, now_ms);
	}
	gwb_free(t);
	return rc;
}

int store_task_release(struct store *s, const char *id, enum task_proof proof,
		       enum task_state final_state, enum task_reason task_reason,
		       const json_t *evidence, int64_t now_ms, int *released)
{
	*released = 0;
	const char *reason = task_proof_name(proof);
	int rc = store_unit_begin(s);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "SELECT team, reserved_gpu_memory_mib, "
					 "reserved_gpu_core_percent, released, state FROM tasks "
					 "WHERE " STORE_SQL_TASK_IS("", ":id")
					 " AND reserved_gpu_memory_mib IS NOT NULL");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	store_bind_text(st, 1, id);
	if (sqlite3_step(st) != SQLITE_ROW) {
		sqlite3_reset(st);
		rc = GWB_ENOTFOUND;
		goto out;
	}
	char team[64];
	store_col_copy(st, 0, team, sizeof team);
	int64_t mem = sqlite3_column_int64(st, 1), core = sqlite3_column_int64(st, 2);
	int already = sqlite3_column_int(st, 3);
	enum task_state state = task_state_parse(store_col_text(st, 4));
	sqlite3_reset(st);
	if (already) {
		store_unit_end(s, GWB_EEXISTS); /* nothing written: closed like a refusal */
		return 0;
	}
	char *ev = jx_dump(evidence);
	st = store_stmt(s, "UPDATE tasks SET released = 1, released_at = ?, release_reason = ?, "
			   "release_evidence = ? WHERE " STORE_SQL_TASK_IS("", ":id")
			   " AND released = 0");
	if (!st) {
		gwb_free(ev);
		rc = GWB_EDB;
		goto out;
	}
	sqlite3_bind_int64(st, 1, now_ms);
	store_bind_text(st, 2, reason);
	store_bind_text(st, 3, ev);
	store_bind_text(st, 4, id);
	rc = store_step_done(s, st);
	gwb_free(ev);
	if (rc)
		goto out;
	if ((rc = store_team_reserve(s, team, -mem, -core, now_ms)))
		goto out;
	/* The quota is back: the team's line admits what it now holds, in this transaction. */
	if ((rc = store_queue_admit(s, team, now_ms)))
		goto out;
	if (final_state != TASK_NONE && final_state != state) {
		if ((rc = release_move(s, id, final_state, task_reason, now_ms)))
			goto out;
	} else if (task_reason_name(task_reason)) {
		/* The state stays: only the reason the task ends with. */
		st = store_stmt(s, "UPDATE tasks SET reason = ? WHERE "
				   STORE_SQL_TASK_IS("", ":id"));
		if (!st) {
			rc = GWB_EDB;
			goto out;
		}
		store_bind_text(st, 1, task_reason_name(task_reason));
		store_bind_text(st, 2, id);
		if ((rc = store_step_done(s, st)))
			goto out;
	}
	json_t *detail = json_pack("{s:s, s:I, s:I, s:O}", "reason", reason, "gpu_memory_mib",
				   (json_int_t)mem, "gpu_core_percent", (json_int_t)core,
				   "evidence", evidence);
	rc = store_event_add(s, id, now_ms, "released", NULL, NULL, detail);
	json_decref(detail);
out:
	rc = store_unit_end(s, rc);
	if (rc)
		return rc;
	*released = 1;
	return 0;
}
