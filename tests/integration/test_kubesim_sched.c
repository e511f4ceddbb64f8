/* DeviceShare scheduling (koordinator.md §4) on the default node: two 8 GiB cards. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define PODS "/api/v1/namespaces/gpu-workbench/pods"
#define NODE "/api/v1/nodes/colima-gwb"

static void create_pod(struct h_kubesim *k, const char *name, int mem, int core)
{
	const char *env[] = { "SLEEP=30", NULL };
	char *pod = h_kubesim_gpu_pod(name, mem, core, env);
	json_decref(h_kube_create(k, PODS, pod));
	gwb_free(pod);
}

/* Waits for the pod to be bound; returns the minor of its first card. */
static int bound_minor(struct h_kubesim *k, const char *name, struct devalloc *out)
{
	char path[256];
	snprintf(path, sizeof path, PODS "/%s", name);
	json_t *pod = h_kube_wait(k, path, h_pred_bound, NULL, 3000, name);
	const char *ann = json_string_value(json_object_get(
		json_object_get(json_object_get(pod, "metadata"), "annotations"),
		DEVALLOC_ANNOTATION));
	CHECKF(ann, "%s has no %s annotation", name, DEVALLOC_ANNOTATION);
	struct devalloc a;
	CHECK_INT(devalloc_parse(ann, strlen(ann), &a, NULL, 0), 0);
	CHECK(a.ncards >= 1);
	json_decref(pod);
	if (out)
		*out = a;
	return a.cards[0].minor;
}

struct cond_msg {
	const char *prefix;
};

static int pred_unschedulable(const json_t *pod, void *arg)
{
	const char *want = ((struct cond_msg *)arg)->prefix;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(json_object_get(pod, "status"), "conditions"), i, c)
	{
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *m = json_string_value(json_object_get(c, "message"));
		const char *r = json_string_value(json_object_get(c, "reason"));
		if (t && !strcmp(t, "PodScheduled") && m && r && !strcmp(r, "Unschedulable") &&
		    !strcmp(m, want))
			return 1;
	}
	return 0;
}

static void expect_pending(struct h_kubesim *k, const char *name, const char *msg)
{
	char path[256];
	snprintf(path, sizeof path, PODS "/%s", name);
	struct cond_msg cm = { msg };
	json_t *pod = h_kube_wait(k, path, pred_unschedulable, &cm, 3000, msg);
	CHECK(json_object_get(json_object_get(pod, "spec"), "nodeName") == NULL);
	CHECK_STR(json_string_value(json_object_get(json_object_get(pod, "status"), "phase")),
		  "Pending");
	json_decref(pod);
}

static const char *alloc_of(const json_t *node, const char *res)
{
	const char *s = json_string_value(
		json_object_get(json_object_get(json_object_get(node, "status"), "allocatable"), res));
	return s ? s : "(none)";
}

TEST_T(sched_fragmentation, 40)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	json_t *node = h_kube_get(&k, NODE);
	CHECK_STR(alloc_of(node, "koordinator.sh/gpu-memory"), "16Gi");
	CHECK_STR(alloc_of(node, "koordinator.sh/gpu-core"), "200");
	CHECK_STR(alloc_of(node, "koordinator.sh/gpu.shared"), "200");
	json_decref(node);

	create_pod(&k, "big-a", 5120, 60);
	int ma = bound_minor(&k, "big-a", NULL);
	create_pod(&k, "big-b", 5120, 60);
	int mb = bound_minor(&k, "big-b", NULL);
	CHECKF(ma != mb, "both big pods on card %d", ma);

	/* 6144 MiB are free in total, but 3072 MiB per card: DeviceShare, not the node totals. */
	create_pod(&k, "small", 4096, 30);
	expect_pending(&k, "small", "0/1 nodes are available: 1 Insufficient GPU Devices.");
	json_t *evs = h_kube_get(&k, "/api/v1/namespaces/gpu-workbench/events?fieldSelector="
				     "involvedObject.name%3Dsmall,reason%3DFailedScheduling");
	json_t *ev = json_array_get(json_object_get(evs, "items"), 0);
	CHECK(ev);
	CHECK_STR(json_string_value(json_object_get(ev, "type")), "Warning");
	json_decref(evs);

	/* Deleting one big pod frees its card; the small one binds there. */
	CHECK_INT(h_kube(&k, "DELETE", PODS "/big-a?gracePeriodSeconds=0", NULL, NULL, NULL), 200);
	struct devalloc a;
	int ms = bound_minor(&k, "small", &a);
	CHECK_INT(ms, ma);
	CHECK_INT(a.cards[0].mem_bytes, 4096LL << 20);
	CHECK_INT(a.cards[0].ratio, 50);
	CHECK_INT(a.cards[0].core, 30);
}

