/* The WAL's part of struct store (store_ckpt.c): its size as the WAL hook last saw it, its
 * bound, the checkpoints run, and the checkpoint thread. */
#ifndef GWB_STORE_CKPT_H
#define GWB_STORE_CKPT_H

#include <stddef.h>
#include <stdint.h>

struct store;
struct store_ckpt;

struct store_ckpt_part {
	int64_t wal_pages; /* the WAL as the WAL hook last saw it (pages) */
	int page_size;
	int64_t wal_max_bytes;
	int wal_wrote; /* the last COMMIT wrote WAL frames (the WAL hook ran) */
	int64_t runs, runs_busy; /* checkpoints run; those that could not finish */
	int64_t runs_failed;     /* of which the storage refused */
	int64_t loop_us;         /* time store_checkpoint took */
	struct store_ckpt *thread; /* the checkpoint thread, NULL until started */
	int64_t asked_pages; /* wal_pages when the thread was last asked (store_wal_bound) */
};

/* The connection's WAL settings and hook, with wal_max_bytes its bound: 0, or GWB_EDB with the
 * reason in err. */
int store_wal_setup(struct store *s, int64_t wal_max_bytes, char *err, size_t errlen);
/* Counts a checkpoint's outcome (SQLite's rc, the WAL's frames, those copied) and returns
 * it as store_checkpoint does. */
int store_checkpoint_counted(struct store *s, int rc, int log, int done, int truncate);

#endif
