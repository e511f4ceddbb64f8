/* The store: gwb-server's SQLite database (WAL). It owns teams and their quota, tasks,
 * reservations, idempotency keys, the intent outbox and task events. Every decision that reads
 * and writes quota is one BEGIN IMMEDIATE transaction, so it is atomic across processes, not
 * only inside the reactor. Schema changes are numbered migrations on PRAGMA user_version. */
#ifndef GWB_STORE_H
#define GWB_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "server/task.h"

struct store;

/* Opens (creating if needed) the database at path, enables WAL and foreign keys, sets the busy
 * time-out, and runs pending migrations. Returns 0 and *out (caller frees with store_close), or
 * a negative error with the reason in err, which names path: GWB_EUNAVAIL when the file can
 * only be opened read-only (a read-only file or filesystem: the store must write). */
int store_open(struct store **out, const char *path, int busy_timeout_ms, char *err, size_t errlen);
/* The WAL bound store_open uses: 64 MiB. */
#define STORE_WAL_MAX_DEFAULT (64LL << 20)
/* store_open with the server's settings: open_busy_ms is how long opening (the migrations)
 * waits for another writer; busy_ms how long every later statement does (the server passes 0:
 * its event loop never sleeps on a lock, SQLITE_BUSY comes back at once as GWB_EBUSY).
 * SQLite's automatic checkpoint is off: the owner calls store_checkpoint from its timer, and a
 * commit that leaves the WAL above wal_max_bytes runs a PASSIVE one. store_open is
 * store_open_ex(busy_timeout_ms, busy_timeout_ms, STORE_WAL_MAX_DEFAULT). Same returns as store_open. */
int store_open_ex(struct store **out, const char *path, int open_busy_ms, int busy_ms,
		  int64_t wal_max_bytes, char *err, size_t errlen);
/* Closes the database. Accepts NULL. */
void store_close(struct store *s);
/* The last SQLite error message of s (valid until the next store call). */
const char *store_errmsg(struct store *s);
/* The schema version the database is at. */
int store_schema_version(struct store *s);
/* The schema version this build migrates to (the number of migrations it knows). */
int store_schema_latest(void);
/* The SQL of migration v + 1 (0 <= v < store_schema_latest()), for tests that build a
 * database of an older version as the migrations made it. */
const char *store_migration_sql(int v);
/* Runs PRAGMA quick_check (a scan of the whole file: for tests and tools, not the loop); 0 when
 * the database is intact. */
int store_check(struct store *s);

/* A validated submission. Strings are borrowed for the call. */
struct task_req {
	const char *team;
	const char *name;
	int64_t gpu_memory_mib;   /* per card */
	int64_t gpu_core_percent; /* per card */
	int64_t gpu_count;
	int64_t duration_seconds;
	const char *qos;          /* "LS" | "BE" */
	const char *experiment;   /* "normal" | "overlimit" */
	const char *workload;     /* the container's canonical JSON, or NULL: the worker */
	int on_quota_full;        /* STORE_ON_FULL_*: what a submission the quota cannot hold does */
};
/* A submission's on_quota_full: the team's default_on_quota_full, refuse (403), or wait. */
enum { STORE_ON_FULL_DEFAULT, STORE_ON_FULL_REFUSE, STORE_ON_FULL_WAIT };

/* What a submission decided, with the numbers an error answer needs. */
struct submit_result {
	int replayed;          /* 1: an earlier task with the same key and parameters */
	char task_id[32];
	int64_t req_mem, req_core;          /* totals asked: per card × gpu_count */
	int64_t reserved_mem, reserved_core; /* the team's reservation before this task */
	int64_t quota_mem, quota_core;
};

