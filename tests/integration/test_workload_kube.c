/* A workload task on kubesim (issue 35): the Job gwb creates, read back from kubesim's API,
 * carries the team's container with everything that makes the slice work; every Pod (the
 * worker's too) meets the restricted profile; a container that cannot start shows its
 * waiting reason in the task's view, and a cancel of that task releases its reservation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define TOK "alpha-token-123"
#define JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"
#define PODS "/api/v1/namespaces/gpu-workbench/pods"

static void stack_start(struct h_stack *st)
{
	const char *env[] = { "GWB_KUBE_REQUEST_TIMEOUT_MS=1000", NULL };
	h_stack_start(st, 0, NULL, env, "alpha",
		      "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"" TOK
		      "\", \"workload_policy\": {\"allowed_images\": [\"busybox\"], "
		      "\"memory\": {\"max\": \"2Gi\"}}}");
}

static json_t *jget(json_t *o, const char *path)
{
	char buf[160];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok && o; tok = dot) {
		dot = strchr(tok, '.');
		if (dot)
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtol(tok, NULL, 10))
				     : json_object_get(o, tok);
	}
	return o;
}

static const char *js(json_t *o, const char *path)
{
	json_t *v = jget(o, path);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Submits body (its members after "team") and returns the task id (static ring). */
static const char *submit(struct h_stack *st, const char *members)
{
	static char ids[4][32];
	static int slot;
	char body[1024];
	snprintf(body, sizeof body, "{\"team\": \"alpha\", %s}", members);
	struct h_resp r;
	h_req(&r, "POST", st->srv.proc.url, "/v1/tasks", TOK, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 4];
	snprintf(id, 32, "%s", js(r.json, "id"));
	h_resp_free(&r);
	return id;
}

static json_t *task(struct h_stack *st, const char *id)
{
	char path[64];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", st->srv.proc.url, path, TOK, NULL, NULL);
	CHECKF(r.status == 200, "GET %s: %ld", path, r.status);
	json_t *t = json_incref(r.json);
	h_resp_free(&r);
	return t;
}

/* Waits until the task's field at path shows want ("true"/"false" for booleans). */
static json_t *wait_field(struct h_stack *st, const char *id, const char *path, const char *want,
			  int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		json_t *t = task(st, id);
		json_t *v = jget(t, path);
		const char *s = json_is_string(v) ? json_string_value(v)
				: json_is_true(v)  ? "true"
				: json_is_false(v) ? "false"
						   : NULL;
		if (s && strcmp(s, want) == 0)
			return t;
		if (clock_mono_ms() > deadline) {
			char *d = json_dumps(t, JSON_COMPACT);
			t_log("task: %s", d);
			gwb_free(d);
			json_decref(t);
			h_proc_dump_log(&st->srv.proc, 15);
			t_fail(__FILE__, __LINE__, "%s: %s never became %s", id, path, want);
		}
		json_decref(t);
		h_sleep_ms(50);
	}
}

static int pred_one_item(const json_t *obj, void *arg)
{
	(void)arg;
	return json_array_size(json_object_get(obj, "items")) == 1;
}

/* The task's Pod as kubesim has it (caller decrefs). */
static json_t *pod_of_task(struct h_stack *st, const char *id)
{
	char path[160];
	snprintf(path, sizeof path, PODS "?labelSelector=gwb.io%%2Ftask%%3D%s", id);
	json_t *list = h_kube_wait(&st->ks, path, pred_one_item, NULL, 20000, "the task's Pod");
	json_t *pod = json_incref(json_array_get(json_object_get(list, "items"), 0));
	json_decref(list);
	return pod;
}

/* The restricted profile's rules on a Pod spec as the API server holds it: the first broken
 * one's name, or NULL. */
static const char *restricted_broken(json_t *spec)
{
	if (json_is_true(json_object_get(spec, "hostNetwork")) ||
	    json_is_true(json_object_get(spec, "hostPID")) ||
	    json_is_true(json_object_get(spec, "hostIPC")))
		return "host namespaces";
	if (!json_is_false(json_object_get(spec, "automountServiceAccountToken")))
		return "automountServiceAccountToken false";
	if (!json_is_true(jget(spec, "securityContext.runAsNonRoot")))
		return "runAsNonRoot";
	if (json_integer_value(jget(spec, "securityContext.runAsUser")) <= 0)
		return "a non-zero runAsUser";
	const char *sp = js(spec, "securityContext.seccompProfile.type");
	if (!sp || strcmp(sp, "RuntimeDefault") != 0)
		return "seccompProfile RuntimeDefault";
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(spec, "volumes"), i, v)
		if (json_object_get(v, "hostPath"))
			return "no hostPath";
	json_array_foreach(json_object_get(spec, "containers"), i, v) {
		if (!json_is_false(jget(v, "securityContext.allowPrivilegeEscalation")))
			return "allowPrivilegeEscalation false";
		const char *drop = js(v, "securityContext.capabilities.drop.0");
		if (!drop || strcmp(drop, "ALL") != 0)
			return "capabilities.drop [ALL]";
		const char *tmp = js(v, "terminationMessagePolicy");
		if (!tmp || strcmp(tmp, "FallbackToLogsOnError") != 0)
			return "terminationMessagePolicy FallbackToLogsOnError";
	}
	return NULL;
}

