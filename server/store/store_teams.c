/* The store's team side: quota changes, token lookup (with the tokens it found remembered)
 * and the team views. */
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/quantity.h"
#include "server/store/store_internal.h"

/* Forgets every remembered token: a token changed (or may have). */
static void tokens_forget(struct store *s)
{
	memset(s->teams.tokens, 0, sizeof s->teams.tokens);
}

/* Writes pol into the team's row (just inserted or updated). */
static int policy_write(struct store *s, const char *team, const struct team_policy *pol)
{
	sqlite3_stmt *st = store_stmt(s, "UPDATE teams SET allowed_images = ?1, "
					 "cpu_default_milli = ?2, cpu_max_milli = ?3, "
					 "memory_default_bytes = ?4, memory_max_bytes = ?5 "
					 "WHERE name = ?6");
	if (!st)
		return GWB_EDB;
	char *allowed = json_array_size(pol->allowed_images) ? jx_dump(pol->allowed_images) : NULL;
	store_bind_text(st, 1, allowed);
	const int64_t v[4] = { pol->cpu_default, pol->cpu_max, pol->memory_default,
			       pol->memory_max };
	for (int i = 0; i < 4; i++) {
		if (v[i] > 0)
			sqlite3_bind_int64(st, 2 + i, v[i]);
		else
			sqlite3_bind_null(st, 2 + i);
	}
	store_bind_text(st, 6, team);
	int rc = store_step_done(s, st);
	gwb_free(allowed);
	return rc;
}

int store_team_put(struct store *s, const char *team, int64_t mem_mib, int64_t core_pct,
		   const unsigned char *token_hash, int64_t now_ms, int *created)
{
	return store_team_put_policy(s, team, mem_mib, core_pct, token_hash, NULL, now_ms,
				     created);
}

int store_team_put_policy(struct store *s, const char *team, int64_t mem_mib, int64_t core_pct,
			  const unsigned char *token_hash, const struct team_policy *pol,
			  int64_t now_ms, int *created)
{
	/* A new token replaces the team's old one: from now on only a read of the table says
	 * which token is whose. Forgotten again once the change is decided, so nothing read in
	 * between survives it either. */
	if (token_hash)
		tokens_forget(s);
	int rc = store_begin(s);
	if (rc)
		return rc;
	sqlite3_stmt *st = store_stmt(s, "SELECT 1 FROM teams WHERE name = ?");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	store_bind_text(st, 1, team);
	int step = sqlite3_step(st);
	sqlite3_reset(st);
	if (step != SQLITE_ROW && step != SQLITE_DONE) {
		rc = GWB_EDB;
		goto out;
	}
	*created = step == SQLITE_DONE;
	if (token_hash) {
		st = store_stmt(s, "SELECT 1 FROM teams WHERE token_hash = ? AND name <> ?");
		if (!st) {
			rc = GWB_EDB;
			goto out;
		}
		sqlite3_bind_blob(st, 1, token_hash, 32, SQLITE_TRANSIENT);
		store_bind_text(st, 2, team);
		step = sqlite3_step(st);
		sqlite3_reset(st);
		if (step == SQLITE_ROW) {
			rc = GWB_EEXISTS;
			goto out;
		}
	}
	/* Lowering a quota below the reservation is allowed: it blocks new submissions until
	 * enough is released, and never touches what is already reserved. */
	st = *created ? store_stmt(s, "INSERT INTO teams (quota_mem_mib, quota_core_pct, "
				      "token_hash, name, created_at, updated_at) VALUES "
				      "(?1, ?2, ?3, ?4, ?5, ?5)")
		      : store_stmt(s, "UPDATE teams SET quota_mem_mib = ?1, quota_core_pct = ?2, "
				      "token_hash = COALESCE(?3, token_hash), updated_at = ?5 "
				      "WHERE name = ?4");
	if (!st) {
		rc = GWB_EDB;
		goto out;
	}
	sqlite3_bind_int64(st, 1, mem_mib);
	sqlite3_bind_int64(st, 2, core_pct);
	if (token_hash)
		sqlite3_bind_blob(st, 3, token_hash, 32, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, 3);
	store_bind_text(st, 4, team);
	sqlite3_bind_int64(st, 5, now_ms);
	if ((rc = store_step_done(s, st)))
		goto out;
	if (pol && (rc = policy_write(s, team, pol)))
		goto out;
	/* A raised quota: the team's line admits what it now holds, in this transaction. */
	if (!*created && (rc = store_queue_admit(s, team, now_ms)))
		goto out;
	rc = store_commit(s);
	if (token_hash)
		tokens_forget(s);
	return rc;
out:
	store_rollback(s);
	if (token_hash)
		tokens_forget(s);
	return rc;
}