/* ---- group commit ----
 * Between store_batch_begin and store_batch_commit (or _rollback), store_task_submit and
 * store_task_cancel each run inside their own SAVEPOINT of the batch's one BEGIN IMMEDIATE
 * transaction: a refused or failed one undoes only its own writes, a later one sees the
 * earlier ones' writes (quota and idempotency keys stay exact), and nothing is durable before
 * the batch's COMMIT (one fsync for the lot). Every other write of the store made while a
 * batch is open (the reconciler's, at its safe point) is a savepoint of the batch too.
 * An optimistic batch (store_batch_begin_optimistic) skips the savepoints and says when one
 * would have been needed; decided again with them, the outcome is the same. */

/* ---- storage faults ----
 * A write refused by the storage under the database returns GWB_EUNAVAIL, from any function
 * of the store that writes: SQLITE_FULL (no space left), SQLITE_READONLY (the file, its
 * folder or its filesystem cannot be written), SQLITE_IOERR or SQLITE_CANTOPEN (the disk or
 * the filesystem failed). Nothing of the failed transaction is stored (SQLite rolls back what
 * it cannot write) and the counters kept in memory (tasks by state, transitions) roll back
 * with it, so a retry later starts from what is stored. The store remembers the fault until a
 * transaction that changed something commits again: that is how the server sees the space
 * return. */
enum store_fault_kind {
	STORE_FAULT_NONE,
	STORE_FAULT_FULL,
	STORE_FAULT_READONLY,
	STORE_FAULT_IO,
};
struct store_fault {
	enum store_fault_kind kind; /* of the last refused write; NONE once a write commits */
	int64_t since_ms;           /* wall clock of the first refused write of this fault */
	int64_t writes_failed;      /* statements and commits refused during this fault */
	int64_t faults;             /* faults since the store was opened (NONE -> a kind) */
};
/* Copies the store's fault state into out (from memory: no I/O). */
void store_fault_get(struct store *s, struct store_fault *out);
/* "none", "full", "read_only" or "io_error". */
const char *store_fault_name(enum store_fault_kind kind);

/* Opens a batch: BEGIN IMMEDIATE. 0, GWB_EBUSY (another process holds the write lock),
 * GWB_EUNAVAIL (a storage fault) or GWB_EDB; on failure no batch is open. */
int store_batch_begin(struct store *s);
/* store_batch_begin without a SAVEPOINT per decision: each decision's writes go straight into
 * the batch's transaction (a SAVEPOINT costs a copy of every page the decision touches).
 * Decisions that refuse before writing (quota, conflicts, replays, unknown teams or tasks)
 * need no undo; when one that wrote must be undone (an error in the middle of its writes, a
 * storage fault), the batch is spoiled: store_batch_spoiled says so, and the caller must roll
 * the batch back and run it again after store_batch_begin, where that decision undoes only
 * itself. Same returns as store_batch_begin. */
int store_batch_begin_optimistic(struct store *s);
/* Inside an optimistic batch a new task is not inserted by its decision: once the decisions
 * are made, this inserts every new task of the batch, with its event, in
 * one INSERT of many rows per table (not a statement per row). Call it
 * before store_batch_spoiled: a task id that turns out taken spoils the batch, which is then
 * decided again with a SAVEPOINT each, where each insert runs at once and a taken id is drawn
 * again. Returns 0, or the storage's error, which store_batch_commit then returns too. Rows
 * not written so are written by store_batch_commit. */
int store_batch_write(struct store *s);
/* 1 when an optimistic batch is open and one of its decisions could not be undone alone:
 * nothing of the batch may be committed. */
int store_batch_spoiled(const struct store *s);
/* Commits the batch (one fsync): 0, or GWB_EBUSY / GWB_EUNAVAIL / GWB_EDB, in which case
 * every write of the batch is rolled back, with the in-memory counters' moves. Either way the
 * batch is closed. When SQLite rolled the batch's transaction back during a unit (a storage
 * fault can), every later unit of the batch failed with that error and the commit returns it.
 * A commit that leaves the WAL above its bound runs a PASSIVE checkpoint (as every commit
 * does). */
