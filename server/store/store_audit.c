/* The store's side of the quota audit: the team totals beside their reservations, the tasks
 * holding quota, the repair of the totals and its team-level records. */
#include "server/store/store_audit.h"

#include <jansson.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "server/store/store_internal.h"

/* The sums of the unreleased reservations held in the task rows, by the tasks' team: what
 * the submissions charged. Its parameter 1: teams_stmt binds it. */
#define AUDIT_TEAMS_SQL                                                                   \
	"SELECT tm.name, tm.reserved_mem_mib, tm.reserved_core_pct, COALESCE(s.mem, 0), " \
	"COALESCE(s.core, 0) FROM teams tm LEFT JOIN (SELECT team, SUM(m) AS mem, "         \
	"SUM(c) AS core FROM (" STORE_SQL_UNRELEASED("team, reserved_gpu_memory_mib AS m, " \
						     "reserved_gpu_core_percent AS c",         \
						     1) ") GROUP BY team) s ON s.team = tm.name " \
	"ORDER BY tm.name"

static sqlite3_stmt *teams_stmt(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, AUDIT_TEAMS_SQL);
	if (st)
		store_bind_states(st, 1, TASK_HOLDS_QUOTA, TASK_FINAL); /* no waiting task */
	return st;
}

static void team_row(sqlite3_stmt *st, struct store_audit_team *t)
{
	t->team = store_col_text(st, 0);
	t->stored_mem = sqlite3_column_int64(st, 1);
	t->stored_core = sqlite3_column_int64(st, 2);
	t->computed_mem = sqlite3_column_int64(st, 3);
	t->computed_core = sqlite3_column_int64(st, 4);
}

int store_audit_teams(struct store *s, store_audit_team_fn fn, void *arg)
{
	sqlite3_stmt *st = teams_stmt(s);
	if (!st)
		return GWB_EDB;
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_audit_team t;
		team_row(st, &t);
		if (t.team)
			fn(arg, &t);
	}
	sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : GWB_EDB;
}

int store_audit_holding(struct store *s, store_audit_task_fn fn, void *arg)
{
	sqlite3_stmt *st = store_stmt(
		s, "SELECT id, team, state, created_at, reserved_gpu_memory_mib, "
		   "reserved_gpu_core_percent, COALESCE(reason, ''), COALESCE(pod_deadline_at, 0) "
		   "FROM tasks WHERE seq IN (" STORE_SQL_UNRELEASED("seq", 1) ") ORDER BY seq");
	if (!st)
		return GWB_EDB;
	store_bind_states(st, 1, TASK_HOLDS_QUOTA, TASK_FINAL);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_audit_task t = {
			store_col_text(st, 0), store_col_text(st, 1),
			task_state_parse(store_col_text(st, 2)), sqlite3_column_int64(st, 3),
			sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5),
			store_col_text(st, 6), sqlite3_column_int64(st, 7)
		};
		if (t.id && t.team)
			fn(arg, &t);
	}
	sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : GWB_EDB;
}

/* Reads every team that drifted into *out (a new array of
 * [name, stored mem, stored core, computed mem, computed core]), so the updates never run
 * under an open SELECT of the same table. 0 or GWB_EDB. */
static int drifted_teams(struct store *s, json_t **out)
{
	*out = json_array();
	sqlite3_stmt *st = teams_stmt(s);
	if (!st)
		return GWB_EDB;
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_audit_team t;
		team_row(st, &t);
		if (t.team && (t.stored_mem != t.computed_mem || t.stored_core != t.computed_core))
			json_array_append_new(*out, json_pack("[s,I,I,I,I]", t.team,
							      (json_int_t)t.stored_mem,
							      (json_int_t)t.stored_core,
							      (json_int_t)t.computed_mem,
							      (json_int_t)t.computed_core));
	}
	sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : GWB_EDB;
}

/* Writes one team's repair and its record inside the caller's transaction. 0 or an error. */
static int repair_one(struct store *s, const struct store_audit_team *t, int64_t now_ms)
{
	sqlite3_stmt *st = store_stmt(s, "UPDATE teams SET reserved_mem_mib = ?1, "
					 "reserved_core_pct = ?2, updated_at = ?3 WHERE name = ?4");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, t->computed_mem);
	sqlite3_bind_int64(st, 2, t->computed_core);
	sqlite3_bind_int64(st, 3, now_ms);
	store_bind_text(st, 4, t->team);
	int rc = store_step_done(s, st);
	if (rc)
		return rc;
	json_t *detail =
		json_pack("{s:o, s:o}", "stored", jx_gpu_pair(t->stored_mem, t->stored_core),
			  "computed", jx_gpu_pair(t->computed_mem, t->computed_core));
	char *text = jx_dump(detail);
	json_decref(detail);
	st = store_stmt(s, "INSERT INTO team_events (team, ts, type, detail) VALUES (?, ?, "
			   "'audit_repair', ?)");
	if (!st) {
		gwb_free(text);
		return GWB_EDB;
	}
	store_bind_text(st, 1, t->team);
	sqlite3_bind_int64(st, 2, now_ms);
	/* SQLITE_TRANSIENT: text is freed right after the step. */
	sqlite3_bind_text(st, 3, text, -1, SQLITE_TRANSIENT);
	rc = store_step_done(s, st);
	gwb_free(text);
	return rc;
}

int store_audit_repair(struct store *s, int64_t now_ms, store_audit_team_fn fn, void *arg,
		       int *changed)
{
	json_t *drift = NULL;
	*changed = 0;
	int rc = store_begin(s);
	if (rc)
		return rc;
	if ((rc = drifted_teams(s, &drift)))
		goto out;
	size_t i;
	json_t *row;
	json_array_foreach(drift, i, row) {
		struct store_audit_team t = {
			json_string_value(json_array_get(row, 0)),
			json_integer_value(json_array_get(row, 1)),
			json_integer_value(json_array_get(row, 2)),
			json_integer_value(json_array_get(row, 3)),
			json_integer_value(json_array_get(row, 4)),
		};
		/* A repair that lowers the reserved totals gives quota back: the line may move. */
		if ((rc = repair_one(s, &t, now_ms)) || (rc = store_queue_admit(s, t.team, now_ms)))
			goto out;
		if (fn)
			fn(arg, &t);
	}
	if ((rc = store_commit(s)) == 0)
		*changed = (int)json_array_size(drift);
out:
	if (rc)
		store_rollback(s); /* harmless after a commit that already rolled back */
	json_decref(drift);
	return rc;
}

int store_team_events(struct store *s, const char *team, int limit, store_team_event_fn fn,
		      void *arg)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT id, ts, team, type, detail FROM team_events "
					 "WHERE ?1 IS NULL OR team = ?1 ORDER BY id DESC LIMIT ?2");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	sqlite3_bind_int(st, 2, limit);
	int step;
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct store_team_event ev = { sqlite3_column_int64(st, 0),
					       sqlite3_column_int64(st, 1), store_col_text(st, 2),
					       store_col_text(st, 3), store_col_text(st, 4) };
		fn(arg, &ev);
	}
	sqlite3_reset(st);
	return step == SQLITE_DONE ? 0 : GWB_EDB;
}
