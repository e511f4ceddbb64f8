/* The quota replayed forward in time (see queue_predict.h): a min-heap of the moments at
 * which held quota frees, popped until each waiter fits. */
#include "server/queue_predict.h"

#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"

struct release {
	int64_t at;
	int64_t mem, core;
	const char *id;
};

struct heap {
	struct release *a;
	int n, cap;
};

static void sift_up(struct heap *h, int i)
{
	while (i > 0) {
		int p = (i - 1) / 2;
		if (h->a[p].at <= h->a[i].at)
			break;
		struct release t = h->a[p];
		h->a[p] = h->a[i];
		h->a[i] = t;
		i = p;
	}
}

static void sift_down(struct heap *h, int i)
{
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < h->n && h->a[l].at < h->a[m].at)
			m = l;
		if (r < h->n && h->a[r].at < h->a[m].at)
			m = r;
		if (m == i)
			return;
		struct release t = h->a[m];
		h->a[m] = h->a[i];
		h->a[i] = t;
		i = m;
	}
}

static void push(struct heap *h, struct release r)
{
	h->a[h->n] = r; /* room for every holder and waiter was made at the start */
	sift_up(h, h->n++);
}

static struct release pop(struct heap *h)
{
	struct release r = h->a[0];
	h->a[0] = h->a[--h->n];
	sift_down(h, 0);
	return r;
}

static int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

/* When a holder frees its quota. */
static int64_t holder_end(const struct qp_input *in, const struct qp_holder *h)
{
	if (h->duration_ms < 0)
		return INT64_MAX;
	if (h->ended)
		return in->now_ms;
	if (h->started)
		return max64(h->started_at + h->duration_ms, in->now_ms);
	int64_t start = max64(h->admitted_at + in->start_latency_ms, in->now_ms);
	return start + h->duration_ms;
}

int queue_predict(const struct qp_input *in, struct qp_result *out)
{
	struct heap h = { NULL, 0, in->nholders + in->nwaiters };
	if (h.cap > 0 && !(h.a = gwb_malloc(sizeof *h.a * (size_t)h.cap)))
		return -1;
	int64_t used_mem = 0, used_core = 0, t = in->now_ms;
	for (int i = 0; i < in->nholders; i++) {
		const struct qp_holder *x = &in->holders[i];
		used_mem += x->mem;
		used_core += x->core;
		push(&h, (struct release){ holder_end(in, x), x->mem, x->core, x->id });
	}
	/* The ends that made room for the last admission that needed any: the basis of every
	 * admission after it that needed none. */
	struct qp_result last = { 0, { NULL }, 0 };
	int never = 0;
	for (int i = 0; i < in->nwaiters; i++) {
		const struct qp_waiter *w = &in->waiters[i];
		struct qp_result *r = &out[i];
		memset(r, 0, sizeof *r);
		if (never || w->mem > in->quota_mem || w->core > in->quota_core || t == INT64_MAX) {
			never = 1; /* strict order: nothing behind a task that never fits */
			r->admit_at = -1;
			continue;
		}
		while ((used_mem + w->mem > in->quota_mem || used_core + w->core > in->quota_core) &&
		       h.n > 0) {
			struct release e = pop(&h);
			t = max64(t, e.at);
			if (t == INT64_MAX)
				break; /* an end not known: never, as far as the replay knows */
			used_mem -= e.mem;
			used_core -= e.core;
			if (r->nbasis < QP_BASIS_MAX)
				r->basis[r->nbasis++] = e.id;
		}
		if (t == INT64_MAX) {
			never = 1;
			r->admit_at = -1;
			r->nbasis = 0;
			continue;
		}
		if (r->nbasis) {
			last = *r;
		} else {
			memcpy(r->basis, last.basis, sizeof r->basis);
			r->nbasis = last.nbasis;
		}
		r->admit_at = t;
		used_mem += w->mem;
		used_core += w->core;
		push(&h, (struct release){ t + in->start_latency_ms + w->duration_ms, w->mem, w->core,
					  w->id });
	}
	gwb_free(h.a);
	return 0;
}

static int cmp64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int64_t queue_predict_bind(const struct qp_card *cards, int ncards, int64_t mem, int64_t core,
			   int64_t count, int64_t now_ms)
{
	if (ncards <= 0 || count <= 0 || count > ncards)
		return -1;
	int64_t *at = gwb_malloc(sizeof *at * (size_t)ncards);
	int n = 0;
	for (int i = 0; i < ncards; i++) {
		const struct qp_card *c = &cards[i];
		struct qp_waiter w = { "", mem, core, 0 };
		struct qp_input in = { now_ms, c->mem_total, c->core_total, 0, c->holders,
				       c->nholders, &w, 1 };
		struct qp_result r;
		if (queue_predict(&in, &r) == 0 && r.admit_at >= 0)
			at[n++] = r.admit_at;
	}
	int64_t out = -1;
	if (n >= count) {
		qsort(at, (size_t)n, sizeof *at, cmp64);
		out = at[count - 1];
	}
	gwb_free(at);
	return out;
}
