/* Internals shared by the store's own files (store.c, and the store_*.c files that extend it):
 * the connection and its parts, the prepared-statement cache and the transaction helpers.
 * Nothing outside server/store/ (and its unit tests) includes this. */
#ifndef GWB_STORE_INTERNAL_H
#define GWB_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "lib/jsonw.h"
#include "server/store/store.h"

#include "server/store/store_batch.h"
#include "server/store/store_ckpt.h"
#include "server/store/store_counts.h"
#include "server/store/store_ids.h"
#include "server/store/store_outbox.h"
#include "server/store/store_queue.h"
#include "server/store/store_sync.h"
#include "server/store/store_teams.h"

#define STORE_STMT_CACHE 128

/* The connection and its parts, each owned by the file its header names: a file touches its
 * own part, and the core (store.c, store_batch.c) calls the others through functions and
 * hooks. */
struct store {
	sqlite3 *db;
	/* The prepared statements (store_stmt), by the address of their SQL. */
	struct store_stmts {
		struct {
			const char *sql; /* static string: the cache key is its address */
			sqlite3_stmt *stmt;
		} cache[STORE_STMT_CACHE];
		int n;
	} stmts;
	/* The storage fault the last write met (store_fault_get); cleared by the next commit
	 * that stored a change. changes_at_begin: sqlite3_total_changes64 when the transaction
	 * began. */
	struct store_fault fault;
	int64_t changes_at_begin;
	struct store_batch batch;       /* store_batch.c */
	struct store_rows rows;         /* store_tasks.c (store_batch_write) */
	struct store_counters counters; /* store_counts.c */
	struct store_ids ids;           /* store_ids.c */
	struct store_ckpt_part ckpt;    /* store_ckpt.c */
	struct store_sync_part sync;    /* store_sync.c */
	struct store_gate gate;         /* store_sync.c */
	struct store_outbox_part outbox; /* store_outbox.c */
	struct store_teams teams;       /* store_teams.c, store_tasks.c */
	struct store_queue_part queue;  /* store_queue.c */
};

/* A part's steps when the store opens (after the migrations and the pragmas) and closes
 * (before the connection does), in the order of store_open_parts (store_parts.c). open: 0, or
 * an error that fails the open, reported as what and SQLite's message. Either may be NULL. */
struct store_open_hooks {
	int (*open)(struct store *s);
	const char *what;
	void (*close)(struct store *s);
};
/* Ended by an entry without open and close. */
extern const struct store_open_hooks store_open_parts[];

/* Runs sql (no rows expected) on the connection: 0 or store_rc_err's error. */
int store_exec(struct store *s, const char *sql);
/* The kind of storage fault a SQLite result code is (the connection's codes are primary
 * ones: extended codes are off), or STORE_FAULT_NONE when it is not one. */
enum store_fault_kind store_fault_kind_of(int rc);
/* After a commit: a transaction that stored a change committed, so whatever refused the
 * writes before does not now (the fault is cleared and its end logged). */
void store_fault_clear(struct store *s);
/* Runs the migrations the file has not had, in one transaction: 0, or an error with the
 * reason in err (store_schema.c). */
int store_schema_migrate(struct store *s, char *err, size_t errlen);

/* The smaller of two row ids, 0 standing for none. */
static inline int64_t store_min_id(int64_t a, int64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}


#define STORE_TASK_SEL(kind, f, tbl, col, size, role) tbl "." col ", "
/* The task SELECT: the columns of TASK_COLUMNS in order (the trailing NULL closes the list),
 * read by store_task_read; the caller appends WHERE. */
#define TASK_SELECT                                                          \
	"SELECT " TASK_COLUMNS(STORE_TASK_SEL) "NULL FROM tasks t "

/* Binds field f of struct task *t as parameter i, by its column's kind (TASK_COLUMNS); an
 * empty text binds NULL (the store keeps NULL, never ""). */
