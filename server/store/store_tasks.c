/* The store's task side: the submission transaction, task reads (rows, through the column list
 * of server/task.h), listings and event history. The API shapes the JSON. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonw.h"
#include "lib/log.h"
#include "server/quota.h"
#include "server/store/store_internal.h"

/* Looks up an unexpired idempotency key. Returns 1 (found: fills fp and task), 0 (absent or
 * expired; an expired one is deleted), or a negative error. */
static int idem_lookup(struct store *s, const char *team, const char *key, int64_t now_ms,
		       char *fp, size_t fplen, char *task, size_t tasklen)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT fingerprint, task_id, expires_at FROM "
					 "idempotency_keys WHERE team = ? AND key = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	store_bind_text(st, 2, key);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		sqlite3_reset(st);
		return 0;
	}
	if (rc != SQLITE_ROW) {
		sqlite3_reset(st);
		return GWB_EDB;
	}
	snprintf(fp, fplen, "%s", store_col_text(st, 0));
	snprintf(task, tasklen, "%s", store_col_text(st, 1));
	int64_t expires = sqlite3_column_int64(st, 2);
	sqlite3_reset(st);
	if (expires > now_ms)
		return 1;
	st = store_stmt(s, "DELETE FROM idempotency_keys WHERE team = ? AND key = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	store_bind_text(st, 2, key);
	rc = store_step_done(s, st);
	return rc ? rc : 0;
}

/* The team's row: quota (v[0], v[1]) and reserved (v[2], v[3]) totals. */
static int team_select(struct store *s, const char *team, int64_t v[4])
{
	return store_team_totals(s, team, &v[2], &v[3], &v[0], &v[1]);
}

int store_team_reserve(struct store *s, const char *team, int64_t mem, int64_t core,
		       int64_t now_ms)
{
	sqlite3_stmt *st = store_stmt(s, "UPDATE teams SET reserved_mem_mib = reserved_mem_mib + ?, "
					 "reserved_core_pct = reserved_core_pct + ?, updated_at = ? "
					 "WHERE name = ?");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, mem);
	sqlite3_bind_int64(st, 2, core);
	sqlite3_bind_int64(st, 3, now_ms);
	store_bind_text_until_step(st, 4, team);
	return store_step_done(s, st);
}

int store_team_flush(struct store *s)
{
	struct store_team_pend *p = &s->teams.pend;
	if (!p->read || (!p->add_mem && !p->add_core))
		return 0;
	int rc = store_team_reserve(s, p->team, p->add_mem, p->add_core, p->updated_at);
	if (rc == 0) {
		/* Written: the row now holds them (and the hook marked the read stale). */
		p->add_mem = p->add_core = 0;
	}
	return rc;
}

void store_team_forget(struct store *s)
{
	memset(&s->teams.pend, 0, sizeof s->teams.pend);
	s->teams.pend_sp = s->teams.pend;
}

int store_team_usage(struct store *s, const char *team, struct team_usage *u)
{
	int64_t v[4];
	if (!s->batch.open) {
		int rc = team_select(s, team, v);
		if (rc == 0) {
			u->quota_mem = v[0];
			u->quota_core = v[1];
			u->reserved_mem = v[2];
			u->reserved_core = v[3];
		}
		return rc;
	}
	struct store_team_pend *p = &s->teams.pend;
	if (!p->read || p->stale || strcmp(p->team, team) != 0) {
		int rc = team_select(s, team, v);
		if (rc)
			return rc;
		p->quota_mem = v[0];
		p->quota_core = v[1];
		p->reserved_mem = v[2];
		p->reserved_core = v[3];
		p->stale = 0;
		p->read = 1;
		snprintf(p->team, sizeof p->team, "%s", team);
	}
	u->quota_mem = p->quota_mem;
	u->quota_core = p->quota_core;
	u->reserved_mem = p->reserved_mem + p->add_mem;
	u->reserved_core = p->reserved_core + p->add_core;
	return 0;
}

