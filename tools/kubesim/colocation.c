/* koord-manager's Pod webhooks, in their chain order: ClusterColocationProfile mutation, the
 * batch/mid resource rewrite with the extended-resource-spec annotation, the colocation
 * validation, then DeviceResourceSpec. Namespaces labelled control-plane are skipped, as the
 * webhook's namespaceSelector skips them. */
#include "tools/kubesim/colocation.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/patch.h"
#include "tools/kubesim/selector.h"
#include "tools/kubesim/store.h"

#define QOS_LABEL "koordinator.sh/qosClass"
#define PRIO_LABEL "koordinator.sh/priority"
#define PRIO_CLASS_LABEL "koordinator.sh/priority-class"
#define SKIP_RESOURCES "config.koordinator.sh/skip-update-resources"
#define EXT_SPEC "node.koordinator.sh/extended-resource-spec"

static json_t *labels_of(json_t *o)
{
	return obj_child(obj_child(o, "metadata"), "labels");
}

static int probability_hit(const json_t *p)
{
	if (!p)
		return 1;
	long pct;
	if (json_is_integer(p))
		pct = (long)json_integer_value(p);
	else if (json_is_string(p))
		pct = strtol(json_string_value(p), NULL, 10);
	else
		return 1;
	if (pct <= 0)
		return 0;
	if (pct >= 100)
		return 1;
	unsigned char r;
	obj_random(&r, 1);
	return (long)(r % 100) < pct;
}

/* Applies one profile. Returns 0 or -1 with e (a missing PriorityClass). */
static int apply_profile(struct ks *ks, json_t *pod, const json_t *prof, int *skip_res,
			 struct kerr *e)
{
	json_t *spec = obj_path(prof, "spec");
	json_t *labels = labels_of(pod);
	const char *qos = obj_str(spec, "qosClass");
	if (qos && qos[0])
		json_object_set_new(labels, QOS_LABEL, json_string(qos));
	const char *pcn = obj_str(spec, "priorityClassName");
	if (pcn && pcn[0]) {
		json_t *pc = store_get(ks->store, RES_PRIORITYCLASSES, NULL, pcn);
		if (!pc) {
			kerr_set(e, 400, "BadRequest",
				 "admission webhook \"mpod-create.koordinator.sh\" denied the request: "
				 "failed to get PriorityClass %s: priorityclasses.scheduling.k8s.io "
				 "\"%s\" not found",
				 pcn, pcn);
			return -1;
		}
		json_t *ps = obj_child(pod, "spec");
		json_object_set_new(ps, "priorityClassName", json_string(pcn));
		json_object_set_new(ps, "priority", json_integer(obj_int(pc, "value", 0)));
		const char *pp = obj_str(pc, "preemptionPolicy");
		if (pp)
			json_object_set_new(ps, "preemptionPolicy", json_string(pp));
	}
	json_t *kp = json_object_get(spec, "koordinatorPriority");
	if (json_is_integer(kp)) {
		char buf[32];
		snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(kp));
		json_object_set_new(labels, PRIO_LABEL, json_string(buf));
	}
	json_object_update(labels, json_object_get(spec, "labels"));
	json_t *anns = obj_child(obj_child(pod, "metadata"), "annotations");
	json_object_update(anns, json_object_get(spec, "annotations"));
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(spec, "labelKeysMapping"), k, v)
	{
		json_t *val = json_object_get(labels, k);
		if (val && json_is_string(v))
			json_object_set(labels, json_string_value(v), val);
	}
	json_object_foreach(json_object_get(spec, "annotationKeysMapping"), k, v)
	{
		json_t *val = json_object_get(anns, k);
		if (val && json_is_string(v))
			json_object_set(anns, json_string_value(v), val);
	}
	json_object_foreach(json_object_get(spec, "labelSuffixes"), k, v)
	{
		const char *cur = json_string_value(json_object_get(labels, k));
		if (cur && json_is_string(v)) {
			char buf[512];
			snprintf(buf, sizeof buf, "%s%s", cur, json_string_value(v));
			json_object_set_new(labels, k, json_string(buf));
		}
	}
	const char *sched = obj_str(spec, "schedulerName");
	if (sched && sched[0])
		obj_set_str(pod, "spec.schedulerName", sched);
	json_t *patch = json_object_get(spec, "patch");
	if (json_is_object(patch)) {
		json_t *out = NULL;
		char err[200];
		if (patch_apply(PATCH_STRATEGIC, pod, patch, &out, err, sizeof err) == 0) {
			/* Replace the pod's members in place: the caller holds the pod. */
			json_object_clear(pod);
			json_object_update(pod, out);
			json_decref(out);
		}
	}
	if (obj_annotation(prof, SKIP_RESOURCES))
		*skip_res = 1;
	return 0;
}

