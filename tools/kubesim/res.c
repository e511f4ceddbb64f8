/* The static table of served resources (kube-api.md §1, koordinator.md §1.1, §6.1, §6.6). */
#include "tools/kubesim/res.h"

#include <stdio.h>
#include <string.h>

static const struct res_def table[RES_COUNT] = {
	[RES_NAMESPACES] = { RES_NAMESPACES, "", "v1", "namespaces", "namespace", "Namespace",
			     "NamespaceList", "v1", 0, 0, 1, 0, 0, 0, { "ns" }, { 0 },
			     { "status.phase" } },
	[RES_NODES] = { RES_NODES, "", "v1", "nodes", "node", "Node", "NodeList", "v1", 0, 0, 1,
			0, 0, 0, { "no" }, { 0 }, { "spec.unschedulable" } },
	[RES_PODS] = { RES_PODS, "", "v1", "pods", "pod", "Pod", "PodList", "v1", 1, 0, 1, 1, 1, 0,
		       { "po" }, { "all" },
		       { "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
			 "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
			 "status.podIP", "status.nominatedNodeName" } },
	[RES_EVENTS] = { RES_EVENTS, "", "v1", "events", "event", "Event", "EventList", "v1", 1, 0,
			 0, 0, 0, 0, { "ev" }, { 0 },
			 { "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
			   "involvedObject.uid", "involvedObject.apiVersion",
			   "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
			   "reportingComponent", "source", "type" } },
	[RES_JOBS] = { RES_JOBS, "batch", "v1", "jobs", "job", "Job", "JobList", "batch/v1", 1, 0,
		       1, 0, 0, 1, { 0 }, { "all" }, { "status.successful" } },
	[RES_PRIORITYCLASSES] = { RES_PRIORITYCLASSES, "scheduling.k8s.io", "v1", "priorityclasses",
				  "priorityclass", "PriorityClass", "PriorityClassList",
				  "scheduling.k8s.io/v1", 0, 0, 0, 0, 0, 0, { "pc" }, { 0 },
				  { 0 } },
	[RES_DEVICES] = { RES_DEVICES, "scheduling.koordinator.sh", "v1alpha1", "devices", "device",
			  "Device", "DeviceList", "scheduling.koordinator.sh/v1alpha1", 0, 1, 0, 0,
			  0, 1, { 0 }, { 0 }, { 0 } },
	[RES_CCPS] = { RES_CCPS, "config.koordinator.sh", "v1alpha1", "clustercolocationprofiles",
		       "clustercolocationprofile", "ClusterColocationProfile",
		       "ClusterColocationProfileList", "config.koordinator.sh/v1alpha1", 0, 1, 1, 0,
		       0, 1, { 0 }, { 0 }, { 0 } },
	[RES_NODEMETRICS] = { RES_NODEMETRICS, "slo.koordinator.sh", "v1alpha1", "nodemetrics",
			      "nodemetric", "NodeMetric", "NodeMetricList",
			      "slo.koordinator.sh/v1alpha1", 0, 1, 1, 0, 0, 1, { 0 }, { 0 },
			      { 0 } },
	[RES_NODESLOS] = { RES_NODESLOS, "slo.koordinator.sh", "v1alpha1", "nodeslos", "nodeslo",
			   "NodeSLO", "NodeSLOList", "slo.koordinator.sh/v1alpha1", 0, 1, 1, 0, 0, 1,
			   { 0 }, { 0 }, { 0 } },
};

const struct res_def *res_get(enum res_id id)
{
	return (unsigned)id < RES_COUNT ? &table[id] : NULL;
}

const struct res_def *res_find(const char *group, const char *version, const char *plural)
{
	for (int i = 0; i < RES_COUNT; i++)
		if (!strcmp(table[i].group, group) && !strcmp(table[i].version, version) &&
		    !strcmp(table[i].plural, plural))
			return &table[i];
	return NULL;
}

const struct res_def *res_find_kind(const char *api_version, const char *kind)
{
	for (int i = 0; i < RES_COUNT; i++)
		if (!strcmp(table[i].api_version, api_version) && !strcmp(table[i].kind, kind))
			return &table[i];
	return NULL;
}

int res_gv_served(const char *group, const char *version)
{
	for (int i = 0; i < RES_COUNT; i++)
		if (!strcmp(table[i].group, group) && !strcmp(table[i].version, version))
			return 1;
	return 0;
}

const char *res_qualified(const struct res_def *r)
{
	static char names[RES_COUNT][96];
	char *n = names[r->id];
	if (!n[0]) {
		if (r->group[0])
			snprintf(n, sizeof names[0], "%s.%s", r->plural, r->group);
		else
			snprintf(n, sizeof names[0], "%s", r->plural);
	}
	return n;
}

int res_field_supported(const struct res_def *r, const char *field)
{
	if (!strcmp(field, "metadata.name") || !strcmp(field, "metadata.namespace"))
		return 1;
	for (int i = 0; i < 12 && r->field_selectors[i]; i++)
		if (!strcmp(r->field_selectors[i], field))
			return 1;
	return 0;
}