#define INS_COL_REQ(col) ", " col
#define INS_COL_OBS(col)
#define INS_COL_RO(col)
#define INS_COL(kind, f, tbl, col, size, role) INS_COL_##role(col)
#define INS_VAL_REQ ", ?"
#define INS_VAL_OBS
#define INS_VAL_RO
#define INS_VAL(kind, f, tbl, col, size, role) INS_VAL_##role
/* The new row's texts live in t until the insert has run: bound without a copy. */
#define INS_BIND_TEXT(st, i, t, f) store_bind_text_until_step(st, i, (t)->f[0] ? (t)->f : NULL);
#define INS_BIND_INT STORE_BIND_INT
#define INS_BIND_BOOL STORE_BIND_BOOL
#define INS_BIND_OPT STORE_BIND_OPT
#define INS_BIND_STATE STORE_BIND_STATE
#define INS_BIND_REQ(kind, st, i, t, f) INS_BIND_##kind(st, i, t, f) i++;
#define INS_BIND_OBS(kind, st, i, t, f)
#define INS_BIND_RO(kind, st, i, t, f)
#define INS_BIND(kind, f, tbl, col, size, role) INS_BIND_##role(kind, st, idx, t, f)

/* Copies src into dst (size len) whole: 0, or 1 when it does not fit (dst is then ""). */
static int copy_text(char *dst, size_t len, const char *src)
{
	size_t n = strlen(src);
	if (n >= len) {
		dst[0] = '\0';
		return 1;
	}
	memcpy(dst, src, n + 1);
	return 0;
}

/* The new task as a row: the request's columns (role REQ in TASK_COLUMNS), in state (queued,
 * or waiting). Returns 0, or GWB_EINVAL when a text does not fit its column (the API's limits
 * keep it from happening). */
static int new_task(struct task *t, const struct task_req *req, const char *key,
		    const struct submit_result *res, int64_t now_ms, enum task_state state)
{
	task_clear(t);
	t->state = state;
	t->gpu_memory_mib = req->gpu_memory_mib;
	t->gpu_core_percent = req->gpu_core_percent;
	t->gpu_count = req->gpu_count;
	t->duration_seconds = req->duration_seconds;
	t->reserved_mem_mib = res->req_mem;
	t->reserved_core_percent = res->req_core;
	t->created_at = now_ms;
	t->updated_at = now_ms;
	int cut = 0;
	cut |= copy_text(t->team, sizeof t->team, req->team);
	cut |= copy_text(t->name, sizeof t->name, req->name);
	cut |= copy_text(t->qos, sizeof t->qos, req->qos);
	cut |= copy_text(t->experiment, sizeof t->experiment, req->experiment);
	cut |= copy_text(t->workload, sizeof t->workload, req->workload ? req->workload : "");
	cut |= copy_text(t->idempotency_key, sizeof t->idempotency_key, key ? key : "");
	return cut ? GWB_EINVAL : 0;
}

/* t's seq and id: a new seq (store_task_seq_new), its id and Job name. */
static int new_task_id(struct store *s, struct task *t, int64_t now_ms, char id[16])
{
	int rc = store_task_seq_new(s, now_ms, &t->seq);
	if (rc)
		return rc;
	store_task_id_encode(t->seq, id);
	copy_text(t->id, sizeof t->id, id); /* 14 characters */
	task_job_name(id, t->job_name, sizeof t->job_name);
	return 0;
}

/* Inserts the task row with a new id; t receives the row as inserted. */
static int insert_task(struct store *s, const struct task_req *req, const char *key,
		       const struct submit_result *res, int64_t now_ms, enum task_state state,
		       char id[16], struct task *t)
{
	if (!s->batch.open)
		s->ids.next_seq = 0; /* read again: a transaction of its own */
	int rc = new_task(t, req, key, res, now_ms, state);
	if (rc || (rc = new_task_id(s, t, now_ms, id)))
		return rc;
	sqlite3_stmt *st = store_stmt(s, "INSERT INTO tasks (seq, state, updated_at" TASK_COLUMNS(
					 INS_COL) ") VALUES (?, ?, ?" TASK_COLUMNS(INS_VAL) ")");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, t->seq);
	store_bind_text(st, 2, task_state_name(t->state));
	sqlite3_bind_int64(st, 3, t->updated_at);
	int idx = 4;
	TASK_COLUMNS(INS_BIND)
	return store_step_done(s, st);
}

