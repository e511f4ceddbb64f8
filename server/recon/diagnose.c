/* Card picture and pending diagnosis. */
#include "server/recon/diagnose.h"

#include <stdio.h>
#include <string.h>

#include "lib/devalloc.h"
#include "lib/jsonx.h"
#include "lib/kobj.h"
#include "lib/quantity.h"

#define MIB (1024 * 1024)

static int64_t qget(const json_t *res, const char *key)
{
	const char *s = kobj_str(res, key);
	int64_t v = 0;
	if (s && quantity_parse(s, &v) == 0)
		return v;
	return 0;
}

static struct diag_card *find_card(struct diag_cards *cs, const char *node, int minor)
{
	for (int i = 0; i < cs->n; i++)
		if (cs->c[i].minor == minor && strcmp(cs->c[i].node, node) == 0)
			return &cs->c[i];
	return NULL;
}

static void add_device(struct diag_cards *out, const char *node, const json_t *dev)
{
	const char *type = kobj_str(dev, "type");
	json_t *minor = json_object_get(dev, "minor");
	if (!type || strcmp(type, "gpu") != 0 || !json_is_integer(minor) || out->n == DIAG_MAX_CARDS)
		return;
	struct diag_card *c = &out->c[out->n++];
	memset(c, 0, sizeof *c);
	snprintf(c->node, sizeof c->node, "%s", node);
	c->minor = (int)json_integer_value(minor);
	snprintf(c->id, sizeof c->id, "%s", kobj_str(dev, "id") ? kobj_str(dev, "id") : "");
	json_t *h = json_object_get(dev, "health");
	c->healthy = !json_is_false(h);
	if (!c->healthy) {
		json_t *cond = json_array_get(json_object_get(dev, "conditions"), 0);
		snprintf(c->health_reason, sizeof c->health_reason, "%s",
			 kobj_str(cond, "reason") ? kobj_str(cond, "reason") : "health: false");
	}
	json_t *topo = json_object_get(dev, "topology");
	if (json_is_object(topo)) {
		c->has_topology = 1;
		c->numa = json_integer_value(json_object_get(topo, "nodeID"));
		snprintf(c->pcie, sizeof c->pcie, "%s", kobj_str(topo, "pcieID") ? kobj_str(topo, "pcieID") : "");
	}
	json_t *res = json_object_get(dev, "resources");
	c->mem_total_mib = qget(res, DEVALLOC_RES_MEM) / MIB;
	c->core_total = qget(res, DEVALLOC_RES_CORE);
	c->ratio_total = qget(res, DEVALLOC_RES_RATIO);
}

static void add_pod(struct diag_cards *out, const json_t *pod)
{
	if (kobj_pod_terminal(pod))
		return;
	const char *raw = kobj_annotation(pod, DEVALLOC_ANNOTATION);
	const char *node = kobj_pstr(pod, "spec", "nodeName");
	const char *task = kobj_label(pod, "gwb.io/task");
	struct devalloc a;
	if (!raw || devalloc_parse(raw, strlen(raw), &a, NULL, 0) != 0)
		return;
	for (int i = 0; i < a.ncards; i++) {
		struct diag_card *c = find_card(out, node ? node : "", a.cards[i].minor);
		if (!c && !node) {
			/* Not bound yet: the annotation is written just before binding; match by
			 * minor alone when there is a single node. */
			for (int k = 0; k < out->n && !c; k++)
				if (out->c[k].minor == a.cards[i].minor)
					c = &out->c[k];
		}
		if (!c)
			continue;
		int64_t mem = a.cards[i].has_mem ? a.cards[i].mem_bytes / MIB : 0;
		int64_t core = a.cards[i].has_core ? a.cards[i].core : 0;
		c->mem_used_mib += mem;
		c->core_used += core;
		c->ratio_used += a.cards[i].has_ratio ? a.cards[i].ratio : 0;
		if (c->nholders < DIAG_MAX_HOLDERS) {
			struct diag_holder *h = &c->holders[c->nholders++];
			snprintf(h->task, sizeof h->task, "%s", task ? task : "");
			h->mem_mib = mem;
			h->core = core;
		}
	}
}

