/* The installed kubectl (a gcloud dispatcher picking kubectl 1.32 from /version) against
 * kubesim: discovery, Tables, -o yaml, create/apply -f, delete, get -w. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define PODS "/api/v1/namespaces/gpu-workbench/pods"

static char *kubectl_ok(struct h_kubesim *k, const char *const *args)
{
	char *out = NULL;
	int rc = h_kubectl(k, &out, args);
	if (rc != 0) {
		t_log("kubectl %s %s: exit %d\n%s", args[0], args[1] ? args[1] : "", rc, out);
		gwb_free(out);
		t_fail(__FILE__, __LINE__, "kubectl failed");
	}
	return out;
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return gwb_strdup("");
	char *buf = gwb_malloc(65536);
	size_t n = fread(buf, 1, 65535, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

static int pred_running(const json_t *list, void *arg)
{
	(void)arg;
	json_t *p = json_array_get(json_object_get(list, "items"), 0);
	const char *ph = json_string_value(json_object_get(json_object_get(p, "status"), "phase"));
	return ph && !strcmp(ph, "Running");
}

static int pred_empty(const json_t *list, void *arg)
{
	(void)arg;
	return json_array_size(json_object_get(list, "items")) == 0;
}

TEST_T(kubectl_device_yaml_and_tables, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	const char *a1[] = { "get", "devices", "colima-gwb", "-o", "yaml", NULL };
	char *out = kubectl_ok(&k, a1);
	CHECKF(strstr(out, "kind: Device") && strstr(out, "koordinator.sh/gpu-memory: 8Gi") &&
		       strstr(out, "minor: 1") && strstr(out, "pcieID: pci0000:00"),
	       "%s", out);
	gwb_free(out);
	const char *a2[] = { "get", "nodes", NULL };
	out = kubectl_ok(&k, a2);
	CHECKF(strstr(out, "STATUS") && strstr(out, "colima-gwb   Ready"), "%s", out);
	gwb_free(out);
	/* kubectl create namespace sends protobuf; kubesim reads its metadata. */
	const char *a3[] = { "create", "namespace", "extra", NULL };
	out = kubectl_ok(&k, a3);
	CHECKF(strstr(out, "namespace/extra created"), "%s", out);
	gwb_free(out);
	json_t *ns = h_kube_get(&k, "/api/v1/namespaces/extra");
	CHECK(ns != NULL);
	json_decref(ns);
	const char *a4[] = { "delete", "namespace", "extra", NULL };
	out = kubectl_ok(&k, a4);
	gwb_free(out);
	json_decref(h_kube_wait(&k, "/api/v1/namespaces/extra", h_pred_gone, NULL, 3000,
				"namespace gone"));
}