#define STORE_BIND_TEXT(st, i, t, f) store_bind_text(st, i, (t)->f[0] ? (t)->f : NULL);
#define STORE_BIND_INT(st, i, t, f) sqlite3_bind_int64(st, i, (t)->f);
#define STORE_BIND_BOOL(st, i, t, f) sqlite3_bind_int(st, i, (t)->f);
#define STORE_BIND_OPT(st, i, t, f)                  \
	if ((t)->has_##f)                            \
		sqlite3_bind_int64(st, i, (t)->f);   \
	else                                         \
		sqlite3_bind_null(st, i);
#define STORE_BIND_STATE(st, i, t, f) store_bind_text(st, i, task_state_name((t)->f));

/* Reads the current row of a TASK_SELECT statement into *t. 0, or GWB_EDB when its state is
 * not in the lifecycle table (the rest is read anyway). */
int store_task_read(sqlite3_stmt *st, struct task *t);

/* The cancels task ?1 had before (its outbox row's attempt is one more): counted from its
 * cancel_requested events, written with each cancel's outbox row, through the events' index
 * on (task_id, id). The outbox has no index on task_id: counted there, every cancel scanned
 * every row the outbox ever held, on the loop. */
#define STORE_SQL_CANCELS_BEFORE                                                              \
	"(SELECT count(*) FROM task_events WHERE task_id = ?1 AND type = 'cancel_requested')"
/* Steps st (NULL: a statement that could not be prepared), a query of one row of one
 * integer, into *v, and resets it. 0 or GWB_EDB. */
int store_one_int(sqlite3_stmt *st, int64_t *v);
/* sql prepared to be kept (SQLITE_PREPARE_PERSISTENT), the caller's to finalize, or NULL
 * after logging the error. */
sqlite3_stmt *store_prepare_kept(struct store *s, const char *sql);
/* Returns a reset prepared statement for sql (a string literal; cached by address), or NULL on
 * a preparation error. The statement stays owned by the store. */
sqlite3_stmt *store_stmt(struct store *s, const char *sql);
/* BEGIN IMMEDIATE: 0, GWB_EBUSY or GWB_EDB. Inside a batch (store_batch_begin) it opens
 * SAVEPOINT "unit" instead, and store_commit / store_rollback release it or undo only its
 * writes: every transaction of the store's files is a savepoint of the batch there. */
int store_begin(struct store *s);
/* COMMIT (RELEASE in a batch): 0, GWB_EBUSY or GWB_EDB (rolled back on failure). */
int store_commit(struct store *s);
/* Opens the unit of one decision: store_begin. 0, GWB_EBUSY, GWB_EUNAVAIL (a storage fault,
 * or a batch whose transaction is gone) or GWB_EDB. */
int store_unit_begin(struct store *s);
/* Ends the unit opened by store_unit_begin: when rc is 0 commits it (COMMIT, or RELEASE inside
 * a batch: durable only with the batch's COMMIT) and returns that outcome; otherwise undoes
 * only this unit's writes (ROLLBACK, or ROLLBACK TO and RELEASE) and returns rc, except that
 * a GWB_EDB whose cause was the storage (the connection's last error) becomes GWB_EUNAVAIL,
 * and inside a batch whose transaction SQLite rolled back it returns the batch's error. */
int store_unit_end(struct store *s, int rc);
/* Records that a task moved from one state to the other (TASK_NONE: created). Inside a
 * transaction the move counts once that transaction commits; outside, at once. */
void store_count_move(struct store *s, enum task_state from, enum task_state to);
/* ROLLBACK; harmless when no transaction is open. */
void store_rollback(struct store *s);
/* Maps a failed SQLite result code to the store's error: GWB_EBUSY for a lock, GWB_EUNAVAIL
 * for the storage (SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN: the fault is
 * recorded on s), GWB_EDB otherwise. */
int store_rc_err(struct store *s, int rc);
/* Runs one statement to completion, expecting no rows. 0 or GWB_EDB/GWB_EBUSY/GWB_EUNAVAIL
 * (store_rc_err). */
int store_step_done(struct store *s, sqlite3_stmt *st);
/* Appends an event to the task's history inside the caller's transaction. detail may be NULL
 * (borrowed). 0 or GWB_EDB. */
int store_event_add(struct store *s, const char *task_id, int64_t now_ms, const char *type,
		    const char *from_state, const char *to_state, const json_t *detail);
/* Reads task id's state inside the caller's transaction. 0, GWB_ENOTFOUND or GWB_EDB (also
 * for a stored name that is not a state). */
int store_state_get(struct store *s, const char *id, enum task_state *out);
/* The store's guard on the lifecycle: 0 when task id may move from one state to the other;
 * otherwise logs the refusal and returns GWB_ESTATE (the caller rolls back). */
int store_state_check(const char *id, enum task_state from, enum task_state to);
/* Binds, as parameter idx, the JSON array of the states that have every flag in with and
 * none in without (task_states_json), for "state IN (SELECT value FROM json_each(?))": the
 * SQL lists of states come from the lifecycle table, never written by hand. */
void store_bind_states(sqlite3_stmt *st, int idx, unsigned with, unsigned without);
/* The final states as SQL equalities, "(state = 'succeeded' OR state = 'failed' OR state =
 * 'cancelled')", built from the lifecycle table's states of kind ENDED. SQLite uses a partial
 * index only for a query that names the index's condition as it is written, so migration
 * 11's tasks_final_unreleased is defined on this text and the queries below name it; a new
 * final state needs a migration of that index (a test holds the two together). Equalities,
 * not IN: an IN list makes every write of a task test its row against the index's condition
 * through a temporary b-tree. */
#define STORE_SQL_FINAL "(" STORE_SQL_OR_(STORE_SQL_TAIL_(~ TASK_STATES(STORE_SQL_PICK_))) ")"
#define STORE_SQL_PICK_(id, name, kind, next) STORE_SQL_PICK_##kind(name)
#define STORE_SQL_PICK_LIVE(name)
#define STORE_SQL_PICK_STOPPING(name)
#define STORE_SQL_PICK_ENDED(name) , name
#define STORE_SQL_PICK_WAITING(name)
#define STORE_SQL_TAIL_(...) STORE_SQL_TAIL2_(__VA_ARGS__)
#define STORE_SQL_TAIL2_(first, ...) __VA_ARGS__
#define STORE_SQL_EQ_(name) "state = '" name "'"
#define STORE_SQL_OR_1(a) STORE_SQL_EQ_(a)
#define STORE_SQL_OR_2(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_1(__VA_ARGS__)
#define STORE_SQL_OR_3(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_2(__VA_ARGS__)
#define STORE_SQL_OR_4(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_3(__VA_ARGS__)
#define STORE_SQL_OR_5(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_4(__VA_ARGS__)
#define STORE_SQL_OR_6(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_5(__VA_ARGS__)
#define STORE_SQL_OR_7(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_6(__VA_ARGS__)
#define STORE_SQL_OR_8(a, ...) STORE_SQL_EQ_(a) " OR " STORE_SQL_OR_7(__VA_ARGS__)
#define STORE_SQL_NARG_(...) STORE_SQL_NARG2_(__VA_ARGS__, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define STORE_SQL_NARG2_(a1, a2, a3, a4, a5, a6, a7, a8, n, ...) n
#define STORE_SQL_CAT_(a, b) a##b
#define STORE_SQL_XCAT_(a, b) STORE_SQL_CAT_(a, b)
#define STORE_SQL_OR_(...) STORE_SQL_XCAT_(STORE_SQL_OR_, STORE_SQL_NARG_(__VA_ARGS__))(__VA_ARGS__)

/* The one door (store_move.c), inside the caller's open transaction: applies move m to t,
 * whose row the caller read in that transaction (t->loaded_state is the state it saw). Checks
 * the move against the lifecycle table (store_state_check: GWB_ESTATE, logged, nothing
 * written), sets t's reason to the move's (unless TASK_REASON_KEEP) and, entering
 * cancelling, its cancel_requested_at; writes the state with t's observed fields (role OBS);
 * records a change of state as the move's event (from, to, detail) and counts it at the
 * transaction's commit. On success t holds the new state, loaded, unchanged. 0, GWB_ESTATE or
 * the write's error (the caller rolls back). The only code that writes a task's state. */
int store_move_write(struct store *s, struct task *t, const struct task_move *m, int64_t now_ms);

/* The seq of the task whose id is x (a named parameter, which may appear more than once, or a
 * column): a task made before schema 13 from task_legacy_ids, any other from its id
 * (gwb_task_seq). STORE_SQL_TASK_IS is the condition on the tasks row (column prefix t, "" or
 * "t.") that it is that task: found by its primary key, its id compared too (an unknown id
 * can encode the seq of another task). */
#define STORE_SQL_TASK_SEQ_OF(x)                                                            \
	"COALESCE((SELECT l_.seq FROM task_legacy_ids l_ WHERE l_.id = " x "), gwb_task_seq(" x \
	"))"
#define STORE_SQL_TASK_IS(t, x) t "seq = " STORE_SQL_TASK_SEQ_OF(x) " AND " t "id = " x
/* The tasks row (prefix t) is its own create intent: it never waited for quota (a waiting
 * task is none yet, an admitted one's intent is an outbox row: store_queue.c). */
#define STORE_SQL_OWN_CREATE(t) "(" t "state <> 'waiting' AND " t "admitted_at IS NULL)"

/* cols of the final tasks holding their reservation, through tasks_final_unreleased. Named,
 * since the planner would rather search tasks_state_team for the three states, which holds
 * every task that ever ended; a statement that names an index it cannot use fails to
 * prepare. */
#define STORE_SQL_FINAL_UNRELEASED(cols)                                                  \
	"SELECT " cols " FROM tasks INDEXED BY tasks_final_unreleased WHERE "             \
	STORE_SQL_FINAL " AND released = 0"

/* cols of every task holding its reservation (released = 0), each half through an index:
 * the states not final that hold quota (parameter n, bound by store_bind_states(st, n,
 * TASK_HOLDS_QUOTA, TASK_FINAL): a waiting task holds nothing) through
 * tasks_state_team, the final ones as above. A task that is not final is never released (a
 * release moves it to its final state in the same unit); the first half asks for released =
 * 0 all the same. */
#define STORE_SQL_UNRELEASED(cols, n)                                                   \
	"SELECT " cols " FROM tasks WHERE state IN (SELECT value FROM json_each(?" #n     \
	")) AND released = 0 UNION ALL " STORE_SQL_FINAL_UNRELEASED(cols)

/* Adds mem and core (negative: a release) to the team's reserved totals, team bound without
 * a copy (it must outlive the call). 0 or the UPDATE's error. */
int store_team_reserve(struct store *s, const char *team, int64_t mem, int64_t core,
		       int64_t now_ms);
/* Writes what the open batch's submissions reserved for their team (store_task_submit_row)
 * to its row: 0, or the error of the UPDATE. Nothing when there is nothing to write. */
int store_team_flush(struct store *s);
/* Forgets the batch's team (a new batch, or one rolled back). */
void store_team_forget(struct store *s);

/* Binds text or NULL. */
void store_bind_text(sqlite3_stmt *st, int idx, const char *v);
/* Binds text or NULL without a copy: v must stay unchanged until the statement has been
 * stepped for the last time (then reset; store_stmt clears the bindings before the
 * statement's next use, so the pointer is never read again). */
void store_bind_text_until_step(sqlite3_stmt *st, int idx, const char *v);
/* Column text or NULL. */
const char *store_col_text(sqlite3_stmt *st, int idx);
/* Copies column idx's text into dst (size len, cut to fit; "" for NULL). */
void store_col_copy(sqlite3_stmt *st, int idx, char *dst, size_t len);

/* The name of the VFS that writes each commit's WAL frames with one write (store_vfs.c),
 * registered at the first call over the default VFS of that moment; NULL (SQLite's default)
 * if it could not be. Not thread-safe: stores are opened on one thread. */
const char *store_vfs_name(void);
/* File controls of that VFS, on the database file ("main"), above SQLite's own opcodes:
 * - STORE_FCNTL_SYNC_LATER (int *: 1 or 0): from now on the sync SQLite asks for at each
 *   COMMIT (synchronous=FULL) is left out, until 0 again; the WAL is written as before, and
 *   the sync thread syncs it (store_batch_begin_later);
 * - STORE_FCNTL_WAL_SYNCS (int64_t[2]): the syncs of the WAL file passed on, and left out. */
#define STORE_FCNTL_SYNC_LATER 0x67770001
#define STORE_FCNTL_WAL_SYNCS 0x67770002

/* Makes SQLite allocate through size classes kept on free lists (store_mem.c). Only possible
 * before SQLite is initialised: 0, or -1 when it is too late (SQLite's allocator stays). */
int store_mem_install(void);

#endif
