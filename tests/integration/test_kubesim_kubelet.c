/* The kubelet (kube-api.md §4): exit codes and reasons, graceful deletion with SIGTERM then
 * SIGKILL, the koordlet GPU env and the downward-API annotations file, /log. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define PODS "/api/v1/namespaces/gpu-workbench/pods"

static json_t *terminated(const json_t *pod)
{
	json_t *cs = json_array_get(
		json_object_get(json_object_get(pod, "status"), "containerStatuses"), 0);
	return json_object_get(json_object_get(cs, "state"), "terminated");
}

static void run_pod(struct h_kubesim *k, const char *name, const char *const *env)
{
	char *pod = h_kubesim_gpu_pod(name, 1024, 25, env);
	json_decref(h_kube_create(k, PODS, pod));
	gwb_free(pod);
}

static char *get_log(struct h_kubesim *k, const char *pod, const char *query)
{
	char url[512];
	snprintf(url, sizeof url, "%s" PODS "/%s/log%s", k->url, pod, query ? query : "");
	struct h_resp r;
	h_http(&r, "GET", url, NULL, NULL, NULL);
	CHECKF(r.status == 200, "log of %s: %ld %s", pod, r.status, r.body);
	char *out = gwb_strdup(r.body);
	h_resp_free(&r);
	return out;
}

TEST_T(kubelet_exit_codes, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *ok[] = { "CODE=0", NULL };
	const char *bad[] = { "CODE=3", NULL };
	run_pod(&k, "ok", ok);
	run_pod(&k, "bad", bad);
	json_t *p = h_kube_wait(&k, PODS "/ok", h_pred_phase, "Succeeded", 3000, "ok Succeeded");
	CHECK_INT(json_integer_value(json_object_get(terminated(p), "exitCode")), 0);
	CHECK_STR(json_string_value(json_object_get(terminated(p), "reason")), "Completed");
	json_decref(p);
	p = h_kube_wait(&k, PODS "/bad", h_pred_phase, "Failed", 3000, "bad Failed");
	CHECK_INT(json_integer_value(json_object_get(terminated(p), "exitCode")), 3);
	CHECK_STR(json_string_value(json_object_get(terminated(p), "reason")), "Error");
	json_decref(p);
	/* A finished pod gives its share back: the card can take 7 GiB more. */
	const char *env[] = { "SLEEP=30", NULL };
	char *big = h_kubesim_gpu_pod("big", 7168, 50, env);
	json_decref(h_kube_create(&k, PODS, big));
	gwb_free(big);
	json_decref(h_kube_wait(&k, PODS "/big", h_pred_phase, "Running", 3000, "big Running"));

	/* A worker that cannot be started: StartError, exit 128, pod Failed. */
	struct h_kubesim k2;
	h_kubesim_init(&k2);
	snprintf(k2.worker, sizeof k2.worker, "%s", h_path("no-such-worker"));
	snprintf(k2.ctl, sizeof k2.ctl, "%s", h_path("ks2.sock"));
	snprintf(k2.state, sizeof k2.state, "%s", h_path("state2"));
	snprintf(k2.kubeconfig, sizeof k2.kubeconfig, "%s", h_path("kubeconfig2"));
	h_kubesim_start(&k2);
	run_pod(&k2, "nostart", ok);
	p = h_kube_wait(&k2, PODS "/nostart", h_pred_phase, "Failed", 3000, "nostart Failed");
	CHECK_INT(json_integer_value(json_object_get(terminated(p), "exitCode")), 128);
	CHECK_STR(json_string_value(json_object_get(terminated(p), "reason")), "StartError");
	json_decref(p);
}