/* The submitted event's detail of the new task t, as jx_dump would write it (keys sorted),
 * without building it, then its NUL. */
static void submitted_detail(struct jw *w, const struct task *t)
{
	jw_obj_begin(w);
	if (t->idempotency_key[0])
		jw_member_str(w, "idempotency_key", t->idempotency_key);
	jw_member_int(w, "reserved_gpu_core_percent", t->reserved_core_percent);
	jw_member_int(w, "reserved_gpu_memory_mib", t->reserved_mem_mib);
	jw_obj_end(w);
	jw_raw(w, "", 1);
}

/* An optimistic batch's new task: t, with a new seq and id, kept for store_batch_write. */
static int defer_task(struct store *s, const struct task_req *req, const char *key,
		      const struct submit_result *res, int64_t now_ms, char id[16],
		      struct task *t)
{
	int rc = new_task(t, req, key, res, now_ms, TASK_QUEUED);
	if (rc || (rc = new_task_id(s, t, now_ms, id)))
		return rc;
	if (s->rows.n == s->rows.cap) {
		s->rows.cap = s->rows.cap ? 2 * s->rows.cap : 64;
		s->rows.task =
		    gwb_realloc(s->rows.task, (size_t)s->rows.cap * sizeof *s->rows.task);
	}
	s->rows.task[s->rows.n++] = t;
	return 0;
}

static int trail_insert(struct store *s, struct task *const *rows, int n);

/* A waiting task's row: inserted at once in state waiting (the batch's multi-row INSERT writes
 * queued tasks), its submitted event to waiting, and not an intent: the relay publishes no
 * waiting task (its admission writes its create intent), so the insert the update hook
 * counted as one is not. Its predicted admission is recorded. */
static int insert_waiting(struct store *s, const struct task_req *req, const char *key,
			  const struct submit_result *res, int64_t now_ms, char id[16],
			  struct task *t)
{
	int rc = insert_task(s, req, key, res, now_ms, TASK_WAITING, id, t);
	if (rc)
		return rc;
	s->counters.unpub_pend--;
	t->loaded_state = t->state;
	json_t *detail = json_pack("{s:I, s:I, s:s}", "requested_gpu_memory_mib",
				   (json_int_t)res->req_mem, "requested_gpu_core_percent",
				   (json_int_t)res->req_core, "on_quota_full", "wait");
	if (t->idempotency_key[0])
		json_object_set_new(detail, "idempotency_key", json_string(t->idempotency_key));
	rc = store_event_add(s, t->id, now_ms, "submitted", NULL, task_state_name(TASK_WAITING),
			     detail);
	json_decref(detail);
	return rc ? rc : store_queue_predict_new(s, t, now_ms);
}

/* The writes of an accepted submission, after the checks. Inside an optimistic batch (when
 * the caller's row outlives the batch: may_defer) the task and its event are written later,
 * by store_batch_write. The new task is its own create intent (store_outbox.c): no outbox
 * row. A waiting one (waiting) holds nothing and is no intent yet. */
static int submit_writes(struct store *s, const struct task_req *req, const char *key,
			 const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
			 struct submit_result *res, struct task *t, int may_defer, int waiting)
{
	char id[16];
	int defer = !waiting && may_defer && s->batch.open && s->batch.optimistic;
	int rc = waiting ? insert_waiting(s, req, key, res, now_ms, id, t)
	       : defer	 ? defer_task(s, req, key, res, now_ms, id, t)
			 : insert_task(s, req, key, res, now_ms, TASK_QUEUED, id, t);
	if (rc)
		return rc;
	copy_text(res->task_id, sizeof res->task_id, id);
	/* The row holds its reservation (res->req_mem and req_core), unreleased. */
	t->loaded_state = t->state;
	sqlite3_stmt *st;

