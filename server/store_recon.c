/* The store's reconciler side. */
#include "server/store_recon.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "server/store_internal.h"

static void copy_col(sqlite3_stmt *st, int col, char *dst, size_t len)
{
	const char *t = store_col_text(st, col);
	snprintf(dst, len, "%s", t ? t : "");
}

int store_task_load(struct store *s, const char *id, struct task_row *out)
{
	sqlite3_stmt *st = store_stmt(
		s, "SELECT t.id, t.team, t.state, t.gpu_memory_mib, t.gpu_core_percent, "
		   "t.gpu_count, t.duration_seconds, t.qos, t.experiment, "
		   "t.cancel_requested_at IS NOT NULL, r.released, t.job_uid, t.job_suspended, "
		   "t.pod_name, t.pod_uid, t.pod_node, t.pod_phase, t.exit_code, t.reason, "
		   "t.allocation, t.pending_message, t.pending_diagnosis, t.created_at "
		   "FROM tasks t JOIN reservations r ON r.task_id = t.id WHERE t.id = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(st);
		return rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
	}
	memset(out, 0, sizeof *out);
	copy_col(st, 0, out->id, sizeof out->id);
	copy_col(st, 1, out->team, sizeof out->team);
	copy_col(st, 2, out->state, sizeof out->state);
	out->mem_mib = sqlite3_column_int64(st, 3);
	out->core_pct = sqlite3_column_int64(st, 4);
	out->count = sqlite3_column_int64(st, 5);
	out->duration_s = sqlite3_column_int64(st, 6);
	copy_col(st, 7, out->qos, sizeof out->qos);
	copy_col(st, 8, out->experiment, sizeof out->experiment);
	out->cancel_requested = sqlite3_column_int(st, 9);
	out->released = sqlite3_column_int(st, 10);
	copy_col(st, 11, out->job_uid, sizeof out->job_uid);
	out->job_suspended = sqlite3_column_int(st, 12);
	copy_col(st, 13, out->pod_name, sizeof out->pod_name);
	copy_col(st, 14, out->pod_uid, sizeof out->pod_uid);
	copy_col(st, 15, out->pod_node, sizeof out->pod_node);
	copy_col(st, 16, out->pod_phase, sizeof out->pod_phase);
	out->has_exit_code = sqlite3_column_type(st, 17) != SQLITE_NULL;
	out->exit_code = sqlite3_column_int64(st, 17);
	copy_col(st, 18, out->reason, sizeof out->reason);
	copy_col(st, 19, out->allocation, sizeof out->allocation);
	copy_col(st, 20, out->pending_message, sizeof out->pending_message);
	copy_col(st, 21, out->pending_diagnosis, sizeof out->pending_diagnosis);
	out->created_ms = sqlite3_column_int64(st, 22);
	sqlite3_reset(st);
	return 0;
}

int store_tasks_active(struct store *s, json_t **ids)
{
	/* Both halves use an index (tasks_state, reservations_unreleased), so the pass costs
	 * what is active, not what the history holds. */
	sqlite3_stmt *st = store_stmt(
		s, "SELECT t.id FROM tasks t WHERE t.id IN (SELECT id FROM tasks WHERE state IN "
		   "(SELECT value FROM json_each(?1)) UNION "
		   "SELECT task_id FROM reservations WHERE released = 0) ORDER BY t.seq");
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

static void bind_or_null(sqlite3_stmt *st, int idx, const char *v)
{
	store_bind_text(st, idx, v && v[0] ? v : NULL);
}

int store_task_observe(struct store *s, const struct task_row *row, const char *expected_state,
		       const json_t *detail, int64_t now_ms)
{
	int rc = store_begin(s);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "SELECT state FROM tasks WHERE id = ?");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	store_bind_text(st, 1, row->id);
	char cur[16] = "";
	if (sqlite3_step(st) == SQLITE_ROW)
		copy_col(st, 0, cur, sizeof cur);
	sqlite3_reset(st);
	if (strcmp(cur, expected_state) != 0) {
		rc = GWB_ECONFLICT;
		goto out;
	}
	if ((rc = store_state_check(row->id, task_state_parse(cur), task_state_parse(row->state))))
		goto out;
	st = store_stmt(s, "UPDATE tasks SET state = ?, job_uid = ?, job_suspended = ?, "
			   "pod_name = ?, pod_uid = ?, pod_node = ?, pod_phase = ?, exit_code = ?, "
			   "reason = ?, allocation = ?, pending_message = ?, pending_diagnosis = ?, "
			   "updated_at = ? WHERE id = ?");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	store_bind_text(st, 1, row->state);
	bind_or_null(st, 2, row->job_uid);
	sqlite3_bind_int(st, 3, row->job_suspended);
	bind_or_null(st, 4, row->pod_name);
	bind_or_null(st, 5, row->pod_uid);
	bind_or_null(st, 6, row->pod_node);
	bind_or_null(st, 7, row->pod_phase);
	if (row->has_exit_code)
		sqlite3_bind_int64(st, 8, row->exit_code);
	else
		sqlite3_bind_null(st, 8);
	bind_or_null(st, 9, row->reason);
	bind_or_null(st, 10, row->allocation);
	bind_or_null(st, 11, row->pending_message);
	bind_or_null(st, 12, row->pending_diagnosis);
	sqlite3_bind_int64(st, 13, now_ms);
	store_bind_text(st, 14, row->id);
	if ((rc = store_step_done(s, st)))
		goto out;
	if (strcmp(cur, row->state) != 0 &&
	    (rc = store_event_add(s, row->id, now_ms, "state", cur, row->state, detail)))
		goto out;
	return store_commit(s);
out:
	store_rollback(s);
	return rc;
}