void diag_cards_build(struct diag_cards *out, const json_t *devices, const json_t *pods)
{
	memset(out, 0, sizeof *out);
	const char *name;
	json_t *v;
	json_object_foreach((json_t *)devices, name, v) {
		size_t i;
		json_t *dev;
		json_array_foreach(kobj_path(v, "spec", "devices"), i, dev)
			add_device(out, name, dev);
	}
	json_object_foreach((json_t *)pods, name, v)
		add_pod(out, v);
}

void diag_card_deviceshare(const struct diag_card *c, struct deviceshare_card *d)
{
	memset(d, 0, sizeof *d);
	d->minor = c->minor;
	d->healthy = c->healthy;
	d->has_topology = c->has_topology;
	d->numa = c->numa;
	snprintf(d->pcie, sizeof d->pcie, "%s", c->pcie);
	snprintf(d->id, sizeof d->id, "%s", c->id);
	d->total_core = c->core_total;
	d->total_mem = c->mem_total_mib;
	d->total_ratio = c->ratio_total;
	d->used_core = c->core_used;
	d->used_mem = c->mem_used_mib;
	d->used_ratio = c->ratio_used;
}

int diag_req_deviceshare(const struct diag_req *r, struct deviceshare_request *out)
{
	int64_t n = r->count > 0 ? r->count : 1;
	struct deviceshare_pod pod = { .shared = n, .core = r->core * n, .mem = r->mem_mib * n };
	char msg[256];
	if (deviceshare_request_from_pod(&pod, out, msg, sizeof msg) == 1)
		return 1;
	memset(out, 0, sizeof *out);
	out->count = (int)n;
	out->shared = 1;
	out->has_mem = r->mem_mib > 0;
	out->mem = r->mem_mib;
	out->has_core = r->core > 0;
	out->core = r->core;
	return -1;
}

/* DeviceShare's per-card fit of the request on c. */
static int card_fits(const struct diag_card *c, const struct deviceshare_request *r)
{
	struct deviceshare_card d;
	diag_card_deviceshare(c, &d);
	return deviceshare_card_fits(&d, r);
}

static int64_t free_mem(const struct diag_card *c)
{
	return c->healthy && c->mem_total_mib > c->mem_used_mib ? c->mem_total_mib - c->mem_used_mib
								 : 0;
}

static int64_t free_core(const struct diag_card *c)
{
	return c->healthy && c->core_total > c->core_used ? c->core_total - c->core_used : 0;
}

static json_t *card_json(const struct diag_card *c)
{
	json_t *tasks = json_array();
	for (int i = 0; i < c->nholders; i++)
		json_array_append_new(tasks, json_pack("{s:s, s:I, s:I}", "task",
						       c->holders[i].task, "gpu_memory_mib",
						       (json_int_t)c->holders[i].mem_mib,
						       "gpu_core_percent",
						       (json_int_t)c->holders[i].core));
	return json_pack("{s:s, s:i, s:s, s:b, s:o, s:o, s:o, s:o, s:o}", "node", c->node, "minor",
			 c->minor, "id", c->id, "healthy", c->healthy, "health_reason",
			 c->healthy ? json_null() : json_string(c->health_reason), "total",
			 jx_gpu_pair(c->mem_total_mib, c->core_total), "allocated",
			 jx_gpu_pair(c->mem_used_mib, c->core_used), "free",
			 jx_gpu_pair(free_mem(c), free_core(c)), "tasks", tasks);
}

json_t *diag_cards_json(const struct diag_cards *cards)
{
	json_t *arr = json_array();
	for (int i = 0; i < cards->n; i++)
		json_array_append_new(arr, card_json(&cards->c[i]));
	return arr;
}

/* The card with the task's own share taken out (a Pending pod normally holds none). */
static struct diag_card without_task(const struct diag_card *c, const char *task)
{
	struct diag_card d = *c;
	for (int i = 0; i < c->nholders; i++) {
		if (strcmp(c->holders[i].task, task) == 0) {
			d.mem_used_mib -= c->holders[i].mem_mib;
			d.core_used -= c->holders[i].core;
		}
	}
	return d;
}