	/* Inside a batch the team's row is written once, when the batch commits (store_team_usage
	 * read it for this team just before). */
	if (waiting) {
		/* nothing reserved */
	} else if (s->batch.open) {
		s->teams.pend.add_mem += res->req_mem;
		s->teams.pend.add_core += res->req_core;
		s->teams.pend.updated_at = now_ms;
	} else if ((rc = store_team_reserve(s, req->team, res->req_mem, res->req_core, now_ms))) {
		return rc;
	}

	if (key) {
		st = store_stmt(s, "INSERT INTO idempotency_keys (team, key, fingerprint, task_id, "
				   "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)");
		if (!st)
			return GWB_EDB;
		store_bind_text_until_step(st, 1, req->team);
		store_bind_text_until_step(st, 2, key);
		store_bind_text_until_step(st, 3, fingerprint);
		store_bind_text_until_step(st, 4, id);
		sqlite3_bind_int64(st, 5, now_ms);
		sqlite3_bind_int64(st, 6, now_ms + key_ttl_ms);
		if ((rc = store_step_done(s, st)))
			return rc;
	}
	/* Its event, as a batch writes it (store_batch_write). */
	return defer || waiting ? 0 : trail_insert(s, &t, 1);
}

/* Up to STORE_ROWS_MAX new tasks per statement (and as many events): a statement of exactly
 * as many rows as the batch has (one statement per table, a statement having a cost of its
 * own), each prepared the first time its size is needed and kept in the store (s->rows.st),
 * outside the statement cache and its search. */
static const char *const rows_head[STORE_ROWS_TABLES] = {
	"INSERT INTO tasks (seq, state, updated_at" TASK_COLUMNS(INS_COL) ") VALUES ",
	"INSERT INTO task_events (task_id, ts, type, from_state, to_state, detail) VALUES ",
};
/* A row's values; %s is the new task's state, a literal like the other values every row
 * shares (a literal costs the statement less than a parameter bound for each row). */
static const char *const rows_group[STORE_ROWS_TABLES] = {
	"(?, '%s', ?" TASK_COLUMNS(INS_VAL) ")",
	"(?, ?, 'submitted', NULL, '%s', ?)",
};

/* table's INSERT of n rows (1 to STORE_ROWS_MAX), reset, or NULL when it cannot be prepared. */
static sqlite3_stmt *rows_stmt(struct store *s, int table, int n)
{
	sqlite3_stmt **slot = &s->rows.st[table][n];
	if (*slot) {
		sqlite3_reset(*slot);
		sqlite3_clear_bindings(*slot);
		return *slot;
	}
	char sql[3072];
	size_t len = (size_t)snprintf(sql, sizeof sql, "%s", rows_head[table]);
	for (int i = 0; i < n && len < sizeof sql; i++) {
		if (i)
			len += (size_t)snprintf(sql + len, sizeof sql - len, ", ");
		if (len < sizeof sql)
			len += (size_t)snprintf(sql + len, sizeof sql - len, rows_group[table],
						task_state_name(TASK_QUEUED));
	}
	if (len >= sizeof sql) {
		log_error("store", "rows_sql_too_long", "table=%d rows=%d", table, n);
		return NULL;
	}
	return *slot = store_prepare_kept(s, sql);
}

/* 0, or the step's failure as the store's error: GWB_ECONFLICT for a constraint (a task id
 * taken, nearly always: the batch is then decided again, where the insert that fails undoes
 * only its own decision, whatever the constraint). */
static int rows_step(struct store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	if (rc == SQLITE_DONE)
		return 0;
	return rc == SQLITE_CONSTRAINT ? GWB_ECONFLICT : store_rc_err(s, rc);
}

/* The submitted events of n new tasks, inserted already. */
static int trail_insert(struct store *s, struct task *const *rows, int n)
{
	sqlite3_stmt *st;
	int idx = 1;
	/* The events' details one after the other in one buffer, each ended by its NUL. */
	struct jw *w = &s->rows.detail;
	jw_reset(w);
	size_t at[STORE_ROWS_MAX];
	for (int k = 0; k < n; k++) {
		at[k] = w->len;
		submitted_detail(w, rows[k]);
	}
	if (!jw_ok(w))
		return GWB_EINVAL;
	if (!(st = rows_stmt(s, STORE_ROWS_EVENTS, n)))
		return GWB_EDB;
	idx = 1;
	for (int k = 0; k < n; k++) {
		store_bind_text_until_step(st, idx++, rows[k]->id);
		sqlite3_bind_int64(st, idx++, rows[k]->created_at);
		store_bind_text_until_step(st, idx++, w->buf + at[k]);
	}
	return store_step_done(s, st);
}

