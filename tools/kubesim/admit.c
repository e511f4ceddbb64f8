/* Registry strategies, simplified to what clients of this project can observe. */
#include "tools/kubesim/admit.h"

#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "lib/quantity.h"
#include "tools/kubesim/colocation.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/store.h"

static void set_default(json_t *o, const char *key, json_t *v)
{
	if (!json_object_get(o, key))
		json_object_set_new(o, key, v);
	else
		json_decref(v);
}

static void container_defaults(json_t *c)
{
	const char *image = obj_str(c, "image");
	int latest = !image || !strchr(image, ':') ||
		     (strrchr(image, ':') && !strcmp(strrchr(image, ':'), ":latest"));
	if (image && strchr(image, '@'))
		latest = 0;
	set_default(c, "imagePullPolicy", json_string(latest ? "Always" : "IfNotPresent"));
	set_default(c, "terminationMessagePath", json_string("/dev/termination-log"));
	set_default(c, "terminationMessagePolicy", json_string("File"));
	json_t *res = obj_child(c, "resources");
	/* Requests default to limits for every resource that has only a limit. */
	json_t *lim = json_object_get(res, "limits");
	if (json_is_object(lim) && json_object_size(lim)) {
		json_t *req = obj_child(res, "requests");
		const char *k;
		json_t *v;
		json_object_foreach(lim, k, v) set_default(req, k, json_incref(v));
	}
}

void admit_pod_spec_defaults(json_t *spec)
{
	set_default(spec, "restartPolicy", json_string("Always"));
	set_default(spec, "dnsPolicy", json_string("ClusterFirst"));
	set_default(spec, "schedulerName", json_string("default-scheduler"));
	set_default(spec, "terminationGracePeriodSeconds", json_integer(30));
	set_default(spec, "securityContext", json_object());
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(spec, "containers"), i, c) container_defaults(c);
	json_array_foreach(json_object_get(spec, "initContainers"), i, c) container_defaults(c);
}

const char *admit_qos_class(const json_t *spec)
{
	int any = 0, guaranteed = 1;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(spec, "containers"), i, c)
	{
		json_t *req = obj_path(c, "resources.requests");
		json_t *lim = obj_path(c, "resources.limits");
		const char *names[] = { "cpu", "memory" };
		for (int k = 0; k < 2; k++) {
			json_t *rq = json_object_get(req, names[k]);
			json_t *lm = json_object_get(lim, names[k]);
			if (rq || lm)
				any = 1;
			int64_t a = 0, b = 0;
			if (!lm || !rq || !json_is_string(rq) || !json_is_string(lm) ||
			    quantity_parse(json_string_value(rq), &a) < 0 ||
			    quantity_parse(json_string_value(lm), &b) < 0 || a != b)
				guaranteed = 0;
		}
	}
	if (!any)
		return "BestEffort";
	return guaranteed ? "Guaranteed" : "Burstable";
}

/* Validation shared by pods and Job templates. prefix is "spec" or "spec.template.spec". */
static int validate_pod_spec(const struct res_def *r, const char *name, const json_t *spec,
			     const char *prefix, struct kerr *e)
{
	char field[160];
	json_t *ctrs = json_object_get(spec, "containers");
	if (!json_is_array(ctrs) || json_array_size(ctrs) == 0) {
		snprintf(field, sizeof field, "%s.containers", prefix);
		kerr_invalid(e, r, name, field, "FieldValueRequired", "Required value");
		return GWB_EINVAL;
	}
	size_t i;
	json_t *c;
	json_array_foreach(ctrs, i, c)
	{
		const char *cn = obj_str(c, "name");
		if (!cn || !obj_dns_label(cn)) {
			snprintf(field, sizeof field, "%s.containers[%zu].name", prefix, i);
			kerr_invalid(e, r, name, field, cn ? "FieldValueInvalid" : "FieldValueRequired",
				     cn ? "Invalid value: a lowercase RFC 1123 label must consist of "
					  "lower case alphanumeric characters or '-'"
					: "Required value");
			return GWB_EINVAL;
		}
		for (size_t j = 0; j < i; j++) {
			const char *other = obj_str(json_array_get(ctrs, j), "name");
			if (other && !strcmp(other, cn)) {
				snprintf(field, sizeof field, "%s.containers[%zu].name", prefix, i);
				char text[160];
				snprintf(text, sizeof text, "Duplicate value: \"%s\"", cn);
				kerr_invalid(e, r, name, field, "FieldValueDuplicate", text);
				return GWB_EINVAL;
			}
		}
		if (!obj_str(c, "image")) {
			snprintf(field, sizeof field, "%s.containers[%zu].image", prefix, i);
			kerr_invalid(e, r, name, field, "FieldValueRequired", "Required value");
			return GWB_EINVAL;
		}
	}
	const char *rp = obj_str(spec, "restartPolicy");
	if (rp && strcmp(rp, "Always") && strcmp(rp, "OnFailure") && strcmp(rp, "Never")) {
		snprintf(field, sizeof field, "%s.restartPolicy", prefix);
		char text[200];
		snprintf(text, sizeof text,
			 "Unsupported value: \"%s\": supported values: \"Always\", \"OnFailure\", "
			 "\"Never\"",
			 rp);
		kerr_invalid(e, r, name, field, "FieldValueNotSupported", text);
		return GWB_EINVAL;
	}
	return 0;
}

