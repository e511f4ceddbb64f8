/* Placement prediction: DeviceShare's filter, allocator and scorers on the card picture. */
#include "server/recon/predict.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One request, in the units the scorer weighs: gpu-memory-ratio (percent of a card) and
 * gpu-memory (MiB); gpu-core is checked for fit but carries no weight in the score. */
struct want {
	int64_t mem, core, count;
	int shared; /* a memory-based (or partial) request: cards may be shared */
	enum predict_strategy strategy;
};

const char *predict_strategy_name(enum predict_strategy s)
{
	return s == PREDICT_MOST_ALLOCATED ? "MostAllocated" : "LeastAllocated";
}

int predict_strategy_parse(const char *name, enum predict_strategy *out)
{
	if (strcmp(name, "LeastAllocated") == 0)
		*out = PREDICT_LEAST_ALLOCATED;
	else if (strcmp(name, "MostAllocated") == 0)
		*out = PREDICT_MOST_ALLOCATED;
	else
		return -1;
	return 0;
}

/* An unhealthy card has no resources at all for the scheduler. */
static int64_t total_mem(const struct diag_card *c)
{
	return c->healthy ? c->mem_total_mib : 0;
}

static int64_t free_of(int64_t total, int64_t used)
{
	return total > used ? total - used : 0;
}

static int fits(const struct diag_card *c, const struct want *w)
{
	if (!c->healthy)
		return 0;
	if (w->mem > free_of(c->mem_total_mib, c->mem_used_mib))
		return 0;
	return w->core == 0 || w->core <= free_of(c->core_total, c->core_used);
}

static int used_any(const struct diag_card *c)
{
	return c->mem_used_mib > 0 || c->core_used > 0;
}

/* The percentage of a card's memory that mem MiB is (gpu-memory-ratio, rounded down). */
static int64_t ratio_of(int64_t mem, int64_t total)
{
	return total > 0 ? mem * 100 / total : 0;
}

/* One weighted resource's score: LeastAllocated (total − requested)·100/total, MostAllocated
 * requested·100/total; 0 when requested exceeds the total. */
static int64_t score_r(enum predict_strategy s, int64_t total, int64_t requested)
{
	if (requested > total)
		return 0;
	return s == PREDICT_MOST_ALLOCATED ? requested * 100 / total
					   : (total - requested) * 100 / total;
}

/* The scorer with its arguments in the right order, over a total and what is used of it (a card
 * or a node's sum): the integer average over gpu-memory-ratio and gpu-memory. */
static int64_t score(enum predict_strategy s, int64_t t_mem, int64_t used_mem, int64_t req_mem)
{
	if (t_mem <= 0)
		return 0;
	int64_t t_ratio = 100;
	int64_t by_ratio = score_r(s, t_ratio, ratio_of(used_mem, t_mem) + ratio_of(req_mem, t_mem));
	int64_t by_mem = score_r(s, t_mem, used_mem + req_mem);
	return (by_ratio + by_mem) / 2;
}

/* The topology path calls the scorer with free and total swapped: for LeastAllocated an unused
 * card scores as it should and a partially used one 0; for MostAllocated the reverse, a
 * partially used card scores 100. */
static int64_t score_swapped(const struct diag_card *c, const struct want *w)
{
	if (used_any(c))
		return w->strategy == PREDICT_MOST_ALLOCATED ? 100 : 0;
	return score(w->strategy, total_mem(c), 0, w->mem);
}

struct pick {
	int ok, depth, cne;
	int64_t score;
	int n;
	int idx[DIAG_MAX_CARDS];
};

/* Allocation inside one scope (card indexes in ascending minor): a whole-card or multi-card
 * request takes the first cards that fit; a single shared card is the fitting card with the
 * highest score, the lowest minor among equals. */
static void alloc_scope(const struct diag_cards *cs, const int *idx, int n, const struct want *w,
			struct pick *out)
{
	memset(out, 0, sizeof *out);
	if (!w->shared || w->count > 1) {
		for (int i = 0; i < n && out->n < w->count; i++)
			if (fits(&cs->c[idx[i]], w))
				out->idx[out->n++] = idx[i];
		out->ok = out->n == w->count;
		return;
	}
	for (int i = 0; i < n; i++) {
		if (!fits(&cs->c[idx[i]], w))
			continue;
		int64_t s = score_swapped(&cs->c[idx[i]], w);
		if (!out->ok || s > out->score) {
			out->ok = 1;
			out->n = 1;
			out->idx[0] = idx[i];
			out->score = s;
		}
	}
}