/* Inserts n new tasks with their events. */
static int rows_insert(struct store *s, struct task *const *rows, int n)
{
	sqlite3_stmt *st = rows_stmt(s, STORE_ROWS_TASKS, n);
	if (!st)
		return GWB_EDB;
	int idx = 1;
	for (int k = 0; k < n; k++) {
		const struct task *t = rows[k];
		if (t->state != TASK_QUEUED)
			return GWB_EINVAL; /* the text holds a new task's state */
		sqlite3_bind_int64(st, idx++, t->seq); /* its state is the text's (new_task) */
		sqlite3_bind_int64(st, idx++, t->updated_at);
		TASK_COLUMNS(INS_BIND)
	}
	int rc = rows_step(s, st);
	return rc ? rc : trail_insert(s, rows, n);
}

int store_batch_write(struct store *s)
{
	int done = 0;
	while (done < s->rows.n && !s->rows.write_rc && !s->batch.spoiled) {
		int n = s->rows.n - done < STORE_ROWS_MAX ? s->rows.n - done : STORE_ROWS_MAX;
		int rc = rows_insert(s, s->rows.task + done, n);
		if (rc == GWB_ECONFLICT)
			s->batch.spoiled = 1; /* decided again, each insert at once */
		else if (rc)
			s->rows.write_rc = rc;
		done += n;
	}
	s->rows.n = 0;
	return s->rows.write_rc;
}

static int submit_row(struct store *s, const struct task_req *req, const char *key,
		      const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
		      struct submit_result *res, struct task *row, int may_defer);

int store_task_submit(struct store *s, const struct task_req *req, const char *key,
		      const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
		      struct submit_result *res)
{
	/* The row dies here: written at once, even inside an optimistic batch. */
	struct task *t = gwb_malloc(sizeof *t);
	int rc = submit_row(s, req, key, fingerprint, now_ms, key_ttl_ms, res, t, 0);
	gwb_free(t);
	return rc;
}

int store_task_submit_row(struct store *s, const struct task_req *req, const char *key,
			  const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
			  struct submit_result *res, struct task *row)
{
	return submit_row(s, req, key, fingerprint, now_ms, key_ttl_ms, res, row, 1);
}

/* Whether a submission the quota holds (fits) or not is admitted (*waiting 0), waits (1),
 * or is refused (GWB_EQUOTA). One that refuses is decided as it always was, whatever the line;
 * one that waits joins the line when it does not fit, or when the line may not be passed
 * (store_queue_blocks). Without on_quota_full, the team's default (read only when it matters). */
static int submit_waits(struct store *s, const struct task_req *req, int fits, int64_t now_ms,
			int *waiting)
{
	*waiting = 0;
	int wait = req->on_quota_full == STORE_ON_FULL_WAIT, rc = 0;
	if (req->on_quota_full == STORE_ON_FULL_REFUSE)
		return fits ? 0 : GWB_EQUOTA;
	if (fits) {
		int blocks = 0;
		if ((rc = store_queue_blocks(s, req->team, now_ms, &blocks)) || !blocks)
			return rc;
		if (!wait && (rc = store_queue_team_waits(s, req->team, &wait)))
			return rc;
		*waiting = wait;
		return 0;
	}
	if (!wait && (rc = store_queue_team_waits(s, req->team, &wait)))
		return rc;
	*waiting = wait;
	return wait ? 0 : GWB_EQUOTA;
}

