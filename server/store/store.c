/* The store's core: opening and closing the connection, the prepared-statement cache, the
 * storage faults and the small helpers every store file binds and steps with. */
#include "server/store/store_internal.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"

const char *store_errmsg(struct store *s)
{
	return s && s->db ? sqlite3_errmsg(s->db) : "no database";
}

/* The kind of storage fault a SQLite result code is (the connection's codes are primary
 * ones: extended codes are off), or STORE_FAULT_NONE when it is not one. */
enum store_fault_kind store_fault_kind_of(int rc)
{
	switch (rc) {
	case SQLITE_FULL:
		return STORE_FAULT_FULL;
	case SQLITE_READONLY:
		return STORE_FAULT_READONLY;
	case SQLITE_IOERR:
	case SQLITE_CANTOPEN:
		return STORE_FAULT_IO;
	default:
		return STORE_FAULT_NONE;
	}
}

int store_rc_err(struct store *s, int rc)
{
	if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED)
		return GWB_EBUSY;
	enum store_fault_kind kind = store_fault_kind_of(rc);
	if (kind == STORE_FAULT_NONE)
		return GWB_EDB;
	if (s->fault.kind == STORE_FAULT_NONE) {
		s->fault.since_ms = clock_now_ms();
		s->fault.writes_failed = 0;
		s->fault.faults++;
		log_error("store", "storage_fault", "kind=%s error=%s", store_fault_name(kind),
			  log_q(sqlite3_errstr(rc)));
	}
	s->fault.kind = kind;
	s->fault.writes_failed++;
	return GWB_EUNAVAIL;
}

const char *store_fault_name(enum store_fault_kind kind)
{
	switch (kind) {
	case STORE_FAULT_FULL:
		return "full";
	case STORE_FAULT_READONLY:
		return "read_only";
	case STORE_FAULT_IO:
		return "io_error";
	default:
		return "none";
	}
}

void store_fault_get(struct store *s, struct store_fault *out)
{
	*out = s->fault;
}

/* A transaction that stored a change committed: whatever refused the writes before does not
 * now. */
void store_fault_clear(struct store *s)
{
	if (s->fault.kind == STORE_FAULT_NONE ||
	    sqlite3_total_changes64(s->db) == s->changes_at_begin)
		return;
	log_info("store", "storage_recovered", "kind=%s writes_failed=%lld seconds=%lld",
		 store_fault_name(s->fault.kind), (long long)s->fault.writes_failed,
		 (long long)((clock_now_ms() - s->fault.since_ms) / 1000));
	s->fault.kind = STORE_FAULT_NONE;
}