/* ---- Jobs ---- */

static int job_create(struct ks *ks, const struct res_def *r, json_t *job, struct kerr *e)
{
	(void)ks;
	const char *name = obj_name(job);
	const char *uid = obj_uid(job);
	json_t *spec = obj_child(job, "spec");
	json_t *tmpl = obj_child(spec, "template");
	json_t *tmeta = obj_child(tmpl, "metadata");
	json_t *tspec = obj_child(tmpl, "spec");
	json_t *tlabels = obj_child(tmeta, "labels");
	if (!obj_true(spec, "manualSelector")) {
		json_object_set_new(spec, "selector",
				    json_pack("{s:{s:s}}", "matchLabels",
					      "batch.kubernetes.io/controller-uid", uid));
		json_object_set_new(tlabels, "batch.kubernetes.io/controller-uid", json_string(uid));
		json_object_set_new(tlabels, "batch.kubernetes.io/job-name", json_string(name));
		json_object_set_new(tlabels, "controller-uid", json_string(uid));
		json_object_set_new(tlabels, "job-name", json_string(name));
	}
	json_t *labels = obj_path(job, "metadata.labels");
	if (!json_is_object(labels) || json_object_size(labels) == 0)
		obj_set(job, "metadata.labels", json_deep_copy(tlabels));
	if (!json_object_get(spec, "parallelism") && !json_object_get(spec, "completions")) {
		json_object_set_new(spec, "parallelism", json_integer(1));
		json_object_set_new(spec, "completions", json_integer(1));
	}
	set_default(spec, "parallelism", json_integer(1));
	set_default(spec, "backoffLimit", json_integer(6));
	set_default(spec, "completionMode", json_string("NonIndexed"));
	set_default(spec, "suspend", json_false());
	int pfp = json_is_object(json_object_get(spec, "podFailurePolicy"));
	set_default(spec, "podReplacementPolicy",
		    json_string(pfp ? "Failed" : "TerminatingOrFailed"));
	admit_pod_spec_defaults(tspec);
	json_object_set_new(job, "status", json_object());

	if (validate_pod_spec(r, name, tspec, "spec.template.spec", e) < 0)
		return GWB_EINVAL;
	const char *rp = obj_str(tspec, "restartPolicy");
	if (!rp || (strcmp(rp, "Never") && strcmp(rp, "OnFailure"))) {
		char text[160];
		snprintf(text, sizeof text,
			 "Unsupported value: \"%s\": supported values: \"OnFailure\", \"Never\"",
			 rp ? rp : "");
		kerr_invalid(e, r, name, "spec.template.spec.restartPolicy",
			     "FieldValueNotSupported", text);
		return GWB_EINVAL;
	}
	if (pfp && strcmp(rp, "Never") != 0) {
		kerr_invalid(e, r, name, "spec.template.spec.restartPolicy",
			     "FieldValueInvalid",
			     "Invalid value: \"OnFailure\": only \"Never\" is supported when "
			     "podFailurePolicy is specified");
		return GWB_EINVAL;
	}
	json_t *rules = obj_path(spec, "podFailurePolicy.rules");
	if (json_array_size(rules) > 20) {
		kerr_invalid(e, r, name, "spec.podFailurePolicy.rules", "FieldValueTooMany",
			     "Too many: must have at most 20 items");
		return GWB_EINVAL;
	}
	int64_t bl = obj_int(spec, "backoffLimit", 6);
	if (bl < 0) {
		kerr_invalid(e, r, name, "spec.backoffLimit", "FieldValueInvalid",
			     "Invalid value: must be greater than or equal to 0");
		return GWB_EINVAL;
	}
	if (strlen(name) > 63) {
		kerr_invalid(e, r, name, "metadata.name", "FieldValueInvalid",
			     "Invalid value: must be no more than 63 characters");
		return GWB_EINVAL;
	}
	return 0;
}