static int submit_row(struct store *s, const struct task_req *req, const char *key,
		      const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
		      struct submit_result *res, struct task *row, int may_defer)
{
	int waiting = 0;
	memset(res, 0, sizeof *res);
	res->req_mem = req->gpu_memory_mib * req->gpu_count;
	res->req_core = req->gpu_core_percent * req->gpu_count;
	/* A batch moving to another team writes the one before first, outside this decision's
	 * unit: undoing the unit must not undo that. */
	if (s->batch.open && s->teams.pend.read && strcmp(s->teams.pend.team, req->team) != 0) {
		int frc = store_team_flush(s);
		if (frc)
			return frc;
	}
	int rc = store_unit_begin(s);
	if (rc)
		return rc;
	if (key) {
		char fp[128], task[32];
		rc = idem_lookup(s, req->team, key, now_ms, fp, sizeof fp, task, sizeof task);
		if (rc < 0)
			goto out;
		if (rc == 1) {
			snprintf(res->task_id, sizeof res->task_id, "%s", task);
			if (strcmp(fp, fingerprint) != 0) {
				rc = GWB_ECONFLICT;
				goto out;
			}
			res->replayed = 1;
			/* Nothing written: undone like a refusal (a pseudo-error keeps the unit's
			 * end in one place). */
			rc = GWB_EEXISTS;
			goto out;
		}
	}
	struct team_usage u;
	if ((rc = store_team_usage(s, req->team, &u)))
		goto out;
	res->quota_mem = u.quota_mem;
	res->quota_core = u.quota_core;
	res->reserved_mem = u.reserved_mem;
	res->reserved_core = u.reserved_core;
	struct quota_ask ask = { req->gpu_memory_mib, req->gpu_core_percent, req->gpu_count };
	if ((rc = submit_waits(s, req, quota_decide(&u, &ask).admitted, now_ms, &waiting)))
		goto out;
	rc = submit_writes(s, req, key, fingerprint, now_ms, key_ttl_ms, res, row, may_defer,
			   waiting);
out:
	rc = store_unit_end(s, rc);
	if (rc == 0 && !res->replayed)
		store_count_move(s, TASK_NONE, waiting ? TASK_WAITING : TASK_QUEUED);
	return rc == GWB_EEXISTS && res->replayed ? 0 : rc;
}

#define TASK_READ_TEXT(st, i, t, f) store_col_copy(st, i, (t)->f, sizeof (t)->f);
#define TASK_READ_INT(st, i, t, f) (t)->f = sqlite3_column_int64(st, i);
#define TASK_READ_BOOL(st, i, t, f) (t)->f = sqlite3_column_int(st, i) != 0;
#define TASK_READ_OPT(st, i, t, f)                                  \
	(t)->has_##f = sqlite3_column_type(st, i) != SQLITE_NULL; \
	(t)->f = sqlite3_column_int64(st, i);
#define TASK_READ_STATE(st, i, t, f) (t)->f = task_state_parse(store_col_text(st, i));

int store_task_read(sqlite3_stmt *st, struct task *t)
{
	/* Every column is read below: only the two fields that are not columns need a value. */
	t->changed = 0;
#define TASK_READ(kind, f, tbl, col, size, role) TASK_READ_##kind(st, TASK_COL_##f, t, f)
	TASK_COLUMNS(TASK_READ)
#undef TASK_READ
	t->loaded_state = t->state;
	return t->state == TASK_NONE ? GWB_EDB : 0;
}

int store_task_load(struct store *s, const char *id, struct task *out)
{
	sqlite3_stmt *st = store_stmt(s, TASK_SELECT "WHERE " STORE_SQL_TASK_IS("t.", ":id"));
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = store_task_read(st, out);
	else
		rc = rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
	sqlite3_reset(st);
	return rc;
}

int store_task_team(struct store *s, const char *id, char *team, size_t len)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT team FROM tasks WHERE " STORE_SQL_TASK_IS("", ":id"));
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		snprintf(team, len, "%s", store_col_text(st, 0));
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}

/* A team's tasks of every state below seq ?3, newest first, at most ?4: the newest ?4 of each
 * state, each read backwards in tasks_state_team, then merged. That index serves a team's
 * listing since migration 14 dropped the one on (team, seq): a submission inserts into one
 * index fewer. The text is built once, from the lifecycle table. */
