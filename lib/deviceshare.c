/* DeviceShare's request conversion, card fit, scorers and the two allocation paths. All
 * arithmetic is integer except the memory-to-ratio fill, which truncates a float64 as
 * koord-scheduler does. */
#include "lib/deviceshare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/quantity.h"

#define R_KGPU "koordinator.sh/gpu"

/* ---- PreFilter ---- */

struct gpu_name {
	const char *name;
	int64_t v;
};

/* Go prints a []string as "[a b]"; the real order is a map's, sorted here: names is sorted. */
static void names_list(const struct gpu_name *names, int n, char *buf, size_t len)
{
	size_t o = (size_t)snprintf(buf, len, "[");
	int first = 1;
	for (int i = 0; i < n && o < len; i++) {
		if (names[i].v <= 0)
			continue;
		o += (size_t)snprintf(buf + o, len - o, "%s%s", first ? "" : " ", names[i].name);
		first = 0;
	}
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

static int ok_unit(int64_t v)
{
	return v <= 100 || v % 100 == 0;
}

/* Whether the set of names present (n of them) is one of the accepted combinations, with its
 * unit checks; *implied receives the core and ratio a whole-card or koordinator.sh/gpu request
 * implies (0 otherwise). */
static int valid_set(const struct deviceshare_pod *p, int n, int64_t *implied)
{
	int64_t whole = p->nvidia + p->amd + p->dcu;
	*implied = 0;
	if (whole && n == 1) {
		*implied = whole * 100;
		return 1;
	}
	if (p->kgpu && n == 1) {
		*implied = p->kgpu;
		return 1;
	}
	int64_t core = p->core, mem = p->mem, ratio = p->ratio, shared = p->shared;
	if (!shared && !core && mem && !ratio && n == 1)
		return 1;
	if (!shared && !core && ratio && n == 1)
		return ok_unit(ratio);
	if (!shared && core && mem && n == 2)
		return ok_unit(core);
	if (!shared && core && ratio && n == 2)
		return ok_unit(core) && ok_unit(ratio);
	if (shared && !core && mem && n == 2)
		return 1;
	if (shared && !core && ratio && n == 2)
		return ratio % shared == 0 && ratio / shared <= 100;
	if (shared && core && mem && n == 3)
		return core % shared == 0 && core / shared <= 100;
	if (shared && core && ratio && n == 3)
		return core % shared == 0 && core / shared <= 100 && ratio % shared == 0 &&
		       ratio / shared <= 100;
	return 0;
}

int deviceshare_request_from_pod(const struct deviceshare_pod *p, struct deviceshare_request *g,
				 char *msg, size_t len)
{
	/* In strcmp order, for the message. */
	const struct gpu_name names[] = {
		{ "amd.com/gpu", p->amd },
		{ "dcu.com/gpu", p->dcu },
		{ R_KGPU, p->kgpu },
		{ "koordinator.sh/gpu-core", p->core },
		{ "koordinator.sh/gpu-memory", p->mem },
		{ "koordinator.sh/gpu-memory-ratio", p->ratio },
		{ "koordinator.sh/gpu.shared", p->shared },
		{ "nvidia.com/gpu", p->nvidia },
	};
	const int nnames = (int)(sizeof names / sizeof names[0]);
	struct deviceshare_pod q = { 0 };
	int n = 0;
	for (int i = 0; i < nnames; i++)
		n += names[i].v > 0;
	memset(g, 0, sizeof *g);
	if (n == 0)
		return 0;
	/* Names with a zero or negative request are not asked for. */
	q.core = p->core > 0 ? p->core : 0;
	q.mem = p->mem > 0 ? p->mem : 0;
	q.ratio = p->ratio > 0 ? p->ratio : 0;
	q.shared = p->shared > 0 ? p->shared : 0;
	q.kgpu = p->kgpu > 0 ? p->kgpu : 0;
	q.nvidia = p->nvidia > 0 ? p->nvidia : 0;
	q.amd = p->amd > 0 ? p->amd : 0;
	q.dcu = p->dcu > 0 ? p->dcu : 0;
	if (q.kgpu && n == 1 && !ok_unit(q.kgpu)) {
		char qs[QUANTITY_BUF];
		snprintf(msg, len, "invalid resource unit %s: %s", R_KGPU,
			 quantity_format_decimal(q.kgpu, qs, sizeof qs));
		return -1;
	}
	int64_t implied;
	if (!valid_set(&q, n, &implied)) {
		char list[512];
		names_list(names, nnames, list, sizeof list);
		snprintf(msg, len, "invalid resource device requests: %s", list);
		return -1;
	}
	int64_t core = implied ? implied : q.core, ratio = implied ? implied : q.ratio;
	int64_t count = q.shared;
	if (count <= 0)
		count = ratio > 100 && ratio % 100 == 0 ? ratio / 100 : 1;
	g->count = (int)count;
	if (core) {
		g->has_core = 1;
		g->core = core / count;
	}
	if (ratio) {
		g->has_ratio = 1;
		g->ratio = ratio / count;
	} else if (q.mem) {
		g->has_mem = 1;
		g->mem = q.mem / count;
	}
	g->shared = g->has_mem || (g->has_ratio && g->ratio < 100);
	return 1;
}

/* ---- Filter and scorers ---- */

static int64_t free_of(int64_t total, int64_t used)
{
	return total > used ? total - used : 0;
}

/* What DeviceShare counts as the card's totals: none for an unhealthy card. */
static int64_t total_mem(const struct deviceshare_card *c)
{
	return c->healthy ? c->total_mem : 0;
}

static int64_t total_ratio(const struct deviceshare_card *c)
{
	return c->healthy ? c->total_ratio : 0;
}

int deviceshare_card_fits(const struct deviceshare_card *c, const struct deviceshare_request *r)
{
	if (!c->healthy)
		return 0;
	if (r->has_core && r->core > free_of(c->total_core, c->used_core))
		return 0;
	if (r->has_mem && r->mem > free_of(c->total_mem, c->used_mem))
		return 0;
	if (r->has_ratio && r->ratio > free_of(c->total_ratio, c->used_ratio))
		return 0;
	return 1;
}

static int used_any(const struct deviceshare_card *c)
{
	return c->used_core > 0 || c->used_mem > 0 || c->used_ratio > 0;
}

/* One weighted resource: LeastAllocated scores the share left, MostAllocated the share taken. */
static int64_t score_res(enum deviceshare_strategy s, int64_t total, int64_t requested)
{
	if (requested > total)
		return 0;
	return s == DEVICESHARE_MOST_ALLOCATED ? requested * 100 / total
					       : (total - requested) * 100 / total;
}

int64_t deviceshare_score(enum deviceshare_strategy s, int64_t total_r, int64_t total_m,
			  int64_t used_r, int64_t used_m, const struct deviceshare_request *r)
{
	int64_t sum = 0, w = 0;
	if (total_r > 0) {
		sum += score_res(s, total_r, used_r + (r->has_ratio ? r->ratio : 0));
		w++;
	}
	if (total_m > 0) {
		sum += score_res(s, total_m, used_m + (r->has_mem ? r->mem : 0));
		w++;
	}
	return w ? sum / w : 0;
}

/* The topology path's call of the scorer, with free and total swapped (allocator_gpu.go). */
static int64_t score_swapped(const struct deviceshare_card *c, const struct deviceshare_request *r,
			     enum deviceshare_strategy s)
{
	if (used_any(c))
		return s == DEVICESHARE_MOST_ALLOCATED ? 100 : 0;
	return deviceshare_score(s, total_ratio(c), total_mem(c), 0, 0, r);
}

/* ---- Reserve ---- */

struct pick {
	int ok, depth, cne;
	int64_t score;
	int n;
	int idx[DEVICESHARE_MAX_CARDS];
};

struct ctx {
	const struct deviceshare_card *cards;
	const struct deviceshare_request *r;
	enum deviceshare_strategy s;
};

/* Allocation inside one scope (card indexes in ascending minor): a whole-card or multi-card
 * request takes the first cards that fit; a single shared card is the fitting card with the
 * highest swapped score, the lowest minor among equals. */
static void alloc_scope(const struct ctx *x, const int *idx, int n, struct pick *out)
{
	memset(out, 0, sizeof *out);
	if (!x->r->shared || x->r->count > 1) {
		for (int i = 0; i < n && out->n < x->r->count; i++)
			if (deviceshare_card_fits(&x->cards[idx[i]], x->r))
				out->idx[out->n++] = idx[i];
		out->ok = out->n == x->r->count;
		return;
	}
	for (int i = 0; i < n; i++) {
		if (!deviceshare_card_fits(&x->cards[idx[i]], x->r))
			continue;
		int64_t sc = score_swapped(&x->cards[idx[i]], x->r, x->s);
		if (!out->ok || sc > out->score) {
			out->ok = 1;
			out->n = 1;
			out->idx[0] = idx[i];
			out->score = sc;
		}
	}
}

/* Whether a beats b: deeper scope, then more scopes in use on its path (binpack at the topology
 * level), then, for a shared request, the higher card score; else the earlier. */
static int better(const struct pick *a, const struct pick *b, const struct deviceshare_request *r)
{
	if (!a->ok)
		return 0;
	if (!b->ok)
		return 1;
	if (a->depth != b->depth)
		return a->depth > b->depth;
	if (a->cne != b->cne)
		return a->cne > b->cne;
	return r->shared && a->score > b->score;
}

static int any_used(const struct ctx *x, const int *idx, int n)
{
	for (int i = 0; i < n; i++)
		if (used_any(&x->cards[idx[i]]))
			return 1;
	return 0;
}

/* Tries a scope at depth with cne scopes in use above it; keeps the better result in best. */
static void try_scope(const struct ctx *x, const int *idx, int n, int depth, int cne,
		      struct pick *best)
{
	if (n < x->r->count)
		return;
	struct pick p;
	alloc_scope(x, idx, n, &p);
	p.depth = depth;
	p.cne = cne + any_used(x, idx, n);
	if (better(&p, best, x->r))
		*best = p;
}

/* The distinct NUMA ids of cards idx[0..n), ascending. Returns how many. */
static int numa_ids(const struct ctx *x, const int *idx, int n, int64_t *out)
{
	int nn = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < nn; j++)
			seen |= out[j] == x->cards[idx[i]].numa;
		if (!seen)
			out[nn++] = x->cards[idx[i]].numa;
	}
	for (int i = 1; i < nn; i++)
		for (int j = i; j > 0 && out[j - 1] > out[j]; j--) {
			int64_t t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return nn;
}