/* Whether a beats b: deeper scope, then more scopes in use on its path (binpack at the
 * topology level), then, for shared requests, the higher card score; else the earlier. */
static int better(const struct pick *a, const struct pick *b, const struct want *w)
{
	if (!a->ok)
		return 0;
	if (!b->ok)
		return 1;
	if (a->depth != b->depth)
		return a->depth > b->depth;
	if (a->cne != b->cne)
		return a->cne > b->cne;
	return w->shared && a->score > b->score;
}

static int any_used(const struct diag_cards *cs, const int *idx, int n)
{
	for (int i = 0; i < n; i++)
		if (used_any(&cs->c[idx[i]]))
			return 1;
	return 0;
}

/* Tries a scope at depth with cne scopes in use above it; keeps the better result in best. */
static void try_scope(const struct diag_cards *cs, const int *idx, int n, int depth, int cne,
		      const struct want *w, struct pick *best)
{
	if (n < w->count)
		return;
	struct pick p;
	alloc_scope(cs, idx, n, w, &p);
	p.depth = depth;
	p.cne = cne + any_used(cs, idx, n);
	if (better(&p, best, w))
		*best = p;
}

/* The topology tree of one node: node (depth 1) → NUMA nodes by id (2) → PCIe roots by id
 * (3). Children with enough cards are tried first; a scope itself only when none of its
 * children gave a result. idx holds the node's cards in ascending minor. */
static void alloc_topology(const struct diag_cards *cs, const int *idx, int n,
			   const struct want *w, struct pick *out)
{
	memset(out, 0, sizeof *out);
	int node_used = any_used(cs, idx, n);
	int64_t numas[DIAG_MAX_CARDS];
	int nn = 0;
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < nn; j++)
			seen |= numas[j] == cs->c[idx[i]].numa;
		if (!seen)
			numas[nn++] = cs->c[idx[i]].numa;
	}
	for (int i = 1; i < nn; i++)
		for (int j = i; j > 0 && numas[j - 1] > numas[j]; j--) {
			int64_t t = numas[j];
			numas[j] = numas[j - 1];
			numas[j - 1] = t;
		}
	for (int a = 0; a < nn; a++) {
		int in_numa[DIAG_MAX_CARDS], ni = 0;
		for (int i = 0; i < n; i++)
			if (cs->c[idx[i]].numa == numas[a])
				in_numa[ni++] = idx[i];
		if (ni < w->count)
			continue;
		int numa_cne = node_used + any_used(cs, in_numa, ni);
		const char *pcies[DIAG_MAX_CARDS];
		int np = 0;
		for (int i = 0; i < ni; i++) {
			int seen = 0;
			for (int j = 0; j < np; j++)
				seen |= strcmp(pcies[j], cs->c[in_numa[i]].pcie) == 0;
			if (!seen)
				pcies[np++] = cs->c[in_numa[i]].pcie;
		}
		for (int i = 1; i < np; i++)
			for (int j = i; j > 0 && strcmp(pcies[j - 1], pcies[j]) > 0; j--) {
				const char *t = pcies[j];
				pcies[j] = pcies[j - 1];
				pcies[j - 1] = t;
			}
		struct pick in_this = { 0 };
		for (int p = 0; p < np; p++) {
			int leaf[DIAG_MAX_CARDS], nl = 0;
			for (int i = 0; i < ni; i++)
				if (strcmp(cs->c[in_numa[i]].pcie, pcies[p]) == 0)
					leaf[nl++] = in_numa[i];
			try_scope(cs, leaf, nl, 3, numa_cne, w, &in_this);
		}
		if (!in_this.ok)
			try_scope(cs, in_numa, ni, 2, node_used, w, &in_this);
		if (better(&in_this, out, w))
			*out = in_this;
	}
	if (!out->ok)
		try_scope(cs, idx, n, 1, 0, w, out);
}

/* The fallback allocator: every card scored in the right argument order, best first, the lower
 * minor among equals; the first cards that fit until count are chosen. */
