/* The Job controller (kube-api.md §3) and the garbage collector (§1.7). */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"
#define PODS "/api/v1/namespaces/gpu-workbench/pods"

static json_t *cond(const json_t *o, const char *type)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(json_object_get(o, "status"), "conditions"), i, c)
	{
		const char *t = json_string_value(json_object_get(c, "type"));
		if (t && !strcmp(t, type))
			return c;
	}
	return NULL;
}

static const char *cstr(const json_t *c, const char *k)
{
	const char *s = json_string_value(json_object_get(c, k));
	return s ? s : "";
}

static json_int_t status_int(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(json_object_get(o, "status"), k));
}

/* Pods of a Job (by the job-name label); returns the list (caller decrefs). */
static json_t *job_pods(struct h_kubesim *k, const char *job)
{
	char path[256];
	snprintf(path, sizeof path, PODS "?labelSelector=batch.kubernetes.io%%2Fjob-name%%3D%s", job);
	return h_kube_get(k, path);
}

static int pred_running_pod(const json_t *list, void *arg)
{
	(void)arg;
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(list, "items"), i, p)
	{
		const char *ph = json_string_value(json_object_get(json_object_get(p, "status"), "phase"));
		if (ph && !strcmp(ph, "Running") &&
		    !json_object_get(json_object_get(p, "metadata"), "deletionTimestamp"))
			return 1;
	}
	return 0;
}

static int pred_no_pods(const json_t *list, void *arg)
{
	(void)arg;
	return json_array_size(json_object_get(list, "items")) == 0;
}

TEST_T(job_suspend_deletes_pods, 40)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=30", NULL };
	char *job = h_kubesim_gpu_job("js", 1024, 10, env, 0, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	const char *sel = PODS "?labelSelector=batch.kubernetes.io%2Fjob-name%3Djs";
	json_t *pods = h_kube_wait(&k, sel, pred_running_pod, NULL, 3000, "a running pod");
	json_t *pod = json_array_get(json_object_get(pods, "items"), 0);
	const char *pname = json_string_value(json_object_get(json_object_get(pod, "metadata"), "name"));
	CHECKF(!strncmp(pname, "js-", 3) && strlen(pname) == 8, "pod name %s", pname);
	json_t *owner = json_array_get(
		json_object_get(json_object_get(pod, "metadata"), "ownerReferences"), 0);
	CHECK_STR(cstr(owner, "kind"), "Job");
	CHECK(json_is_true(json_object_get(owner, "controller")));
	json_decref(pods);

	CHECK_INT(h_kube(&k, "PATCH", JOBS "/js", "{\"spec\":{\"suspend\":true}}",
			 "application/merge-patch+json", NULL),
		  200);
	json_t *j = h_kube_wait(&k, JOBS "/js", h_pred_condition, "Suspended", 3000, "Suspended");
	CHECK_STR(cstr(cond(j, "Suspended"), "reason"), "JobSuspended");
	CHECK_STR(cstr(cond(j, "Suspended"), "message"), "Job suspended");
	CHECK(json_object_get(json_object_get(j, "status"), "active") == NULL);
	json_decref(j);
	json_decref(h_kube_wait(&k, sel, pred_no_pods, NULL, 5000, "the pods deleted"));
	j = h_kube_get(&k, JOBS "/js");
	CHECK_INT(status_int(j, "failed"), 0); /* suspension is not a failure */
	json_decref(j);

	CHECK_INT(h_kube(&k, "PATCH", JOBS "/js", "{\"spec\":{\"suspend\":false}}",
			 "application/merge-patch+json", NULL),
		  200);
	json_decref(h_kube_wait(&k, sel, pred_running_pod, NULL, 3000, "a new pod after resume"));
	j = h_kube_get(&k, JOBS "/js");
	CHECK_STR(cstr(cond(j, "Suspended"), "status"), "False");
	CHECK_STR(cstr(cond(j, "Suspended"), "reason"), "JobResumed");
	json_decref(j);
}

TEST_T(job_failjob_exit42, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "CODE=42", NULL };
	char *job = h_kubesim_gpu_job(
		"j42", 1024, 10, env, 6,
		"{\"podFailurePolicy\":{\"rules\":[{\"action\":\"FailJob\",\"onExitCodes\":"
		"{\"containerName\":\"worker\",\"operator\":\"In\",\"values\":[42]}}]}}");
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	json_t *j = h_kube_wait(&k, JOBS "/j42", h_pred_condition, "Failed", 5000, "Failed");
	json_t *f = cond(j, "Failed");
	CHECK_STR(cstr(f, "reason"), "PodFailurePolicy");
	CHECKF(strstr(cstr(f, "message"), "failed with exit code 42 matching FailJob rule at index 0"),
	       "%s", cstr(f, "message"));
	CHECK_STR(cstr(cond(j, "FailureTarget"), "reason"), "PodFailurePolicy");
	CHECK_INT(status_int(j, "failed"), 1);
	json_decref(j);
	json_t *pods = job_pods(&k, "j42");
	CHECK_INT(json_array_size(json_object_get(pods, "items")), 1); /* no retry */
	json_t *cs = json_array_get(json_object_get(json_object_get(
					    json_array_get(json_object_get(pods, "items"), 0), "status"),
					    "containerStatuses"),
				    0);
	json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
	CHECK_INT(json_integer_value(json_object_get(term, "exitCode")), 42);
	CHECK_STR(cstr(term, "reason"), "Error");
	json_decref(pods);
}