/* The distinct PCIe roots of cards idx[0..n), in string order. Returns how many. */
static int pcie_ids(const struct ctx *x, const int *idx, int n, const char **out)
{
	int np = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < np; j++)
			seen |= strcmp(out[j], x->cards[idx[i]].pcie) == 0;
		if (!seen)
			out[np++] = x->cards[idx[i]].pcie;
	}
	for (int i = 1; i < np; i++)
		for (int j = i; j > 0 && strcmp(out[j - 1], out[j]) > 0; j--) {
			const char *t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return np;
}

/* One NUMA node's scope (cards in_numa[0..ni)): its PCIe roots first, the NUMA node itself only
 * when none of them gave a result. */
static void alloc_numa(const struct ctx *x, const int *in_numa, int ni, int node_used,
		       struct pick *out)
{
	memset(out, 0, sizeof *out);
	int numa_cne = node_used + any_used(x, in_numa, ni);
	const char *pcies[DEVICESHARE_MAX_CARDS];
	int np = pcie_ids(x, in_numa, ni, pcies);
	for (int p = 0; p < np; p++) {
		int leaf[DEVICESHARE_MAX_CARDS], nl = 0;
		for (int i = 0; i < ni; i++)
			if (strcmp(x->cards[in_numa[i]].pcie, pcies[p]) == 0)
				leaf[nl++] = in_numa[i];
		try_scope(x, leaf, nl, 3, numa_cne, out);
	}
	if (!out->ok)
		try_scope(x, in_numa, ni, 2, node_used, out);
}