static json_t *strip_sched_directives(const json_t *tmpl)
{
	json_t *t = json_deep_copy(tmpl);
	json_t *m = json_object_get(t, "metadata");
	json_object_del(m, "labels");
	json_object_del(m, "annotations");
	json_t *s = json_object_get(t, "spec");
	json_object_del(s, "nodeSelector");
	json_object_del(s, "affinity");
	json_object_del(s, "tolerations");
	json_object_del(s, "schedulingGates");
	return t;
}

static int job_update(const struct res_def *r, const json_t *old, json_t *job, struct kerr *e)
{
	const char *name = obj_name(job);
	json_t *ot = obj_path(old, "spec.template"), *nt = obj_path(job, "spec.template");
	if (!json_equal(ot, nt)) {
		int mutable_sched = obj_true(old, "spec.suspend") &&
				    !obj_str(old, "status.startTime");
		json_t *a = strip_sched_directives(ot), *b = strip_sched_directives(nt);
		int same = json_equal(a, b);
		json_decref(a);
		json_decref(b);
		if (!mutable_sched || !same) {
			kerr_invalid(e, r, name, "spec.template", "FieldValueInvalid",
				     "Invalid value: field is immutable");
			return GWB_EINVAL;
		}
	}
	if (!json_equal(obj_path(old, "spec.selector"), obj_path(job, "spec.selector"))) {
		kerr_invalid(e, r, name, "spec.selector", "FieldValueInvalid",
			     "Invalid value: field is immutable");
		return GWB_EINVAL;
	}
	if (!json_equal(obj_path(old, "spec.completions"), obj_path(job, "spec.completions"))) {
		kerr_invalid(e, r, name, "spec.completions", "FieldValueInvalid",
			     "Invalid value: field is immutable");
		return GWB_EINVAL;
	}
	return 0;
}

/* ---- Pods ---- */

static int pod_create(struct ks *ks, const struct res_def *r, json_t *pod, struct kerr *e)
{
	json_t *spec = obj_child(pod, "spec");
	admit_pod_spec_defaults(spec);
	set_default(spec, "serviceAccountName", json_string("default"));
	set_default(spec, "serviceAccount", json_string("default"));
	set_default(spec, "enableServiceLinks", json_true());
	set_default(spec, "preemptionPolicy", json_string("PreemptLowerPriority"));
	set_default(spec, "priority", json_integer(0));
	if (!json_object_get(spec, "tolerations")) {
		json_t *t = json_array();
		const char *keys[] = { "node.kubernetes.io/not-ready",
				       "node.kubernetes.io/unreachable" };
		for (int i = 0; i < 2; i++)
			json_array_append_new(
				t, json_pack("{s:s, s:s, s:s, s:i}", "key", keys[i], "operator",
					     "Exists", "effect", "NoExecute", "tolerationSeconds",
					     300));
		json_object_set_new(spec, "tolerations", t);
	}
	/* The Koordinator webhooks run on CREATE, before validation. */
	if (colocation_admit_pod(ks, pod, e) < 0)
		return GWB_EINVAL;
	if (validate_pod_spec(r, obj_name(pod), spec, "spec", e) < 0)
		return GWB_EINVAL;
	json_t *st = json_object();
	json_object_set_new(st, "phase", json_string("Pending"));
	json_object_set_new(st, "qosClass", json_string(admit_qos_class(spec)));
	json_object_set_new(pod, "status", st);
	return 0;
}