int store_batch_commit(struct store *s);
/* Rolls the batch back and closes it. */
void store_batch_rollback(struct store *s);

/* Durable later (server/store/store_sync.c): the batch's fsync off the caller's thread.
 * store_sync_start starts the thread that syncs the WAL (0; GWB_EINVAL for a database
 * without a file, GWB_EIO when the thread cannot start). store_batch_begin_later opens an
 * optimistic batch (store_batch_begin_optimistic) whose store_batch_commit does not wait for
 * the disk: its commit is store_commit_seq() and is durable once store_durable_seq() reaches
 * it. The thread syncs every commit made before its sync began; when one ends
 * store_sync_fd() turns readable, and the owner calls store_sync_done, which raises
 * store_durable_seq, starts the next sync if commits wait, and returns GWB_EIO when a sync
 * failed (store_sync_failed_upto then says which commits it covered). Every other commit
 * (synchronous=FULL) makes all earlier ones durable too. Intents (new tasks, outbox rows) are
 * not handed to the relay before their commit is durable. Without the thread,
 * store_batch_begin_later is store_batch_begin_optimistic and its commit is durable when it
 * returns. */
int store_batch_begin_later(struct store *s);
int store_sync_start(struct store *s);
/* Stops the thread after one last sync of what waits (store_close does it too). */
void store_sync_stop(struct store *s);
int store_sync_fd(const struct store *s);
int store_sync_done(struct store *s);
uint64_t store_commit_seq(const struct store *s);
uint64_t store_durable_seq(const struct store *s);
int store_sync_failed_upto(const struct store *s, uint64_t seq);
struct store_sync_stats {
	int64_t syncs;   /* syncs run */
	int64_t failed;  /* of which failed */
	int64_t commits; /* commits they made durable */
	int64_t pending; /* commits waiting for one now */
	double seconds;  /* time the syncs took */
};
void store_sync_stats(const struct store *s, struct store_sync_stats *out);
/* The connection's PRAGMA synchronous (2: FULL, 1: NORMAL), or GWB_EDB. */
int store_synchronous(struct store *s);

/* Checkpoints the WAL without waiting for anyone: PASSIVE, or TRUNCATE (truncate 1: the WAL
 * file emptied, for idle moments). 0 when every frame reached the database, GWB_EBUSY when a
 * reader or another writer kept part of it (retried on the next call), GWB_EUNAVAIL when the
 * storage refused (the database file could not grow: the frames stay in the WAL, counted in
 * checkpoints_failed; it does not set the store's fault, which writes alone set and clear),
 * or GWB_EDB. */
int store_checkpoint(struct store *s, int truncate);
/* After a commit: above the WAL's bound a PASSIVE checkpoint on the caller's thread (which
 * lets the next commit start the WAL over); below it, with the checkpoint thread started, one
 * asked of the thread each time the WAL grew by 512 KiB (an eighth of the bound at most).
 * Nothing while the thread's runs. */
void store_wal_bound(struct store *s);

/* Checkpoints off the caller's thread (server/store/store_ckpt.c): a thread with a connection of
 * its own runs PASSIVE checkpoints beside the caller's commits. store_ckpt_start starts it
 * (0; GWB_EINVAL for a database without a file, GWB_EDB or GWB_EIO when it cannot).
 * store_checkpoint_later asks it for one: 0, or GWB_EBUSY while one runs (without the thread
 * it is store_checkpoint(s, 0)). When one ends store_ckpt_fd() turns readable and the owner
 * calls store_ckpt_done, which counts it as store_checkpoint counts its own and returns its
 * outcome (0 also when nothing ended), with SQLite's message in msg. store_ckpt_running: one
 * runs now (store_checkpoint would find the WAL busy). store_close stops the thread. */
