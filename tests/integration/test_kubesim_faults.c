/* Each fault of the control endpoint demonstrably happens and stops when cleared. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"
#define PODS "/api/v1/namespaces/gpu-workbench/pods"

/* Sends a raw request and returns what arrived within timeout_ms (caller frees). */
static char *raw(struct h_kubesim *k, const char *method, const char *path, const char *body,
		 int timeout_ms)
{
	char req[8192];
	int n = snprintf(req, sizeof req,
			 "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
			 method, path, body ? strlen(body) : 0, body ? body : "");
	return h_raw(k->url, req, (size_t)n, timeout_ms);
}

static long version_status(struct h_kubesim *k)
{
	char url[300];
	snprintf(url, sizeof url, "%s/version", k->url);
	struct h_resp r;
	h_http(&r, "GET", url, NULL, NULL, NULL);
	long st = r.status;
	h_resp_free(&r);
	return st;
}

TEST_T(fault_refuse, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	CHECK_INT(version_status(&k), 200);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"api\":\"refuse\"}", NULL), 200);
	CHECK_INT(version_status(&k), 0); /* connection refused */
	CHECK_INT(h_kubesim_ctl(&k, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	CHECK_INT(version_status(&k), 200);
	/* With a duration it clears itself. */
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults",
				"{\"api\":\"refuse\",\"api_for_ms\":300}", NULL),
		  200);
	CHECK_INT(version_status(&k), 0);
	h_sleep_ms(600);
	CHECK_INT(version_status(&k), 200);
}

TEST_T(fault_hang_and_slow, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"api\":\"hang\"}", NULL), 200);
	char *got = raw(&k, "GET", "/version", NULL, 500);
	CHECKF(got[0] == '\0', "answered while hanging: %.200s", got);
	gwb_free(got);
	json_t *st = NULL;
	h_kubesim_ctl(&k, "GET", "/_kubesim/faults", NULL, &st);
	CHECK_STR(json_string_value(json_object_get(st, "api")), "hang");
	json_decref(st);
	CHECK_INT(h_kubesim_ctl(&k, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	got = raw(&k, "GET", "/version", NULL, 2000);
	CHECKF(!strncmp(got, "HTTP/1.1 200", 12), "%.200s", got);
	gwb_free(got);

	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"slow_ms\":400}", NULL), 200);
	int64_t t0 = clock_mono_ms();
	CHECK_INT(version_status(&k), 200);
	int64_t slow = clock_mono_ms() - t0;
	CHECKF(slow >= 390, "answered in %lld ms", (long long)slow);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"slow_ms\":0}", NULL), 200);
	t0 = clock_mono_ms();
	CHECK_INT(version_status(&k), 200);
	CHECKF(clock_mono_ms() - t0 < 300, "still slow");
}

TEST_T(fault_create_stored_answer_dropped, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults",
				"{\"withhold_create\":{\"resource\":\"jobs\",\"count\":1}}", NULL),
		  200);
	const char *env[] = { "SLEEP=0", NULL };
	char *job = h_kubesim_gpu_job("lost", 1024, 10, env, 0, "{\"suspend\":true}");
	char *got = raw(&k, "POST", JOBS, job, 700);
	CHECKF(got[0] == '\0', "the create was answered: %.200s", got);
	gwb_free(got);
	gwb_free(job);
	/* ... but the Job exists. */
	json_t *j = h_kube_get(&k, JOBS "/lost");
	CHECK(j != NULL);
	json_decref(j);
	/* Only the next create was affected. */
	job = h_kubesim_gpu_job("kept", 1024, 10, env, 0, "{\"suspend\":true}");
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
}