/* The topology tree of one node: node (depth 1) -> NUMA nodes by id (2) -> PCIe roots by id (3).
 * Children with enough cards are tried first; a scope itself only when none of its children
 * gave a result. */
static void alloc_topology(const struct ctx *x, const int *idx, int n, struct pick *out)
{
	memset(out, 0, sizeof *out);
	int node_used = any_used(x, idx, n);
	int64_t numas[DEVICESHARE_MAX_CARDS];
	int nn = numa_ids(x, idx, n, numas);
	for (int a = 0; a < nn; a++) {
		int in_numa[DEVICESHARE_MAX_CARDS], ni = 0;
		for (int i = 0; i < n; i++)
			if (x->cards[idx[i]].numa == numas[a])
				in_numa[ni++] = idx[i];
		if (ni < x->r->count)
			continue;
		struct pick in_this;
		alloc_numa(x, in_numa, ni, node_used, &in_this);
		if (better(&in_this, out, x->r))
			*out = in_this;
	}
	if (!out->ok)
		try_scope(x, idx, n, 1, 0, out);
}

/* The scored path: every card scored with the arguments in the right order, best first, the
 * lower minor among equals; the first cards that fit until count are chosen. */
static void alloc_scored(const struct ctx *x, const int *idx, int n, struct pick *out)
{
	memset(out, 0, sizeof *out);
	int order[DEVICESHARE_MAX_CARDS];
	int64_t sc[DEVICESHARE_MAX_CARDS];
	for (int i = 0; i < n; i++) {
		const struct deviceshare_card *c = &x->cards[idx[i]];
		order[i] = idx[i];
		sc[i] = deviceshare_score(x->s, total_ratio(c), total_mem(c), c->used_ratio,
					  c->used_mem, x->r);
	}
	/* Insertion sort: stable, so equal scores keep ascending minor. */
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && sc[j - 1] < sc[j]; j--) {
			int64_t ts = sc[j];
			sc[j] = sc[j - 1];
			sc[j - 1] = ts;
			int to = order[j];
			order[j] = order[j - 1];
			order[j - 1] = to;
		}
	for (int i = 0; i < n && out->n < x->r->count; i++)
		if (deviceshare_card_fits(&x->cards[order[i]], x->r))
			out->idx[out->n++] = order[i];
	out->ok = out->n == x->r->count;
}