TEST_T(job_backoff_limit, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--job-backoff-ms";
	k.args[1] = "50";
	h_kubesim_start(&k);
	const char *env[] = { "CODE=1", NULL };
	char *job = h_kubesim_gpu_job("jb", 1024, 10, env, 1, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	json_t *j = h_kube_wait(&k, JOBS "/jb", h_pred_condition, "Failed", 5000, "Failed");
	CHECK_STR(cstr(cond(j, "Failed"), "reason"), "BackoffLimitExceeded");
	CHECK_STR(cstr(cond(j, "Failed"), "message"), "Job has reached the specified backoff limit");
	CHECK_INT(status_int(j, "failed"), 2);
	json_decref(j);
	json_t *pods = job_pods(&k, "jb");
	CHECK_INT(json_array_size(json_object_get(pods, "items")), 2);
	json_decref(pods);
}

TEST_T(job_complete_and_ttl, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "CODE=0", NULL };
	char *job = h_kubesim_gpu_job("jc", 1024, 10, env, 0, "{\"ttlSecondsAfterFinished\":1}");
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	json_t *j = h_kube_wait(&k, JOBS "/jc", h_pred_condition, "Complete", 5000, "Complete");
	CHECK_STR(cstr(cond(j, "Complete"), "reason"), "CompletionsReached");
	CHECK(cond(j, "SuccessCriteriaMet") != NULL);
	CHECK_INT(status_int(j, "succeeded"), 1);
	CHECK(json_object_get(json_object_get(j, "status"), "completionTime") != NULL);
	json_decref(j);
	json_t *pods = job_pods(&k, "jc");
	json_t *p = json_array_get(json_object_get(pods, "items"), 0);
	CHECK_STR(cstr(json_object_get(p, "status"), "phase"), "Succeeded");
	CHECK(json_object_get(json_object_get(p, "metadata"), "finalizers") == NULL);
	json_decref(pods);
	/* ttlSecondsAfterFinished: 1 -> the Job and its pod go away. */
	json_decref(h_kube_wait(&k, JOBS "/jc", h_pred_gone, NULL, 4000, "TTL deletion"));
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Djc", pred_no_pods, NULL, 4000,
				"pods collected"));
}

TEST_T(job_delete_propagation, 40)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=30", NULL };
	char *job = h_kubesim_gpu_job("jf", 1024, 10, env, 0, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	job = h_kubesim_gpu_job("jo", 1024, 10, env, 0, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Djf", pred_running_pod, NULL,
				3000, "jf running"));
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Djo", pred_running_pod, NULL,
				3000, "jo running"));

	/* Foreground: the answer is the Job with the finalizer; it goes after its pods. */
	json_t *out = NULL;
	CHECK_INT(h_kube(&k, "DELETE", JOBS "/jf", "{\"propagationPolicy\":\"Foreground\"}", NULL,
			 &out),
		  200);
	CHECK_STR(cstr(out, "kind"), "Job");
	CHECK(json_object_get(json_object_get(out, "metadata"), "deletionTimestamp") != NULL);
	CHECK_STR(json_string_value(json_array_get(
			  json_object_get(json_object_get(out, "metadata"), "finalizers"), 0)),
		  "foregroundDeletion");
	json_decref(out);
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Djf", pred_no_pods, NULL, 5000,
				"jf pods gone"));
	json_decref(h_kube_wait(&k, JOBS "/jf", h_pred_gone, NULL, 3000, "jf gone"));

	/* Orphan: the Job goes, the pod stays and loses its owner. */
	CHECK_INT(h_kube(&k, "DELETE", JOBS "/jo?propagationPolicy=Orphan", NULL, NULL, &out), 200);
	json_decref(out);
	json_decref(h_kube_wait(&k, JOBS "/jo", h_pred_gone, NULL, 3000, "jo gone"));
	json_t *pods = h_kube_wait(&k, PODS "?labelSelector=job-name%3Djo", pred_running_pod, NULL,
				   1000, "orphan still running");
	json_t *p = json_array_get(json_object_get(pods, "items"), 0);
	CHECK(json_object_get(json_object_get(p, "metadata"), "ownerReferences") == NULL);
	CHECK(json_object_get(json_object_get(p, "metadata"), "finalizers") == NULL);
	json_decref(pods);

	/* Background (what kubectl sends): Status answer, pods collected. */
	job = h_kubesim_gpu_job("jg", 1024, 10, env, 0, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Djg", pred_running_pod, NULL,
				3000, "jg running"));
	CHECK_INT(h_kube(&k, "DELETE", JOBS "/jg", "{\"propagationPolicy\":\"Background\"}", NULL,
			 &out),
		  200);
	CHECK_STR(cstr(out, "kind"), "Status");
	CHECK_STR(cstr(out, "status"), "Success");
	CHECK_STR(cstr(json_object_get(out, "details"), "kind"), "jobs");
	json_decref(out);
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Djg", pred_no_pods, NULL, 5000,
				"jg pods collected"));
}
