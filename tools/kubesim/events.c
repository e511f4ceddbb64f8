/* Event recording with aggregation by (involved uid, reason, message). */
#include "tools/kubesim/events.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

/* Events kept at most; a real cluster expires them after an hour, a cap is enough here. */
#define EVENTS_MAX 1000
/* Past the cap, this many of the oldest go in one sweep, so the sweep is rare. */
#define EVENTS_SWEEP 100

struct aged {
	const char *ts;
	char ns[256], name[256];
};

static int cmp_aged(const void *a, const void *b)
{
	return strcmp(((const struct aged *)a)->ts, ((const struct aged *)b)->ts);
}

/* Over the cap, removes the EVENTS_SWEEP events with the oldest lastTimestamp. */
static void trim(struct ks *ks)
{
	if (store_count(ks->store, RES_EVENTS) <= EVENTS_MAX)
		return;
	json_t **all = NULL;
	size_t n = store_list(ks->store, RES_EVENTS, NULL, &all);
	struct aged *a = gwb_calloc(n ? n : 1, sizeof *a);
	for (size_t i = 0; i < n; i++) {
		const char *ts = obj_str(all[i], "lastTimestamp");
		a[i].ts = ts ? ts : "";
		snprintf(a[i].ns, sizeof a[i].ns, "%s", obj_ns(all[i]));
		snprintf(a[i].name, sizeof a[i].name, "%s", obj_name(all[i]));
	}
	/* qsort is not stable: events with equal timestamps go in no particular order. */
	qsort(a, n, sizeof *a, cmp_aged);
	size_t drop = n - EVENTS_MAX + EVENTS_SWEEP;
	if (drop > n)
		drop = n;
	/* Timestamps point into stored events: copy the keys out before removing any. */
	for (size_t i = 0; i < drop; i++)
		registry_remove(ks->registry, RES_EVENTS, a[i].ns, a[i].name);
	gwb_free(a);
	gwb_free(all);
}

void events_record(struct ks *ks, const json_t *involved, const char *type, const char *reason,
		   const char *message, const char *component)
{
	const char *ns = obj_ns(involved);
	if (!ns[0])
		ns = "default";
	char now[32];
	obj_now(now, sizeof now);
	json_t **all = NULL;
	size_t n = obj_uid(involved) ? store_list_index(ks->store, RES_EVENTS, STORE_IDX_INVOLVED,
							 obj_uid(involved), ns, &all)
				     : 0;
	for (size_t i = 0; i < n; i++) {
		json_t *e = all[i];
		const char *uid = obj_str(e, "involvedObject.uid");
		const char *r = obj_str(e, "reason"), *m = obj_str(e, "message");
		if (uid && r && m && !strcmp(uid, obj_uid(involved)) && !strcmp(r, reason) &&
		    !strcmp(m, message)) {
			json_t *c = json_deep_copy(e);
			json_object_set_new(c, "count", json_integer(obj_int(e, "count", 1) + 1));
			json_object_set_new(c, "lastTimestamp", json_string(now));
			registry_commit(ks->registry, RES_EVENTS, c);
			gwb_free(all);
			return;
		}
	}
	gwb_free(all);
	char name[320];
	snprintf(name, sizeof name, "%.240s.%" PRIx64, obj_name(involved),
		 (uint64_t)((uint64_t)clock_now_ms() * 1000000U + store_rv(ks->store) % 1000000U));
	json_t *io = json_pack("{s:s, s:s, s:s, s:s, s:s}", "kind", obj_str(involved, "kind") ? obj_str(involved, "kind") : "",
			       "name", obj_name(involved), "uid", obj_uid(involved),
			       "apiVersion", obj_str(involved, "apiVersion") ? obj_str(involved, "apiVersion") : "v1",
			       "resourceVersion", obj_str(involved, "metadata.resourceVersion") ? obj_str(involved, "metadata.resourceVersion") : "");
	if (obj_ns(involved)[0])
		json_object_set_new(io, "namespace", json_string(obj_ns(involved)));
	json_t *ev = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o, s:s, s:s, s:s, s:{s:s, s:s}, s:s, "
			       "s:s, s:i, s:n, s:s, s:s}",
			       "kind", "Event", "apiVersion", "v1", "metadata", "name", name,
			       "namespace", ns, "involvedObject", io, "reason", reason, "message",
			       message, "type", type, "source", "component", component, "host",
			       ks->cfg.node, "firstTimestamp", now, "lastTimestamp", now, "count",
			       1, "eventTime", "reportingComponent", component, "reportingInstance",
			       ks->cfg.node);
	if (strcmp(component, "kubelet") != 0)
		json_object_del(json_object_get(ev, "source"), "host");
	struct kerr e = { 0 };
	registry_create(ks->registry, res_get(RES_EVENTS), ns, ev, 0, NULL, &e);
	kerr_clear(&e);
	trim(ks);
}