/* koord priority class of a pod (koordinator.md §6.2 step 2, §6.4). */
static const char *priority_class(const json_t *pod, const char *k8s_qos)
{
	const char *l = obj_label(pod, PRIO_CLASS_LABEL);
	if (l && l[0])
		return l;
	json_t *p = obj_path(pod, "spec.priority");
	if (json_is_integer(p)) {
		json_int_t v = json_integer_value(p);
		if (v >= 9000 && v <= 9999)
			return "koord-prod";
		if (v >= 7000 && v <= 7999)
			return "koord-mid";
		if (v >= 5000 && v <= 5999)
			return "koord-batch";
		if (v >= 3000 && v <= 3999)
			return "koord-free";
		if (v != 0)
			return "";
	}
	const char *qos = obj_label(pod, QOS_LABEL);
	if (!qos || !qos[0])
		qos = !strcmp(k8s_qos, "BestEffort") ? "BE"
		      : !strcmp(k8s_qos, "Burstable") ? "LS" : "LSR";
	return !strcmp(qos, "BE") ? "koord-batch" : "koord-prod";
}

static int64_t cpu_milli(const char *q)
{
	size_t n = strlen(q);
	if (n && q[n - 1] == 'm')
		return strtoll(q, NULL, 10);
	double d = strtod(q, NULL);
	int64_t m = (int64_t)(d * 1000.0);
	return (double)m < d * 1000.0 ? m + 1 : m;
}

/* cpu/memory -> <prefix>-cpu/<prefix>-memory in one requests or limits map. */
static void rewrite_map(json_t *m, const char *cpu_name, const char *mem_name)
{
	if (!json_is_object(m))
		return;
	json_t *cpu = json_object_get(m, "cpu"), *mem = json_object_get(m, "memory");
	if (json_is_string(cpu)) {
		char buf[QUANTITY_BUF];
		quantity_format_decimal(cpu_milli(json_string_value(cpu)), buf, sizeof buf);
		json_object_set_new(m, cpu_name, json_string(buf));
		json_object_del(m, "cpu");
	}
	if (json_is_string(mem)) {
		json_object_set(m, mem_name, mem);
		json_object_del(m, "memory");
	}
}

