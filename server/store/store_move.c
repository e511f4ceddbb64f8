/* The one door of a task's state: a decider's move applied against the state the decider saw,
 * checked against the lifecycle table, written with the task's observed fields, recorded as
 * an event and counted. Nothing else writes a task's state. */
#include "lib/err.h"
#include "server/store/store_internal.h"
#include "server/store/store_recon.h"

#define MOVE_SET_OBS(col) ", " col " = ?"
#define MOVE_SET_REQ(col)
#define MOVE_SET_RO(col)
#define MOVE_SET(kind, f, tbl, col, size, role) MOVE_SET_##role(col)

#define MOVE_BIND_OBS(kind, st, i, t, f) STORE_BIND_##kind(st, i, t, f) i++;
#define MOVE_BIND_REQ(kind, st, i, t, f)
#define MOVE_BIND_RO(kind, st, i, t, f)
#define MOVE_BIND(kind, f, tbl, col, size, role) MOVE_BIND_##role(kind, st, idx, t, f)

/* t is as its deciders saw it and now holds state s: what the row holds, nothing pending. */
static void task_at(struct task *t, enum task_state s)
{
	t->state = s;
	t->loaded_state = s;
	t->changed = 0;
}

int store_move_write(struct store *s, struct task *t, const struct task_move *m, int64_t now_ms)
{
	enum task_state from = t->loaded_state;
	int rc = store_state_check(t->id, from, m->to);
	if (rc)
		return rc;
	const char *reason = task_reason_name(m->reason);
	if (reason)
		TASK_SET_TEXT(t, reason, reason);
	/* Only the cancel request enters cancelling: the move is the request. */
	if (m->to == TASK_CANCELLING && from != TASK_CANCELLING) {
		t->has_cancel_requested_at = 1;
		t->cancel_requested_at = now_ms;
	}
	sqlite3_stmt *st = store_stmt(s, "UPDATE tasks SET state = ?, updated_at = ?, "
					 "cancel_requested_at = ?" TASK_COLUMNS(MOVE_SET)
					 " WHERE " STORE_SQL_TASK_IS("", ":id"));
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, task_state_name(m->to));
	sqlite3_bind_int64(st, 2, now_ms);
	int idx = 3;
	STORE_BIND_OPT(st, idx, t, cancel_requested_at)
	idx++;
	TASK_COLUMNS(MOVE_BIND)
	store_bind_text(st, idx, t->id);
	if ((rc = store_step_done(s, st)))
		return rc;
	if (from != m->to) {
		rc = store_event_add(s, t->id, now_ms, task_event_name(m->event),
				     task_state_name(from), task_state_name(m->to), m->detail);
		if (rc)
			return rc;
		/* Counted when the caller's transaction commits; undone with it. */
		store_count_move(s, from, m->to);
		if (m->to == TASK_RUNNING)
			store_queue_note_start(s, t, now_ms);
	}
	task_at(t, m->to);
	return 0;
}

int store_task_move(struct store *s, struct task *t, const struct task_move *m, int64_t now_ms)
{
	enum task_state seen = t->loaded_state;
	int rc = store_unit_begin(s);
	if (rc)
		return rc;
	enum task_state cur;
	if (!(rc = store_state_get(s, t->id, &cur)) && cur != seen)
		rc = GWB_ECONFLICT;
	if (!rc)
		rc = store_move_write(s, t, m, now_ms);
	rc = store_unit_end(s, rc);
	if (rc && t->loaded_state != seen) {
		task_at(t, seen); /* undone: the row holds what the deciders saw */
		t->changed = 1;
	}
	return rc;
}