int deviceshare_topology_path(const struct deviceshare_card *cards, int n,
			      const struct deviceshare_request *r)
{
	for (int i = 0; i < n; i++)
		if (!cards[i].has_topology)
			return 0;
	return !(r->count > 1 && r->shared);
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

int deviceshare_allocate(const struct deviceshare_card *cards, int n,
			 const struct deviceshare_request *r, enum deviceshare_strategy s,
			 int *chosen)
{
	if (n <= 0 || r->count <= 0 || r->count > DEVICESHARE_MAX_CARDS)
		return 0;
	if (n > DEVICESHARE_MAX_CARDS)
		n = DEVICESHARE_MAX_CARDS;
	struct ctx x = { cards, r, s };
	int idx[DEVICESHARE_MAX_CARDS];
	for (int i = 0; i < n; i++)
		idx[i] = i;
	struct pick p;
	if (deviceshare_topology_path(cards, n, r))
		alloc_topology(&x, idx, n, &p);
	else
		alloc_scored(&x, idx, n, &p);
	if (!p.ok)
		return 0;
	memcpy(chosen, p.idx, sizeof(int) * (size_t)p.n);
	qsort(chosen, (size_t)p.n, sizeof(int), cmp_int);
	return p.n;
}

/* ---- Score ---- */

int64_t deviceshare_node_score(const struct deviceshare_card *cards, int n,
			       const struct deviceshare_request *r, enum deviceshare_strategy s)
{
	int64_t tr = 0, tm = 0, ur = 0, um = 0;
	for (int i = 0; i < n; i++) {
		if (!cards[i].healthy)
			continue;
		tr += cards[i].total_ratio;
		tm += cards[i].total_mem;
		ur += cards[i].used_ratio;
		um += cards[i].used_mem;
	}
	return n > 0 ? deviceshare_score(s, tr, tm, ur, um, r) : 0;
}

void deviceshare_normalize(int64_t *scores, int n)
{
	int64_t max = 0;
	for (int i = 0; i < n; i++)
		if (scores[i] > max)
			max = scores[i];
	for (int i = 0; i < n; i++)
		scores[i] = max ? scores[i] * 100 / max : 0;
}

/* ---- the annotation's amounts ---- */

void deviceshare_fill(const struct deviceshare_card *c, const struct deviceshare_request *r,
		      struct devalloc_card *a)
{
	memset(a, 0, sizeof *a);
	a->minor = c->minor;
	snprintf(a->id, sizeof a->id, "%s", c->id);
	if (r->has_core) {
		a->has_core = 1;
		a->core = r->core;
	}
	a->has_mem = a->has_ratio = 1;
	if (r->has_ratio) {
		a->ratio = r->ratio;
		a->mem_bytes = r->ratio * c->total_mem / 100;
	} else {
		a->mem_bytes = r->mem;
		double share = c->total_mem ? (double)r->mem / (double)c->total_mem : 0.0;
		a->ratio = (int64_t)(share * 100.0);
	}
}

void deviceshare_cards_add(struct deviceshare_card *cards, int n, const struct devalloc *a)
{
	for (int j = 0; j < a->ncards; j++)
		for (int c = 0; c < n; c++) {
			if (cards[c].minor != a->cards[j].minor)
				continue;
			if (a->cards[j].has_core)
				cards[c].used_core += a->cards[j].core;
			if (a->cards[j].has_mem)
				cards[c].used_mem += a->cards[j].mem_bytes;
			if (a->cards[j].has_ratio)
				cards[c].used_ratio += a->cards[j].ratio;
		}
}
