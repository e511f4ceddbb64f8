/* When a waiting task will be admitted: the team's quota replayed forward in time from what
 * is known, from numbers alone (no SQLite, no I/O). A task holding quota frees it at its end:
 * a running one at its start plus its duration, an admitted one not yet running after the
 * start latency plus its duration, a final one awaiting its release now. The waiting tasks are
 * admitted in line order, each as soon as the quota holds it (strict FIFO: a best_effort team
 * may only be earlier). Used by the task view, the queue listing and the submission (which
 * records the prediction to measure its error at the admission). */
#ifndef GWB_QUEUE_PREDICT_H
#define GWB_QUEUE_PREDICT_H

#include <stdint.h>

/* The names a prediction gives as its basis, at most. */
#define QP_BASIS_MAX 8

/* A task holding the team's quota (times in ms since the epoch). */
struct qp_holder {
	const char *id;
	int64_t mem, core;      /* its reservation */
	int64_t duration_ms;    /* < 0: its end is not known (it never frees, for the replay) */
	int started;            /* 1: running since started_at */
	int ended;              /* 1: its Pods ended, only its release is left: frees now */
	int64_t started_at;     /* when started */
	int64_t admitted_at;    /* when not started: when it was admitted (or submitted) */
};

/* A waiting task, in line order. */
struct qp_waiter {
	const char *id;
	int64_t mem, core;
	int64_t duration_ms;
};

struct qp_input {
	int64_t now_ms;
	int64_t quota_mem, quota_core;
	int64_t start_latency_ms; /* from admission to running, the moving average */
	const struct qp_holder *holders;
	int nholders;
	const struct qp_waiter *waiters;
	int nwaiters;
};

/* One waiter's prediction: admit_at, or -1 when the quota can never hold it (it asks more
 * than the quota); basis: the tasks whose ends the admission waits for (the ends that made
 * room at that moment; none when it fits at once). */
struct qp_result {
	int64_t admit_at;
	const char *basis[QP_BASIS_MAX];
	int nbasis;
};

/* Predicts the admission of every waiter into out[0..nwaiters). Returns 0, or -1 when out of
 * memory. */
int queue_predict(const struct qp_input *in, struct qp_result *out);

/* A card for the bind prediction: its capacity and the tasks holding it. */
struct qp_card {
	int64_t mem_total, core_total;
	const struct qp_holder *holders;
	int nholders;
};
/* When a request of mem / core per card on count cards could bind: for each card the same
 * replay, the card's capacity as the quota and the request as the one waiter (a card frees
 * as its tasks end), then the count-th earliest card's moment. -1 when fewer than count cards
 * are known to free enough. */
int64_t queue_predict_bind(const struct qp_card *cards, int ncards, int64_t mem, int64_t core,
			   int64_t count, int64_t now_ms);

#endif
