/* The Job of a task (server/recon/jobspec.c): what Koordinator's scheduler and the kubelet
 * expect of it, and the Pod deadline it carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/recon/jobspec.h"
#include "tests/harness/t.h"

static const char *s_at(json_t *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok; tok = dot) {
		dot = strchr(tok, '|');
		if (dot)
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtol(tok, NULL, 10))
				     : json_object_get(o, tok);
	}
	return json_is_string(o) ? json_string_value(o) : NULL;
}

TEST(jobspec_lab_task_as_koordinator_expects)
{
	struct jobspec_in in = { "t-abc", "alpha", 1024, 25, 1, 60, "LS", "normal",
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600 };
	json_t *job = jobspec_build(&in);
	CHECK_STR(s_at(job, "metadata|name"), "gwb-t-abc");
	CHECK_STR(s_at(job, "metadata|labels|gwb.io/task"), "t-abc");
	CHECK_STR(s_at(job, "metadata|labels|gwb.io/managed"), "true");
	json_t *spec = json_object_get(job, "spec");
	CHECK_INT(json_integer_value(json_object_get(spec, "backoffLimit")), 0);
	CHECK(json_is_false(json_object_get(spec, "suspend")));
	json_t *codes = json_object_get(json_object_get(json_array_get(json_object_get(
		json_object_get(spec, "podFailurePolicy"), "rules"), 0), "onExitCodes"), "values");
	CHECK_INT(json_integer_value(json_array_get(codes, 0)), 42);
	CHECK_STR(s_at(spec, "podFailurePolicy|rules|0|action"), "FailJob");
	CHECK_INT(json_integer_value(json_object_get(spec, "ttlSecondsAfterFinished")), 3600);
	CHECK_STR(s_at(spec, "template|spec|schedulerName"), "koord-scheduler");
	CHECK_STR(s_at(spec, "template|metadata|labels|koordinator.sh/qosClass"), "LS");
	CHECK_STR(s_at(spec, "template|metadata|labels|koordinator.sh/gpu-isolation-provider"),
		  "HAMi-core");
	const char *res = "template|spec|containers|0|resources|limits|";
	char k[200];
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-memory", res);
	CHECK_STR(s_at(spec, k), "1Gi");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-core", res);
	CHECK_STR(s_at(spec, k), "25");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu.shared", res);
	CHECK_STR(s_at(spec, k), "1");
	CHECK_STR(s_at(spec, "template|spec|volumes|0|downwardAPI|items|0|fieldRef|fieldPath"),
		  "metadata.annotations");
	CHECK(json_object_get(json_object_get(json_object_get(spec, "template"), "spec"),
			      "priorityClassName") == NULL);
	CHECK(jobspec_is_ours(job, "t-abc"));
	CHECK(!jobspec_is_ours(job, "t-abd"));
	json_decref(job);
	/* BE, two cards, the cancel marker. */
	struct jobspec_in be = { "t-be", "alpha", 4096, 50, 2, 60, "BE", "overlimit",
				 "gpu-workbench", "img", "", 1, 0 };
	job = jobspec_build(&be);
	spec = json_object_get(job, "spec");
	CHECK(json_is_true(json_object_get(spec, "suspend")));
	CHECK(json_object_get(spec, "ttlSecondsAfterFinished") == NULL);
	CHECK_STR(s_at(spec, "template|spec|priorityClassName"), "koord-batch");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-memory", res);
	CHECK_STR(s_at(spec, k), "8Gi");
	snprintf(k, sizeof k, "%skoordinator.sh/gpu-core", res);
	CHECK_STR(s_at(spec, k), "100");
	CHECK(s_at(spec, "template|metadata|labels|koordinator.sh/gpu-isolation-provider") == NULL);
	CHECK_STR(s_at(spec, "template|spec|containers|0|env|0|value"), "overlimit");
	json_decref(job);
}

TEST(jobspec_pod_deadline_is_duration_plus_margin)
{
	struct jobspec_in in = { "t-abc", "alpha", 1024, 25, 1, 60, "LS", "normal",
				 "gpu-workbench", "gwb-worker:local", "HAMi-core", 0, 3600 };
	json_t *job = jobspec_build(&in);
	json_t *pod = json_object_get(json_object_get(json_object_get(job, "spec"), "template"),
				      "spec");
	CHECK_INT(json_integer_value(json_object_get(pod, "activeDeadlineSeconds")),
		  60 + JOBSPEC_DEADLINE_MARGIN_DEFAULT_S);
	/* On the Pod, not the Job: the kubelet enforces it without the control plane. */
	CHECK(json_object_get(json_object_get(job, "spec"), "activeDeadlineSeconds") == NULL);
	json_decref(job);
	jobspec_set_deadline_margin(15);
	CHECK_INT(jobspec_pod_deadline_s(60), 75);
	CHECK_INT(jobspec_pod_deadline_s(0), 15);
	jobspec_set_deadline_margin(JOBSPEC_DEADLINE_MARGIN_DEFAULT_S);
}