/* Which holders of a card, released largest first, would make it fit the request. */
static json_t *unblock_card(const struct diag_card *c, const struct diag_req *r)
{
	int used[DIAG_MAX_HOLDERS] = { 0 };
	int64_t mem = free_mem(c), core = free_core(c);
	json_t *tasks = json_array();
	while (mem < r->mem_mib || core < r->core) {
		int best = -1;
		for (int i = 0; i < c->nholders; i++)
			if (!used[i] && strcmp(c->holders[i].task, r->task) != 0 &&
			    (best < 0 || c->holders[i].mem_mib > c->holders[best].mem_mib))
				best = i;
		if (best < 0) {
			json_decref(tasks);
			return NULL;
		}
		used[best] = 1;
		mem += c->holders[best].mem_mib;
		core += c->holders[best].core;
		json_array_append_new(tasks, json_string(c->holders[best].task));
	}
	return json_pack("{s:s, s:i, s:o, s:I}", "node", c->node, "minor", c->minor,
			 "release_tasks", tasks, "free_after_mib", (json_int_t)mem);
}

/* "card 0 on colima-gwb" */
static void card_name(const struct diag_card *c, char *buf, size_t len)
{
	snprintf(buf, len, "card %d on %s", c->minor, c->node);
}

/* "card 0 on n has 3072 MiB / 40% free, card 1 on n has ..." for the healthy cards. */
static void free_list(const struct diag_cards *cards, const char *task, char *buf, size_t len)
{
	size_t n = 0;
	buf[0] = '\0';
	for (int i = 0; i < cards->n && n < len; i++) {
		struct diag_card c = without_task(&cards->c[i], task);
		if (!c.healthy)
			continue;
		char name[96];
		card_name(&c, name, sizeof name);
		int w = snprintf(buf + n, len - n, "%s%s has %lld MiB / %lld%% free", n ? ", " : "",
				 name, (long long)free_mem(&c), (long long)free_core(&c));
		if (w < 0)
			break;
		n += (size_t)w;
	}
}

/* "t-a on card 0 on n ends" (the first unblock option), or "running tasks end". */
static void first_unblock(json_t *unblock, char *buf, size_t len)
{
	json_t *u = json_array_get(unblock, 0);
	json_t *tasks = json_object_get(u, "release_tasks");
	if (!u || json_array_size(tasks) == 0) {
		snprintf(buf, len, "running tasks end");
		return;
	}
	size_t n = 0;
	size_t i;
	json_t *t;
	json_array_foreach(tasks, i, t) {
		int w = snprintf(buf + n, len - n, "%s%s", i ? " and " : "", json_string_value(t));
		if (w < 0 || (size_t)w >= len - n)
			return;
		n += (size_t)w;
	}
	snprintf(buf + n, len - n, " on card %lld on %s %s (or %s cancelled)",
		 (long long)json_integer_value(json_object_get(u, "minor")),
		 json_string_value(json_object_get(u, "node")),
		 json_array_size(tasks) > 1 ? "end" : "ends",
		 json_array_size(tasks) > 1 ? "are" : "is");
}