/* active_tasks counts the active states (not final, not waiting), each through the (state, team) index:
 * the cost follows the active tasks, not the team's whole history. */
#define TEAM_SELECT                                                                           \
	"SELECT name, quota_mem_mib, quota_core_pct, reserved_mem_mib, reserved_core_pct, "   \
	"token_hash IS NOT NULL, created_at, updated_at, (SELECT COUNT(*) FROM tasks t WHERE " \
	"t.team = teams.name AND t.state IN (SELECT value FROM json_each(?9))), "             \
	"allowed_images, cpu_default_milli, cpu_max_milli, memory_default_bytes, "            \
	"memory_max_bytes FROM teams "

/* The policy's columns of a TEAM_SELECT row (or policy_select's, from col on). */
static void policy_of_row(sqlite3_stmt *st, int col, struct team_policy *pol)
{
	const char *allowed = store_col_text(st, col);
	pol->allowed_images = allowed ? json_loads(allowed, 0, NULL) : NULL;
	if (!json_is_array(pol->allowed_images)) {
		json_decref(pol->allowed_images);
		pol->allowed_images = json_array();
	}
	pol->cpu_default = sqlite3_column_int64(st, col + 1);
	pol->cpu_max = sqlite3_column_int64(st, col + 2);
	pol->memory_default = sqlite3_column_int64(st, col + 3);
	pol->memory_max = sqlite3_column_int64(st, col + 4);
}

/* A cpu amount (millicores) as a Kubernetes quantity, or null for 0 (not set). */
static json_t *cpu_json(int64_t milli)
{
	char buf[QUANTITY_BUF];
	return milli > 0 ? json_string(quantity_format_milli(milli, buf, sizeof buf)) : json_null();
}

static json_t *memory_json(int64_t bytes)
{
	char buf[QUANTITY_BUF];
	if (bytes <= 0)
		return json_null();
	return json_string(quantity_format_binary(bytes, buf, sizeof buf));
}

json_t *store_team_policy_json(const struct team_policy *pol)
{
	return json_pack("{s:O, s:{s:o, s:o}, s:{s:o, s:o}}", "allowed_images",
			 pol->allowed_images, "cpu", "default", cpu_json(pol->cpu_default), "max",
			 cpu_json(pol->cpu_max), "memory", "default",
			 memory_json(pol->memory_default), "max", memory_json(pol->memory_max));
}

int store_team_policy(struct store *s, const char *team, struct team_policy *pol)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT allowed_images, cpu_default_milli, "
					 "cpu_max_milli, memory_default_bytes, memory_max_bytes "
					 "FROM teams WHERE name = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, team);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		policy_of_row(st, 0, pol);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}

static json_t *team_row_json(sqlite3_stmt *st)
{
	int64_t qm = sqlite3_column_int64(st, 1), qc = sqlite3_column_int64(st, 2);
	int64_t rm = sqlite3_column_int64(st, 3), rc = sqlite3_column_int64(st, 4);
	char created[40], updated[40];
	clock_fmt_rfc3339_ms(sqlite3_column_int64(st, 6), created, sizeof created);
	clock_fmt_rfc3339_ms(sqlite3_column_int64(st, 7), updated, sizeof updated);
	struct team_policy pol;
	policy_of_row(st, 9, &pol);
	json_t *policy = store_team_policy_json(&pol);
	json_decref(pol.allowed_images);
	/* available never goes below zero: a lowered quota shows 0, not a negative budget. */
	return json_pack("{s:s, s:o, s:o, s:o, s:I, s:b, s:s, s:s, s:o}", "team",
			 store_col_text(st, 0), "quota", jx_gpu_pair(qm, qc), "reserved",
			 jx_gpu_pair(rm, rc),
			 "available", jx_gpu_pair(qm > rm ? qm - rm : 0, qc > rc ? qc - rc : 0),
			 "active_tasks", (json_int_t)sqlite3_column_int64(st, 8), "has_token",
			 sqlite3_column_int(st, 5), "created_at", created, "updated_at", updated,
			 "workload_policy", policy);
}