static void alloc_scored(const struct diag_cards *cs, const int *idx, int n, const struct want *w,
			 struct pick *out)
{
	memset(out, 0, sizeof *out);
	int order[DIAG_MAX_CARDS];
	int64_t sc[DIAG_MAX_CARDS];
	for (int i = 0; i < n; i++) {
		const struct diag_card *c = &cs->c[idx[i]];
		order[i] = idx[i];
		sc[i] = score(w->strategy, total_mem(c), c->mem_used_mib, w->mem);
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
	for (int i = 0; i < n && out->n < w->count; i++)
		if (fits(&cs->c[order[i]], w))
			out->idx[out->n++] = order[i];
	out->ok = out->n == w->count;
}

static int cmp_int(const void *a, const void *b)
{
	int x = *(const int *)a, y = *(const int *)b;
	return (x > y) - (x < y);
}

/* The cards of one node, by ascending minor. Returns how many. */
static int node_cards(const struct diag_cards *cs, const char *node, int *idx)
{
	int n = 0;
	for (int i = 0; i < cs->n; i++)
		if (strcmp(cs->c[i].node, node) == 0)
			idx[n++] = i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cs->c[idx[j - 1]].minor > cs->c[idx[j]].minor; j--) {
			int t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	return n;
}

/* The node's DeviceShare score: the scorer over its summed healthy totals and use. */
static int64_t node_score(const struct diag_cards *cs, const int *idx, int n, const struct want *w)
{
	int64_t t = 0, used = 0;
	for (int i = 0; i < n; i++) {
		const struct diag_card *c = &cs->c[idx[i]];
		if (!c->healthy)
			continue;
		t += c->mem_total_mib;
		used += c->mem_used_mib;
	}
	return score(w->strategy, t, used, w->mem);
}

void predict_place(const struct diag_cards *cs, const struct diag_req *req,
		   enum predict_strategy strategy, struct predict_result *out)
{
	memset(out, 0, sizeof *out);
	struct want w = { req->mem_mib, req->core, req->count > 0 ? req->count : 1,
			  req->mem_mib > 0 || req->core < 100, strategy };
	const char *nodes[PREDICT_MAX_NODES];
	int nnodes = 0;
	for (int i = 0; i < cs->n && nnodes < PREDICT_MAX_NODES; i++) {
		int seen = 0;
		for (int j = 0; j < nnodes; j++)
			seen |= strcmp(nodes[j], cs->c[i].node) == 0;
		if (!seen)
			nodes[nnodes++] = cs->c[i].node;
	}
	int64_t best_score = -1;
	for (int k = 0; k < nnodes; k++) {
		int idx[DIAG_MAX_CARDS];
		int n = node_cards(cs, nodes[k], idx);
		int all_topo = 1;
		for (int i = 0; i < n; i++)
			all_topo &= cs->c[idx[i]].has_topology;
		struct pick p = { 0 };
		if (all_topo && !(w.count > 1 && w.shared))
			alloc_topology(cs, idx, n, &w, &p);
		if (!p.ok)
			alloc_scored(cs, idx, n, &w, &p);
		if (!p.ok)
			continue;
		int64_t s = node_score(cs, idx, n, &w);
		if (s == best_score && out->ntied < PREDICT_MAX_NODES) {
			snprintf(out->tied[out->ntied++], sizeof out->tied[0], "%s", nodes[k]);
			continue;
		}
		if (s < best_score)
			continue;
		best_score = s;
		out->bind = 1;
		out->ntied = 0;
		snprintf(out->node, sizeof out->node, "%s", nodes[k]);
		out->nminors = p.n;
		for (int i = 0; i < p.n; i++)
			out->minors[i] = cs->c[p.idx[i]].minor;
		qsort(out->minors, (size_t)out->nminors, sizeof out->minors[0], cmp_int);
	}
}

json_t *predict_placement_json(const struct diag_cards *cards, const struct diag_req *req,
			       enum predict_strategy strategy)
{
	struct predict_result res;
	predict_place(cards, req, strategy, &res);
	if (!res.bind) {
		json_t *d = diag_pending(req, cards);
		json_t *unblock = json_incref(json_object_get(d, "unblock"));
		return json_pack("{s:s, s:n, s:[], s:[], s:o, s:o}", "outcome", "pending", "node",
				 "cards", "tied_nodes", "diagnosis", d, "unblock",
				 unblock ? unblock : json_array());
	}
	json_t *minors = json_array(), *tied = json_array();
	for (int i = 0; i < res.nminors; i++)
		json_array_append_new(minors, json_integer(res.minors[i]));
	for (int i = 0; i < res.ntied; i++)
		json_array_append_new(tied, json_string(res.tied[i]));
	return json_pack("{s:s, s:s, s:o, s:o, s:n, s:[]}", "outcome", "bind", "node", res.node,
			 "cards", minors, "tied_nodes", tied, "diagnosis", "unblock");
}