json_t *diag_pending(const struct diag_req *r, const struct diag_cards *cards)
{
	int fit = 0, fit_if_healthy = 0, big_enough = 0, big_enough_healthy = 0, healthy = 0;
	int64_t largest = 0, total_free = 0, total_free_core = 0;
	const struct diag_card *fit_card = NULL, *sick_card = NULL;
	json_t *unblock = json_array();
	struct deviceshare_request dr;
	diag_req_deviceshare(r, &dr);
	for (int i = 0; i < cards->n; i++) {
		struct diag_card c = without_task(&cards->c[i], r->task);
		struct diag_card empty = c, as_healthy = c;
		empty.healthy = as_healthy.healthy = 1;
		empty.mem_used_mib = empty.core_used = empty.ratio_used = 0;
		int cap = card_fits(&empty, &dr);
		big_enough += cap;
		if (c.mem_total_mib > largest)
			largest = c.mem_total_mib;
		int would_fit = card_fits(&as_healthy, &dr);
		fit_if_healthy += would_fit;
		if (!c.healthy) {
			if (would_fit && !sick_card)
				sick_card = &cards->c[i];
			continue;
		}
		healthy++;
		big_enough_healthy += cap;
		total_free += free_mem(&c);
		total_free_core += free_core(&c);
		if (card_fits(&c, &dr)) {
			fit++;
			if (!fit_card)
				fit_card = &cards->c[i];
		} else if (cap) {
			json_t *u = unblock_card(&c, r);
			if (u)
				json_array_append_new(unblock, u);
		}
	}
	char summary[600], name[96], frees[300], unb[200];
	long long mem = (long long)r->mem_mib, core = (long long)r->core;
	const char *per = r->count > 1 ? "on each of its cards" : "on one card";
	const char *kind;
	free_list(cards, r->task, frees, sizeof frees);
	first_unblock(unblock, unb, sizeof unb);
	if (fit >= r->count) {
		kind = "waiting";
		card_name(fit_card, name, sizeof name);
		snprintf(summary, sizeof summary,
			 "It fits now (%s has room for %lld MiB / %lld%%); the scheduler has not "
			 "placed it yet, and nothing needs to change.",
			 name, mem, core);
	} else if (big_enough < r->count) {
		kind = "card_capacity";
		snprintf(summary, sizeof summary,
			 "No card is large enough: the task needs %lld MiB / %lld%% %s and the largest "
			 "card has %lld MiB; it can run only if it asks for less per card (more team "
			 "quota would not help).",
			 mem, core, per, (long long)largest);
	} else if (big_enough_healthy < r->count || fit_if_healthy >= r->count) {
		kind = "device_unhealthy";
		if (sick_card) {
			card_name(sick_card, name, sizeof name);
			snprintf(summary, sizeof summary,
				 "%s could hold %lld MiB / %lld%% but is unhealthy (%s); the task runs "
				 "once that card is healthy again, or once a healthy card has that much "
				 "room (now: %s).",
				 name, mem, core, sick_card->health_reason,
				 frees[0] ? frees : "none is healthy");
		} else {
			snprintf(summary, sizeof summary,
				 "Only unhealthy cards are large enough for %lld MiB / %lld%% %s; the "
				 "task runs once one of them is healthy again.",
				 mem, core, per);
		}
	} else if (total_free >= r->mem_mib * r->count && total_free_core >= r->core * r->count) {
		kind = "fragmentation";
		snprintf(summary, sizeof summary,
			 "%lld MiB are free in total, but split across cards (%s) and the task needs "
			 "%lld MiB / %lld%% %s; it runs when %s. More team quota would not help.",
			 (long long)total_free, frees, mem, core, per, unb);
	} else {
		kind = "capacity_in_use";
		snprintf(summary, sizeof summary,
			 "The cards are busy: %lld MiB / %lld%% are free in total (%s) and the task "
			 "needs %lld MiB / %lld%% %s; it runs when %s.",
			 (long long)total_free, (long long)total_free_core, frees, mem, core, per, unb);
	}
	json_t *quota = json_pack("{s:b, s:o, s:o, s:s}", "ok", 1, "reserved",
				  jx_gpu_pair(r->team_reserved_mem, r->team_reserved_core), "quota",
				  jx_gpu_pair(r->team_quota_mem, r->team_quota_core), "note",
				  "the task's quota is already reserved: the team quota admitted it");
	return json_pack("{s:s, s:s, s:{s:I, s:I, s:I}, s:o, s:{s:i, s:i, s:i, s:I, s:I, s:I}, "
			 "s:o}",
			 "kind", kind, "summary", summary, "request", "gpu_memory_mib",
			 (json_int_t)r->mem_mib, "gpu_core_percent", (json_int_t)r->core,
			 "gpu_count", (json_int_t)r->count, "team_quota", quota, "cards", "healthy",
			 healthy, "fit_now", fit, "large_enough", big_enough, "largest_card_mib",
			 (json_int_t)largest, "total_free_mib", (json_int_t)total_free,
			 "total_free_core_percent", (json_int_t)total_free_core, "unblock", unblock);
}
