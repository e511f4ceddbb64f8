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
#include "lib/deviceshare.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "tools/kubesim/events.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

#define ISOLATION_LABEL "koordinator.sh/gpu-isolation-provider"
#define MAX_CARDS DEVICESHARE_MAX_CARDS
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

/* ---- DeviceShare request and cards ---- */

/* The pod's DeviceShare request in this cycle. */
struct gpu_req {
	int present; /* the pod asks for GPU resources at all */
	struct deviceshare_request r;
	enum deviceshare_strategy s;
};

/* PreFilter: the pod's GPU request, validated and split per card. Returns 0, or -1 with msg
 * set. */
static int gpu_request(const struct rlist *req, struct gpu_req *g, char *msg, size_t len)
{
	struct deviceshare_pod p = {
		.core = rl_get(req, DEVALLOC_RES_CORE),
		.mem = rl_get(req, DEVALLOC_RES_MEM),
		.ratio = rl_get(req, DEVALLOC_RES_RATIO),
		.shared = rl_get(req, "koordinator.sh/gpu.shared"),
		.kgpu = rl_get(req, "koordinator.sh/gpu"),
		.nvidia = rl_get(req, "nvidia.com/gpu"),
		.amd = rl_get(req, "amd.com/gpu"),
		.dcu = rl_get(req, "dcu.com/gpu"),
	};
	int rc = deviceshare_request_from_pod(&p, &g->r, msg, len);
	g->present = rc == 1;
	return rc < 0 ? -1 : 0;
}

static int64_t card_qty(const json_t *res, const char *name)
{
	const char *s = json_string_value(json_object_get(res, name));
	int64_t v;
	return s && quantity_parse(s, &v) == 0 ? v : 0;
}

static void card_from_device(const json_t *d, struct deviceshare_card *c)
{
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
		c->total_core = card_qty(res, DEVALLOC_RES_CORE);
		c->total_mem = card_qty(res, DEVALLOC_RES_MEM);
		c->total_ratio = card_qty(res, DEVALLOC_RES_RATIO);
	}
}

/* Builds the card table of a node from its Device and the annotations of the pods that hold
 * a share (bound there, from the node index, not terminated), in ascending minor. Returns the
 * card count, or -1 when the node has no Device (DeviceShare then passes). */
static int node_cards(struct ks *ks, const char *node, struct deviceshare_card *cards)
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
		card_from_device(d, &cards[n++]);
	}
	for (int a = 1; a < n; a++)
		for (int b = a; b > 0 && cards[b - 1].minor > cards[b].minor; b--) {
			struct deviceshare_card t = cards[b];
			cards[b] = cards[b - 1];
			cards[b - 1] = t;
		}
	json_t **pods = NULL;
	size_t np = store_list_index(ks->store, RES_PODS, STORE_IDX_NODE_LIVE, node, NULL, &pods);
	for (size_t k = 0; k < np; k++) {
		const char *ann = obj_annotation(pods[k], DEVALLOC_ANNOTATION);
		struct devalloc a;
		if (!ann || devalloc_parse(ann, strlen(ann), &a, NULL, 0) < 0)
			continue;
		deviceshare_cards_add(cards, n, &a);
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
	struct deviceshare_card cards[MAX_CARDS];
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
	const struct deviceshare_card *cards = st->cards;
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
	if (g->r.shared && pl && !strcmp(pl, "HAMi-core") && (!nl || strcmp(nl, "HAMi-core"))) {
		r->v = V_ERROR;
		add_reason(r, "running \"DeviceShare\" filter plugin: "
			      "GPUIsolationProviderHAMICore not found on the node");
		return;
	}
	int chosen[MAX_CARDS];
	int got = deviceshare_allocate(cards, n, &g->r, g->s, chosen);
	if (!got) {
		int topo = deviceshare_topology_path(cards, n, &g->r);
		add_reason(r, topo ? "Insufficient GPU Devices" : "Insufficient gpu devices");
		return;
	}
	/* Reserve: memory and ratio against each card's own total. */
	memset(&r->alloc, 0, sizeof r->alloc);
	for (int k = 0; k < got && k < DEVALLOC_MAX_CARDS; k++)
		deviceshare_fill(&cards[chosen[k]], &g->r, &r->alloc.cards[r->alloc.ncards++]);
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

/* NodeResourcesFit's LeastAllocated for one resource: the share left after the request, 0 when
 * the request passes the total. */
static int64_t least_allocated(int64_t total, int64_t requested)
{
	return requested > total ? 0 : (total - requested) * 100 / total;
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
		sum += least_allocated(alloc, rl_get(&st->used, names[i]) + rl_get(req, names[i]));
		w++;
	}
	return w ? sum / w : 0;
}

/* The node to bind to among those that fit: DeviceShare's node score normalised so the best
 * node gets 100, plus NodeResourcesFit's; the highest total wins, ties to the first in name
 * order. Returns its index, or -1 when none fits. */
static int pick_node(const struct node_result *res, const struct nstate *st, int nn,
		     const struct rlist *req, const struct gpu_req *g)
{
	int64_t dscore[MAX_NODES];
	for (int i = 0; i < nn; i++)
		dscore[i] = res[i].v == V_FIT && g->present
				    ? deviceshare_node_score(st[i].cards, st[i].ncards, &g->r, g->s)
				    : 0;
	deviceshare_normalize(dscore, nn);
	int pick = -1;
	int64_t best = -1;
	for (int i = 0; i < nn; i++) {
		if (res[i].v != V_FIT)
			continue;
		int64_t total = dscore[i] + fit_score(&st[i], req);
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
	g.s = ks->cfg.score_most ? DEVICESHARE_MOST_ALLOCATED : DEVICESHARE_LEAST_ALLOCATED;
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
			deviceshare_cards_add(st[pick].cards, st[pick].ncards, &res[pick].alloc);
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
