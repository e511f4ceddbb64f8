/* The waiting line's part of struct store (store_queue.c): its setting, the start latency it
 * measures, what it tells about admissions, and its histograms for /metrics. */
#ifndef GWB_STORE_QUEUE_H
#define GWB_STORE_QUEUE_H

#include <stdint.h>

#include "lib/prom.h"
#include "server/task.h"

struct store;

struct store_queue_part {
	int64_t max_skip_ms;       /* queue.max_skip_seconds, in ms */
	int64_t start_latency_ms;  /* moving average, admission (or submission) to running; 0: none yet */
	void (*on_admit)(void *arg, const char *task_id);
	void *on_admit_arg;
	struct prom_hist waited;   /* seconds from submission to admission */
	struct prom_hist error;    /* seconds between the predicted and the actual admission */
	int hists_ready;
};

/* A task moved to running (the door, store_move.c): the start latency's average moves. */
void store_queue_note_start(struct store *s, const struct task *t, int64_t now_ms);
/* The team's waiting tasks admitted while they fit (the line's order: strict, or best_effort
 * within its bounds), inside the caller's open transaction: called where quota comes back
 * (a release, a cancel, a quota raised) and the line may move (a waiting task cancelled).
 * 0 or a store error. */
int store_queue_admit(struct store *s, const char *team, int64_t now_ms);
/* Whether a submission that fits must still join team's line (a line is there, and under
 * strict, or best_effort with a head waiting longer than queue.max_skip_seconds, it may not
 * pass). *wait_default: the team's default_on_quota_full is wait. 0 or a store error. */
int store_queue_blocks(struct store *s, const char *team, int64_t now_ms, int *blocks);
/* The team's default_on_quota_full is wait: *wait 1. 0, GWB_ENOTFOUND or GWB_EDB. */
int store_queue_team_waits(struct store *s, const char *team, int *wait);
/* The new waiting task t (just inserted) gets its predicted admission recorded. */
int store_queue_predict_new(struct store *s, struct task *t, int64_t now_ms);
/* A waiting task cancelled in the caller's transaction: moved by m (to cancelled), marked
 * released (it held nothing: proof never_admitted), and the line behind it moves. */
int store_queue_cancel(struct store *s, struct task *t, const struct task_move *m,
		       int64_t now_ms);

#endif