TEST_T(fault_stuck_terminating, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=30", NULL };
	char *pod = h_kubesim_gpu_pod("stuck", 1024, 10, env);
	json_decref(h_kube_create(&k, PODS, pod));
	gwb_free(pod);
	json_decref(h_kube_wait(&k, PODS "/stuck", h_pred_phase, "Running", 3000, "Running"));
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults",
				"{\"stuck_terminating\":[\"gpu-workbench/stuck\"]}", NULL),
		  200);
	CHECK_INT(h_kube(&k, "DELETE", PODS "/stuck?gracePeriodSeconds=1", NULL, NULL, NULL), 200);
	h_sleep_ms(1500);
	json_t *p = h_kube_get(&k, PODS "/stuck");
	CHECKF(p, "the pod went although stuck");
	CHECK(json_object_get(json_object_get(p, "metadata"), "deletionTimestamp") != NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "phase")),
		  "Running");
	json_decref(p);
	CHECK_INT(h_kubesim_ctl(&k, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	json_decref(h_kube_wait(&k, PODS "/stuck", h_pred_gone, NULL, 3000, "gone after clearing"));
}

static int pred_running(const json_t *list, void *arg)
{
	(void)arg;
	json_t *p = json_array_get(json_object_get(list, "items"), 0);
	const char *ph = json_string_value(json_object_get(json_object_get(p, "status"), "phase"));
	return ph && !strcmp(ph, "Running");
}

TEST_T(fault_job_deleted_pods_orphaned, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=30", NULL };
	char *job = h_kubesim_gpu_job("gone", 1024, 10, env, 0, NULL);
	json_decref(h_kube_create(&k, JOBS, job));
	gwb_free(job);
	const char *sel = PODS "?labelSelector=job-name%3Dgone";
	json_decref(h_kube_wait(&k, sel, pred_running, NULL, 3000, "pod running"));
	CHECK_INT(h_kubesim_ctl(&k, "POST", "/_kubesim/actions/orphan-job",
				"{\"namespace\":\"gpu-workbench\",\"name\":\"gone\"}", NULL),
		  200);
	json_t *j = h_kube_get(&k, JOBS "/gone");
	CHECK(j == NULL);
	h_sleep_ms(300);
	json_t *pods = h_kube_get(&k, sel);
	CHECK(pred_running(pods, NULL));
	json_t *p = json_array_get(json_object_get(pods, "items"), 0);
	CHECK(json_object_get(json_object_get(p, "metadata"), "ownerReferences") == NULL);
	json_decref(pods);
}

TEST_T(fault_device_health, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	CHECK_INT(h_kubesim_ctl(&k, "POST", "/_kubesim/actions/device-health",
				"{\"node\":\"colima-gwb\",\"minor\":1,\"healthy\":false,\"xid\":48}",
				NULL),
		  200);
	json_t *d = h_kube_get(&k, "/apis/scheduling.koordinator.sh/v1alpha1/devices/colima-gwb");
	json_t *card = json_array_get(json_object_get(json_object_get(d, "spec"), "devices"), 1);
	CHECK(json_is_false(json_object_get(card, "health")));
	json_t *c = json_array_get(json_object_get(card, "conditions"), 0);
	CHECK_STR(json_string_value(json_object_get(c, "reason")), "Xid48");
	CHECK_STR(json_string_value(json_object_get(c, "type")), "Healthy");
	json_decref(d);
	h_sleep_ms(100);
	json_t *n = h_kube_get(&k, "/api/v1/nodes/colima-gwb");
	json_t *alloc = json_object_get(json_object_get(n, "status"), "allocatable");
	CHECK_STR(json_string_value(json_object_get(alloc, "koordinator.sh/gpu-memory")), "8Gi");
	CHECK_STR(json_string_value(json_object_get(alloc, "koordinator.sh/gpu-core")), "100");
	json_decref(n);
	CHECK_INT(h_kubesim_ctl(&k, "POST", "/_kubesim/actions/device-health",
				"{\"minor\":1,\"healthy\":true}", NULL),
		  200);
	h_sleep_ms(100);
	n = h_kube_get(&k, "/api/v1/nodes/colima-gwb");
	alloc = json_object_get(json_object_get(n, "status"), "allocatable");
	CHECK_STR(json_string_value(json_object_get(alloc, "koordinator.sh/gpu-memory")), "16Gi");
	json_decref(n);
	d = h_kube_get(&k, "/apis/scheduling.koordinator.sh/v1alpha1/devices/colima-gwb");
	card = json_array_get(json_object_get(json_object_get(d, "spec"), "devices"), 1);
	CHECK(json_is_true(json_object_get(card, "health")));
	CHECK(json_object_get(card, "conditions") == NULL);
	json_decref(d);
	/* Bad requests to the control endpoint are refused. */
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"api\":\"sideways\"}", NULL), 400);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"nope\":1}", NULL), 400);
}

/* The current resourceVersion of the Pods' collection, for a watch that resumes from it. */
static void pods_rv(struct h_kubesim *k, char *rv, size_t len)
{
	json_t *list = h_kube_get(k, PODS);
	snprintf(rv, len, "%s",
		 json_string_value(json_object_get(json_object_get(list, "metadata"),
						   "resourceVersion")));
	json_decref(list);
}

TEST_T(fault_watches_cut, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	struct h_watch w;
	CHECK_INT(h_watch_open(&w, &k, PODS "?watch=1&timeoutSeconds=60", NULL), 0);
	CHECK_INT(w.status, 200);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"cut_watches_every_ms\":300}",
				NULL),
		  200);
	int64_t t0 = clock_mono_ms();
	while (!w.ended && clock_mono_ms() - t0 < 3000)
		json_decref(h_watch_next(&w, 100));
	CHECKF(w.ended, "the stream was not cut");
	h_watch_close(&w);
	/* Streams opened later are cut too, every period. */
	CHECK_INT(h_watch_open(&w, &k, PODS "?watch=1&timeoutSeconds=60", NULL), 0);
	t0 = clock_mono_ms();
	while (!w.ended && clock_mono_ms() - t0 < 3000)
		json_decref(h_watch_next(&w, 100));
	CHECKF(w.ended, "the second stream was not cut");
	h_watch_close(&w);
	json_t *st = NULL;
	h_kubesim_ctl(&k, "GET", "/_kubesim/faults", NULL, &st);
	CHECK_INT(json_integer_value(json_object_get(st, "cut_watches_every_ms")), 300);
	json_decref(st);
	/* Cleared: a stream stays open. */
	CHECK_INT(h_kubesim_ctl(&k, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	CHECK_INT(h_watch_open(&w, &k, PODS "?watch=1&timeoutSeconds=60", NULL), 0);
	json_decref(h_watch_next(&w, 1000));
	CHECKF(!w.ended, "a stream ended after the fault was cleared");
	h_watch_close(&w);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"cut_watches_every_ms\":10}",
				NULL),
		  400);
}

