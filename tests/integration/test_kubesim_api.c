/* kubesim's REST surface against the wire facts of kube-api.md: discovery, Status errors,
 * Job defaulting, the three PATCH types, preconditions, selectors and DELETE propagation. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

static json_t *path_get(const json_t *o, const char *a, const char *b)
{
	return json_object_get(json_object_get(o, a), b);
}

TEST_T(api_discovery, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	json_t *v = h_kube_get(&k, "/version");
	CHECK_STR(str(v, "major"), "1");
	CHECK_STR(str(v, "minor"), "32");
	json_decref(v);
	json_t *api = h_kube_get(&k, "/api");
	CHECK_STR(str(api, "kind"), "APIVersions");
	CHECK_STR(json_string_value(json_array_get(json_object_get(api, "versions"), 0)), "v1");
	json_decref(api);
	json_t *apis = h_kube_get(&k, "/apis");
	int batch = 0, dev = 0, slo = 0;
	size_t i;
	json_t *g;
	json_array_foreach(json_object_get(apis, "groups"), i, g)
	{
		batch |= !strcmp(str(g, "name"), "batch");
		dev |= !strcmp(str(g, "name"), "scheduling.koordinator.sh");
		slo |= !strcmp(str(g, "name"), "slo.koordinator.sh");
	}
	CHECK(batch && dev && slo);
	json_decref(apis);
	json_t *gv = h_kube_get(&k, "/apis/scheduling.koordinator.sh/v1alpha1");
	json_t *r = json_array_get(json_object_get(gv, "resources"), 0);
	CHECK_STR(str(r, "name"), "devices");
	CHECK(json_is_false(json_object_get(r, "namespaced")));
	json_decref(gv);
	json_t *core = h_kube_get(&k, "/api/v1");
	int pods = 0, log = 0;
	json_array_foreach(json_object_get(core, "resources"), i, r)
	{
		if (!strcmp(str(r, "name"), "pods")) {
			pods = json_is_true(json_object_get(r, "namespaced"));
			CHECK_STR(json_string_value(json_array_get(json_object_get(r, "shortNames"), 0)),
				  "po");
		}
		log |= !strcmp(str(r, "name"), "pods/log");
	}
	CHECK(pods && log);
	json_decref(core);
	json_t *oa = h_kube_get(&k, "/openapi/v3");
	CHECK(path_get(oa, "paths", "apis/batch/v1") != NULL);
	json_decref(oa);
	json_t *st = NULL;
	CHECK_INT(h_kube(&k, "GET", "/api/v1/nosuch", NULL, NULL, &st), 404);
	CHECK_STR(str(st, "kind"), "Status");
	CHECK_STR(str(st, "reason"), "NotFound");
	CHECK_STR(str(st, "message"), "the server could not find the requested resource");
	json_decref(st);
}

TEST_T(api_status_errors, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	json_t *st = NULL;
	CHECK_INT(h_kube(&k, "GET", JOBS "/nope", NULL, NULL, &st), 404);
	CHECK_STR(str(st, "message"), "jobs.batch \"nope\" not found");
	CHECK_STR(str(json_object_get(st, "details"), "kind"), "jobs");
	CHECK_STR(str(json_object_get(st, "details"), "group"), "batch");
	CHECK_INT(json_integer_value(json_object_get(st, "code")), 404);
	json_decref(st);

	const char *env[] = { "SLEEP=0", NULL };
	char *job = h_kubesim_gpu_job("j1", 1024, 10, env, 0, "{\"suspend\":true}");
	json_decref(h_kube_create(&k, JOBS, job));
	CHECK_INT(h_kube(&k, "POST", JOBS, job, NULL, &st), 409);
	CHECK_STR(str(st, "reason"), "AlreadyExists");
	CHECK_STR(str(st, "message"), "jobs.batch \"j1\" already exists");
	json_decref(st);
	gwb_free(job);

	/* restartPolicy Always is not allowed for Jobs: 422 with the field in the causes. */
	char *bad = h_kubesim_gpu_job("j2", 1024, 10, env, 0,
				      "{\"template\":{\"spec\":{\"restartPolicy\":\"Always\","
				      "\"containers\":[{\"name\":\"w\",\"image\":\"x\"}]}}}");
	CHECK_INT(h_kube(&k, "POST", JOBS, bad, NULL, &st), 422);
	CHECK_STR(str(st, "reason"), "Invalid");
	CHECK_STR(str(json_object_get(st, "details"), "kind"), "Job");
	json_t *cause = json_array_get(path_get(st, "details", "causes"), 0);
	CHECK_STR(str(cause, "field"), "spec.template.spec.restartPolicy");
	CHECKF(strstr(str(st, "message"), "Job.batch \"j2\" is invalid:"), "%s", str(st, "message"));
	json_decref(st);
	gwb_free(bad);

	CHECK_INT(h_kube(&k, "POST", "/apis/batch/v1/namespaces/nope/jobs",
			 "{\"metadata\":{\"name\":\"x\"}}", NULL, &st),
		  404);
	CHECK_STR(str(st, "message"), "namespaces \"nope\" not found");
	json_decref(st);

	CHECK_INT(h_kube(&k, "GET", JOBS "?labelSelector=a%20in%20(b", NULL, NULL, &st), 400);
	json_decref(st);
	CHECK_INT(h_kube(&k, "GET", JOBS "?fieldSelector=spec.foo%3Dx", NULL, NULL, &st), 400);
	CHECK_STR(str(st, "message"), "field label not supported: spec.foo");
	json_decref(st);

	/* Strategic merge patch is refused for custom resources. */
	CHECK_INT(h_kube(&k, "PATCH", "/apis/scheduling.koordinator.sh/v1alpha1/devices/colima-gwb",
			 "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
			 "application/strategic-merge-patch+json", &st),
		  415);
	CHECK_STR(str(st, "reason"), "UnsupportedMediaType");
	json_decref(st);

	/* A stale resourceVersion on PUT: 409 Conflict. */
	json_t *cur = h_kube_get(&k, JOBS "/j1");
	json_object_set_new(json_object_get(cur, "metadata"), "resourceVersion", json_string("1"));
	char *body = json_dumps(cur, JSON_COMPACT);
	CHECK_INT(h_kube(&k, "PUT", JOBS "/j1", body, NULL, &st), 409);
	CHECK_STR(str(st, "reason"), "Conflict");
	json_decref(st);
	gwb_free(body);
	json_decref(cur);
}

