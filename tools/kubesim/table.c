/* Table printers. The cell logic follows the upstream printers' rules as described in
 * kube-api.md §4.3 and §6.4: one row per object, wide (priority 1) cells always included. */
#include "tools/kubesim/table.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tools/kubesim/obj.h"

const char *table_accept(const char *accept)
{
	if (!accept)
		return NULL;
	/* Media ranges are comma separated; parameters are ;-separated and unordered. */
	const char *p = accept;
	while (*p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		char part[256];
		if (n < sizeof part) {
			memcpy(part, p, n);
			part[n] = '\0';
			if (strstr(part, "as=Table") && strstr(part, "g=meta.k8s.io")) {
				if (strstr(part, "v=v1beta1"))
					return "meta.k8s.io/v1beta1";
				if (strstr(part, "v=v1"))
					return "meta.k8s.io/v1";
			}
			if (strstr(part, "application/json") && !strstr(part, "as="))
				return NULL; /* plain JSON ranked first */
		}
		if (!end)
			break;
		p = end + 1;
		while (*p == ' ')
			p++;
	}
	return NULL;
}

enum table_include table_include_parse(const char *s)
{
	if (s && !strcmp(s, "None"))
		return TABLE_INCLUDE_NONE;
	if (s && !strcmp(s, "Object"))
		return TABLE_INCLUDE_OBJECT;
	return TABLE_INCLUDE_METADATA;
}

char *table_human_duration(int64_t s, char *buf, size_t len)
{
	if (s < -1) {
		snprintf(buf, len, "<invalid>");
		return buf;
	}
	if (s < 0)
		s = 0;
	int64_t m = s / 60, h = s / 3600, d = h / 24;
	if (s < 120)
		snprintf(buf, len, "%" PRId64 "s", s);
	else if (m < 10)
		s % 60 ? snprintf(buf, len, "%" PRId64 "m%" PRId64 "s", m, s % 60)
		       : snprintf(buf, len, "%" PRId64 "m", m);
	else if (m < 180)
		snprintf(buf, len, "%" PRId64 "m", m);
	else if (h < 8)
		m % 60 ? snprintf(buf, len, "%" PRId64 "h%" PRId64 "m", h, m % 60)
		       : snprintf(buf, len, "%" PRId64 "h", h);
	else if (h < 48)
		snprintf(buf, len, "%" PRId64 "h", h);
	else if (h < 24 * 8)
		h % 24 ? snprintf(buf, len, "%" PRId64 "d%" PRId64 "h", d, h % 24)
		       : snprintf(buf, len, "%" PRId64 "d", d);
	else if (h < 24 * 365 * 2)
		snprintf(buf, len, "%" PRId64 "d", d);
	else if (h < 24 * 365 * 8)
		d % 365 ? snprintf(buf, len, "%" PRId64 "y%" PRId64 "d", d / 365, d % 365)
			: snprintf(buf, len, "%" PRId64 "y", d / 365);
	else
		snprintf(buf, len, "%" PRId64 "y", d / 365);
	return buf;
}

char *table_age(const json_t *obj, const char *path, char *buf, size_t len)
{
	int64_t ms;
	if (obj_time_ms(obj, path, &ms) < 0) {
		snprintf(buf, len, "<unknown>");
		return buf;
	}
	return table_human_duration((clock_now_ms() - ms) / 1000, buf, len);
}

/* ---- columns ---- */

struct col {
	const char *name, *type, *format, *desc;
	int priority;
};