/* The env entry name of a container, or NULL. */
static const char *env_of(json_t *c, const char *name)
{
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(c, "env"), i, e)
		if (strcmp(js(e, "name"), name) == 0)
			return js(e, "value");
	return NULL;
}

TEST_T(workload_job_carries_the_container_and_the_slice, 90)
{
	struct h_stack st;
	stack_start(&st);
	const char *id = submit(&st, "\"gpu_memory_mib\": 9000, \"gpu_core_percent\": 30, "
				     "\"qos\": \"BE\", \"duration_seconds\": 120, \"workload\": "
				     "{\"image\": \"busybox:1.36\", \"command\": [\"/bin/sh\", \"-c\"], "
				     "\"args\": [\"echo dev=$NVIDIA_VISIBLE_DEVICES; exit 3\"], "
				     "\"env\": {\"MODE\": \"train\"}, \"working_dir\": \"/tmp\", "
				     "\"cpu\": \"750m\"}");
	char path[160];
	snprintf(path, sizeof path, JOBS "/gwb-%s", id);
	json_t *job = NULL;
	for (int64_t end = clock_mono_ms() + 20000; !job && clock_mono_ms() < end;)
		if (!(job = h_kube_get(&st.ks, path)))
			h_sleep_ms(50);
	CHECKF(job != NULL, "no Job %s", path);
	CHECK_STR(json_string_value(json_object_get(jget(job, "metadata.labels"), "gwb.io/task")),
		  id);
	json_t *spec = jget(job, "spec.template.spec");
	CHECK_STR(js(spec, "schedulerName"), "koord-scheduler");
	CHECK_STR(js(spec, "priorityClassName"), "koord-batch");
	CHECK_STR(json_string_value(json_object_get(jget(job, "spec.template.metadata.labels"),
						    "koordinator.sh/qosClass")),
		  "BE");
	CHECK_INT(json_integer_value(json_object_get(spec, "activeDeadlineSeconds")), 120 + 300);
	json_t *c = jget(spec, "containers.0");
	CHECK_STR(js(c, "image"), "busybox:1.36");
	CHECK_STR(js(c, "command.0"), "/bin/sh");
	CHECK_STR(js(c, "args.0"), "echo dev=$NVIDIA_VISIBLE_DEVICES; exit 3");
	CHECK_STR(js(c, "workingDir"), "/tmp");
	CHECK_STR(js(c, "resources.requests.cpu"), "750m");
	CHECK_STR(js(c, "resources.limits.cpu"), "750m");
	/* No memory asked: the fallback (1Gi) held to the team's maximum (2Gi). */
	CHECK_STR(js(c, "resources.limits.memory"), "1Gi");
	CHECK_STR(json_string_value(json_object_get(jget(c, "resources.limits"),
						    "koordinator.sh/gpu-core")),
		  "30");
	CHECK_STR(env_of(c, "MODE"), "train");
	CHECK_STR(env_of(c, "GWB_TASK_ID"), id);
	CHECK(env_of(c, "GWB_EXPERIMENT") == NULL);
	CHECKF(restricted_broken(spec) == NULL, "restricted: %s", restricted_broken(spec));
	json_decref(job);
	/* The view says what runs. */
	json_t *v = task(&st, id);
	CHECK_STR(js(v, "workload.image"), "busybox:1.36");
	CHECK_STR(js(v, "workload.command.0"), "/bin/sh");
	json_decref(v);
}

TEST_T(workload_worker_pod_is_restricted_and_still_runs, 90)
{
	struct h_stack st;
	stack_start(&st);
	const char *id = submit(&st, "\"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10, "
				     "\"duration_seconds\": 1");
	json_t *pod = pod_of_task(&st, id);
	json_t *spec = json_object_get(pod, "spec");
	CHECKF(restricted_broken(spec) == NULL, "restricted: %s", restricted_broken(spec));
	CHECK_STR(js(spec, "containers.0.command.0"), "gwb-worker");
	json_decref(pod);
	json_decref(wait_field(&st, id, "state", "succeeded", 30000));
}