int store_ckpt_start(struct store *s);
void store_ckpt_stop(struct store *s);
int store_ckpt_fd(const struct store *s);
int store_ckpt_running(const struct store *s);
int store_checkpoint_later(struct store *s);
int store_ckpt_done(struct store *s, char *msg, size_t len);
/* The checkpoints the thread ran, and the time they took in seconds. */
void store_ckpt_stats(const struct store *s, int64_t *count, double *seconds);
struct store_wal_stats {
	int64_t wal_bytes;        /* frames in the WAL after the last commit or checkpoint */
	int64_t wal_max_bytes;    /* the bound */
	int64_t checkpoints;      /* checkpoints run */
	int64_t checkpoints_busy; /* of which could not finish */
	int64_t checkpoints_failed; /* of which the storage refused (GWB_EUNAVAIL) */
	int64_t checkpoints_thread; /* of all, those the checkpoint thread ran */
	double loop_seconds;        /* time the caller's thread spent in checkpoints */
	double thread_seconds;      /* time the checkpoint thread spent in them */
};
/* Fills out with the WAL's figures (from memory: no I/O). */
void store_wal_stats(struct store *s, struct store_wal_stats *out);
/* Tasks in each state (counts has room for TASK_NSTATES), from the counters kept in memory:
 * counted from the table at open, then moved by every committed state change of this
 * connection. */
void store_task_counts(struct store *s, int64_t *counts);
/* State changes from -> to committed since the store was opened (from TASK_NONE: submissions),
 * counted in memory with the same rule as the counts. */
int64_t store_task_transitions(struct store *s, enum task_state from, enum task_state to);

/* Submits one task: idempotency lookup, quota check, task row, reservation, reserved totals,
 * idempotency record and a task event, in one BEGIN IMMEDIATE transaction (in a SAVEPOINT of
 * the batch's inside a batch). The new task is its own create intent: no outbox row.
 * key may be NULL (no idempotency); fingerprint identifies the canonical parameters.
 * Returns 0 (res->replayed tells a replay from a new task), GWB_EQUOTA, GWB_ECONFLICT (the key
 * was used with other parameters), GWB_ENOTFOUND (no such team), GWB_EBUSY (the database stayed
 * locked past the busy time-out), GWB_EUNAVAIL (the storage refused: see "storage faults"), or
 * GWB_EDB. res is filled in every case it can be. */
int store_task_submit(struct store *s, const struct task_req *req, const char *key,
		      const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
		      struct submit_result *res);
/* store_task_submit that also fills *row (caller-owned) with the new task exactly as a later
 * store_task_load inside the same transaction would read it (its reservation joined, seq
 * included), so the submission can be answered without reading it back. *row is meaningful
 * only when 0 is returned and res->replayed is 0; a replay leaves it undefined (the earlier
 * task may have moved on: read it). Same returns as store_task_submit. Inside an optimistic
 * batch the row is what store_batch_write inserts: it must stay unchanged until the batch is
 * committed or rolled back, and the task cannot be read before. */
int store_task_submit_row(struct store *s, const struct task_req *req, const char *key,
			  const char *fingerprint, int64_t now_ms, int64_t key_ttl_ms,
			  struct submit_result *res, struct task *row);

/* Loads task id into *out (the row as stored: the API shapes its JSON). 0, GWB_ENOTFOUND or
 * GWB_EDB (also for a stored state that is not in the lifecycle table). */
int store_task_load(struct store *s, const char *id, struct task *out);
/* The team of task id into team (size len). 0, GWB_ENOTFOUND or GWB_EDB. */
int store_task_team(struct store *s, const char *id, char *team, size_t len);

/* Receives one listed task, borrowed for the call. */
typedef void (*store_task_fn)(void *arg, const struct task *t);
/* Lists tasks newest first, calling fn for each of at most limit tasks. team and state may be
 * NULL (no filter). cursor 0 starts at the newest; otherwise only tasks older than the cursor.
 * *next is the cursor of the next page, 0 when there is none. 0 or GWB_EDB (fn may have
 * fired for some tasks before the error). */