static const struct col pod_cols[] = {
	{ "Name", "string", "name", "Name must be unique within a namespace.", 0 },
	{ "Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0 },
	{ "Status", "string", "", "The aggregate status of the containers in this pod.", 0 },
	{ "Restarts", "string", "", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.", 0 },
	{ "Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0 },
	{ "IP", "string", "", "podIP address allocated to the pod.", 1 },
	{ "Node", "string", "", "NodeName is the name of the node the pod is scheduled on.", 1 },
	{ "Nominated Node", "string", "", "nominatedNodeName is set when this pod preempts other pods on the node.", 1 },
	{ "Readiness Gates", "string", "", "If specified, all readiness gates will be evaluated for pod readiness.", 1 },
	{ 0 }
};
static const struct col job_cols[] = {
	{ "Name", "string", "name", "Name must be unique within a namespace.", 0 },
	{ "Status", "string", "", "Status of the job.", 0 },
	{ "Completions", "string", "", "The number of pods that have completed successfully out of the desired number.", 0 },
	{ "Duration", "string", "", "Time required to complete the job.", 0 },
	{ "Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0 },
	{ "Containers", "string", "", "Names of each container in the template.", 1 },
	{ "Images", "string", "", "Images referenced by each container in the template.", 1 },
	{ "Selector", "string", "", "A label query over pods that should match the pod count.", 1 },
	{ 0 }
};
static const struct col node_cols[] = {
	{ "Name", "string", "name", "Name must be unique within a namespace.", 0 },
	{ "Status", "string", "", "The status of the node", 0 },
	{ "Roles", "string", "", "The roles of the node", 0 },
	{ "Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0 },
	{ "Version", "string", "", "Kubelet Version reported by the node.", 0 },
	{ "Internal-IP", "string", "", "List of addresses reachable to the node.", 1 },
	{ "External-IP", "string", "", "List of addresses reachable to the node.", 1 },
	{ "OS-Image", "string", "", "OS Image reported by the node from /etc/os-release.", 1 },
	{ "Kernel-Version", "string", "", "Kernel Version reported by the node.", 1 },
	{ "Container-Runtime", "string", "", "Container Runtime Version reported by the node.", 1 },
	{ 0 }
};
static const struct col event_cols[] = {
	{ "Last Seen", "string", "", "The time at which the most recent occurrence of this event was recorded.", 0 },
	{ "Type", "string", "", "Type of this event (Normal, Warning), new types could be added in the future.", 0 },
	{ "Reason", "string", "", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.", 0 },
	{ "Object", "string", "", "The object that this event is about.", 0 },
	{ "Subobject", "string", "", "The subobject that this event is about.", 1 },
	{ "Source", "string", "", "The component reporting this event.", 1 },
	{ "Message", "string", "", "A human-readable description of the status of this operation.", 0 },
	{ "First Seen", "string", "", "The time at which the event was first recorded.", 1 },
	{ "Count", "string", "", "The number of times this event has occurred.", 1 },
	{ "Name", "string", "name", "Name must be unique within a namespace.", 1 },
	{ 0 }
};
static const struct col ns_cols[] = {
	{ "Name", "string", "name", "Name must be unique within a namespace.", 0 },
	{ "Status", "string", "", "The status of the namespace", 0 },
	{ "Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0 },
	{ 0 }
};
static const struct col default_cols[] = {
	{ "Name", "string", "name", "Name must be unique within a namespace.", 0 },
	{ "Age", "date", "", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0 },
	{ 0 }
};

static const struct col *cols_for(const struct res_def *r)
{
	switch (r->id) {
	case RES_PODS: return pod_cols;
	case RES_JOBS: return job_cols;
	case RES_NODES: return node_cols;
	case RES_EVENTS: return event_cols;
	case RES_NAMESPACES: return ns_cols;
	default: return default_cols;
	}
}

/* ---- cells ---- */

static void add(json_t *cells, const char *s)
{
	json_array_append_new(cells, json_string(s));
}

static void pod_cells(const json_t *pod, json_t *cells)
{
	char buf[128];
	json_t *statuses = obj_path(pod, "status.containerStatuses");
	size_t total = json_array_size(obj_path(pod, "spec.containers"));
	int ready = 0, running = 0;
	int64_t restarts = 0;
	const char *reason = obj_str(pod, "status.reason");
	if (!reason)
		reason = obj_str(pod, "status.phase");
	if (!reason)
		reason = "Pending";
	static char rbuf[64];
	for (size_t i = json_array_size(statuses); i-- > 0;) {
		json_t *cs = json_array_get(statuses, i);
		restarts += obj_int(cs, "restartCount", 0);
		const char *w = obj_str(cs, "state.waiting.reason");
		json_t *term = obj_path(cs, "state.terminated");
		if (w && w[0]) {
			reason = w;
		} else if (term && obj_str(term, "reason") && obj_str(term, "reason")[0]) {
			reason = obj_str(term, "reason");
		} else if (term) {
			int64_t sig = obj_int(term, "signal", 0);
			if (sig)
				snprintf(rbuf, sizeof rbuf, "Signal:%" PRId64, sig);
			else
				snprintf(rbuf, sizeof rbuf, "ExitCode:%" PRId64,
					 obj_int(term, "exitCode", 0));
			reason = rbuf;
		} else if (obj_true(cs, "ready") && obj_path(cs, "state.running")) {
			running = 1;
			ready++;
		}
	}
	if (!strcmp(reason, "Completed") && running)
		reason = obj_condition_true(pod, "Ready") ? "Running" : "NotReady";
	if (obj_deleting(pod)) {
		const char *sr = obj_str(pod, "status.reason");
		if (sr && !strcmp(sr, "NodeLost"))
			reason = "Unknown";
		else if (!obj_pod_terminal(pod))
			reason = "Terminating";
	}
	add(cells, obj_name(pod));
	snprintf(buf, sizeof buf, "%d/%zu", ready, total);
	add(cells, buf);
	add(cells, reason);
	snprintf(buf, sizeof buf, "%" PRId64, restarts);
	add(cells, buf);
	add(cells, table_age(pod, "metadata.creationTimestamp", buf, sizeof buf));
	const char *ip = obj_str(pod, "status.podIP");
	add(cells, ip ? ip : "<none>");
	const char *node = obj_str(pod, "spec.nodeName");
	add(cells, node && node[0] ? node : "<none>");
	const char *nom = obj_str(pod, "status.nominatedNodeName");
	add(cells, nom && nom[0] ? nom : "<none>");
	add(cells, "<none>");
}

static void join_field(const json_t *arr, const char *key, char *buf, size_t len)
{
	size_t o = 0;
	size_t i;
	json_t *e;
	buf[0] = '\0';
	json_array_foreach((json_t *)arr, i, e)
	{
		const char *v = obj_str(e, key);
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? "," : "", v ? v : "");
	}
}

static void job_cells(const json_t *job, json_t *cells)
{
	char buf[512];
	const char *status = "Running";
	if (obj_condition_true(job, "Complete"))
		status = "Complete";
	else if (obj_condition_true(job, "Failed"))
		status = "Failed";
	else if (obj_deleting(job))
		status = "Terminating";
	else if (obj_condition_true(job, "Suspended"))
		status = "Suspended";
	else if (obj_condition_true(job, "FailureTarget"))
		status = "FailureTarget";
	add(cells, obj_name(job));
	add(cells, status);
	int64_t succ = obj_int(job, "status.succeeded", 0);
	json_t *comp = obj_path(job, "spec.completions");
	int64_t par = obj_int(job, "spec.parallelism", 1);
	if (json_is_integer(comp))
		snprintf(buf, sizeof buf, "%" PRId64 "/%" PRId64, succ,
			 (int64_t)json_integer_value(comp));
	else if (par > 1)
		snprintf(buf, sizeof buf, "%" PRId64 "/1 of %" PRId64, succ, par);
	else
		snprintf(buf, sizeof buf, "%" PRId64 "/1", succ);
	add(cells, buf);
	int64_t start, end;
	if (obj_time_ms(job, "status.startTime", &start) < 0) {
		add(cells, "");
	} else {
		if (obj_time_ms(job, "status.completionTime", &end) < 0)
			end = clock_now_ms();
		add(cells, table_human_duration((end - start) / 1000, buf, sizeof buf));
	}
	add(cells, table_age(job, "metadata.creationTimestamp", buf, sizeof buf));
	json_t *ctrs = obj_path(job, "spec.template.spec.containers");
	join_field(ctrs, "name", buf, sizeof buf);
	add(cells, buf);
	join_field(ctrs, "image", buf, sizeof buf);
	add(cells, buf);
	size_t o = 0;
	const char *k;
	json_t *v;
	buf[0] = '\0';
	json_object_foreach(obj_path(job, "spec.selector.matchLabels"), k, v)
	{
		if (o < sizeof buf)
			o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s=%s", o ? "," : "", k,
					      json_string_value(v) ? json_string_value(v) : "");
	}
	add(cells, buf[0] ? buf : "<none>");
}

static void node_cells(const json_t *node, json_t *cells)
{
	char buf[256];
	add(cells, obj_name(node));
	snprintf(buf, sizeof buf, "%s%s", obj_condition_true(node, "Ready") ? "Ready" : "NotReady",
		 obj_true(node, "spec.unschedulable") ? ",SchedulingDisabled" : "");
	add(cells, buf);
	size_t o = 0;
	const char *k;
	json_t *v;
	buf[0] = '\0';
	json_object_foreach(obj_path(node, "metadata.labels"), k, v)
	{
		if (!strncmp(k, "node-role.kubernetes.io/", 24) && o < sizeof buf)
			o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", o ? "," : "", k + 24);
	}
	add(cells, buf[0] ? buf : "<none>");
	add(cells, table_age(node, "metadata.creationTimestamp", buf, sizeof buf));
	const char *ver = obj_str(node, "status.nodeInfo.kubeletVersion");
	add(cells, ver ? ver : "");
	const char *internal = "<none>", *external = "<none>";
	size_t i;
	json_t *a;
	json_array_foreach(obj_path(node, "status.addresses"), i, a)
	{
		const char *t = obj_str(a, "type");
		if (t && !strcmp(t, "InternalIP"))
			internal = obj_str(a, "address");
		if (t && !strcmp(t, "ExternalIP"))
			external = obj_str(a, "address");
	}
	add(cells, internal ? internal : "<none>");
	add(cells, external ? external : "<none>");
	const char *s = obj_str(node, "status.nodeInfo.osImage");
	add(cells, s ? s : "");
	s = obj_str(node, "status.nodeInfo.kernelVersion");
	add(cells, s ? s : "");
	s = obj_str(node, "status.nodeInfo.containerRuntimeVersion");
	add(cells, s ? s : "");
}

static void event_cells(const json_t *ev, json_t *cells)
{
	char buf[512];
	const char *last = obj_str(ev, "lastTimestamp") ? "lastTimestamp" : "eventTime";
	const char *first = obj_str(ev, "firstTimestamp") ? "firstTimestamp" : "eventTime";
	add(cells, table_age(ev, last, buf, sizeof buf));
	const char *t = obj_str(ev, "type");
	add(cells, t ? t : "");
	t = obj_str(ev, "reason");
	add(cells, t ? t : "");
	const char *kind = obj_str(ev, "involvedObject.kind");
	char lk[64];
	snprintf(lk, sizeof lk, "%s", kind ? kind : "");
	for (char *c = lk; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	const char *name = obj_str(ev, "involvedObject.name");
	snprintf(buf, sizeof buf, "%s/%s", lk, name ? name : "");
	add(cells, buf);
	t = obj_str(ev, "involvedObject.fieldPath");
	add(cells, t ? t : "");
	const char *comp = obj_str(ev, "source.component");
	const char *host = obj_str(ev, "source.host");
	if (!comp || !comp[0])
		comp = obj_str(ev, "reportingComponent");
	if (host && host[0])
		snprintf(buf, sizeof buf, "%s, %s", comp ? comp : "", host);
	else
		snprintf(buf, sizeof buf, "%s", comp ? comp : "");
	add(cells, buf);
	t = obj_str(ev, "message");
	add(cells, t ? t : "");
	add(cells, table_age(ev, first, buf, sizeof buf));
	snprintf(buf, sizeof buf, "%" PRId64, obj_int(ev, "count", 1));
	add(cells, buf);
	add(cells, obj_name(ev));
}

static void ns_cells(const json_t *ns, json_t *cells)
{
	char buf[64];
	add(cells, obj_name(ns));
	const char *ph = obj_str(ns, "status.phase");
	add(cells, ph ? ph : "Active");
	add(cells, table_age(ns, "metadata.creationTimestamp", buf, sizeof buf));
}

static json_t *row(const struct res_def *r, const json_t *obj, enum table_include inc)
{
	json_t *cells = json_array();
	char buf[64];
	switch (r->id) {
	case RES_PODS: pod_cells(obj, cells); break;
	case RES_JOBS: job_cells(obj, cells); break;
	case RES_NODES: node_cells(obj, cells); break;
	case RES_EVENTS: event_cells(obj, cells); break;
	case RES_NAMESPACES: ns_cells(obj, cells); break;
	default:
		add(cells, obj_name(obj));
		add(cells, table_age(obj, "metadata.creationTimestamp", buf, sizeof buf));
		break;
	}
	json_t *row = json_pack("{s:o}", "cells", cells);
	/* Rows share the stored documents' parts (a reference, or a shallow copy where a field
	 * is added): the table is dumped and dropped, never changed. */
	if (inc == TABLE_INCLUDE_METADATA) {
		json_t *meta = obj_path(obj, "metadata");
		json_object_set_new(row, "object",
				    json_pack("{s:s, s:s, s:o}", "kind", "PartialObjectMetadata",
					      "apiVersion", "meta.k8s.io/v1", "metadata",
					      meta ? json_incref(meta) : json_object()));
	} else if (inc == TABLE_INCLUDE_OBJECT) {
		json_t *o = json_copy((json_t *)obj);
		json_object_set_new(o, "kind", json_string(r->kind));
		json_object_set_new(o, "apiVersion", json_string(r->api_version));
		json_object_set_new(row, "object", o);
	}
	return row;
}

json_t *table_build(const struct res_def *r, json_t *const *objs, size_t n,
		    const char *api_version, const char *rv, enum table_include inc,
		    int with_columns)
{
	json_t *t = json_pack("{s:s, s:s, s:{s:s}}", "kind", "Table", "apiVersion", api_version,
			      "metadata", "resourceVersion", rv);
	if (with_columns) {
		json_t *defs = json_array();
		for (const struct col *c = cols_for(r); c->name; c++)
			json_array_append_new(
				defs, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", c->name, "type",
						c->type, "format", c->format, "description", c->desc,
						"priority", c->priority));
		json_object_set_new(t, "columnDefinitions", defs);
	}
	json_t *rows = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(rows, row(r, objs[i], inc));
	json_object_set_new(t, "rows", rows);
	return t;
}