TEST_T(kubelet_graceful_deletion, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	char marker[4200];
	snprintf(marker, sizeof marker, "MARKER=%s", h_path("polite.marker"));
	const char *polite[] = { "SLEEP=30", marker, NULL };
	const char *stubborn[] = { "SLEEP=30", "TERM_MODE=ignore", NULL };
	run_pod(&k, "polite", polite);
	run_pod(&k, "stubborn", stubborn);
	json_decref(h_kube_wait(&k, PODS "/polite", h_pred_phase, "Running", 3000, "polite Running"));
	json_decref(h_kube_wait(&k, PODS "/stubborn", h_pred_phase, "Running", 3000, "stubborn Running"));
	h_sleep_ms(200); /* let the shells install their traps */

	/* grace 10: SIGTERM; the worker exits 143 at once and the pod goes. */
	json_t *out = NULL;
	CHECK_INT(h_kube(&k, "DELETE", PODS "/polite?gracePeriodSeconds=10", NULL, NULL, &out), 200);
	CHECK_STR(json_string_value(json_object_get(out, "kind")), "Pod");
	json_t *meta = json_object_get(out, "metadata");
	CHECK(json_object_get(meta, "deletionTimestamp") != NULL);
	CHECK_INT(json_integer_value(json_object_get(meta, "deletionGracePeriodSeconds")), 10);
	const char *uid = json_string_value(json_object_get(meta, "uid"));
	char poddir[4096];
	snprintf(poddir, sizeof poddir, "%s/pods/%s", k.state, uid);
	json_decref(out);
	json_decref(h_kube_wait(&k, PODS "/polite", h_pred_gone, NULL, 3000, "polite gone"));
	FILE *f = fopen(h_path("polite.marker"), "r");
	CHECKF(f, "the worker never saw SIGTERM");
	char buf[256];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = '\0';
	fclose(f);
	CHECKF(strstr(buf, "got-sigterm"), "marker: %s", buf);
	/* The kubelet removed the deleted pod's folder. */
	h_sleep_ms(300);
	CHECKF(access(poddir, F_OK) != 0, "%s still exists", poddir);

	/* grace 1 and a worker that ignores SIGTERM: Terminating, then SIGKILL after 1 s. */
	int64_t t0 = clock_mono_ms();
	CHECK_INT(h_kube(&k, "DELETE", PODS "/stubborn", "{\"gracePeriodSeconds\":1}", NULL, NULL),
		  200);
	h_sleep_ms(400);
	json_t *p = h_kube_get(&k, PODS "/stubborn");
	CHECKF(p, "stubborn went before its grace period");
	CHECK(json_object_get(json_object_get(p, "metadata"), "deletionTimestamp") != NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "phase")),
		  "Running");
	json_decref(p);
	json_decref(h_kube_wait(&k, PODS "/stubborn", h_pred_gone, NULL, 4000, "stubborn gone"));
	int64_t took = clock_mono_ms() - t0;
	CHECKF(took >= 900, "gone after %lld ms, before the grace period", (long long)took);
}

TEST_T(kubelet_env_annotations_logs, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=0", NULL };
	run_pod(&k, "envpod", env);
	json_decref(h_kube_wait(&k, PODS "/envpod", h_pred_phase, "Succeeded", 3000, "Succeeded"));
	char *log = get_log(&k, "envpod", NULL);
	CHECKF(strstr(log, "NVIDIA_VISIBLE_DEVICES=0 "), "%s", log);
	CHECKF(strstr(log, "CUDA_DEVICE_MEMORY_LIMIT=1073741824 "), "%s", log);
	CHECKF(strstr(log, "CUDA_DEVICE_SM_LIMIT=25 "), "%s", log);
	/* No LD_PRELOAD of a HAMi library that is not installed. */
	if (access("/usr/local/vgpu/libvgpu.so", R_OK) != 0)
		CHECKF(strstr(log, "LD_PRELOAD=unset"), "%s", log);
	/* The downward-API file in the kubelet format, holding the scheduler's annotation. */
	CHECKF(strstr(log, "scheduling.koordinator.sh/device-allocated=\"{\\\"gpu\\\":[{\\\"minor\\\":0,"),
	       "%s", log);
	gwb_free(log);
	log = get_log(&k, "envpod", "?tailLines=1");
	CHECK_STR(log, "done\n");
	gwb_free(log);
	json_t *st = NULL;
	CHECK_INT(h_kube(&k, "GET", PODS "/envpod/log?container=nope", NULL, NULL, &st), 400);
	json_decref(st);
	CHECK_INT(h_kube(&k, "GET", PODS "/missing/log", NULL, NULL, &st), 404);
	json_decref(st);
}

