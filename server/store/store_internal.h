/* Internals shared by the store's own files (store.c, and the store_*.c files that extend it):
 * the connection, the prepared-statement cache and the transaction helpers. Nothing outside
 * server/store*.c includes this. */
#ifndef GWB_STORE_INTERNAL_H
#define GWB_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>

#include "lib/jsonw.h"
#include "server/store/store.h"

#define STORE_STMT_CACHE 128
/* Team tokens remembered by store_team_by_token (direct-mapped by the hash's first byte). */
#define STORE_TOKEN_CACHE 64
/* How long a remembered token is trusted after the read that found it: a change this
 * connection makes empties the cache at once; this bounds how long a change written by
 * another process (another server on the same file) can go unseen. */
#define STORE_TOKEN_TTL_MS 1000

/* A batch's new tasks are inserted STORE_ROWS_MAX at most per statement, into two tables. */
#define STORE_ROWS_MAX 32
enum { STORE_ROWS_TASKS, STORE_ROWS_EVENTS, STORE_ROWS_TABLES };

struct store {
	/* The detail of a submission's event, written into this one buffer every time. */
	struct jw submit_detail;
	sqlite3 *db;
	struct {
		const char *sql; /* static string: the cache key is its address */
		sqlite3_stmt *stmt;
	} cache[STORE_STMT_CACHE];
	int ncache;
	/* Tokens found in the teams table, so that a request authenticates without a read
	 * transaction: the SHA-256 (never the token), its team, and the monotonic time of the
	 * read (0: the slot is empty). */
	struct store_token {
		unsigned char hash[32];
		char team[64];
		int64_t read_ms;
	} tokens[STORE_TOKEN_CACHE];
	/* The outbox insert watcher (store_outbox_watch): the connection's only update hook. */
	store_outbox_fn outbox_fn;
	void *outbox_arg;
	/* Group commit (store_batch_begin): 1 while a batch's transaction is open, so each
	 * decision runs in its own SAVEPOINT instead of its own transaction. */
	int in_batch;
	/* An optimistic batch (store_batch_begin_optimistic): its decisions run without a
	 * SAVEPOINT each. unit_changes is the connection's change count when the current
	 * decision began; spoiled is set when a decision that wrote something had to be undone,
	 * which only a SAVEPOINT could have done. */
	int batch_optimistic, batch_spoiled;
	int64_t unit_changes;
	/* An optimistic batch's new tasks, inserted once its decisions are made
	 * (store_batch_write) with one INSERT of many rows per table, their events too: the
	 * rows are the deciders' (store_task_submit_row), with seqs given from next_seq (0: not
	 * read in this batch). unit_rows is their count when the current
	 * decision began; write_rc the error of their insert, which the COMMIT then returns. */
	struct task **new_rows;
	int nrows, rows_cap, unit_rows;
	int64_t next_seq;
	/* The batch's multi-row INSERTs, by table and number of rows (store_tasks.c). */
	sqlite3_stmt *rows_st[STORE_ROWS_TABLES][STORE_ROWS_MAX + 1];
	/* task_legacy_ids has rows: a new seq's id is checked against them. */
	int has_legacy;
	int write_rc;
	/* The WAL as the wal hook last saw it (pages), and what bounds it. */
	int64_t wal_pages;
	int page_size;
	int64_t wal_max_bytes;
	int64_t checkpoints, checkpoint_busy; /* checkpoints run; those that could not finish */
	int64_t checkpoint_failed;           /* of which the storage refused */
	int64_t ckpt_loop_us;                /* time store_checkpoint took */
	/* Tasks by state, kept in memory for /metrics (counted from the table at open); the
	 * moves of the open transaction wait in count_pend until its COMMIT. */
	int64_t counts[TASK_NSTATES];
	int64_t count_pend[TASK_NSTATES];
	int64_t count_sp[TASK_NSTATES]; /* count_pend when the batch's current unit began */
	/* State changes by (from, to) since the store was opened, kept like the counts; the row
	 * TASK_NSTATES stands for "none" (a submission creating the task). */
	int64_t trans[TASK_NSTATES + 1][TASK_NSTATES];
	int64_t trans_pend[TASK_NSTATES + 1][TASK_NSTATES];
	int64_t trans_sp[TASK_NSTATES + 1][TASK_NSTATES];
	/* The storage fault the last write met (store_fault_get); cleared by the next commit
	 * that stored a change. */
	struct store_fault fault;
	int64_t changes_at_begin; /* sqlite3_total_changes64 when the transaction began */
	/* Inside a batch: the error that made SQLite roll the batch's whole transaction back
	 * (a full disk or an I/O error can), 0 while it is open. Once set, every later unit of
	 * the batch fails with it and the batch's commit returns it: no unit may run outside
	 * the batch's transaction, where its RELEASE would be a commit of its own. */
	int batch_lost;
	/* Durability (server/store/store_sync.c). commit_seq counts the commits; durable_seq is the
	 * last one known to be on the disk: a commit with synchronous=FULL makes every commit
	 * up to it durable, a batch committed by store_batch_commit_later waits for the sync
	 * thread. sync is NULL until store_sync_start. */
	struct store_sync *sync;
	struct store_ckpt *ckpt; /* the checkpoint thread (store_ckpt.c), NULL until started */
	int64_t ckpt_asked_pages; /* wal_pages when the thread was last asked (store_wal_bound) */
	uint64_t commit_seq, durable_seq;
	uint64_t sync_error_upto; /* commits up to it were covered by a sync that failed */
	int batch_later;          /* the open batch is store_batch_begin_later's */
	int wal_wrote;            /* the last COMMIT wrote WAL frames (the WAL hook ran) */
	/* The smallest outbox row id and the smallest task seq written by the open transaction
	 * (the update hook), 0 for none. */
	int64_t ob_txn_min, tk_txn_min;
	/* The commits not yet durable that wrote outbox rows or new tasks (each its own create
	 * intent), oldest first, each with its smallest row id and seq (0: none): the relay sees
	 * no row from the oldest one's on (store_outbox_gate, store_create_gate). Entries
	 * [held_head, nheld) are live; store_held_push and store_held_settle. */
	struct store_held {
		uint64_t seq;
		int64_t ob_min, tk_min;
	} *held;
	int nheld, held_head, held_cap;
	/* Every outbox row with a smaller id is published (store_outbox.c): the relay's reads
	 * start from it. */
	int64_t ob_low;
	/* Every task with a seq at or below it has had its create intent published (or, for
	 * the tasks made before migration 15, written to the outbox): intent_cursor's row, read
	 * at open and moved by each publication's commit. A task above it is its own create
	 * intent, whose id is its seq (store_outbox.c). */
	int64_t ic_cursor;
	/* The create intents the relay's last read handed out, in seq order: the first of them
	 * are the tasks right above ic_cursor (store_outbox_published moves it over those). */
	int64_t *ic_fetched;
	int ic_nfetched, ic_cap;
	/* The intents not published (outbox rows and tasks above ic_cursor), counted at open
	 * and kept since: the rows the update hook saw inserted and the publications wait in
	 * ob_unpub_pend until their COMMIT, as the task counts do (ob_unpub_sp: when the batch's
	 * unit began). */
	int64_t ob_unpub, ob_unpub_pend, ob_unpub_sp;
	/* A batch's team (store_tasks.c): the totals of the team its last submission was for,
	 * as read from the row, and what the batch's submissions have reserved for it since,
	 * written with one UPDATE when the batch commits or moves to another team, not one per
	 * submission. stale: another statement wrote the teams table since the read (the
	 * update hook), so the next submission reads the row again (without the additions,
	 * which are not written yet). tp_sp: tp when the batch's current unit began. */
	struct store_team_pend {
		char team[64];
		int64_t quota_mem, quota_core, reserved_mem, reserved_core;
		int64_t add_mem, add_core, updated_at;
		int read, stale;
	} tp, tp_sp;
};