/* `gwbctl get id` against the stack's server: its text output (gwb_malloc'd). */
static char *gwbctl_get(struct h_stack *st, const char *id)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "GWB_URL=%s GWB_TOKEN=%s '%s' -o text get %s 2>&1",
		 st->srv.proc.url, TOK, h_bin("gwbctl"), id);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t cap = 1 << 16, len = 0, n;
	char *buf = gwb_malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += n;
	buf[len] = '\0';
	CHECKF(pclose(p) == 0, "gwbctl get: %s", buf);
	return buf;
}

TEST_T(workload_waiting_reason_is_shown_and_a_cancel_releases, 90)
{
	struct h_stack st;
	stack_start(&st);
	/* Above one card: the Pod stays unscheduled, so only the status set below speaks for
	 * its container, as a kubelet that cannot create it would. */
	const char *id = submit(&st, "\"gpu_memory_mib\": 9000, \"gpu_core_percent\": 10, "
				     "\"workload\": {\"image\": \"busybox:1.36\", "
				     "\"command\": [\"/opt/not-allowed\"]}");
	json_t *pod = pod_of_task(&st, id);
	char path[200];
	snprintf(path, sizeof path, PODS "/%s/status", js(pod, "metadata.name"));
	json_decref(pod);
	long s = h_kube(&st.ks, "PATCH", path,
			"{\"status\": {\"containerStatuses\": [{\"name\": \"worker\", \"ready\": "
			"false, \"restartCount\": 0, \"image\": \"busybox:1.36\", \"imageID\": \"\", "
			"\"state\": {\"waiting\": {\"reason\": \"CreateContainerError\", "
			"\"message\": \"/opt/not-allowed is not in the allow list\"}}}]}}",
			"application/merge-patch+json", NULL);
	CHECKF(s == 200, "PATCH status: %ld", s);
	json_t *t = wait_field(&st, id, "pod.waiting.reason", "CreateContainerError", 20000);
	CHECK_STR(js(t, "pod.waiting.message"), "/opt/not-allowed is not in the allow list");
	CHECK_STR(js(t, "state"), "pending");
	json_decref(t);
	char *text = gwbctl_get(&st, id);
	CHECKF(strstr(text, "image        busybox:1.36\n") != NULL, "%s", text);
	CHECKF(strstr(text, "command      /opt/not-allowed\n") != NULL, "%s", text);
	CHECKF(strstr(text, "waiting      CreateContainerError: /opt/not-allowed is not in the "
			    "allow list\n") != NULL,
	       "%s", text);
	gwb_free(text);
	struct h_resp r;
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	h_req(&r, "POST", st.srv.proc.url, path, TOK, NULL, NULL);
	CHECKF(r.status == 202, "cancel: %ld %s", r.status, r.body);
	h_resp_free(&r);
	json_decref(wait_field(&st, id, "state", "cancelled", 30000));
	json_decref(wait_field(&st, id, "reservation.released", "true", 30000));
	CHECK(h_sql_int(st.srv.db, "SELECT reserved_mem_mib FROM teams WHERE name = 'alpha'") == 0);
}

/* A workload's own termination message is its task's result, as text: here its log's last
 * lines (FallbackToLogsOnError, which gwb's Job asks, when it wrote no message and failed);
 * it gives no isolation verdict. */
TEST_T(workload_termination_message_is_the_result, 90)
{
	struct h_stack st;
	const char *flags[] = { "--exec-allow", "/bin/sh", NULL };
	const char *env[] = { "GWB_KUBE_REQUEST_TIMEOUT_MS=1000", NULL };
	h_stack_start(&st, 0, flags, env, "alpha",
		      "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"" TOK
		      "\", \"workload_policy\": {\"allowed_images\": [\"busybox\"]}}");
	const char *id = submit(&st, "\"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10, "
				     "\"duration_seconds\": 30, \"workload\": "
				     "{\"image\": \"busybox:1.36\", \"command\": [\"/bin/sh\", \"-c\"], "
				     "\"args\": [\"echo epoch 1; echo loss went NaN; exit 3\"]}");
	json_t *v = wait_field(&st, id, "state", "failed", 30000);
	json_decref(v);
	v = wait_field(&st, id, "reservation.released", "true", 30000);
	CHECK_STR(js(v, "result"), "epoch 1\nloss went NaN\n");
	CHECK(json_is_null(jget(v, "isolation")));
	json_decref(v);
	char *out = gwbctl_get(&st, id);
	CHECKF(strstr(out, "result       epoch 1\nloss went NaN\n") != NULL, "gwbctl get: %s", out);
	gwb_free(out);
}
