/* Scheduler: a simplified kube-scheduler framework with the koord-scheduler profile. Per pod:
 * PreFilter (DeviceShare request validation), per node Filter (unschedulable, node selector,
 * NodeResourcesFit, then DeviceShare card fit), then Reserve/PreBind/Bind as writes: the
 * device-allocated annotation first, the binding second. All arithmetic is integer except the
 * memory->ratio conversion, which truncates a float64 as koord-scheduler does. */
#include "tools/kubesim/sched.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "tools/kubesim/events.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

#define R_CORE "koordinator.sh/gpu-core"
#define R_MEM "koordinator.sh/gpu-memory"
#define R_RATIO "koordinator.sh/gpu-memory-ratio"
#define R_SHARED "koordinator.sh/gpu.shared"
#define R_KGPU "koordinator.sh/gpu"
#define R_NVIDIA "nvidia.com/gpu"
#define ISOLATION_LABEL "koordinator.sh/gpu-isolation-provider"
#define MAX_CARDS 64
#define MAX_RES 32
#define MAX_NODES 64

/* ---- resource lists ---- */

struct rlist {
	int n;
	char name[MAX_RES][96];
	int64_t v[MAX_RES];
};

static int64_t *rl_slot(struct rlist *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return &l->v[i];
	if (l->n == MAX_RES)
		return NULL;
	snprintf(l->name[l->n], sizeof l->name[0], "%s", name);
	l->v[l->n] = 0;
	return &l->v[l->n++];
}

static int64_t rl_get(const struct rlist *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return l->v[i];
	return 0;
}

static int rl_has(const struct rlist *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (!strcmp(l->name[i], name))
			return 1;
	return 0;
}

/* A quantity in the unit the scheduler compares: milli-cores for cpu, Value() otherwise. */
static int64_t res_value(const char *name, const char *q)
{
	int64_t v = 0;
	if (!q)
		return 0;
	if (!strcmp(name, "cpu")) {
		size_t n = strlen(q);
		if (n && q[n - 1] == 'm')
			return strtoll(q, NULL, 10);
		double d = strtod(q, NULL);
		int64_t m = (int64_t)(d * 1000.0);
		if ((double)m < d * 1000.0)
			m++;
		return m;
	}
	return quantity_parse(q, &v) == 0 ? v : 0;
}

static void add_map(struct rlist *l, const json_t *m, int max_mode)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)m, k, v)
	{
		int64_t x = res_value(k, json_string_value(v));
		int64_t *slot = rl_slot(l, k);
		if (!slot)
			continue;
		if (max_mode)
			*slot = *slot > x ? *slot : x;
		else
			*slot += x;
	}
}

/* PodRequests: sum of containers, max with each init container, plus overhead. */
static void pod_requests(const json_t *pod, struct rlist *out)
{
	memset(out, 0, sizeof *out);
	size_t i;
	json_t *c;
	json_array_foreach(obj_path(pod, "spec.containers"), i, c)
		add_map(out, obj_path(c, "resources.requests"), 0);
	json_array_foreach(obj_path(pod, "spec.initContainers"), i, c)
		add_map(out, obj_path(c, "resources.requests"), 1);
	add_map(out, obj_path(pod, "spec.overhead"), 0);
}

/* ---- DeviceShare request ---- */

struct gpu_req {
	int present;     /* the pod asks for GPU resources at all */
	int count;       /* N cards */
	int shared;      /* memory-based or ratio < 100 per card */
	int has_core, has_mem, has_ratio;
	int64_t core, mem, ratio; /* per card */
	int most;        /* this cycle scores MostAllocated (else LeastAllocated) */
};