TEST_T(kubectl_jobs_pods_watch_delete, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	/* kubectl get pods -w from before the Job exists. */
	const char *aw[] = { "-n", "gpu-workbench", "get", "pods", "-w", NULL };
	const char *wfile = h_path("watch.out");
	pid_t watcher = h_kubectl_bg(&k, wfile, aw);
	/* Wait until its watch is open (discovery and the list come first). */
	for (int64_t end = clock_mono_ms() + 10000;;) {
		json_t *st = NULL;
		h_kubesim_ctl(&k, "GET", "/_kubesim/state", NULL, &st);
		int open = (int)json_integer_value(json_object_get(st, "watches"));
		json_decref(st);
		if (open > 0)
			break;
		CHECKF(clock_mono_ms() < end, "kubectl get -w never opened its watch");
		h_sleep_ms(20);
	}

	const char *env[] = { "SLEEP=30", NULL };
	char *job = h_kubesim_gpu_job("kj", 2048, 20, env, 0, NULL);
	const char *jpath = h_path("job.json");
	FILE *f = fopen(jpath, "w");
	fputs(job, f);
	fclose(f);
	gwb_free(job);
	const char *ac[] = { "create", "-f", jpath, NULL };
	char *out = kubectl_ok(&k, ac);
	CHECKF(strstr(out, "job.batch/kj created"), "%s", out);
	gwb_free(out);
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Dkj", pred_running, NULL, 5000,
				"kj running"));

	const char *ay[] = { "-n", "gpu-workbench", "get", "pods", "-o", "yaml", NULL };
	out = kubectl_ok(&k, ay);
	CHECKF(strstr(out, "schedulerName: koord-scheduler"), "%s", out);
	CHECKF(strstr(out, "scheduling.koordinator.sh/device-allocated: '{\"gpu\":[{\"minor\":0,"),
	       "%s", out);
	gwb_free(out);

	const char *aj[] = { "get", "jobs", NULL };
	out = kubectl_ok(&k, aj);
	CHECKF(strstr(out, "NAME") && strstr(out, "STATUS") && strstr(out, "COMPLETIONS") &&
		       strstr(out, "DURATION"),
	       "%s", out);
	CHECKF(strstr(out, "kj ") && strstr(out, "Running") && strstr(out, "0/1"), "%s", out);
	gwb_free(out);

	const char *ad[] = { "delete", "job", "kj", NULL };
	out = kubectl_ok(&k, ad);
	CHECKF(strstr(out, "job.batch \"kj\" deleted"), "%s", out);
	gwb_free(out);
	json_decref(h_kube_wait(&k, PODS "?labelSelector=job-name%3Dkj", pred_empty, NULL, 5000,
				"kj pods collected"));

	/* The watch saw the pod come, run, and terminate. */
	char *w = NULL;
	int64_t deadline = clock_mono_ms() + 3000;
	for (;;) {
		gwb_free(w);
		w = read_file(wfile);
		if ((strstr(w, "Terminating") || strstr(w, "Error")) || clock_mono_ms() > deadline)
			break;
		h_sleep_ms(50);
	}
	kill(watcher, SIGKILL);
	waitpid(watcher, NULL, 0);
	CHECKF(strstr(w, "READY") && strstr(w, "kj-") && strstr(w, "Pending") &&
		       strstr(w, "Running") && strstr(w, "Terminating"),
	       "watch output:\n%s", w);
	gwb_free(w);
}

TEST_T(kubectl_apply_deploy_manifests, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--no-device";
	h_kubesim_start(&k);
	json_t *n = h_kube_get(&k, "/api/v1/nodes/colima-gwb");
	CHECK(json_object_get(json_object_get(json_object_get(n, "status"), "allocatable"),
			      "koordinator.sh/gpu-memory") == NULL);
	json_decref(n);
	char dir[4200];
	snprintf(dir, sizeof dir, "%s/deploy/kubesim", h_repo_root());
	const char *aa[] = { "apply", "-f", dir, NULL };
	char *out = kubectl_ok(&k, aa);
	CHECKF(strstr(out, "device.scheduling.koordinator.sh/colima-gwb created") &&
		       strstr(out, "clustercolocationprofile.config.koordinator.sh/gpu-workbench-be "
				   "created"),
	       "%s", out);
	gwb_free(out);
	out = kubectl_ok(&k, aa);
	CHECKF(strstr(out, "device.scheduling.koordinator.sh/colima-gwb unchanged"), "%s", out);
	gwb_free(out);
	h_sleep_ms(100);
	n = h_kube_get(&k, "/api/v1/nodes/colima-gwb");
	json_t *alloc = json_object_get(json_object_get(n, "status"), "allocatable");
	CHECK_STR(json_string_value(json_object_get(alloc, "koordinator.sh/gpu-memory")), "16Gi");
	CHECK_STR(json_string_value(json_object_get(alloc, "koordinator.sh/gpu.shared")), "200");
	json_decref(n);
	/* The published Device is the one kubesim creates by itself. */
	json_t *d = h_kube_get(&k, "/apis/scheduling.koordinator.sh/v1alpha1/devices/colima-gwb");
	json_t *devs = json_object_get(json_object_get(d, "spec"), "devices");
	CHECK_INT(json_array_size(devs), 2);
	json_decref(d);
}