json_t *store_team_json(struct store *s, const char *team)
{
	sqlite3_stmt *st = store_stmt(s, TEAM_SELECT "WHERE name = ?1");
	if (!st)
		return NULL;
	store_bind_text(st, 1, team);
	store_bind_states(st, 9, TASK_ACTIVE, 0); /* a waiting task is not active */
	json_t *out = sqlite3_step(st) == SQLITE_ROW ? team_row_json(st) : NULL;
	sqlite3_reset(st);
	store_team_queue_json(s, team, out);
	return out;
}

json_t *store_teams_json(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, TEAM_SELECT "ORDER BY name");
	json_t *arr = json_array();
	if (!st)
		return arr;
	store_bind_states(st, 9, TASK_ACTIVE, 0);
	while (sqlite3_step(st) == SQLITE_ROW) {
		json_t *t = team_row_json(st);
		store_team_queue_json(s, json_string_value(json_object_get(t, "team")), t);
		json_array_append_new(arr, t);
	}
	sqlite3_reset(st);
	return arr;
}

int store_team_by_token(struct store *s, const unsigned char *hash, char *team, size_t len)
{
	/* The slot comes from the hash, not the token: a SHA-256 is evenly spread, and which
	 * slot is looked at tells nothing of the token beyond its hash (as the index lookup
	 * below). The hashes are compared in constant time all the same. */
	int64_t now = clock_mono_ms();
	struct store_token *e = &s->teams.tokens[hash[0] % STORE_TOKEN_CACHE];
	if (e->read_ms && now - e->read_ms < STORE_TOKEN_TTL_MS &&
	    CRYPTO_memcmp(e->hash, hash, sizeof e->hash) == 0) {
		/* snprintf's copy (cut to len), without parsing a format on every request */
		size_t n = strlen(e->team);
		if (n >= len)
			n = len - 1;
		memcpy(team, e->team, n);
		team[n] = '\0';
		return 0;
	}
	sqlite3_stmt *st = store_stmt(s, "SELECT name FROM teams WHERE token_hash = ?");
	if (!st)
		return GWB_EDB;
	sqlite3_bind_blob(st, 1, hash, 32, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const char *name = store_col_text(st, 0);
		snprintf(team, len, "%s", name);
		/* Only tokens found are remembered: a wrong one costs a read every time, as
		 * before, and cannot push the teams' tokens out. */
		if (strlen(name) < sizeof e->team) {
			memcpy(e->hash, hash, sizeof e->hash);
			snprintf(e->team, sizeof e->team, "%s", name);
			e->read_ms = now > 0 ? now : 1;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}

int store_team_totals(struct store *s, const char *team, int64_t *res_mem, int64_t *res_core,
		      int64_t *quota_mem, int64_t *quota_core)
{
	sqlite3_stmt *st = store_stmt(s, "SELECT reserved_mem_mib, reserved_core_pct, "
					 "quota_mem_mib, quota_core_pct FROM teams WHERE name = ?");
	if (!st)
		return GWB_EDB;
	store_bind_text_until_step(st, 1, team);
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

static void team_unit_save(struct store *s)
{
	s->teams.pend_sp = s->teams.pend;
}

static void team_unit_undo(struct store *s)
{
	s->teams.pend = s->teams.pend_sp;
}

const struct store_batch_hooks store_team_batch_hooks = {
	.unit_save = team_unit_save,
	.unit_undo = team_unit_undo,
	.commit = store_team_flush,
	.forget = store_team_forget,
};