int store_task_list(struct store *s, const char *team, const char *state, int64_t cursor,
		    int limit, store_task_fn fn, void *arg, int64_t *next);

/* One event of a task's history, borrowed for the call. */
struct task_event {
	int64_t seq, ts_ms;
	const char *type;
	const char *from, *to; /* state names, or NULL */
	const char *detail;    /* JSON text, or NULL */
};
/* Receives one event. */
typedef void (*store_event_fn)(void *arg, const struct task_event *ev);
/* Calls fn for each of the task's events, oldest first. 0, GWB_ENOTFOUND (no such task: fn
 * never fired) or GWB_EDB (fn may have fired for some). */
int store_task_events(struct store *s, const char *id, store_event_fn fn, void *arg);

/* Creates or changes a team's quota. token_hash (32 bytes) sets its token when not NULL.
 * *created is 1 when the team is new. 0, GWB_EEXISTS (the token is another team's), GWB_EBUSY
 * or GWB_EDB. */
int store_team_put(struct store *s, const char *team, int64_t mem_mib, int64_t core_pct,
		   const unsigned char *token_hash, int64_t now_ms, int *created);
/* A team's workload policy: the image reference prefixes its tasks may run (a JSON array of
 * strings; empty: only the simulated worker), and the cpu (millicores) and memory (bytes)
 * a workload gets when it names none and the most it may ask for (0: not set). */
struct team_policy {
	json_t *allowed_images;
	int64_t cpu_default, cpu_max;
	int64_t memory_default, memory_max;
};
/* store_team_put that also replaces the team's workload policy when pol is not NULL (in the
 * same transaction; pol->allowed_images borrowed). */
int store_team_put_policy(struct store *s, const char *team, int64_t mem_mib, int64_t core_pct,
			  const unsigned char *token_hash, const struct team_policy *pol,
			  int64_t now_ms, int *created);
/* The team's workload policy into *pol (allowed_images a new reference the caller
 * json_decrefs, an empty array when none is set). 0, GWB_ENOTFOUND or GWB_EDB. */
int store_team_policy(struct store *s, const char *team, struct team_policy *pol);
/* The policy as the API shows it: {"allowed_images", "cpu": {"default", "max"}, "memory":
 * {"default", "max"}}, the amounts as Kubernetes quantities or null. A new reference. */
json_t *store_team_policy_json(const struct team_policy *pol);
/* The team's reserved and quota totals as its row holds them (team borrowed for the call):
 * the one read of them, for the submission's quota check and the reconciler's. 0,
 * GWB_ENOTFOUND or GWB_EDB. */
int store_team_totals(struct store *s, const char *team, int64_t *res_mem, int64_t *res_core,
		      int64_t *quota_mem, int64_t *quota_core);
/* The team as the API shows it (a new reference), or NULL when there is none. */
json_t *store_team_json(struct store *s, const char *team);
/* Every team, sorted by name, as a new JSON array. */
json_t *store_teams_json(struct store *s);
struct team_usage;
/* Reads team's quota and reservation (server/quota.h) into *u as a decision made now sees
 * them: inside a batch, the row plus what the batch's earlier submissions reserved for it,
 * read once per batch and team (again once another statement wrote the teams table). 0,
 * GWB_ENOTFOUND or GWB_EDB. */
int store_team_usage(struct store *s, const char *team, struct team_usage *u);
/* Finds the team whose token hash is hash (32 bytes). 0 and team, GWB_ENOTFOUND, GWB_EDB.
 * A token found is remembered (by its hash) for a second (STORE_TOKEN_TTL_MS), so most
 * calls read nothing; store_team_put with a token forgets them all, so a change made through
 * this store holds from the next call on, one made by another process within that second. */
int store_team_by_token(struct store *s, const unsigned char *hash, char *team, size_t len);

