/* Admission for the kinds kubesim serves: the defaulting, PrepareForCreate/Update and
 * validation the real registry strategies apply (kube-api.md §1.2, §3.4, §4.4), plus the
 * Koordinator webhooks on Pod create (through colocation.h). Works on documents in place. */
#ifndef KUBESIM_ADMIT_H
#define KUBESIM_ADMIT_H

#include <jansson.h>

#include "tools/kubesim/kerr.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/res.h"

/* Defaults and validates a new object (metadata name, namespace, uid and timestamps already
 * set). Returns 0, or a negative error with e filled (422 Invalid, 400 ...). */
int admit_create(struct ks *ks, const struct res_def *r, json_t *obj, struct kerr *e);
/* Validates an update of old into obj (obj already carries the preserved metadata and, for a
 * main-resource write, the old status). status_sub: the write came through /status. Returns 0
 * or a negative error with e filled. */
int admit_update(struct ks *ks, const struct res_def *r, const json_t *old, json_t *obj,
		 int status_sub, struct kerr *e);
/* Fills pod-spec defaults (dnsPolicy, schedulerName, grace period, container defaults,
 * requests from limits). Used for pods and Job templates. */
void admit_pod_spec_defaults(json_t *spec);
/* Kubernetes QoS class of a pod spec: "Guaranteed", "Burstable" or "BestEffort" (static). */
const char *admit_qos_class(const json_t *spec);

#endif