static void names_list(const struct rlist *gpu, char *buf, size_t len)
{
	/* Go prints a []string as "[a b]"; the real order is a map's, sorted here. */
	const char *names[MAX_RES];
	int n = 0;
	for (int i = 0; i < gpu->n; i++)
		if (gpu->v[i] > 0)
			names[n++] = gpu->name[i];
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
			const char *t = names[j];
			names[j] = names[j - 1];
			names[j - 1] = t;
		}
	size_t o = (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? " " : "", names[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

static int ok_unit(int64_t v)
{
	return v <= 100 || v % 100 == 0;
}

/* Validates and converts (koordinator.md §2.2, §2.4). Returns 0, or -1 with msg set. */
static int gpu_request(const struct rlist *req, struct gpu_req *g, char *msg, size_t len)
{
	static const char *const gpu_names[] = { R_CORE, R_MEM, R_RATIO, R_SHARED, R_KGPU,
						 R_NVIDIA, "amd.com/gpu", "dcu.com/gpu" };
	struct rlist gpu = { 0 };
	for (size_t i = 0; i < sizeof gpu_names / sizeof gpu_names[0]; i++) {
		int64_t v = rl_get(req, gpu_names[i]);
		if (v > 0)
			*rl_slot(&gpu, gpu_names[i]) = v;
	}
	memset(g, 0, sizeof *g);
	if (gpu.n == 0)
		return 0;
	g->present = 1;
	int64_t core = rl_get(&gpu, R_CORE), mem = rl_get(&gpu, R_MEM);
	int64_t ratio = rl_get(&gpu, R_RATIO), shared = rl_get(&gpu, R_SHARED);
	int64_t kgpu = rl_get(&gpu, R_KGPU);
	int64_t whole = rl_get(&gpu, R_NVIDIA) + rl_get(&gpu, "amd.com/gpu") +
			rl_get(&gpu, "dcu.com/gpu");
	int valid = 0;
	if (whole && gpu.n == 1) {
		core = ratio = whole * 100;
		valid = 1;
	} else if (kgpu && gpu.n == 1) {
		if (!ok_unit(kgpu)) {
			char q[QUANTITY_BUF];
			snprintf(msg, len, "invalid resource unit %s: %s", R_KGPU,
				 quantity_format_decimal(kgpu, q, sizeof q));
			return -1;
		}
		core = ratio = kgpu;
		valid = 1;
	} else if (!shared && !core && mem && !ratio && gpu.n == 1) {
		valid = 1;
	} else if (!shared && !core && ratio && gpu.n == 1) {
		valid = ok_unit(ratio);
	} else if (!shared && core && mem && gpu.n == 2) {
		valid = ok_unit(core);
	} else if (!shared && core && ratio && gpu.n == 2) {
		valid = ok_unit(core) && ok_unit(ratio);
	} else if (shared && !core && mem && gpu.n == 2) {
		valid = 1;
	} else if (shared && !core && ratio && gpu.n == 2) {
		valid = ratio % shared == 0 && ratio / shared <= 100;
	} else if (shared && core && mem && gpu.n == 3) {
		valid = core % shared == 0 && core / shared <= 100;
	} else if (shared && core && ratio && gpu.n == 3) {
		valid = core % shared == 0 && core / shared <= 100 && ratio % shared == 0 &&
			ratio / shared <= 100;
	}
	if (!valid) {
		char names[512];
		names_list(&gpu, names, sizeof names);
		snprintf(msg, len, "invalid resource device requests: %s", names);
		return -1;
	}
	int64_t n = shared;
	if (n <= 0)
		n = ratio > 100 && ratio % 100 == 0 ? ratio / 100 : 1;
	g->count = (int)n;
	if (core) {
		g->has_core = 1;
		g->core = core / n;
	}
	if (ratio) {
		g->has_ratio = 1;
		g->ratio = ratio / n;
	} else if (mem) {
		g->has_mem = 1;
		g->mem = mem / n;
	}
	g->shared = g->has_mem || (g->has_ratio && g->ratio < 100);
	return 0;
}

/* ---- cards ---- */

struct card {
	int minor;
	int healthy;
	int64_t numa;
	char pcie[64];
	char id[96];
	int64_t t_core, t_mem, t_ratio; /* totals (0 when unhealthy) */
	int64_t u_core, u_mem, u_ratio; /* used */
	int has_topology;
};

static int64_t clamp0(int64_t v)
{
	return v < 0 ? 0 : v;
}

static int fits(const struct card *c, const struct gpu_req *g)
{
	if (!c->healthy)
		return 0;
	if (g->has_core && g->core > clamp0(c->t_core - c->u_core))
		return 0;
	if (g->has_mem && g->mem > clamp0(c->t_mem - c->u_mem))
		return 0;
	if (g->has_ratio && g->ratio > clamp0(c->t_ratio - c->u_ratio))
		return 0;
	return 1;
}

static int used_any(const struct card *c)
{
	return c->u_core > 0 || c->u_mem > 0 || c->u_ratio > 0;
}

/* One weighted resource: requested = used + request; LeastAllocated scores the share left,
 * MostAllocated the share taken; 0 when requested passes the total. */
static int64_t score_res(int64_t total, int64_t requested, int most)
{
	if (requested > total)
		return 0;
	return most ? requested * 100 / total : (total - requested) * 100 / total;
}

/* DeviceShare's scorer over the weighted resources (gpu-memory-ratio, gpu-memory: weight 1
 * each; gpu-core is not weighted), integer average, with the cycle's strategy. */
static int64_t score_card(int64_t t_ratio, int64_t t_mem, int64_t used_ratio, int64_t used_mem,
			  const struct gpu_req *g)
{
	int64_t sum = 0, w = 0;
	if (t_ratio > 0) {
		sum += score_res(t_ratio, used_ratio + (g->has_ratio ? g->ratio : 0), g->most);
		w++;
	}
	if (t_mem > 0) {
		sum += score_res(t_mem, used_mem + (g->has_mem ? g->mem : 0), g->most);
		w++;
	}
	return w ? sum / w : 0;
}

/* The topology path's scorer is called with free and total swapped (koordinator.md §4.3):
 * an unused card scores as the strategy scores it; a partially used one 0 under
 * LeastAllocated (empty card first) and 100 under MostAllocated (a used card first). */
static int64_t score_swapped(const struct card *c, const struct gpu_req *g)
{
	if (used_any(c))
		return g->most ? 100 : 0;
	return score_card(c->t_ratio, c->t_mem, 0, 0, g);
}

struct pick {
	int ok;
	int depth;
	int cne;
	int64_t score;
	int n;
	int idx[MAX_CARDS];
};

/* Allocation inside one scope: cards[idx[0..n)] in ascending minor. */
static void alloc_scope(const struct card *cards, const int *idx, int n, const struct gpu_req *g,
			struct pick *out)
{
	memset(out, 0, sizeof *out);
	if (!g->shared || g->count > 1) {
		for (int i = 0; i < n && out->n < g->count; i++)
			if (fits(&cards[idx[i]], g))
				out->idx[out->n++] = idx[i];
		out->ok = out->n == g->count;
		return;
	}
	int best = -1;
	int64_t bs = -1;
	for (int i = 0; i < n; i++) {
		if (!fits(&cards[idx[i]], g))
			continue;
		int64_t s = score_swapped(&cards[idx[i]], g);
		if (s > bs) {
			bs = s;
			best = idx[i];
		}
	}
	if (best >= 0) {
		out->ok = 1;
		out->n = 1;
		out->idx[0] = best;
		out->score = bs;
	}
}

static int better(const struct pick *a, const struct pick *b, int shared)
{
	if (!b->ok)
		return 1;
	if (a->depth != b->depth)
		return a->depth > b->depth;
	if (a->cne != b->cne)
		return a->cne > b->cne;
	if (shared && a->score != b->score)
		return a->score > b->score;
	return 0;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Path C: Node -> NUMA (by nodeID) -> PCIe (by pcieID); a leaf result beats a parent's. */
static int alloc_topology(const struct card *cards, int ncards, const struct gpu_req *g,
			  int *chosen)
{
	int order[MAX_CARDS];
	for (int i = 0; i < ncards; i++)
		order[i] = i; /* cards are sorted by minor already */
	int root_ne = 0;
	for (int i = 0; i < ncards; i++)
		root_ne |= used_any(&cards[i]);
	struct pick best = { 0 };
	/* Distinct NUMA ids in ascending order. */
	int64_t numas[MAX_CARDS];
	int nn = 0;
	for (int i = 0; i < ncards; i++) {
		int seen = 0;
		for (int j = 0; j < nn; j++)
			seen |= numas[j] == cards[i].numa;
		if (!seen)
			numas[nn++] = cards[i].numa;
	}
	for (int i = 1; i < nn; i++)
		for (int j = i; j > 0 && numas[j - 1] > numas[j]; j--) {
			int64_t t = numas[j];
			numas[j] = numas[j - 1];
			numas[j - 1] = t;
		}
	for (int a = 0; a < nn; a++) {
		int in_numa[MAX_CARDS], nin = 0, numa_ne = 0;
		for (int i = 0; i < ncards; i++)
			if (cards[i].numa == numas[a]) {
				in_numa[nin++] = i;
				numa_ne |= used_any(&cards[i]);
			}
		if (nin < g->count)
			continue;
		struct pick numa_best = { 0 };
		/* PCIe leaves in pcieID string order. */
		const char *pcies[MAX_CARDS];
		int np = 0;
		for (int i = 0; i < nin; i++) {
			int seen = 0;
			for (int j = 0; j < np; j++)
				seen |= !strcmp(pcies[j], cards[in_numa[i]].pcie);
			if (!seen)
				pcies[np++] = cards[in_numa[i]].pcie;
		}
		for (int i = 1; i < np; i++)
			for (int j = i; j > 0 && strcmp(pcies[j - 1], pcies[j]) > 0; j--) {
				const char *t = pcies[j];
				pcies[j] = pcies[j - 1];
				pcies[j - 1] = t;
			}
		for (int p = 0; p < np; p++) {
			int leaf[MAX_CARDS], nl = 0, leaf_ne = 0;
			for (int i = 0; i < nin; i++)
				if (!strcmp(cards[in_numa[i]].pcie, pcies[p])) {
					leaf[nl++] = in_numa[i];
					leaf_ne |= used_any(&cards[in_numa[i]]);
				}
			if (nl < g->count)
				continue;
			struct pick r;
			alloc_scope(cards, leaf, nl, g, &r);
			if (!r.ok)
				continue;
			r.depth = 3;
			r.cne = root_ne + numa_ne + leaf_ne;
			if (better(&r, &numa_best, g->shared))
				numa_best = r;
		}
		if (!numa_best.ok) {
			alloc_scope(cards, in_numa, nin, g, &numa_best);
			numa_best.depth = 2;
			numa_best.cne = root_ne + numa_ne;
		}
		if (numa_best.ok && better(&numa_best, &best, g->shared))
			best = numa_best;
	}
	if (!best.ok) {
		alloc_scope(cards, order, ncards, g, &best);
		best.depth = 1;
	}
	if (!best.ok)
		return 0;
	memcpy(chosen, best.idx, sizeof(int) * (size_t)best.n);
	qsort(chosen, (size_t)best.n, sizeof(int), cmp_int);
	return best.n;
}

/* Path D: by score (correct arguments): LeastAllocated most free card first, MostAllocated
 * most used card first; ties by minor. */
static int alloc_default(const struct card *cards, int ncards, const struct gpu_req *g,
			 int *chosen)
{
	int order[MAX_CARDS];
	int64_t score[MAX_CARDS];
	int n = 0;
	for (int i = 0; i < ncards; i++) {
		if (!cards[i].healthy)
			continue;
		order[n] = i;
		score[i] = score_card(cards[i].t_ratio, cards[i].t_mem, cards[i].u_ratio,
				      cards[i].u_mem, g);
		n++;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0; j--) {
			int a = order[j - 1], b = order[j];
			if (score[a] > score[b] || (score[a] == score[b] && cards[a].minor < cards[b].minor))
				break;
			order[j - 1] = b;
			order[j] = a;
		}
	int got = 0;
	for (int i = 0; i < n && got < g->count; i++)
		if (fits(&cards[order[i]], g))
			chosen[got++] = order[i];
	if (got < g->count)
		return 0;
	qsort(chosen, (size_t)got, sizeof(int), cmp_int);
	return got;
}

static int64_t card_qty(const json_t *res, const char *name)
{
	const char *s = json_string_value(json_object_get(res, name));
	int64_t v;
	return s && quantity_parse(s, &v) == 0 ? v : 0;
}

/* Adds a device-allocated annotation to the cards' usage. */
static void cards_add(struct card *cards, int n, const struct devalloc *a)
{
	for (int j = 0; j < a->ncards; j++)
		for (int c = 0; c < n; c++) {
			if (cards[c].minor != a->cards[j].minor)
				continue;
			if (a->cards[j].has_core)
				cards[c].u_core += a->cards[j].core;
			if (a->cards[j].has_mem)
				cards[c].u_mem += a->cards[j].mem_bytes;
			if (a->cards[j].has_ratio)
				cards[c].u_ratio += a->cards[j].ratio;
		}
}

/* Builds the card table of a node from its Device and the annotations of the pods that hold
 * a share (bound there, from the node index, not terminated). Returns the card count, or -1
 * when the node has no Device (DeviceShare then passes). */
static int node_cards(struct ks *ks, const char *node, struct card *cards)
{
	json_t *dev = store_get(ks->store, RES_DEVICES, NULL, node);
	if (!dev)
		return -1;
	int n = 0;
	size_t i;
	json_t *d;
	json_array_foreach(obj_path(dev, "spec.devices"), i, d)
	{
		const char *type = obj_str(d, "type");
		if (!type || strcmp(type, "gpu") || n == MAX_CARDS)
			continue;
		struct card *c = &cards[n++];
		memset(c, 0, sizeof *c);
		c->minor = (int)obj_int(d, "minor", 0);
		c->healthy = obj_true(d, "health");
		const char *id = obj_str(d, "id");
		snprintf(c->id, sizeof c->id, "%s", id ? id : "");
		json_t *topo = json_object_get(d, "topology");
		c->has_topology = json_is_object(topo);
		c->numa = obj_int(topo, "nodeID", 0);
		const char *pcie = obj_str(topo, "pcieID");
		snprintf(c->pcie, sizeof c->pcie, "%s", pcie ? pcie : "");
		if (c->healthy) {
			json_t *res = json_object_get(d, "resources");
			c->t_core = card_qty(res, R_CORE);
			c->t_mem = card_qty(res, R_MEM);
			c->t_ratio = card_qty(res, R_RATIO);
		}
	}
	/* ascending minor */
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && cards[b - 1].minor > cards[b].minor; b--) {
			struct card t = cards[b];
			cards[b] = cards[b - 1];
			cards[b - 1] = t;
		}
	json_t **pods = NULL;
	size_t np = store_list_index(ks->store, RES_PODS, STORE_IDX_NODE_LIVE, node, NULL, &pods);
	for (size_t k = 0; k < np; k++) {
		json_t *p = pods[k];
		const char *ann = obj_annotation(p, DEVALLOC_ANNOTATION);
		struct devalloc a;
		if (!ann || devalloc_parse(ann, strlen(ann), &a, NULL, 0) < 0)
			continue;
		cards_add(cards, n, &a);
	}
	gwb_free(pods);
	return n;
}

/* ---- filters ---- */

enum verdict { V_FIT, V_UNSCHEDULABLE, V_ERROR };

struct node_result {
	enum verdict v;
	int nreasons;
	char reasons[MAX_RES][160];
	struct devalloc alloc; /* DeviceShare's choice when it fit */
	int has_alloc;
};

static void add_reason(struct node_result *r, const char *reason)
{
	if (r->nreasons < MAX_RES)
		snprintf(r->reasons[r->nreasons++], sizeof r->reasons[0], "%s", reason);
}

/* One node as this cycle sees it, built once per pass and updated at every binding: its
 * allocatable, the literal requests and count of its non-terminated pods, and its cards. */
struct nstate {
	struct rlist alloc, used;
	int npods;
	int ncards; /* -1: no Device */
	struct card cards[MAX_CARDS];
};

static void rl_add(struct rlist *to, const struct rlist *r)
{
	for (int i = 0; i < r->n; i++) {
		int64_t *s = rl_slot(to, r->name[i]);
		if (s)
			*s += r->v[i];
	}
}

static void nstate_build(struct ks *ks, const json_t *node, struct nstate *st)
{
	memset(st, 0, sizeof *st);
	add_map(&st->alloc, obj_path(node, "status.allocatable"), 0);
	json_t **pods = NULL;
	size_t np = store_list_index(ks->store, RES_PODS, STORE_IDX_NODE_LIVE, obj_name(node),
				     NULL, &pods);
	for (size_t k = 0; k < np; k++) {
		struct rlist r;
		pod_requests(pods[k], &r);
		rl_add(&st->used, &r);
		st->npods++;
	}
	gwb_free(pods);
	st->ncards = node_cards(ks, obj_name(node), st->cards);
}

static int fit_node_resources(const struct nstate *st, const struct rlist *req,
			      struct node_result *r)
{
	const struct rlist *alloc = &st->alloc, *used = &st->used;
	if (st->npods + 1 > rl_get(alloc, "pods"))
		add_reason(r, "Too many pods");
	for (int i = 0; i < req->n; i++) {
		const char *name = req->name[i];
		if (req->v[i] <= 0 || !strcmp(name, "pods"))
			continue;
		int64_t have = rl_has(alloc, name) ? rl_get(alloc, name) : 0;
		if (req->v[i] > have - rl_get(used, name)) {
			char txt[160];
			snprintf(txt, sizeof txt, "Insufficient %s", name);
			add_reason(r, txt);
		}
	}
	return r->nreasons == 0;
}

static int node_selector_ok(const json_t *pod, const json_t *node)
{
	const char *k;
	json_t *v;
	json_t *labels = obj_path(node, "metadata.labels");
	json_object_foreach(obj_path(pod, "spec.nodeSelector"), k, v)
	{
		const char *have = json_string_value(json_object_get(labels, k));
		if (!have || !json_is_string(v) || strcmp(have, json_string_value(v)))
			return 0;
	}
	return 1;
}

static int toleration_ok(const json_t *pod, const json_t *taint)
{
	const char *effect = obj_str(taint, "effect");
	if (effect && !strcmp(effect, "PreferNoSchedule"))
		return 1;
	size_t i;
	json_t *t;
	json_array_foreach(obj_path(pod, "spec.tolerations"), i, t)
	{
		const char *key = obj_str(t, "key"), *op = obj_str(t, "operator");
		const char *te = obj_str(t, "effect");
		if (te && te[0] && effect && strcmp(te, effect))
			continue;
		if (op && !strcmp(op, "Exists") && (!key || !key[0] || !strcmp(key, obj_str(taint, "key") ? obj_str(taint, "key") : "")))
			return 1;
		const char *val = obj_str(t, "value"), *tv = obj_str(taint, "value");
		if (key && obj_str(taint, "key") && !strcmp(key, obj_str(taint, "key")) &&
		    !strcmp(val ? val : "", tv ? tv : ""))
			return 1;
	}
	return 0;
}

static void filter_node(const json_t *pod, const json_t *node, const struct nstate *st,
			const struct rlist *req, const struct gpu_req *g, int device_share,
			struct node_result *r)
{
	memset(r, 0, sizeof *r);
	r->v = V_UNSCHEDULABLE;
	if (obj_true(node, "spec.unschedulable")) {
		add_reason(r, "node(s) were unschedulable");
		return;
	}
	size_t i;
	json_t *t;
	json_array_foreach(obj_path(node, "spec.taints"), i, t)
	{
		const char *effect = obj_str(t, "effect");
		if (effect && strcmp(effect, "PreferNoSchedule") && !toleration_ok(pod, t)) {
			char txt[160];
			snprintf(txt, sizeof txt, "node(s) had untolerated taint {%s: %s}",
				 obj_str(t, "key") ? obj_str(t, "key") : "",
				 obj_str(t, "value") ? obj_str(t, "value") : "");
			add_reason(r, txt);
			return;
		}
	}
	if (!node_selector_ok(pod, node)) {
		add_reason(r, "node(s) didn't match Pod's node affinity/selector");
		return;
	}
	if (!fit_node_resources(st, req, r))
		return;
	if (!device_share || !g->present) {
		r->v = V_FIT;
		return;
	}
	const struct card *cards = st->cards;
	int n = st->ncards;
	if (n < 0) {
		r->v = V_FIT; /* no Device: DeviceShare has no cache entry and passes */
		return;
	}
	if (n == 0) {
		add_reason(r, "Insufficient gpu devices");
		return;
	}
	const char *pl = obj_label(pod, ISOLATION_LABEL);
	const char *nl = obj_label(node, ISOLATION_LABEL);
	if (g->shared && pl && !strcmp(pl, "HAMi-core") && (!nl || strcmp(nl, "HAMi-core"))) {
		r->v = V_ERROR;
		add_reason(r, "running \"DeviceShare\" filter plugin: "
			      "GPUIsolationProviderHAMICore not found on the node");
		return;
	}
	int all_topo = 1;
	for (int k = 0; k < n; k++)
		all_topo &= cards[k].has_topology;
	int chosen[MAX_CARDS];
	int got;
	int topo = all_topo && !(g->count > 1 && g->shared);
	if (topo)
		got = alloc_topology(cards, n, g, chosen);
	else
		got = alloc_default(cards, n, g, chosen);
	if (!got) {
		add_reason(r, topo ? "Insufficient GPU Devices" : "Insufficient gpu devices");
		return;
	}
	/* Reserve: fill memory and ratio against each card's own total (§3.2). */
	memset(&r->alloc, 0, sizeof r->alloc);
	for (int k = 0; k < got && k < DEVALLOC_MAX_CARDS; k++) {
		const struct card *c = &cards[chosen[k]];
		struct devalloc_card *a = &r->alloc.cards[r->alloc.ncards++];
		a->minor = c->minor;
		snprintf(a->id, sizeof a->id, "%s", c->id);
		if (g->has_core) {
			a->has_core = 1;
			a->core = g->core;
		}
		a->has_mem = a->has_ratio = 1;
		if (g->has_ratio) {
			a->ratio = g->ratio;
			a->mem_bytes = g->ratio * c->t_mem / 100;
		} else {
			a->mem_bytes = g->mem;
			a->ratio = c->t_mem ? (int64_t)((double)g->mem / (double)c->t_mem * 100.0) : 0;
		}
	}
	r->has_alloc = 1;
	r->v = V_FIT;
}

/* ---- the cycle ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "0/N nodes are available: 1 Insufficient x, 1 Insufficient y." from per-node reasons. */
static void fit_error(struct node_result *res, int nnodes, char *msg, size_t len)
{
	char *strs[MAX_RES * MAX_NODES];
	int counts[MAX_RES * MAX_NODES];
	int ns = 0;
	for (int i = 0; i < nnodes; i++)
		for (int j = 0; j < res[i].nreasons; j++) {
			int k;
			for (k = 0; k < ns; k++)
				if (!strcmp(strs[k], res[i].reasons[j]))
					break;
			if (k == ns) {
				strs[ns] = res[i].reasons[j];
				counts[ns++] = 0;
			}
			counts[k]++;
		}
	char lines[MAX_RES * MAX_NODES][180];
	char *ptrs[MAX_RES * MAX_NODES];
	for (int k = 0; k < ns; k++) {
		snprintf(lines[k], sizeof lines[k], "%d %s", counts[k], strs[k]);
		ptrs[k] = lines[k];
	}
	qsort(ptrs, (size_t)ns, sizeof ptrs[0], cmp_str);
	size_t o = (size_t)snprintf(msg, len, "0/%d nodes are available: ", nnodes);
	for (int k = 0; k < ns && o < len; k++)
		o += (size_t)snprintf(msg + o, len - o, "%s%s", k ? ", " : "", ptrs[k]);
	if (o < len)
		snprintf(msg + o, len - o, ".");
}

static void set_unschedulable(struct ks *ks, json_t *pod, const char *reason, const char *msg,
			      const char *scheduler)
{
	json_t *cond = obj_condition(pod, "PodScheduled");
	const char *om = obj_str(cond, "message"), *orr = obj_str(cond, "reason");
	if (om && orr && !strcmp(om, msg) && !strcmp(orr, reason))
		return;
	json_t *nw = json_deep_copy(pod);
	obj_set_condition(nw, "PodScheduled", "False", reason, msg, 0);
	log_info("sched", "unschedulable", "pod=%s/%s msg=%s", obj_ns(pod), obj_name(pod),
		 log_q(msg));
	registry_commit(ks->registry, RES_PODS, nw);
	json_t *cur = store_get(ks->store, RES_PODS, obj_ns(pod), obj_name(pod));
	if (cur)
		events_record(ks, cur, "Warning", "FailedScheduling", msg, scheduler);
}

static void bind_pod(struct ks *ks, json_t *pod, const char *node, const struct node_result *r,
		 const char *scheduler)
{
	char ns[256], name[256];
	snprintf(ns, sizeof ns, "%s", obj_ns(pod));
	snprintf(name, sizeof name, "%s", obj_name(pod));
	if (r->has_alloc) {
		/* PreBind: the annotation is visible before spec.nodeName (§4.4). */
		char *ann = devalloc_format(&r->alloc);
		json_t *nw = json_deep_copy(pod);
		json_object_set_new(obj_child(obj_child(nw, "metadata"), "annotations"),
				    DEVALLOC_ANNOTATION, json_string(ann));
		log_info("sched", "allocated", "pod=%s/%s allocation=%s", ns, name, log_q(ann));
		gwb_free(ann);
		registry_commit(ks->registry, RES_PODS, nw);
		pod = store_get(ks->store, RES_PODS, ns, name);
		if (!pod)
			return;
	}
	json_t *nw = json_deep_copy(pod);
	obj_set_str(nw, "spec.nodeName", node);
	obj_set_condition(nw, "PodScheduled", "True", NULL, NULL, 0);
	registry_commit(ks->registry, RES_PODS, nw);
	json_t *cur = store_get(ks->store, RES_PODS, ns, name);
	char msg[600];
	snprintf(msg, sizeof msg, "Successfully assigned %s/%s to %s", ns, name, node);
	if (cur)
		events_record(ks, cur, "Normal", "Scheduled", msg, scheduler);
	log_info("sched", "bound", "pod=%s/%s node=%s", ns, name, node);
}

/* NodeResourcesFit's LeastAllocated over cpu, memory, batch-cpu and batch-memory (weight 1
 * each, those the node has). */
static int64_t fit_score(const struct nstate *st, const struct rlist *req)
{
	static const char *const names[] = { "cpu", "memory", "kubernetes.io/batch-cpu",
					     "kubernetes.io/batch-memory" };
	int64_t sum = 0, w = 0;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		int64_t alloc = rl_get(&st->alloc, names[i]);
		if (alloc <= 0)
			continue;
		sum += score_res(alloc, rl_get(&st->used, names[i]) + rl_get(req, names[i]), 0);
		w++;
	}
	return w ? sum / w : 0;
}

/* DeviceShare's node score: its scorer over the node's summed healthy cards, with the
 * per-card request (not multiplied by the card count). */
static int64_t device_score(const struct nstate *st, const struct gpu_req *g)
{
	if (!g->present || st->ncards <= 0)
		return 0;
	int64_t tr = 0, tm = 0, ur = 0, um = 0;
	for (int i = 0; i < st->ncards; i++) {
		if (!st->cards[i].healthy)
			continue;
		tr += st->cards[i].t_ratio;
		tm += st->cards[i].t_mem;
		ur += st->cards[i].u_ratio;
		um += st->cards[i].u_mem;
	}
	return score_card(tr, tm, ur, um, g);
}

/* The node to bind to among those that fit: DeviceShare's score normalised so the best node
 * gets 100, plus NodeResourcesFit's; the highest total wins, ties to the first in name
 * order. Returns its index, or -1 when none fits. */
static int pick_node(const struct node_result *res, const struct nstate *st, int nn,
		     const struct rlist *req, const struct gpu_req *g)
{
	int64_t dmax = 0, dscore[MAX_NODES];
	for (int i = 0; i < nn; i++) {
		dscore[i] = res[i].v == V_FIT ? device_score(&st[i], g) : 0;
		if (dscore[i] > dmax)
			dmax = dscore[i];
	}
	int pick = -1;
	int64_t best = -1;
	for (int i = 0; i < nn; i++) {
		if (res[i].v != V_FIT)
			continue;
		int64_t total = (dmax ? dscore[i] * 100 / dmax : 0) + fit_score(&st[i], req);
		if (total > best) {
			best = total;
			pick = i;
		}
	}
	return pick;
}

static void schedule_one(struct ks *ks, json_t *pod, json_t **nodes, struct nstate *st, int nn)
{
	const char *scheduler = obj_str(pod, "spec.schedulerName");
	int koord = scheduler && !strcmp(scheduler, "koord-scheduler");
	struct rlist req;
	pod_requests(pod, &req);
	struct gpu_req g = { 0 };
	char msg[2048];
	if (koord && gpu_request(&req, &g, msg, sizeof msg) < 0) {
		char full[2200];
		snprintf(full, sizeof full, "0/%d nodes are available: %s.", nn, msg);
		set_unschedulable(ks, pod, "Unschedulable", full, scheduler);
		return;
	}
	g.most = ks->cfg.score_most;
	struct node_result *res = gwb_calloc((size_t)(nn ? nn : 1), sizeof *res);
	for (int i = 0; i < nn; i++) {
		filter_node(pod, nodes[i], &st[i], &req, &g, koord, &res[i]);
		if (res[i].v == V_ERROR) {
			set_unschedulable(ks, pod, "SchedulerError", res[i].reasons[0], scheduler);
			gwb_free(res);
			return;
		}
	}
	int pick = pick_node(res, st, nn, &req, &g);
	if (pick >= 0) {
		bind_pod(ks, pod, obj_name(nodes[pick]), &res[pick], scheduler);
		/* Assume the binding in this cycle's view of the node. */
		rl_add(&st[pick].used, &req);
		st[pick].npods++;
		if (res[pick].has_alloc && st[pick].ncards > 0)
			cards_add(st[pick].cards, st[pick].ncards, &res[pick].alloc);
	} else {
		fit_error(res, nn, msg, sizeof msg);
		set_unschedulable(ks, pod, "Unschedulable", msg, scheduler);
	}
	gwb_free(res);
}

struct pending {
	int64_t prio;
	char created[32];
	char ns[256], name[256];
};

static int cmp_pending(const void *a, const void *b)
{
	const struct pending *x = a, *y = b;
	if (x->prio != y->prio)
		return x->prio > y->prio ? -1 : 1;
	int c = strcmp(x->created, y->created);
	if (c)
		return c;
	c = strcmp(x->ns, y->ns);
	return c ? c : strcmp(x->name, y->name);
}

struct sched {
	struct ks *ks;
	int sub;
	json_t *dirty; /* keys "ns/name" of unbound pods created or changed since the last pass */
	int freed;     /* capacity may have grown: retry every pending pod */
};

static int bound(const json_t *pod)
{
	const char *n = obj_str(pod, "spec.nodeName");
	return n && n[0];
}

/* Store fan-out: new or changed pending pods, and changes that can make room (a bound pod
 * ends or goes, a Node or Device changes), as kube-scheduler's queue moves unschedulable
 * pods back on such events. */
static void on_change(const struct store_event *ev, void *arg)
{
	struct sched *sc = arg;
	if (ev->res == RES_NODES || ev->res == RES_DEVICES) {
		sc->freed = 1;
		return;
	}
	if (ev->res != RES_PODS)
		return;
	if (ev->type != STORE_DELETED && !bound(ev->obj)) {
		char key[520];
		snprintf(key, sizeof key, "%s/%s", obj_ns(ev->obj), obj_name(ev->obj));
		json_object_set_new(sc->dirty, key, json_null());
	}
	if (ev->prev && bound(ev->prev) &&
	    (ev->type == STORE_DELETED || (obj_pod_terminal(ev->obj) && !obj_pod_terminal(ev->prev))))
		sc->freed = 1;
}

struct sched *sched_new(struct ks *ks)
{
	struct sched *sc = gwb_calloc(1, sizeof *sc);
	sc->ks = ks;
	sc->dirty = json_object();
	sc->freed = 1;
	sc->sub = store_subscribe(ks->store, on_change, sc);
	return sc;
}

void sched_free(struct sched *sc)
{
	if (!sc)
		return;
	store_unsubscribe(sc->ks->store, sc->sub);
	json_decref(sc->dirty);
	gwb_free(sc);
}

/* The pods to try this pass: every unbound pod after room was made, else the changed ones. */
static size_t candidates(struct sched *sc, json_t ***out)
{
	struct ks *ks = sc->ks;
	json_t *dirty = sc->dirty;
	sc->dirty = json_object();
	size_t n;
	if (sc->freed) {
		sc->freed = 0;
		n = store_list_index(ks->store, RES_PODS, STORE_IDX_NODE_LIVE, "", NULL, out);
	} else {
		size_t k = 0;
		*out = gwb_malloc((json_object_size(dirty) + 1) * sizeof **out);
		const char *key;
		json_t *v;
		json_object_foreach(dirty, key, v)
		{
			const char *slash = strchr(key, '/');
			char ns[256];
			snprintf(ns, sizeof ns, "%.*s", slash ? (int)(slash - key) : 0, key);
			json_t *p = store_get(ks->store, RES_PODS, ns, slash ? slash + 1 : key);
			if (p)
				(*out)[k++] = p;
		}
		n = k;
	}
	json_decref(dirty);
	return n;
}

void sched_sync(struct ks *ks)
{
	json_t **pods = NULL;
	size_t np = candidates(ks->sched, &pods);
	struct pending *q = gwb_calloc(np ? np : 1, sizeof *q);
	size_t nq = 0;
	for (size_t i = 0; i < np; i++) {
		json_t *p = pods[i];
		const char *s = obj_str(p, "spec.schedulerName");
		if (bound(p) || obj_deleting(p) || obj_pod_terminal(p) || !s ||
		    (strcmp(s, "koord-scheduler") && strcmp(s, "default-scheduler")))
			continue;
		/* A pod with scheduling gates waits (PodScheduled False, SchedulingGated). */
		if (json_array_size(obj_path(p, "spec.schedulingGates")))
			continue;
		q[nq].prio = obj_int(p, "spec.priority", 0);
		snprintf(q[nq].created, sizeof q[nq].created, "%s",
			 obj_str(p, "metadata.creationTimestamp") ? obj_str(p, "metadata.creationTimestamp") : "");
		snprintf(q[nq].ns, sizeof q[nq].ns, "%s", obj_ns(p));
		snprintf(q[nq].name, sizeof q[nq].name, "%s", obj_name(p));
		nq++;
	}
	gwb_free(pods);
	if (!nq) {
		gwb_free(q);
		return;
	}
	qsort(q, nq, sizeof *q, cmp_pending);
	json_t **nodes = NULL;
	size_t nn = store_list(ks->store, RES_NODES, NULL, &nodes);
	if (nn > MAX_NODES)
		nn = MAX_NODES;
	struct nstate *st = gwb_calloc(nn ? nn : 1, sizeof *st);
	for (size_t i = 0; i < nn; i++)
		nstate_build(ks, nodes[i], &st[i]);
	/* Node pointers stay valid: the scheduler writes pods only. */
	for (size_t i = 0; i < nq; i++) {
		json_t *p = store_get(ks->store, RES_PODS, q[i].ns, q[i].name);
		if (p)
			schedule_one(ks, p, nodes, st, (int)nn);
	}
	gwb_free(st);
	gwb_free(nodes);
	gwb_free(q);
}