/* Number of tasks in each state, counted over the table (a scan: start-up and tests, not the
 * loop), indexed by enum task_state (counts has room for TASK_NSTATES). 0 or GWB_EDB. */
int store_task_state_counts(struct store *s, int64_t *counts);

/* Deletes idempotency keys that expired before now_ms; *purged counts them. 0 or GWB_EDB. */
int store_idem_purge(struct store *s, int64_t now_ms, int *purged);

/* A task's id: "t-" and its seq in 12 characters of lowercase base32 (digits 2-7, then the
 * letters: ids sort in ASCII as their seqs do). A new task's seq is the time in ms and 20
 * random bits (store_task_seq_new), so its id says when it was made, and names a Kubernetes
 * Job. store_task_id_seq gives the seq back, or -1 for a text that is not such an id; the
 * ids of tasks made before schema 13 encode something else (task_legacy_ids). */
void store_task_id_encode(int64_t seq, char out[16]);
int64_t store_task_id_seq(const char *id);
/* 12 base32 characters: 60 bits. */
#define STORE_TASK_SEQ_END (INT64_C(1) << 60)

/* ---- intents (server/store/store_outbox.c) ---- */

struct q_intent;

/* Fills out with up to max unpublished intents, as the relay publishes them: the outbox's
 * rows first (cancels, and the creates written before schema 15), oldest first, then the new
 * tasks above the intent cursor, by seq, each a create intent whose id is its seq; every one
 * with its task's parameters, and only those of durable commits. Returns how many (>= 0) or
 * GWB_EDB. */
int store_outbox_unpublished(struct store *s, struct q_intent *out, int max);
/* Records, in one transaction, that the intents ids[i] of the last store_outbox_unpublished
 * were published as stream_ids[i]: an outbox row keeps its stream id (a row already marked its
 * first one); the intent cursor moves over the creates published from the first on (one
 * published after one that was not is handed out again, and its consumer knows it by its
 * id). 0, GWB_EBUSY or GWB_EDB. */
int store_outbox_published(struct store *s, const int64_t *ids, const char (*stream_ids)[48],
			   int n, int64_t now_ms);
/* The number of intents not yet published, kept in memory (counted once at open): 0. */
int store_outbox_unpublished_count(struct store *s, int64_t *n);

/* Called after an intent (an outbox row, or a new task) is inserted, inside the writing
 * transaction (so the callee must defer its work to after the commit). */
typedef void (*store_outbox_fn)(void *arg);
/* Sets (fn not NULL) or clears the outbox insert watcher. It is the store connection's only
 * SQLite update hook; one watcher per store. */
void store_outbox_watch(struct store *s, store_outbox_fn fn, void *arg);

/* One received intent, as its outcome is recorded. Strings borrowed for the call. */
struct intent_rx {
	int64_t intent_id;      /* the intent's id: its outbox row's, or its new task's seq */
	const char *kind;       /* "create" | "cancel" */
	const char *task;
	const char *stream_id;  /* may be NULL */
	const char *consumer;   /* may be NULL */
	int64_t deliveries;
};
/* Records, in one transaction, that each intent was received: its outcome row (once per
 * intent, ever), a task event "intent_received", and for a create intent of a queued task the
 * move to "creating". results[i] is 0 (recorded), 1 (it had been recorded before: nothing
 * written) or GWB_ENOTFOUND (no such task). Returns 0, or GWB_EBUSY / GWB_EDB (nothing
 * written). */
int store_intents_receive(struct store *s, const struct intent_rx *rx, int n, int64_t now_ms,
			  int *results);
/* 1 when the intent's outcome is recorded, 0 when not, or GWB_EDB. */
int store_intent_outcome_exists(struct store *s, int64_t intent_id);
/* Records an intent's outcome (e.g. "handled") unless one is recorded already. 0 or an error. */
int store_intent_outcome_add(struct store *s, const struct intent_rx *rx, const char *outcome,
			     int64_t now_ms);