static void rewrite_resources(json_t *pod, const char *prefix)
{
	char cpu_name[64], mem_name[64];
	snprintf(cpu_name, sizeof cpu_name, "kubernetes.io/%s-cpu", prefix);
	snprintf(mem_name, sizeof mem_name, "kubernetes.io/%s-memory", prefix);
	json_t *ext = json_object();
	const char *lists[] = { "initContainers", "containers" };
	for (int l = 0; l < 2; l++) {
		size_t i;
		json_t *c;
		char path[64];
		snprintf(path, sizeof path, "spec.%s", lists[l]);
		json_array_foreach(obj_path(pod, path), i, c)
		{
			json_t *res = obj_child(c, "resources");
			json_t *lim = json_object_get(res, "limits");
			json_t *req = json_object_get(res, "requests");
			/* A limit alone sets the request. */
			const char *names[] = { "cpu", "memory" };
			for (int n = 0; n < 2; n++)
				if (json_object_get(lim, names[n]) && !json_object_get(req, names[n]))
					json_object_set(obj_child(res, "requests"), names[n],
							json_object_get(lim, names[n]));
			rewrite_map(json_object_get(res, "requests"), cpu_name, mem_name);
			rewrite_map(lim, cpu_name, mem_name);
			json_t *entry = json_object();
			const char *which[] = { "requests", "limits" };
			for (int w = 0; w < 2; w++) {
				json_t *m = json_object_get(res, which[w]);
				json_t *sub = json_object();
				if (json_object_get(m, cpu_name))
					json_object_set(sub, cpu_name, json_object_get(m, cpu_name));
				if (json_object_get(m, mem_name))
					json_object_set(sub, mem_name, json_object_get(m, mem_name));
				if (json_object_size(sub))
					json_object_set_new(entry, which[w], sub);
				else
					json_decref(sub);
			}
			const char *cn = obj_str(c, "name");
			if (json_object_size(entry) && cn && l == 1)
				json_object_set_new(ext, cn, entry);
			else
				json_decref(entry);
		}
	}
	rewrite_map(obj_path(pod, "spec.overhead"), cpu_name, mem_name);
	if (json_object_size(ext)) {
		json_t *doc = json_pack("{s:o}", "containers", ext);
		char *s = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
		json_object_set_new(obj_child(obj_child(pod, "metadata"), "annotations"), EXT_SPEC,
				    json_string(s ? s : "{}"));
		gwb_free(s); /* jansson allocates through gwb_malloc (gwb_alloc_init) */
		json_decref(doc);
	} else {
		json_decref(ext);
	}
}

static int has_colocation_resources(const json_t *pod)
{
	size_t i;
	json_t *c;
	json_array_foreach(obj_path(pod, "spec.containers"), i, c)
	{
		const char *which[] = { "resources.requests", "resources.limits" };
		for (int w = 0; w < 2; w++) {
			json_t *m = obj_path(c, which[w]);
			if (json_object_get(m, "kubernetes.io/batch-cpu") ||
			    json_object_get(m, "kubernetes.io/batch-memory"))
				return 1;
		}
	}
	return 0;
}

static int64_t qty_of(const json_t *m, const char *name)
{
	const char *s = json_string_value(json_object_get(m, name));
	int64_t v;
	return s && quantity_parse(s, &v) == 0 ? v : 0;
}

static void set_both(json_t *res, const char *name, int64_t v)
{
	char buf[QUANTITY_BUF];
	quantity_format_decimal(v, buf, sizeof buf);
	json_object_set_new(obj_child(res, "requests"), name, json_string(buf));
	json_object_set_new(obj_child(res, "limits"), name, json_string(buf));
}

/* DeviceResourceSpec (koordinator.md §2.3), on spec.containers only. */
static void device_resource_spec(json_t *pod)
{
	static const char *const names[] = { "koordinator.sh/gpu", "koordinator.sh/gpu-core",
					     "koordinator.sh/gpu-memory",
					     "koordinator.sh/gpu-memory-ratio",
					     "koordinator.sh/gpu.shared" };
	size_t i;
	json_t *c;
	json_array_foreach(obj_path(pod, "spec.containers"), i, c)
	{
		json_t *res = obj_child(c, "resources");
		json_t *req = json_object_get(res, "requests"), *lim = json_object_get(res, "limits");
		int any = 0;
		for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
			any |= json_object_get(req, names[n]) || json_object_get(lim, names[n]);
		if (!any)
			continue;
		json_t *src = json_object_get(lim, "koordinator.sh/gpu") ? lim : req;
		int64_t g = qty_of(src, "koordinator.sh/gpu");
		if (json_object_get(src, "koordinator.sh/gpu")) {
			set_both(res, "koordinator.sh/gpu-core", g);
			set_both(res, "koordinator.sh/gpu-memory-ratio", g);
			json_object_del(json_object_get(res, "requests"), "koordinator.sh/gpu");
			json_object_del(json_object_get(res, "limits"), "koordinator.sh/gpu");
		}
		json_t *m = json_object_get(res, "limits");
		if (!json_object_size(m))
			m = json_object_get(res, "requests");
		if (json_object_get(m, "koordinator.sh/gpu.shared"))
			continue;
		int64_t ratio = qty_of(m, "koordinator.sh/gpu-memory-ratio");
		int64_t core = qty_of(m, "koordinator.sh/gpu-core");
		int64_t shared = 1;
		if (ratio > 100 && ratio % 100 == 0)
			shared = ratio / 100;
		else if (!ratio && core > 100 && core % 100 == 0)
			shared = core / 100;
		set_both(res, "koordinator.sh/gpu.shared", shared);
	}
}