int store_task_note(struct store *s, const char *id, const char *type, const json_t *detail,
		    int64_t now_ms)
{
	int rc = store_begin(s);
	if (rc)
		return rc;
	if ((rc = store_event_add(s, id, now_ms, type, NULL, NULL, detail))) {
		store_rollback(s);
		return rc;
	}
	return store_commit(s);
}

int store_task_release(struct store *s, const char *id, const char *reason,
		       const char *final_state, const json_t *evidence, int64_t now_ms,
		       int *released)
{
	*released = 0;
	int rc = store_begin(s);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "SELECT r.team, r.gpu_memory_mib, r.gpu_core_percent, "
					 "r.released, t.state FROM reservations r JOIN tasks t ON "
					 "t.id = r.task_id WHERE r.task_id = ?");
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
	char team[64], state[16];
	copy_col(st, 0, team, sizeof team);
	int64_t mem = sqlite3_column_int64(st, 1), core = sqlite3_column_int64(st, 2);
	int already = sqlite3_column_int(st, 3);
	copy_col(st, 4, state, sizeof state);
	sqlite3_reset(st);
	if (already) {
		store_rollback(s);
		return 0;
	}
	char *ev = jx_dump(evidence);
	st = store_stmt(s, "UPDATE reservations SET released = 1, released_at = ?, "
			   "release_reason = ?, release_evidence = ? WHERE task_id = ? AND "
			   "released = 0");
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
	st = store_stmt(s, "UPDATE teams SET reserved_mem_mib = reserved_mem_mib - ?, "
			   "reserved_core_pct = reserved_core_pct - ?, updated_at = ? WHERE name = ?");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	sqlite3_bind_int64(st, 1, mem);
	sqlite3_bind_int64(st, 2, core);
	sqlite3_bind_int64(st, 3, now_ms);
	store_bind_text(st, 4, team);
	if ((rc = store_step_done(s, st)))
		goto out;
	if (final_state && strcmp(final_state, state) != 0) {
		rc = store_state_check(id, task_state_parse(state), task_state_parse(final_state));
		if (rc)
			goto out;
		st = store_stmt(s, "UPDATE tasks SET state = ?, updated_at = ? WHERE id = ?");
		if (!st) {
			rc = GWB_EDB;
			goto out;
		}
		store_bind_text(st, 1, final_state);
		sqlite3_bind_int64(st, 2, now_ms);
		store_bind_text(st, 3, id);
		if ((rc = store_step_done(s, st)) ||
		    (rc = store_event_add(s, id, now_ms, "state", state, final_state, NULL)))
			goto out;
	}
	json_t *detail = json_pack("{s:s, s:I, s:I, s:O}", "reason", reason, "gpu_memory_mib",
				   (json_int_t)mem, "gpu_core_percent", (json_int_t)core,
				   "evidence", evidence);
	rc = store_event_add(s, id, now_ms, "released", NULL, NULL, detail);
	json_decref(detail);
	if (rc)
		goto out;
	rc = store_commit(s);
	if (rc == 0)
		*released = 1;
	return rc;
out:
	store_rollback(s);
	return rc;
}

int store_team_totals(struct store *s, const char *team, int64_t *res_mem, int64_t *res_core,
		      int64_t *quota_mem, int64_t *quota_core)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT reserved_mem_mib, reserved_core_pct, "
					 "quota_mem_mib, quota_core_pct FROM teams WHERE name = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*res_mem = sqlite3_column_int64(st, 0);
		*res_core = sqlite3_column_int64(st, 1);
		*quota_mem = sqlite3_column_int64(st, 2);
		*quota_core = sqlite3_column_int64(st, 3);
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}
