/* lib/kobj: Kubernetes object accessors on a Pod and a Job as the API server writes them, and
 * on objects of the wrong shape. */
#include <string.h>

#include "lib/kobj.h"
#include "tests/harness/t.h"

static json_t *load(const char *text)
{
	json_error_t e;
	json_t *o = json_loads(text, 0, &e);
	CHECKF(o != NULL, "fixture: %s", e.text);
	return o;
}

TEST(kobj_pod_metadata_and_status)
{
	json_t *pod = load(
		"{\"metadata\":{\"name\":\"gwb-t-a-x1\",\"namespace\":\"gwb\",\"uid\":\"u1\","
		"\"resourceVersion\":\"42\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
		"\"deletionTimestamp\":\"2026-01-01T00:01:00Z\",\"labels\":{\"gwb.io/task\":\"t-a\"},"
		"\"annotations\":{\"a\":\"b\"},\"ownerReferences\":[{\"kind\":\"ReplicaSet\","
		"\"name\":\"x\"},{\"kind\":\"Job\",\"name\":\"gwb-t-a\",\"uid\":\"j1\"}]},"
		"\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"PodScheduled\","
		"\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"False\"}]}}");
	CHECK_STR(kobj_name(pod), "gwb-t-a-x1");
	CHECK_STR(kobj_namespace(pod), "gwb");
	CHECK_STR(kobj_uid(pod), "u1");
	CHECK_STR(kobj_rv(pod), "42");
	CHECK_STR(kobj_created(pod), "2026-01-01T00:00:00Z");
	CHECK(kobj_deleting(pod));
	CHECK_STR(kobj_label(pod, "gwb.io/task"), "t-a");
	CHECK(kobj_label(pod, "missing") == NULL);
	CHECK_STR(kobj_annotation(pod, "a"), "b");
	CHECK_STR(kobj_str(kobj_owner(pod, "Job"), "uid"), "j1");
	CHECK(kobj_owner(pod, "StatefulSet") == NULL);
	CHECK_STR(kobj_phase(pod), "Running");
	CHECK(!kobj_pod_terminal(pod));
	CHECK(kobj_condition_true(pod, "PodScheduled"));
	CHECK(!kobj_condition_true(pod, "Ready"));
	CHECK_STR(kobj_str(kobj_condition(pod, "Ready"), "status"), "False");
	CHECK(kobj_condition(pod, "Nope") == NULL);
	json_decref(pod);
}

TEST(kobj_job_suspend_and_terminal_phases)
{
	json_t *job = load("{\"spec\":{\"suspend\":true},\"status\":{\"phase\":\"Succeeded\"},"
			   "\"metadata\":{\"deletionTimestamp\":null}}");
	CHECK(kobj_suspended(job));
	CHECK(kobj_pod_terminal(job));
	CHECK(!kobj_deleting(job));
	json_decref(job);
	job = load("{\"spec\":{\"suspend\":false},\"status\":{\"phase\":\"Failed\"}}");
	CHECK(!kobj_suspended(job));
	CHECK(kobj_pod_terminal(job));
	json_decref(job);
}

TEST(kobj_wrong_shapes_answer_null)
{
	json_t *odd = load("{\"metadata\":[1,2],\"status\":{\"conditions\":{\"type\":\"x\"},"
			   "\"phase\":7},\"spec\":\"s\"}");
	CHECK(kobj_name(odd) == NULL);
	CHECK(kobj_label(odd, "a") == NULL);
	CHECK(kobj_phase(odd) == NULL);
	CHECK(kobj_condition(odd, "x") == NULL);
	CHECK(!kobj_condition_true(odd, "x"));
	CHECK(!kobj_suspended(odd));
	CHECK(kobj_owner(odd, "Job") == NULL);
	CHECK(kobj_name(NULL) == NULL);
	CHECK(!kobj_deleting(NULL));
	CHECK(kobj_path(NULL, "a", "b") == NULL);
	json_t *arr = json_array();
	CHECK(kobj_get(arr, "a") == NULL);
	json_decref(arr);
	json_decref(odd);
}