TEST_T(sched_small_pods_card_choice, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	/* Empty cards first (lowest minor), then the lowest-minor card that fits. */
	const char *names[] = { "s1", "s2", "s3", "s4" };
	int want[] = { 0, 1, 0, 0 };
	for (int i = 0; i < 4; i++) {
		create_pod(&k, names[i], 1024, 25);
		struct devalloc a;
		CHECK_INT(bound_minor(&k, names[i], &a), want[i]);
		CHECK_INT(a.cards[0].ratio, 12); /* 1 GiB of 8 GiB = 12.5 %, truncated */
		CHECK(a.cards[0].has_core && a.cards[0].core == 25);
		CHECK(a.cards[0].id[0]);
	}
}

TEST_T(sched_limits_and_messages, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	/* A 9 GiB single-card request never fits an 8 GiB card (the node has 16 GiB). */
	create_pod(&k, "huge", 9216, 0);
	expect_pending(&k, "huge", "0/1 nodes are available: 1 Insufficient GPU Devices.");
	/* Node totals first: more than the node has at all. */
	create_pod(&k, "toomuch", 20480, 0);
	expect_pending(&k, "toomuch",
		       "0/1 nodes are available: 1 Insufficient koordinator.sh/gpu-memory.");
	/* gpu-core alone: the webhook adds gpu.shared, and {core, shared} is no valid set. */
	const char *body = "{\"metadata\":{\"name\":\"coreonly\"},\"spec\":{\"schedulerName\":"
			   "\"koord-scheduler\",\"containers\":[{\"name\":\"w\",\"image\":\"x\","
			   "\"resources\":{\"limits\":{\"koordinator.sh/gpu-core\":\"50\"}}}]}}";
	json_decref(h_kube_create(&k, PODS, body));
	expect_pending(&k, "coreonly",
		       "0/1 nodes are available: invalid resource device requests: "
		       "[koordinator.sh/gpu-core koordinator.sh/gpu.shared].");
	/* A pod for a scheduler that does not run stays Pending without a condition. */
	body = "{\"metadata\":{\"name\":\"other\"},\"spec\":{\"schedulerName\":\"nobody\","
	       "\"containers\":[{\"name\":\"w\",\"image\":\"x\"}]}}";
	json_decref(h_kube_create(&k, PODS, body));
	h_sleep_ms(300);
	json_t *p = h_kube_get(&k, PODS "/other");
	CHECK(json_object_get(json_object_get(p, "status"), "conditions") == NULL);
	json_decref(p);
}

TEST_T(sched_gpu_shared_gate_off, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--no-gpu-shared-sync";
	h_kubesim_start(&k);
	json_t *node = h_kube_get(&k, NODE);
	CHECK_STR(alloc_of(node, "koordinator.sh/gpu.shared"), "(none)");
	json_decref(node);
	create_pod(&k, "p", 1024, 10);
	expect_pending(&k, "p", "0/1 nodes are available: 1 Insufficient koordinator.sh/gpu.shared.");
}

TEST_T(sched_unhealthy_card, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	CHECK_INT(h_kubesim_ctl(&k, "POST", "/_kubesim/actions/device-health",
				"{\"minor\":0,\"healthy\":false,\"xid\":79}", NULL),
		  200);
	for (int i = 0; i < 100; i++) {
		json_t *n = h_kube_get(&k, NODE);
		int ok = !strcmp(alloc_of(n, "koordinator.sh/gpu-memory"), "8Gi");
		json_decref(n);
		if (ok)
			break;
		h_sleep_ms(20);
	}
	json_t *n = h_kube_get(&k, NODE);
	CHECK_STR(alloc_of(n, "koordinator.sh/gpu-memory"), "8Gi");
	CHECK_STR(alloc_of(n, "koordinator.sh/gpu.shared"), "100");
	json_decref(n);
	/* The unhealthy card receives nothing. */
	create_pod(&k, "u1", 1024, 10);
	CHECK_INT(bound_minor(&k, "u1", NULL), 1);
	create_pod(&k, "u2", 1024, 10);
	CHECK_INT(bound_minor(&k, "u2", NULL), 1);
	create_pod(&k, "u3", 7168, 10);
	expect_pending(&k, "u3", "0/1 nodes are available: 1 Insufficient koordinator.sh/gpu-memory.");
	/* Healthy again: u3 goes to card 0. */
	CHECK_INT(h_kubesim_ctl(&k, "POST", "/_kubesim/actions/device-health",
				"{\"minor\":0,\"healthy\":true}", NULL),
		  200);
	CHECK_INT(bound_minor(&k, "u3", NULL), 0);
}