/* The Kubernetes QoS class from cpu/memory requests and limits (before any rewrite). */
static const char *k8s_qos_of(const json_t *pod)
{
	int any = 0, guaranteed = 1;
	size_t i;
	json_t *c;
	json_array_foreach(obj_path(pod, "spec.containers"), i, c)
	{
		json_t *rq = obj_path(c, "resources.requests"), *lm = obj_path(c, "resources.limits");
		const char *nm[] = { "cpu", "memory" };
		for (int k = 0; k < 2; k++) {
			json_t *a = json_object_get(rq, nm[k]), *b = json_object_get(lm, nm[k]);
			any |= a || b;
			if (!b || (a && !json_equal(a, b)))
				guaranteed = 0;
		}
	}
	if (!any)
		return "BestEffort";
	return guaranteed ? "Guaranteed" : "Burstable";
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(obj_name(*(json_t *const *)a), obj_name(*(json_t *const *)b));
}

int colocation_admit_pod(struct ks *ks, json_t *pod, struct kerr *e)
{
	const char *ns = obj_ns(pod);
	json_t *nsobj = store_get(ks->store, RES_NAMESPACES, NULL, ns);
	json_t *nslabels = obj_path(nsobj, "metadata.labels");
	if (json_object_get(nslabels, "control-plane"))
		return 0;
	json_t **profs = NULL;
	size_t n = store_list(ks->store, RES_CCPS, NULL, &profs);
	if (n > 1) /* qsort with a NULL list (none stored) is undefined */
		qsort(profs, n, sizeof *profs, cmp_name);
	int skip_res = 0, applied = 0;
	for (size_t i = 0; i < n; i++) {
		json_t *spec = obj_path(profs[i], "spec");
		if (!selector_match_doc(json_object_get(spec, "namespaceSelector"), nslabels) ||
		    !selector_match_doc(json_object_get(spec, "selector"),
					obj_path(pod, "metadata.labels")))
			continue;
		if (!probability_hit(json_object_get(spec, "probability")))
			continue;
		if (apply_profile(ks, pod, profs[i], &skip_res, e) < 0) {
			gwb_free(profs);
			return GWB_EINVAL;
		}
		applied++;
		log_debug("colocation", "profile_applied", "pod=%s/%s profile=%s", ns,
			  obj_name(pod), obj_name(profs[i]));
	}
	gwb_free(profs);
	/* The profile step ends here for a pod no profile matched; DeviceResourceSpec and the
	 * validation still run. */
	if (!applied)
		goto validate;
	const char *cls = priority_class(pod, k8s_qos_of(pod));
	if (!skip_res && !strcmp(cls, "koord-batch"))
		rewrite_resources(pod, "batch");
	else if (!skip_res && !strcmp(cls, "koord-mid"))
		rewrite_resources(pod, "mid");
validate:;
	/* Validation (applies to every pod). */
	const char *qos = obj_label(pod, QOS_LABEL);
	if (has_colocation_resources(pod) && (!qos || strcmp(qos, "BE"))) {
		kerr_set(e, 400, "BadRequest",
			 "admission webhook \"vpod.koordinator.sh\" denied the request: "
			 "must specify koordinator QoS BE with koordinator colocation resources");
		return GWB_EINVAL;
	}
	const char *pc = priority_class(pod, k8s_qos_of(pod));
	if (qos && !strcmp(qos, "BE") && (!pc[0] || !strcmp(pc, "koord-prod"))) {
		kerr_set(e, 400, "BadRequest",
			 "admission webhook \"vpod.koordinator.sh\" denied the request: "
			 "koordinator.sh/qosClass=BE and priorityClass=%s cannot be used in combination",
			 pc);
		return GWB_EINVAL;
	}
	device_resource_spec(pod);
	return 0;
}