/* Remembers that commit seq, not yet durable, wrote outbox rows from id ob_min on and new
 * tasks from seq tk_min on (0: none of that kind). */
void store_held_push(struct store *s, uint64_t seq, int64_t ob_min, int64_t tk_min);
/* Forgets the held commits up to s->durable_seq: 1 when it forgot any (the relay may have
 * rows to publish now), 0 otherwise. */
int store_held_settle(struct store *s);
/* The smaller of two row ids, 0 standing for none. */
static inline int64_t store_min_id(int64_t a, int64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* Starts one of the store's threads (the sync thread, the checkpoint thread) with every
 * signal blocked, so that signals stay the loop's, and names it: pthread_create's result. */
int store_thread_start(pthread_t *t, const char *name, void *(*fn)(void *), void *arg);
/* Counts a checkpoint's outcome (SQLite's rc, the WAL's frames, those copied) and returns
 * it as store_checkpoint does. */
int store_checkpoint_counted(struct store *s, int rc, int log, int done, int truncate);
/* Marks every commit so far durable (a FULL commit, or a sync that covered them all). */
void store_durable_all(struct store *s);
/* The outbox row id from which rows wait for a sync (INT64_MAX: none wait). */
int64_t store_outbox_gate(const struct store *s);
/* The task seq from which new tasks' create intents wait for a sync (INT64_MAX: none). */
int64_t store_create_gate(const struct store *s);
/* A new intent id, for a cancel's outbox row (store_task_seq_new draws task seqs from the same
 * counter): above every task seq and outbox id there is, so that no two intents, old or new,
 * share an id. 0, or GWB_EDB. */
int store_intent_id_new(struct store *s, int64_t *id);
/* Closes a batch of store_batch_begin_later: commits sync in their COMMIT again, and a sync
 * is asked of the thread when it committed. Nothing for another batch. */
void store_batch_later_end(struct store *s, int committed);
/* The loop's WAL syncs so far: passed on to the disk, and left to the sync thread (tests). */
void store_wal_syncs(struct store *s, int64_t *passed, int64_t *left);
/* Installs the connection's update hook (store_open does). */
void store_outbox_hook(struct store *s);
/* Sets ob_low from the file: the first unpublished outbox row, or the next id when none is
 * (one scan of the outbox, when the store opens); reads ic_cursor; counts the intents not
 * published (ob_unpub). 0 or GWB_EDB. */
int store_outbox_low_find(struct store *s);


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

/* The seq of a new task (its id: store_task_id_encode, and its create intent's id), never one
 * handed out before, above every outbox id, and never one whose id is a legacy task's: 0, or
 * GWB_EDB when the file cannot be read. next_seq, the next free one, is read again at each
 * batch's start (0). */
int store_task_seq_new(struct store *s, int64_t now_ms, int64_t *seq);
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

/* cols of the final tasks holding their reservation, through tasks_final_unreleased. Named,
 * since the planner would rather search tasks_state_team for the three states, which holds
 * every task that ever ended; a statement that names an index it cannot use fails to
 * prepare. */
#define STORE_SQL_FINAL_UNRELEASED(cols)                                                  \
	"SELECT " cols " FROM tasks INDEXED BY tasks_final_unreleased WHERE "             \
	STORE_SQL_FINAL " AND released = 0"

/* cols of every task holding its reservation (released = 0), each half through an index:
 * the states not final (parameter n, bound by store_bind_states(st, n, 0, TASK_FINAL)) through
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