TEST_T(fault_watch_gone, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"watch_gone\":{\"count\":2}}",
				NULL),
		  200);
	char rv[64], path[256];
	pods_rv(&k, rv, sizeof rv);
	snprintf(path, sizeof path, PODS "?watch=1&resourceVersion=%s", rv);
	/* A watch without a resourceVersion starts with the state: never counted. */
	struct h_watch w;
	CHECK_INT(h_watch_open(&w, &k, PODS "?watch=1", NULL), 0);
	json_t *none = h_watch_next(&w, 200);
	CHECKF(!w.ended, "a watch from the current state was ended");
	json_decref(none);
	h_watch_close(&w);
	for (int i = 0; i < 2; i++) {
		CHECK_INT(h_watch_open(&w, &k, path, NULL), 0);
		CHECK_INT(w.status, 200); /* the Status comes as an event, not as the answer */
		json_t *ev = h_watch_next(&w, 2000);
		CHECKF(ev, "no ERROR event");
		CHECK_STR(json_string_value(json_object_get(ev, "type")), "ERROR");
		json_t *o = json_object_get(ev, "object");
		CHECK_STR(json_string_value(json_object_get(o, "kind")), "Status");
		CHECK_INT(json_integer_value(json_object_get(o, "code")), 410);
		CHECK_STR(json_string_value(json_object_get(o, "reason")), "Expired");
		json_decref(ev);
		json_decref(h_watch_next(&w, 1000));
		CHECKF(w.ended, "the stream stayed open after its 410");
		h_watch_close(&w);
	}
	/* The third resume works. */
	CHECK_INT(h_watch_open(&w, &k, path, NULL), 0);
	const char *env[] = { "SLEEP=0", NULL };
	char *pod = h_kubesim_gpu_pod("after-gone", 1024, 10, env);
	json_decref(h_kube_create(&k, PODS, pod));
	gwb_free(pod);
	json_t *ev = h_watch_next(&w, 2000);
	CHECKF(ev, "no event after the fault was used up");
	CHECK_STR(json_string_value(json_object_get(ev, "type")), "ADDED");
	json_decref(ev);
	h_watch_close(&w);
	json_t *st = NULL;
	h_kubesim_ctl(&k, "GET", "/_kubesim/faults", NULL, &st);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(st, "watch_gone"), "count")), 0);
	json_decref(st);
}

static int pred_deadline(const json_t *pod, void *arg)
{
	(void)arg;
	json_t *st = json_object_get(pod, "status");
	const char *ph = json_string_value(json_object_get(st, "phase"));
	return ph && !strcmp(ph, "Failed");
}

TEST_T(kubelet_active_deadline, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=30", NULL };
	char *text = h_kubesim_gpu_pod("bounded", 1024, 10, env);
	json_t *pod = json_loads(text, 0, NULL);
	gwb_free(text);
	json_object_set_new(json_object_get(pod, "spec"), "activeDeadlineSeconds", json_integer(2));
	json_object_set_new(json_object_get(pod, "spec"), "terminationGracePeriodSeconds",
			    json_integer(1));
	text = json_dumps(pod, JSON_COMPACT);
	json_decref(pod);
	json_decref(h_kube_create(&k, PODS, text));
	gwb_free(text);
	json_decref(h_kube_wait(&k, PODS "/bounded", h_pred_phase, "Running", 5000, "Running"));
	json_t *p = h_kube_wait(&k, PODS "/bounded", pred_deadline, NULL, 10000,
				"Failed at its deadline");
	json_t *st = json_object_get(p, "status");
	CHECK_STR(json_string_value(json_object_get(st, "reason")), "DeadlineExceeded");
	CHECK(json_string_value(json_object_get(st, "message")) != NULL);
	int64_t start, end;
	const json_t *cs = json_array_get(json_object_get(st, "containerStatuses"), 0);
	json_t *term = json_object_get(json_object_get(cs, "state"), "terminated");
	CHECKF(term, "the container is not terminated");
	CHECK_INT(clock_parse_rfc3339(json_string_value(json_object_get(st, "startTime")), &start),
		  0);
	CHECK_INT(clock_parse_rfc3339(json_string_value(json_object_get(term, "finishedAt")), &end),
		  0);
	/* Stopped at its deadline, not after its 30 s of work. */
	CHECKF(end - start < 20000, "ran %lld ms", (long long)(end - start));
	json_decref(p);
	json_t *s = NULL;
	h_kubesim_ctl(&k, "GET", "/_kubesim/state", NULL, &s);
	CHECK_INT(json_integer_value(json_object_get(s, "containers")), 0);
	json_decref(s);
}