TEST_T(kubelet_log_follow, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=1", NULL };
	run_pod(&k, "chatty", env);
	json_decref(h_kube_wait(&k, PODS "/chatty", h_pred_phase, "Running", 3000, "Running"));
	const char req[] = "GET " PODS "/chatty/log?follow=true HTTP/1.1\r\nHost: x\r\n"
			   "Connection: close\r\n\r\n";
	int64_t t0 = clock_mono_ms();
	char *got = h_raw(k.url, req, sizeof req - 1, 5000);
	int64_t took = clock_mono_ms() - t0;
	/* The stream follows the container to its end, then closes. */
	CHECKF(strstr(got, "HTTP/1.1 200") && strstr(got, "worker pid=") && strstr(got, "done"),
	       "%s", got);
	CHECKF(took < 4500, "the stream did not end with the container (%lld ms)", (long long)took);
	gwb_free(got);
}

/* Starts run off the loop: a worker that exits at once often ends (and is reaped) before its
 * start is reported, and a pod may be deleted while its container is still starting. Every
 * pod still ends with its own exit code, and every deleted one goes. */
TEST_T(kubelet_fast_exits_and_deletes_while_starting, 60)
{
	/* /bin/false: exit code 1 right after the exec. */
	struct h_kubesim k;
	h_kubesim_init(&k);
	snprintf(k.worker, sizeof k.worker, "/bin/false");
	h_kubesim_start(&k);
	char name[32], path[128];
	for (int i = 0; i < 40; i++) {
		snprintf(name, sizeof name, "fast-%d", i);
		char *pod = h_kubesim_gpu_pod(name, 16, 1, NULL);
		json_decref(h_kube_create(&k, PODS, pod));
		gwb_free(pod);
	}
	for (int i = 0; i < 40; i++) {
		snprintf(path, sizeof path, PODS "/fast-%d", i);
		json_t *p = h_kube_wait(&k, path, h_pred_phase, "Failed", 10000, path);
		CHECK_INT(json_integer_value(json_object_get(terminated(p), "exitCode")), 1);
		CHECK_STR(json_string_value(json_object_get(terminated(p), "reason")), "Error");
		json_decref(p);
	}

	/* Deleted as soon as created: the stop waits for the pid, then SIGTERM. */
	struct h_kubesim k2;
	h_kubesim_init(&k2);
	snprintf(k2.ctl, sizeof k2.ctl, "%s", h_path("ks2.sock"));
	snprintf(k2.state, sizeof k2.state, "%s", h_path("state2"));
	snprintf(k2.kubeconfig, sizeof k2.kubeconfig, "%s", h_path("kubeconfig2"));
	h_kubesim_start(&k2);
	const char *slow[] = { "SLEEP=30", NULL };
	for (int i = 0; i < 30; i++) {
		snprintf(name, sizeof name, "gone-%d", i);
		char *pod = h_kubesim_gpu_pod(name, 16, 1, slow);
		json_decref(h_kube_create(&k2, PODS, pod));
		gwb_free(pod);
		snprintf(path, sizeof path, PODS "/%s?gracePeriodSeconds=1", name);
		h_kube(&k2, "DELETE", path, NULL, NULL, NULL);
	}
	for (int i = 0; i < 30; i++) {
		snprintf(path, sizeof path, PODS "/gone-%d", i);
		json_decref(h_kube_wait(&k2, path, h_pred_gone, NULL, 10000, path));
	}
}