static const char *team_list_sql(void)
{
	static char sql[4096];
	if (!sql[0]) {
		size_t len =
		    (size_t)snprintf(sql, sizeof sql, "%s", TASK_SELECT "WHERE t.seq IN (");
		for (int i = 0; i < TASK_NSTATES && len < sizeof sql; i++)
			len += (size_t)snprintf(
			    sql + len, sizeof sql - len,
			    "%sSELECT seq FROM (SELECT seq FROM tasks WHERE state = '%s' AND "
			    "team = ?1 AND seq < ?3 ORDER BY seq DESC LIMIT ?4)",
			    i ? " UNION ALL " : "", task_state_name((enum task_state)i));
		if (len < sizeof sql)
			len += (size_t)snprintf(sql + len, sizeof sql - len,
						") ORDER BY t.seq DESC LIMIT ?4");
		if (len >= sizeof sql) {
			sql[0] = '\0';
			log_error("store", "team_list_sql_too_long", "states=%d", TASK_NSTATES);
			return NULL;
		}
	}
	return sql;
}

int store_task_list(struct store *s, const char *team, const char *state, int64_t cursor,
		    int limit, store_task_fn fn, void *arg, int64_t *next)
{
	/* Three shapes, each through an index: a team's tasks of one state, or of all
	 * (team_list_sql), by tasks_state_team; every team's, by the primary key. */
	const char *sql = !team  ? TASK_SELECT "WHERE (?2 IS NULL OR t.state = ?2) AND (?3 = 0 OR "
					       "t.seq < ?3) ORDER BY t.seq DESC LIMIT ?4"
			  : state ? TASK_SELECT "WHERE t.state = ?2 AND t.team = ?1 AND t.seq < ?3 "
						"ORDER BY t.seq DESC LIMIT ?4"
				  : team_list_sql();
	sqlite3_stmt *st = sql ? store_stmt(s, sql) : NULL;
	if (!st)
		return GWB_EDB;
	if (team)
		store_bind_text(st, 1, team);
	store_bind_text(st, 2, state);
	/* No cursor: from the newest (the team's statements compare seq < ?3 alone, so that the
	 * index's range starts there). */
	sqlite3_bind_int64(st, 3, team && !cursor ? INT64_MAX : cursor);
	sqlite3_bind_int(st, 4, limit + 1); /* one more tells whether a next page exists */
	/* One row at a time: a task is some 12 KB, a page of them is not kept. */
	struct task *t = gwb_malloc(sizeof *t);
	int n = 0, rc;
	int64_t last = 0;
	*next = 0;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == limit) {
			*next = last;
			break;
		}
		store_task_read(st, t);
		fn(arg, t);
		last = t->seq;
		n++;
	}
	sqlite3_reset(st);
	gwb_free(t);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : GWB_EDB;
}

int store_task_events(struct store *s, const char *id, store_event_fn fn, void *arg)
{
	char team[64];
	int rc = store_task_team(s, id, team, sizeof team);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "SELECT id, ts, type, from_state, to_state, detail FROM "
					 "task_events WHERE task_id = ? ORDER BY id");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, id);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct task_event ev = { sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1),
					 store_col_text(st, 2), store_col_text(st, 3),
					 store_col_text(st, 4), store_col_text(st, 5) };
		fn(arg, &ev);
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : GWB_EDB;
}

int store_idem_purge(struct store *s, int64_t now_ms, int *purged)
{
	sqlite3_stmt *st = store_stmt(s, "DELETE FROM idempotency_keys WHERE expires_at <= ?");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_int64(st, 1, now_ms);
	int rc = store_step_done(s, st);
	*purged = rc ? 0 : sqlite3_changes(s->db);
	return rc;
}

int store_task_state_counts(struct store *s, int64_t *counts)
{
	for (int i = 0; i < TASK_NSTATES; i++)
		counts[i] = 0;
	sqlite3_stmt *st = store_stmt(s, "SELECT state, COUNT(*) FROM tasks GROUP BY state");
	if (!st)
		return GWB_EDB;
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		enum task_state state = task_state_parse(store_col_text(st, 0));
		if (state != TASK_NONE)
			counts[state] = sqlite3_column_int64(st, 1);
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : GWB_EDB;
}
