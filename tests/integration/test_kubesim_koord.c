/* Koordinator pieces beyond DeviceShare: the ClusterColocationProfile mutation of BE pods,
 * NodeMetric from real /proc figures, NodeSLO, and one run of the real gwb-worker. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/quantity.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define PODS "/api/v1/namespaces/gpu-workbench/pods"
#define JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"

static const char *s(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? v : "";
}

TEST_T(colocation_be_pod, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	json_decref(h_kube_create(
		&k, "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles",
		"{\"metadata\":{\"name\":\"gpu-workbench-be\"},\"spec\":{\"namespaceSelector\":"
		"{\"matchLabels\":{\"kubernetes.io/metadata.name\":\"gpu-workbench\"}},\"selector\":"
		"{\"matchLabels\":{\"koordinator.sh/qosClass\":\"BE\"}},\"qosClass\":\"BE\","
		"\"priorityClassName\":\"koord-batch\",\"koordinatorPriority\":1000,"
		"\"schedulerName\":\"koord-scheduler\"}}"));
	json_t *spec = h_kubesim_pod_spec(1024, 10, NULL);
	json_t *c = json_array_get(json_object_get(spec, "containers"), 0);
	json_t *res = json_object_get(c, "resources");
	json_object_set_new(json_object_get(res, "limits"), "cpu", json_string("1"));
	json_object_set_new(json_object_get(res, "limits"), "memory", json_string("2Gi"));
	json_object_set_new(json_object_get(res, "requests"), "cpu", json_string("500m"));
	json_object_set_new(json_object_get(res, "requests"), "memory", json_string("2Gi"));
	json_object_set_new(spec, "schedulerName", json_string("default-scheduler"));
	json_t *pod = json_pack("{s:{s:s, s:{s:s}}, s:o}", "metadata", "name", "be",
				"labels", "koordinator.sh/qosClass", "BE", "spec", spec);
	char *body = json_dumps(pod, JSON_COMPACT);
	json_decref(pod);
	json_t *got = h_kube_create(&k, PODS, body);
	gwb_free(body);
	json_t *ps = json_object_get(got, "spec");
	CHECK_STR(s(ps, "priorityClassName"), "koord-batch");
	CHECK_INT(json_integer_value(json_object_get(ps, "priority")), 5000);
	CHECK_STR(s(ps, "schedulerName"), "koord-scheduler");
	json_t *labels = json_object_get(json_object_get(got, "metadata"), "labels");
	CHECK_STR(s(labels, "koordinator.sh/priority"), "1000");
	res = json_object_get(json_array_get(json_object_get(ps, "containers"), 0), "resources");
	json_t *req = json_object_get(res, "requests"), *lim = json_object_get(res, "limits");
	CHECK_STR(s(req, "kubernetes.io/batch-cpu"), "500");
	CHECK_STR(s(lim, "kubernetes.io/batch-cpu"), "1k");
	CHECK_STR(s(req, "kubernetes.io/batch-memory"), "2Gi");
	CHECK(json_object_get(req, "cpu") == NULL && json_object_get(lim, "memory") == NULL);
	CHECKF(strstr(s(json_object_get(json_object_get(got, "metadata"), "annotations"),
			"node.koordinator.sh/extended-resource-spec"),
		      "\"kubernetes.io/batch-cpu\":\"1k\""),
	       "no extended-resource-spec");
	/* GPU requests untouched by the profile (gpu.shared kept). */
	CHECK_STR(s(req, "koordinator.sh/gpu.shared"), "1");
	CHECK_STR(s(json_object_get(got, "status"), "qosClass"), "BestEffort");
	json_decref(got);
	json_decref(h_kube_wait(&k, PODS "/be", h_pred_bound, NULL, 3000, "BE pod bound"));

	/* Validation: batch resources without QoS BE are refused. */
	json_t *st = NULL;
	CHECK_INT(h_kube(&k, "POST", PODS,
			 "{\"metadata\":{\"name\":\"cheat\"},\"spec\":{\"containers\":[{\"name\":"
			 "\"w\",\"image\":\"x\",\"resources\":{\"limits\":{\"kubernetes.io/"
			 "batch-cpu\":\"1k\"}}}]}}",
			 NULL, &st),
		  400);
	CHECKF(strstr(s(st, "message"), "must specify koordinator QoS BE"), "%s", s(st, "message"));
	json_decref(st);
}

TEST_T(nodemetric_and_nodeslo, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--metric-ms";
	k.args[1] = "200";
	h_kubesim_start(&k);
	h_sleep_ms(500);
	json_t *nm = h_kube_get(&k, "/apis/slo.koordinator.sh/v1alpha1/nodemetrics/colima-gwb");
	json_t *status = json_object_get(nm, "status");
	CHECK(s(status, "updateTime")[0]);
	json_t *usage = json_object_get(
		json_object_get(json_object_get(json_object_get(status, "nodeMetric"), "nodeUsage"),
				"resources"),
		"memory");
	int64_t mem = 0;
	CHECKF(json_is_string(usage) && quantity_parse(json_string_value(usage), &mem) == 0 &&
		       mem > (1 << 20),
	       "node memory usage %s", json_string_value(usage) ? json_string_value(usage) : "-");
	json_decref(nm);
	json_t *slo = h_kube_get(&k, "/apis/slo.koordinator.sh/v1alpha1/nodeslos/colima-gwb");
	CHECK(json_object_get(json_object_get(slo, "spec"), "resourceUsedThresholdWithBE") != NULL);
	json_decref(slo);
}

TEST_T(real_worker_overlimit_exit42, 40)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	snprintf(k.worker, sizeof k.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(k.worker);
	h_kubesim_start(&k);
	const char *ok[] = { "GWB_DURATION_SECONDS=1", "GWB_EXPERIMENT=normal", NULL };
	char *job = h_kubesim_gpu_job("normal", 1024, 25, ok, 0, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	const char *over[] = { "GWB_DURATION_SECONDS=1", "GWB_EXPERIMENT=overlimit", NULL };
	job = h_kubesim_gpu_job(
		"over", 1024, 25, over, 3,
		"{\"podFailurePolicy\":{\"rules\":[{\"action\":\"FailJob\",\"onExitCodes\":"
		"{\"operator\":\"In\",\"values\":[42]}}]}}");
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	json_decref(h_kube_wait(&k, JOBS "/normal", h_pred_condition, "Complete", 10000,
				"the real worker completing"));
	json_t *j = h_kube_wait(&k, JOBS "/over", h_pred_condition, "Failed", 10000,
				"the real worker failing with 42");
	json_t *conds = json_object_get(json_object_get(j, "status"), "conditions");
	int found = 0;
	size_t i;
	json_t *c;
	json_array_foreach(conds, i, c)
	{
		if (!strcmp(s(c, "type"), "Failed") && !strcmp(s(c, "reason"), "PodFailurePolicy") &&
		    strstr(s(c, "message"), "exit code 42"))
			found = 1;
	}
	CHECK(found);
	json_decref(j);
}