TEST_T(api_job_defaults_and_patches, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=0", NULL };
	char *job = h_kubesim_gpu_job("jp", 1024, 10, env, 2, "{\"suspend\":true}");
	json_t *j = h_kube_create(&k, JOBS, job);
	gwb_free(job);
	const char *uid = str(json_object_get(j, "metadata"), "uid");
	CHECK(strlen(uid) == 36);
	CHECK(str(json_object_get(j, "metadata"), "resourceVersion")[0]);
	CHECK_INT(json_integer_value(path_get(j, "metadata", "generation")), 1);
	json_t *sel = json_object_get(path_get(j, "spec", "selector"), "matchLabels");
	CHECK_STR(str(sel, "batch.kubernetes.io/controller-uid"), uid);
	json_t *tl = json_object_get(json_object_get(path_get(j, "spec", "template"), "metadata"),
				     "labels");
	CHECK_STR(str(tl, "batch.kubernetes.io/job-name"), "jp");
	CHECK_STR(str(tl, "job-name"), "jp");
	CHECK_STR(str(tl, "controller-uid"), uid);
	CHECK_INT(json_integer_value(path_get(j, "spec", "completions")), 1);
	CHECK_INT(json_integer_value(path_get(j, "spec", "parallelism")), 1);
	CHECK_STR(str(json_object_get(j, "spec"), "completionMode"), "NonIndexed");
	json_decref(j);
	j = h_kube_wait(&k, JOBS "/jp", h_pred_condition, "Suspended", 3000, "Suspended=True");
	json_decref(j);

	/* merge patch on metadata: generation unchanged; on spec: +1. */
	json_t *out = NULL;
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp", "{\"metadata\":{\"labels\":{\"team\":\"a\"}}}",
			 "application/merge-patch+json", &out),
		  200);
	CHECK_INT(json_integer_value(path_get(out, "metadata", "generation")), 1);
	json_decref(out);
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp", "{\"spec\":{\"backoffLimit\":3}}",
			 "application/merge-patch+json", &out),
		  200);
	CHECK_INT(json_integer_value(path_get(out, "metadata", "generation")), 2);
	json_decref(out);

	/* strategic merge patch: a container env change is refused (template immutable), a
	 * template annotation while suspended and never started is allowed. */
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp",
			 "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"worker\","
			 "\"env\":[{\"name\":\"X\",\"value\":\"1\"}]}]}}}}",
			 "application/strategic-merge-patch+json", &out),
		  422);
	CHECKF(strstr(str(out, "message"), "field is immutable"), "%s", str(out, "message"));
	json_decref(out);
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp",
			 "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"x\":\"y\"}}}}}",
			 "application/strategic-merge-patch+json", &out),
		  200);
	json_t *ctrs = json_object_get(json_object_get(path_get(out, "spec", "template"), "spec"),
				       "containers");
	CHECK_INT(json_array_size(ctrs), 1);
	json_decref(out);

	/* JSON patch: a failing test op is 422; add works. */
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp",
			 "[{\"op\":\"test\",\"path\":\"/metadata/name\",\"value\":\"other\"}]",
			 "application/json-patch+json", &out),
		  422);
	json_decref(out);
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp",
			 "[{\"op\":\"add\",\"path\":\"/metadata/labels/tier\",\"value\":\"x\"}]",
			 "application/json-patch+json", &out),
		  200);
	CHECK_STR(str(path_get(out, "metadata", "labels"), "tier"), "x");
	json_decref(out);
	CHECK_INT(h_kube(&k, "PATCH", JOBS "/jp", "{}", "text/plain", &out), 415);
	json_decref(out);

	/* Selectors, including Go-style booleans in the query. */
	json_t *l = h_kube_get(&k, JOBS "?labelSelector=team%3Da,tier%20in%20(x,y)&limit=500");
	CHECK_STR(str(l, "kind"), "JobList");
	CHECK_INT(json_array_size(json_object_get(l, "items")), 1);
	CHECK(json_object_get(json_array_get(json_object_get(l, "items"), 0), "kind") == NULL);
	json_decref(l);
	l = h_kube_get(&k, JOBS "?labelSelector=team!%3Da");
	CHECK_INT(json_array_size(json_object_get(l, "items")), 0);
	json_decref(l);
	l = h_kube_get(&k, "/apis/batch/v1/jobs?fieldSelector=metadata.name%3Djp,metadata.namespace%3Dgpu-workbench");
	CHECK_INT(json_array_size(json_object_get(l, "items")), 1);
	json_decref(l);
	CHECK_INT(h_kube(&k, "GET", JOBS "?watch=maybe", NULL, NULL, &out), 400);
	json_decref(out);

	/* DELETE without propagationPolicy: batch/v1 orphans by default and warns. */
	char url[512];
	snprintf(url, sizeof url, "%s%s/jp", k.url, JOBS);
	struct h_resp r;
	h_http(&r, "DELETE", url, NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	const char *warn = h_header(&r, "Warning");
	CHECKF(warn && strstr(warn, "child pods are preserved by default"), "Warning: %s",
	       warn ? warn : "(none)");
	h_resp_free(&r);
	json_decref(h_kube_wait(&k, JOBS "/jp", h_pred_gone, NULL, 3000, "job gone"));
	CHECK_INT(h_kube(&k, "DELETE", JOBS "/jp", NULL, NULL, &out), 404);
	json_decref(out);
}