static json_t *pod_spec_mutable_stripped(const json_t *spec)
{
	json_t *s = json_deep_copy(spec);
	const char *lists[] = { "containers", "initContainers" };
	for (int k = 0; k < 2; k++) {
		size_t i;
		json_t *c;
		json_array_foreach(json_object_get(s, lists[k]), i, c) json_object_del(c, "image");
	}
	json_object_del(s, "activeDeadlineSeconds");
	json_object_del(s, "tolerations");
	json_object_del(s, "schedulingGates");
	json_object_del(s, "terminationGracePeriodSeconds");
	return s;
}

static int pod_update(const struct res_def *r, const json_t *old, json_t *pod, struct kerr *e)
{
	const char *oldnode = obj_str(old, "spec.nodeName");
	const char *newnode = obj_str(pod, "spec.nodeName");
	json_t *a = pod_spec_mutable_stripped(obj_path(old, "spec"));
	json_t *b = pod_spec_mutable_stripped(obj_path(pod, "spec"));
	/* nodeName is set through binding; an update may only keep it. */
	if (!oldnode && newnode)
		json_object_del(b, "nodeName");
	int same = json_equal(a, b);
	json_decref(a);
	json_decref(b);
	if (!same) {
		kerr_invalid(e, r, obj_name(pod), "spec", "FieldValueForbidden",
			     "Forbidden: pod updates may not change fields other than "
			     "`spec.containers[*].image`,`spec.initContainers[*].image`,"
			     "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to "
			     "existing tolerations),`spec.terminationGracePeriodSeconds` (allow it "
			     "to be set to 1 if it was previously negative)");
		return GWB_EINVAL;
	}
	return 0;
}

/* ---- others ---- */

static int ns_create(const struct res_def *r, json_t *ns, struct kerr *e)
{
	const char *name = obj_name(ns);
	if (!obj_dns_label(name)) {
		char text[300];
		snprintf(text, sizeof text,
			 "Invalid value: \"%s\": a lowercase RFC 1123 label must consist of lower "
			 "case alphanumeric characters or '-', and must start and end with an "
			 "alphanumeric character",
			 name);
		kerr_invalid(e, r, name, "metadata.name", "FieldValueInvalid", text);
		return GWB_EINVAL;
	}
	json_t *labels = obj_child(obj_child(ns, "metadata"), "labels");
	json_object_set_new(labels, "kubernetes.io/metadata.name", json_string(name));
	obj_set(ns, "spec.finalizers", json_pack("[s]", "kubernetes"));
	json_object_set_new(ns, "status", json_pack("{s:s}", "phase", "Active"));
	return 0;
}

static int event_create(json_t *ev)
{
	set_default(ev, "count", json_integer(1));
	set_default(ev, "type", json_string("Normal"));
	set_default(ev, "eventTime", json_null());
	set_default(ev, "reportingComponent", json_string(""));
	set_default(ev, "reportingInstance", json_string(""));
	return 0;
}

int admit_create(struct ks *ks, const struct res_def *r, json_t *obj, struct kerr *e)
{
	switch (r->id) {
	case RES_JOBS: return job_create(ks, r, obj, e);
	case RES_PODS: return pod_create(ks, r, obj, e);
	case RES_NAMESPACES: return ns_create(r, obj, e);
	case RES_EVENTS: return event_create(obj);
	case RES_PRIORITYCLASSES:
		if (!json_is_integer(json_object_get(obj, "value"))) {
			kerr_invalid(e, r, obj_name(obj), "value", "FieldValueRequired",
				     "Required value");
			return GWB_EINVAL;
		}
		set_default(obj, "preemptionPolicy", json_string("PreemptLowerPriority"));
		return 0;
	default: return 0;
	}
}

int admit_update(struct ks *ks, const struct res_def *r, const json_t *old, json_t *obj,
		 int status_sub, struct kerr *e)
{
	(void)ks;
	if (status_sub)
		return 0;
	switch (r->id) {
	case RES_JOBS: return job_update(r, old, obj, e);
	case RES_PODS: return pod_update(r, old, obj, e);
	default: return 0;
	}
}