/* The pid a running pod's worker.sh logged ("worker pid=N"), waiting for the line. */
static int logged_pid(struct h_kubesim *k, const char *pod)
{
	for (int tries = 0; tries < 100; tries++) {
		char *log = get_log(k, pod, NULL);
		const char *p = strstr(log, "worker pid=");
		int pid = p ? (int)strtol(p + strlen("worker pid="), NULL, 10) : 0;
		gwb_free(log);
		if (pid > 0)
			return pid;
		usleep(50 * 1000);
	}
	t_fail(__FILE__, __LINE__, "%s logged no pid", pod);
	return 0;
}

/* Field 19 of /proc/pid/stat: the nice value. */
static int nice_of(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	CHECKF(f != NULL, "cannot open %s", path);
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	CHECKF(p != NULL, "no ')' in %s", path);
	int field = 2;
	for (; *p && field < 19; p++)
		if (*p == ' ')
			field++;
	return (int)strtol(p, NULL, 10);
}

/* A container's CPU weight follows its cpu request as a kubelet's cpu.shares do (shares =
 * milli-cores x 1024 / 1000, at least 2), as the nice value with the nearest weight, on the
 * process and, where the kernel groups sessions (autogroup), on its session's group. */
TEST_T(kubelet_cpu_weight, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *env[] = { "SLEEP=30", NULL };
	static const struct {
		const char *name, *cpu;
		int nice;
	} pods[] = { { "best-effort", NULL, 19 }, { "ten-milli", "10m", 19 },
		     { "tenth", "100m", 10 }, { "half", "500m", 3 }, { "one-core", "1", 0 } };
	for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
		json_t *spec = h_kubesim_pod_spec(16, 1, env);
		if (pods[i].cpu) {
			json_t *res = json_object_get(
				json_array_get(json_object_get(spec, "containers"), 0), "resources");
			json_object_set_new(json_object_get(res, "requests"), "cpu",
					    json_string(pods[i].cpu));
			json_object_set_new(json_object_get(res, "limits"), "cpu",
					    json_string(pods[i].cpu));
		}
		json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "v1", "kind",
					"Pod", "metadata", "name", pods[i].name, "namespace",
					"gpu-workbench", "spec", spec);
		char *text = json_dumps(pod, JSON_COMPACT);
		json_decref(pod);
		json_decref(h_kube_create(&k, PODS, text));
		gwb_free(text);
	}
	int grouped = access("/proc/self/autogroup", F_OK) == 0;
	for (size_t i = 0; i < sizeof pods / sizeof pods[0]; i++) {
		char path[128];
		snprintf(path, sizeof path, PODS "/%s", pods[i].name);
		json_decref(h_kube_wait(&k, path, h_pred_phase, "Running", 5000, path));
		int pid = logged_pid(&k, pods[i].name);
		/* A weight of 0 leaves the worker at kubesim's own niceness (10 in a suite run
		 * under `nice`). */
		int want_nice = pods[i].nice > 0 ? pods[i].nice : nice_of(k.proc.pid);
		CHECKF(nice_of(pid) == want_nice, "%s (cpu %s): nice %d, want %d", pods[i].name,
		       pods[i].cpu ? pods[i].cpu : "none", nice_of(pid), want_nice);
		if (!grouped)
			continue;
		char ag[64], want[32];
		snprintf(path, sizeof path, "/proc/%d/autogroup", pid);
		FILE *f = fopen(path, "r");
		CHECKF(f && fgets(ag, sizeof ag, f), "cannot read %s", path);
		fclose(f);
		snprintf(want, sizeof want, " nice %d\n", pods[i].nice);
		CHECKF(strstr(ag, want) != NULL, "%s: autogroup \"%s\", want \"%s\"", pods[i].name, ag,
		       want);
	}
}