sqlite3_stmt *store_prepare_kept(struct store *s, const char *sql)
{
	sqlite3_stmt *st = NULL;
	if (sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
		log_error("store", "prepare_failed", "error=%s", log_q(sqlite3_errmsg(s->db)));
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

sqlite3_stmt *store_stmt(struct store *s, const char *sql)
{
	for (int i = 0; i < s->stmts.n; i++) {
		if (s->stmts.cache[i].sql == sql) {
			sqlite3_reset(s->stmts.cache[i].stmt);
			sqlite3_clear_bindings(s->stmts.cache[i].stmt);
			return s->stmts.cache[i].stmt;
		}
	}
	sqlite3_stmt *st = store_prepare_kept(s, sql);
	if (!st)
		return NULL;
	if (s->stmts.n < STORE_STMT_CACHE) {
		s->stmts.cache[s->stmts.n].sql = sql;
		s->stmts.cache[s->stmts.n].stmt = st;
		s->stmts.n++;
	} else {
		/* A full cache is a programming error (more statements than slots). */
		log_error("store", "stmt_cache_full", "limit=%d", STORE_STMT_CACHE);
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

int store_exec(struct store *s, const char *sql)
{
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : store_rc_err(s, rc);
}

int store_step_done(struct store *s, sqlite3_stmt *st)
{
	if (!st)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : store_rc_err(s, rc);
}

void store_bind_text(sqlite3_stmt *st, int idx, const char *v)
{
	if (v)
		sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, idx);
}

void store_bind_text_until_step(sqlite3_stmt *st, int idx, const char *v)
{
	if (v)
		sqlite3_bind_text(st, idx, v, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, idx);
}

const char *store_col_text(sqlite3_stmt *st, int idx)
{
	return (const char *)sqlite3_column_text(st, idx);
}

void store_col_copy(sqlite3_stmt *st, int idx, char *dst, size_t len)
{
	const char *t = store_col_text(st, idx);
	snprintf(dst, len, "%s", t ? t : "");
}

/* The page size of a new database file: a commit writes every page it changed, whole, to the
 * WAL, so half SQLite's 4 KiB is about half the bytes to checksum, copy, sync and checkpoint;
 * an ended task's row (about 1.1 KiB) still fits in one page. */
#define STORE_PAGE_SIZE_TEXT "2048"

int store_open(struct store **out, const char *path, int busy_timeout_ms, char *err, size_t errlen)
{
	return store_open_ex(out, path, busy_timeout_ms, busy_timeout_ms, STORE_WAL_MAX_DEFAULT, err,
			     errlen);
}

int store_open_ex(struct store **out, const char *path, int open_busy_ms, int busy_ms,
		  int64_t wal_max_bytes, char *err, size_t errlen)
{
	int busy_timeout_ms = open_busy_ms;
	/* SQLite's allocations through free lists of size classes (store_mem.c), and no
	 * memory statistics: SQLite would take a global mutex on every allocation to keep them,
	 * and nothing here reads them. Only possible before SQLite is initialised (the first
	 * open); later calls fail harmlessly. */
	static int configured;
	if (!configured) {
		configured = 1;
		store_mem_install();
		sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	}
	struct store *s = gwb_calloc(1, sizeof *s);
	int rc = sqlite3_open_v2(path, &s->db,
				 SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
				 store_vfs_name());
	if (rc != SQLITE_OK) {
		snprintf(err, errlen, "%s: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	/* SQLite opens a file it cannot write read-only, silently: the server must write its
	 * database (every answer is a commit), so it says so now rather than at the first
	 * submission. */
	if (sqlite3_db_readonly(s->db, "main") == 1) {
		snprintf(err, errlen,
			 "%s: read-only: the file or its filesystem cannot be written, and every "
			 "decision is written to it (make it writable, or set GWB_DB to a writable "
			 "path)",
			 path);
		store_close(s);
		return GWB_EUNAVAIL;
	}
	sqlite3_busy_timeout(s->db, busy_timeout_ms);
	sqlite3_extended_result_codes(s->db, 0);
	if (store_ids_setup(s)) {
		snprintf(err, errlen, "%s: cannot configure: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	/* A new file gets pages of STORE_PAGE_SIZE_TEXT bytes; a file that has any keeps its own
	 * (SQLite ignores the pragma then: only a VACUUM outside WAL mode could change it).
	 * WAL lets readers run beside the writer; synchronous=FULL makes every acknowledged
	 * commit survive a power loss too, not only a process kill. */
	if (store_exec(s, "PRAGMA page_size=" STORE_PAGE_SIZE_TEXT) ||
	    store_exec(s, "PRAGMA journal_mode=WAL") || store_exec(s, "PRAGMA synchronous=FULL")) {
		snprintf(err, errlen, "%s: cannot configure: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	char why[400];
	if ((rc = store_schema_migrate(s, why, sizeof why)) ||
	    (rc = store_wal_setup(s, wal_max_bytes, why, sizeof why))) {
		snprintf(err, errlen, "%s: %s", path, why);
		store_close(s);
		return rc;
	}
	/* Foreign keys from here on (not in a transaction: SQLite ignores the pragma there). */
	if (store_exec(s, "PRAGMA foreign_keys=ON")) {
		snprintf(err, errlen, "%s: cannot configure: %s", path, store_errmsg(s));
		store_close(s);
		return GWB_EDB;
	}
	/* The parts read what they keep in memory from the file (store_open_parts). */
	for (const struct store_open_hooks *p = store_open_parts; p->open || p->close; p++) {
		if (p->open && (rc = p->open(s))) {
			snprintf(err, errlen, "%s: %s: %s", path, p->what, store_errmsg(s));
			store_close(s);
			return rc;
		}
	}
	/* From here on the connection never sleeps for a lock (0: no busy handler) unless the
	 * caller asked for it: SQLITE_BUSY comes back at once as GWB_EBUSY. */
	sqlite3_busy_timeout(s->db, busy_ms);
	*out = s;
	return 0;
}

void store_close(struct store *s)
{
	if (!s)
		return;
	for (const struct store_open_hooks *p = store_open_parts; p->open || p->close; p++)
		if (p->close)
			p->close(s);
	for (int i = 0; i < s->stmts.n; i++)
		sqlite3_finalize(s->stmts.cache[i].stmt);
	sqlite3_close(s->db);
	gwb_free(s);
}

int store_check(struct store *s)
{
	sqlite3_stmt *st = store_stmt(s, "PRAGMA quick_check");
	int ok = st && sqlite3_step(st) == SQLITE_ROW &&
		 strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;
	if (st)
		sqlite3_reset(st);
	return ok ? 0 : GWB_EDB;
}

int store_one_int(sqlite3_stmt *st, int64_t *v)
{
	if (!st)
		return GWB_EDB;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return rc == SQLITE_ROW ? 0 : GWB_EDB;
}

int store_state_get(struct store *s, const char *id, enum task_state *out)
{
	sqlite3_stmt *st =
	    store_stmt(s, "SELECT state FROM tasks WHERE " STORE_SQL_TASK_IS("", ":id"));
	if (!st)
		return GWB_EDB;
	store_bind_text(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = task_state_parse(store_col_text(st, 0));
	sqlite3_reset(st);
	if (rc == SQLITE_ROW)
		return *out == TASK_NONE ? GWB_EDB : 0;
	return rc == SQLITE_DONE ? GWB_ENOTFOUND : GWB_EDB;
}

int store_state_check(const char *id, enum task_state from, enum task_state to)
{
	if (task_transition_ok(from, to))
		return 0;
	log_error("store", "illegal_transition", "task=%s from=%s to=%s", log_q(id),
		  task_state_name(from), task_state_name(to));
	return GWB_ESTATE;
}

void store_bind_states(sqlite3_stmt *st, int idx, unsigned with, unsigned without)
{
	char buf[256]; /* nine short names fit many times over */
	task_states_json(with, without, buf, sizeof buf);
	sqlite3_bind_text(st, idx, buf, -1, SQLITE_TRANSIENT); /* buf dies with this frame */
}