/* Counts one failed attempt at handling the intent (error: why, copied) and sets *failures to
 * the attempts failed so far, this one included. 0, or GWB_EBUSY / GWB_EDB (nothing counted,
 * *failures untouched). */
int store_intent_failure_add(struct store *s, const struct intent_rx *rx, const char *error,
			     int64_t now_ms, int64_t *failures);

/* Requests the cancel of task id, durably: state "cancelling", cancel_requested_at, an outbox
 * row of kind "cancel" and a task event, in one transaction (a SAVEPOINT inside a batch).
 * A task that is not cancellable (already cancelling, or final) is left as it is. *state receives the task's state
 * afterwards; *changed is 1 when this call wrote the request. 0, GWB_ENOTFOUND, GWB_EBUSY or
 * GWB_EDB. */
int store_task_cancel(struct store *s, const char *id, int64_t now_ms, enum task_state *state,
		      int *changed);

/* ---- waiting for quota (store_queue.c) ---- */

/* queue.max_skip_seconds (in ms): how long a best_effort team's head may be passed. */
void store_queue_configure(struct store *s, int64_t max_skip_ms);
/* fn is told of every task its team's line admits (inside the admitting transaction: it may
 * only take note, e.g. mark the task for the reconciler). */
void store_queue_on_admit(struct store *s, void (*fn)(void *arg, const char *task_id), void *arg);
/* Sets a team's line settings (each NULL: kept): default_on_quota_full "refuse" | "wait",
 * queueing "strict" | "best_effort"; the line may move (best_effort). 0, GWB_ENOTFOUND,
 * GWB_EINVAL, or a store error. */
int store_team_queue_put(struct store *s, const char *team, const char *on_full,
			 const char *queueing, int64_t now_ms);
/* Adds the team's line settings and its waiting count to obj (a team's view). */
void store_team_queue_json(struct store *s, const char *team, json_t *obj);
/* Admits what the team's line holds now, in a transaction of its own (after a quota change). */
int store_team_queue_kick(struct store *s, const char *team, int64_t now_ms);

/* A waiting task's place, as store_queue_list gives it. */
struct store_queue_entry {
	const char *id, *name;
	int64_t seq, created_at;
	int64_t gpu_memory_mib, gpu_core_percent; /* its totals (per card times cards) */
	int64_t duration_seconds;
	int64_t position;                         /* 1: the head */
	int64_t ahead_tasks, ahead_mem, ahead_core;
	int64_t predicted_admit_at;               /* -1: not predicted (never fits, or too far) */
	const char *basis[8];
	int nbasis;
};
typedef void (*store_queue_fn)(void *arg, const struct store_queue_entry *e);
/* The team's line from its task of seq from_seq on (0: the head), at most limit, with each
 * one's place and predicted admission (one replay for the page). *next: the from_seq of the
 * next page, 0 when none. 0, GWB_ENOTFOUND (no such team) or GWB_EDB. */
int store_queue_list(struct store *s, const char *team, int64_t from_seq, int limit,
		     int64_t now_ms, store_queue_fn fn, void *arg, int64_t *next);
/* The dry run of req (fits: the quota holds it now): *waits 1 when it would wait in its
 * team's line, and then fn is called once with its place at the line's end. 0 or an error. */
int store_queue_dry_run(struct store *s, const struct task_req *req, int fits, int64_t now_ms,
			int *waits, store_queue_fn fn, void *arg);
/* Calls fn for each team with waiting tasks, with their count. 0 or GWB_EDB. */
int store_queue_waiting_counts(struct store *s, void (*fn)(void *arg, const char *team, int64_t n),
			       void *arg);
struct evbuffer;
/* The line's histograms: time waited, and the prediction's error, at each admission. */
void store_queue_metrics_write(struct store *s, struct evbuffer *out);

#endif
