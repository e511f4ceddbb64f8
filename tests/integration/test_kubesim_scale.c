/* kubesim at scale: the store's indexes seen through label-selector lists and the Job
 * controller under create, delete, relabel and owner change; --nodes; the in-flight limits
 * (429 with Retry-After, success after); both DeviceShare score strategies. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define NS "gpu-workbench"
#define PODS "/api/v1/namespaces/" NS "/pods"
#define JOBS "/apis/batch/v1/namespaces/" NS "/jobs"

/* A pod no scheduler serves: it stays Pending without processes, so the store alone decides
 * what lists and controllers see. */
static void plain_pod(struct h_kubesim *k, const char *ns, const char *name, const char *task)
{
	char path[256], body[1024];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods", ns);
	snprintf(body, sizeof body,
		 "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
		 "\"labels\":{\"gwb.io/task\":\"%s\",\"tier\":\"t\"}},\"spec\":{\"schedulerName\":"
		 "\"nobody\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}",
		 name, task);
	json_decref(h_kube_create(k, path, body));
}

/* The names of the items of a list at path, sorted by the server, joined with ','. */
static char *names_at(struct h_kubesim *k, const char *path)
{
	json_t *list = h_kube_get(k, path);
	CHECKF(list, "no list at %s", path);
	size_t i, o = 0;
	json_t *it;
	char *out = gwb_calloc(1, 4096);
	json_array_foreach(json_object_get(list, "items"), i, it)
	{
		const char *n = json_string_value(
			json_object_get(json_object_get(it, "metadata"), "name"));
		o += (size_t)snprintf(out + o, 4096 - o, "%s%s", o ? "," : "", n ? n : "?");
		if (o >= 4096)
			break;
	}
	json_decref(list);
	return out;
}

static void expect_names(struct h_kubesim *k, const char *path, const char *want)
{
	char *got = names_at(k, path);
	CHECKF(!strcmp(got, want), "%s lists [%s], expected [%s]", path, got, want);
	gwb_free(got);
}

TEST_T(scale_index_label_lists, 40)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	plain_pod(&k, NS, "p1", "a");
	plain_pod(&k, NS, "p2", "b");
	plain_pod(&k, NS, "p3", "a");
	plain_pod(&k, "default", "p4", "a");
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Da", "p1,p3");
	expect_names(&k, "/api/v1/pods?labelSelector=gwb.io/task%3Da", "p4,p1,p3");
	expect_names(&k, "/api/v1/pods?labelSelector=gwb.io/task%3D%3Db", "p2");
	expect_names(&k, PODS "?labelSelector=gwb.io/task+in+(a)", "p1,p3");
	/* An equality term with another requirement: both apply. */
	expect_names(&k, PODS "?labelSelector=tier%3Dt,gwb.io/task!%3Db", "p1,p3");
	/* No equality term (the whole namespace is scanned): the same answer. */
	expect_names(&k, PODS "?labelSelector=gwb.io/task+in+(a,c)", "p1,p3");
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Dzzz", "");

	/* Relabel: p1 moves from a to b. */
	CHECK_INT(h_kube(&k, "PATCH", PODS "/p1",
			 "{\"metadata\":{\"labels\":{\"gwb.io/task\":\"b\"}}}",
			 "application/merge-patch+json", NULL),
		  200);
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Da", "p3");
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Db", "p1,p2");
	/* A label removed: p2 leaves every list of its label. */
	CHECK_INT(h_kube(&k, "PATCH", PODS "/p2", "{\"metadata\":{\"labels\":{\"gwb.io/task\":null}}}",
			 "application/merge-patch+json", NULL),
		  200);
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Db", "p1");
	expect_names(&k, PODS "?labelSelector=!gwb.io/task", "p2");

	/* Delete, and create again under the same name with another label. */
	CHECK_INT(h_kube(&k, "DELETE", PODS "/p3?gracePeriodSeconds=0", NULL, NULL, NULL), 200);
	h_kube_wait(&k, PODS "/p3", h_pred_gone, NULL, 3000, "p3 gone");
	expect_names(&k, "/api/v1/pods?labelSelector=gwb.io/task%3Da", "p4");
	plain_pod(&k, NS, "p3", "c");
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Dc", "p3");
	expect_names(&k, PODS "?labelSelector=gwb.io/task%3Da", "");
	/* deletecollection takes the same path. */
	CHECK_INT(h_kube(&k, "DELETE", "/api/v1/namespaces/default/pods?labelSelector=gwb.io/task%3Da",
			 NULL, NULL, NULL),
		  200);
	expect_names(&k, "/api/v1/pods?labelSelector=tier%3Dt", "p1,p2,p3");
}

/* Follows a paged list: the names of every page joined with '|' between pages, and the
 * remainingItemCount of each page but the last joined with ','. */
static void pages(struct h_kubesim *k, const char *path, char *out, size_t len, char *rem,
		  size_t rlen)
{
	char cont[1400] = "";
	size_t o = 0, r = 0;
	out[0] = rem[0] = '\0';
	for (int page = 0; page < 50; page++) {
		char full[2048];
		snprintf(full, sizeof full, "%s%s%s", path, cont[0] ? "&continue=" : "", cont);
		json_t *list = h_kube_get(k, full);
		CHECKF(list, "no list at %s", full);
		size_t i;
		json_t *it;
		json_array_foreach(json_object_get(list, "items"), i, it)
			o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s",
					      i ? "," : (page ? "|" : ""),
					      json_string_value(json_object_get(
						      json_object_get(it, "metadata"), "name")));
		json_t *meta = json_object_get(list, "metadata");
		const char *next = json_string_value(json_object_get(meta, "continue"));
		if (next)
			r += (size_t)snprintf(rem + r, r < rlen ? rlen - r : 0, "%s%lld",
					      r ? "," : "",
					      (long long)json_integer_value(json_object_get(
						      meta, "remainingItemCount")));
		snprintf(cont, sizeof cont, "%s", next ? next : "");
		json_decref(list);
		if (!cont[0])
			return;
	}
	t_fail(__FILE__, __LINE__, "%s: more than 50 pages", path);
}

TEST_T(scale_paged_lists, 30)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	plain_pod(&k, NS, "p1", "a");
	plain_pod(&k, NS, "p2", "b");
	plain_pod(&k, NS, "p3", "a");
	plain_pod(&k, NS, "p4", "a");
	plain_pod(&k, NS, "p5", "b");
	plain_pod(&k, "default", "d1", "a");
	char got[1024], rem[256];
	pages(&k, PODS "?limit=2", got, sizeof got, rem, sizeof rem);
	CHECK_STR(got, "p1,p2|p3,p4|p5");
	CHECK_STR(rem, "3,1");
	pages(&k, "/api/v1/pods?limit=4", got, sizeof got, rem, sizeof rem);
	CHECK_STR(got, "d1,p1,p2,p3|p4,p5");
	CHECK_STR(rem, "2");
	pages(&k, "/api/v1/namespaces/default/pods?limit=1", got, sizeof got, rem, sizeof rem);
	CHECK_STR(got, "d1");
	/* Filtered pages (from the label index). */
	pages(&k, "/api/v1/pods?labelSelector=gwb.io/task%3Da&limit=2", got, sizeof got, rem,
	      sizeof rem);
	CHECK_STR(got, "d1,p1|p3,p4");
	CHECK_STR(rem, "2");
	/* Cluster-scoped: namespaces in name order. */
	pages(&k, "/api/v1/namespaces?limit=4", got, sizeof got, rem, sizeof rem);
	CHECK_STR(got, "default,gpu-workbench,koordinator-system,kube-node-lease|kube-public,"
		       "kube-system");
	CHECK_STR(rem, "2");
	/* A pod created between pages shows in a later page when it sorts after the token. */
	json_t *first = h_kube_get(&k, PODS "?limit=2");
	const char *tok = json_string_value(
		json_object_get(json_object_get(first, "metadata"), "continue"));
	CHECK(tok);
	char path[1600];
	snprintf(path, sizeof path, PODS "?limit=10&continue=%s", tok);
	json_decref(first);
	plain_pod(&k, NS, "p25", "c");
	expect_names(&k, path, "p25,p3,p4,p5");
}

static void create_job(struct h_kubesim *k, const char *name)
{
	char body[1024];
	snprintf(body, sizeof body,
		 "{\"apiVersion\":\"batch/v1\",\"kind\":\"Job\",\"metadata\":{\"name\":\"%s\"},"
		 "\"spec\":{\"backoffLimit\":0,\"template\":{\"metadata\":{\"labels\":"
		 "{\"gwb.io/task\":\"%s\"}},\"spec\":{\"schedulerName\":\"nobody\","
		 "\"restartPolicy\":\"Never\",\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}}}",
		 name, name);
	json_decref(h_kube_create(k, JOBS, body));
}

static int pred_active(const json_t *job, void *arg)
{
	json_t *a = json_object_get(json_object_get(job, "status"), "active");
	return job && json_integer_value(a) == *(int *)arg;
}

static void wait_active(struct h_kubesim *k, const char *job, int n)
{
	char path[256], what[128];
	snprintf(path, sizeof path, JOBS "/%s", job);
	snprintf(what, sizeof what, "%s with %d active", job, n);
	json_decref(h_kube_wait(k, path, pred_active, &n, 5000, what));
}

/* The name of the only pod labelled gwb.io/task=task (fails otherwise); static buffer. */
static const char *only_pod(struct h_kubesim *k, const char *task)
{
	static char name[128];
	char path[256];
	snprintf(path, sizeof path, PODS "?labelSelector=gwb.io/task%%3D%s", task);
	json_t *list = h_kube_get(k, path);
	CHECKF(json_array_size(json_object_get(list, "items")) == 1, "%zu pods of %s",
	       json_array_size(json_object_get(list, "items")), task);
	snprintf(name, sizeof name, "%s",
		 json_string_value(json_object_get(
			 json_object_get(json_array_get(json_object_get(list, "items"), 0), "metadata"),
			 "name")));
	json_decref(list);
	return name;
}

static size_t count_at(struct h_kubesim *k, const char *path)
{
	json_t *list = h_kube_get(k, path);
	size_t n = json_array_size(json_object_get(list, "items"));
	json_decref(list);
	return n;
}

TEST_T(scale_index_owner_change, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	h_kubesim_start(&k);
	create_job(&k, "j1");
	create_job(&k, "j2");
	wait_active(&k, "j1", 1);
	wait_active(&k, "j2", 1);
	char p1[128], p2[128], path[256];
	snprintf(p1, sizeof p1, "%s", only_pod(&k, "j1"));
	snprintf(p2, sizeof p2, "%s", only_pod(&k, "j2"));

	/* Delete j1's pod (its tracking finalizer first: nothing runs it to an end): the
	 * controller finds no owned pod and makes a replacement. */
	snprintf(path, sizeof path, PODS "/%s", p1);
	CHECK_INT(h_kube(&k, "PATCH", path, "{\"metadata\":{\"finalizers\":null}}",
			 "application/merge-patch+json", NULL),
		  200);
	snprintf(path, sizeof path, PODS "/%s?gracePeriodSeconds=0", p1);
	CHECK_INT(h_kube(&k, "DELETE", path, NULL, NULL, NULL), 200);
	snprintf(path, sizeof path, PODS "/%s", p1);
	h_kube_wait(&k, path, h_pred_gone, NULL, 3000, "j1's first pod gone");
	wait_active(&k, "j1", 1);
	snprintf(p1, sizeof p1, "%s", only_pod(&k, "j1"));

	/* Owner change: j1's pod is re-owned by j2. j2 now owns two pods; j1 none, so it makes
	 * another. */
	json_t *j2 = h_kube_get(&k, JOBS "/j2");
	const char *uid2 =
		json_string_value(json_object_get(json_object_get(j2, "metadata"), "uid"));
	char patch[1024];
	snprintf(patch, sizeof patch,
		 "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"batch/v1\",\"kind\":"
		 "\"Job\",\"name\":\"j2\",\"uid\":\"%s\",\"controller\":true,"
		 "\"blockOwnerDeletion\":true}]}}",
		 uid2);
	json_decref(j2);
	snprintf(path, sizeof path, PODS "/%s", p1);
	CHECK_INT(h_kube(&k, "PATCH", path, patch, "application/merge-patch+json", NULL), 200);
	wait_active(&k, "j2", 2);
	wait_active(&k, "j1", 1);
	CHECK_INT(count_at(&k, PODS "?labelSelector=gwb.io/task%3Dj1"), 2);

	/* Owner removed: the pod is orphaned; j2 is back to one. */
	CHECK_INT(h_kube(&k, "PATCH", path, "{\"metadata\":{\"ownerReferences\":null}}",
			 "application/merge-patch+json", NULL),
		  200);
	wait_active(&k, "j2", 1);

	/* Background deletion of j1: the collector deletes the pod j1 still owns and leaves the
	 * orphan; j2's pod stays. */
	CHECK_INT(h_kube(&k, "DELETE", JOBS "/j1?propagationPolicy=Background", NULL, NULL, NULL),
		  200);
	h_kube_wait(&k, JOBS "/j1", h_pred_gone, NULL, 3000, "j1 gone");
	for (int i = 0; i < 150 && count_at(&k, PODS "?labelSelector=gwb.io/task%3Dj1") != 1; i++)
		h_sleep_ms(20);
	CHECK_STR(only_pod(&k, "j1"), p1);
	snprintf(path, sizeof path, PODS "/%s", p2);
	json_t *pod2 = h_kube_get(&k, path);
	CHECKF(pod2, "j2's pod %s was collected", p2);
	json_decref(pod2);
	CHECK_INT(count_at(&k, "/api/v1/pods"), 2);
}

static int pred_running(const json_t *pod, void *arg)
{
	(void)arg;
	const char *ph = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
	return ph && !strcmp(ph, "Running");
}

/* Creates a GPU pod and waits until it is bound; returns its node (static buffer) and the
 * minor of its card. */
static const char *bind_gpu_pod(struct h_kubesim *k, const char *name, int mem, int *minor)
{
	static char node[128];
	const char *env[] = { "SLEEP=30", NULL };
	char *doc = h_kubesim_gpu_pod(name, mem, 10, env);
	json_decref(h_kube_create(k, PODS, doc));
	gwb_free(doc);
	char path[256];
	snprintf(path, sizeof path, PODS "/%s", name);
	json_t *pod = h_kube_wait(k, path, h_pred_bound, NULL, 5000, name);
	json_t *meta = json_object_get(pod, "metadata");
	const char *ann = json_string_value(
		json_object_get(json_object_get(meta, "annotations"), DEVALLOC_ANNOTATION));
	CHECKF(ann, "%s is bound without %s", name, DEVALLOC_ANNOTATION);
	struct devalloc a;
	CHECK_INT(devalloc_parse(ann, strlen(ann), &a, NULL, 0), 0);
	CHECK_INT(a.ncards, 1);
	*minor = a.cards[0].minor;
	snprintf(node, sizeof node, "%s",
		 json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName")));
	json_decref(pod);
	return node;
}

TEST_T(scale_three_nodes, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--nodes";
	k.args[1] = "3";
	h_kubesim_start(&k);
	expect_names(&k, "/api/v1/nodes", "colima-gwb,colima-gwb-2,colima-gwb-3");
	expect_names(&k, "/apis/scheduling.koordinator.sh/v1alpha1/devices",
		     "colima-gwb,colima-gwb-2,colima-gwb-3");
	json_t *devs = h_kube_get(&k, "/apis/scheduling.koordinator.sh/v1alpha1/devices");
	size_t i;
	json_t *d;
	char first_id[128] = "";
	json_array_foreach(json_object_get(devs, "items"), i, d)
	{
		json_t *cards = json_object_get(json_object_get(d, "spec"), "devices");
		CHECK_INT(json_array_size(cards), 2);
		const char *id = json_string_value(json_object_get(json_array_get(cards, 0), "id"));
		CHECK(id);
		CHECKF(strcmp(id, first_id), "two nodes share the card id %s", id);
		snprintf(first_id, sizeof first_id, "%s", id);
	}
	json_decref(devs);
	json_t *n3 = h_kube_get(&k, "/api/v1/nodes/colima-gwb-3");
	CHECK_STR(json_string_value(json_object_get(
			  json_object_get(json_object_get(n3, "status"), "allocatable"),
			  "koordinator.sh/gpu-memory")),
		  "16Gi");
	json_decref(n3);

	/* LeastAllocated spreads: each pod goes to the emptiest node, ties to name order. */
	const char *want[] = { "colima-gwb", "colima-gwb-2", "colima-gwb-3" };
	for (int p = 0; p < 3; p++) {
		char name[16];
		snprintf(name, sizeof name, "spread-%d", p);
		int minor;
		CHECK_STR(bind_gpu_pod(&k, name, 4096, &minor), want[p]);
		CHECK_INT(minor, 0);
	}
	/* The kubelet runs the pods of every node. */
	json_decref(h_kube_wait(&k, PODS "/spread-2", pred_running, NULL, 5000,
				"spread-2 running on colima-gwb-3"));
	json_t *st = NULL;
	CHECK_INT(h_kubesim_ctl(&k, "GET", "/_kubesim/state", NULL, &st), 200);
	CHECK_INT(json_integer_value(json_object_get(st, "nodes")), 3);
	json_decref(st);
}

/* Opens a connection and sends one request without reading the answer; returns the fd. */
static int send_raw(const struct h_kubesim *k, const char *method, const char *path,
		    const char *body)
{
	int port = atoi(strrchr(k->url, ':') + 1); /* banned-ok: the harness' own URL */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	CHECKF(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "cannot connect");
	char req[1024];
	int n = snprintf(req, sizeof req,
			 "%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n\r\n%s",
			 method, path, body ? strlen(body) : 0, body ? body : "");
	CHECK(write(fd, req, (size_t)n) == n);
	return fd;
}

/* The status code of the answer on fd (waits up to 5 s), or 0. */
static int read_status(int fd)
{
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char buf[64] = "";
	ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
	if (n < 12)
		return 0;
	buf[n] = '\0';
	return (int)strtol(buf + 9, NULL, 10);
}

static long limits_field(struct h_kubesim *k, const char *name)
{
	json_t *doc = NULL;
	CHECK_INT(h_kubesim_ctl(k, "GET", "/_kubesim/limits", NULL, &doc), 200);
	long v = (long)json_integer_value(json_object_get(doc, name));
	json_decref(doc);
	return v;
}

static void wait_inflight(struct h_kubesim *k, const char *name, long n)
{
	for (int i = 0; i < 250 && limits_field(k, name) != n; i++)
		h_sleep_ms(20);
	CHECK_INT(limits_field(k, name), n);
}

/* One request through libcurl: its status and Retry-After header. */
static long request(struct h_kubesim *k, const char *method, const char *path, const char *body,
		    char *retry_after, size_t len)
{
	char url[512];
	snprintf(url, sizeof url, "%s%s", k->url, path);
	const char *headers[] = { "Content-Type: application/json", NULL };
	struct h_resp r;
	h_http(&r, method, url, NULL, body, headers);
	long status = r.status;
	const char *ra = h_header(&r, "Retry-After");
	snprintf(retry_after, len, "%s", ra ? ra : "");
	if (status == 429) {
		CHECK_STR(json_string_value(json_object_get(r.json, "reason")), "TooManyRequests");
		CHECK_INT(json_integer_value(json_object_get(r.json, "code")), 429);
		CHECK_INT(json_integer_value(json_object_get(
				  json_object_get(r.json, "details"), "retryAfterSeconds")),
			  1);
	}
	h_resp_free(&r);
	return status;
}

TEST_T(scale_inflight_limit_429, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--max-requests-inflight";
	k.args[1] = "4";
	k.args[2] = "--max-mutating-requests-inflight";
	k.args[3] = "2";
	h_kubesim_start(&k);
	char ra[32];
	/* A watch is long-running: it holds no slot. */
	struct h_watch w;
	CHECK_INT(h_watch_open(&w, &k, PODS "?watch=true", NULL), 0);
	CHECK_INT(w.status, 200);
	CHECK_INT(limits_field(&k, "inflight"), 0);

	/* Hung requests stay in flight: four reads fill the non-mutating limit. */
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"api\":\"hang\"}", NULL), 200);
	int fds[6];
	for (int i = 0; i < 4; i++)
		fds[i] = send_raw(&k, "GET", PODS, NULL);
	wait_inflight(&k, "inflight", 4);
	CHECK_INT(request(&k, "GET", PODS, NULL, ra, sizeof ra), 429);
	CHECK_STR(ra, "1");
	/* The mutating limit is separate: two creates are held, the third is refused. */
	const char *pod = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":"
			  "\"held\"},\"spec\":{\"schedulerName\":\"nobody\",\"containers\":"
			  "[{\"name\":\"c\",\"image\":\"x\"}]}}";
	fds[4] = send_raw(&k, "POST", "/api/v1/namespaces/default/pods", pod);
	fds[5] = send_raw(&k, "DELETE", PODS "/nothing", NULL);
	wait_inflight(&k, "mutating_inflight", 2);
	CHECK_INT(request(&k, "POST", PODS, "{}", ra, sizeof ra), 429);
	CHECK_STR(ra, "1");
	CHECK(limits_field(&k, "rejected") >= 1);
	CHECK(limits_field(&k, "mutating_rejected") >= 1);

	/* The fault cleared, the held requests are answered and new ones succeed. */
	CHECK_INT(h_kubesim_ctl(&k, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	for (int i = 0; i < 6; i++) {
		int code = read_status(fds[i]);
		CHECKF(code != 0 && code != 429, "held request %d answered %d", i, code);
		close(fds[i]);
	}
	wait_inflight(&k, "inflight", 0);
	wait_inflight(&k, "mutating_inflight", 0);
	CHECK_INT(request(&k, "GET", PODS, NULL, ra, sizeof ra), 200);
	CHECK_STR(ra, "");

	/* Slow answers count too; the limit is changed at run time. */
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/limits", "{\"max_requests_inflight\":2}",
				NULL),
		  200);
	CHECK_INT(limits_field(&k, "max_requests_inflight"), 2);
	CHECK_INT(limits_field(&k, "max_mutating_requests_inflight"), 2);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/faults", "{\"slow_ms\":3000}", NULL), 200);
	fds[0] = send_raw(&k, "GET", "/api/v1/nodes", NULL);
	fds[1] = send_raw(&k, "GET", "/api/v1/nodes", NULL);
	wait_inflight(&k, "inflight", 2);
	CHECK_INT(request(&k, "GET", "/api/v1/nodes", NULL, ra, sizeof ra), 429);
	CHECK_INT(read_status(fds[0]), 200);
	CHECK_INT(read_status(fds[1]), 200);
	close(fds[0]);
	close(fds[1]);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/limits", "{\"max_requests_inflight\":0}",
				NULL),
		  200);
	CHECK_INT(h_kubesim_ctl(&k, "PUT", "/_kubesim/limits", "{\"max_requests_inflight\":-1}",
				NULL),
		  400);
	CHECK_INT(h_kubesim_ctl(&k, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	CHECK_INT(request(&k, "GET", "/api/v1/nodes", NULL, ra, sizeof ra), 200);
	h_watch_close(&w);
}

/* Two pods of 2048 MiB on one node with two empty cards, then (with two nodes) two more:
 * where each strategy puts them. */
static void strategy_case(const char *strategy, int second_minor, const char *second_node)
{
	/* Static: the harness stops them when the case ends (each case is its own process). */
	static struct h_kubesim one, two;
	h_kubesim_init(&one);
	one.args[0] = "--score-strategy";
	one.args[1] = strategy;
	h_kubesim_start(&one);
	int m;
	CHECK_STR(bind_gpu_pod(&one, "a", 2048, &m), "colima-gwb");
	CHECK_INT(m, 0);
	CHECK_STR(bind_gpu_pod(&one, "b", 2048, &m), "colima-gwb");
	CHECKF(m == second_minor, "%s: the second pod got card %d, expected %d", strategy, m,
	       second_minor);
	h_kubesim_stop(&one);

	h_kubesim_init(&two);
	two.args[0] = "--score-strategy";
	two.args[1] = strategy;
	two.args[2] = "--nodes";
	two.args[3] = "2";
	h_kubesim_start(&two);
	CHECK_STR(bind_gpu_pod(&two, "a", 2048, &m), "colima-gwb");
	const char *n = bind_gpu_pod(&two, "b", 2048, &m);
	CHECKF(!strcmp(n, second_node), "%s: the second pod went to %s, expected %s", strategy, n,
	       second_node);
	json_t *st = NULL;
	CHECK_INT(h_kubesim_ctl(&two, "GET", "/_kubesim/state", NULL, &st), 200);
	CHECK_STR(json_string_value(json_object_get(st, "score_strategy")), strategy);
	json_decref(st);
}

TEST_T(scale_score_least_allocated, 60)
{
	/* Spread: an empty card first, an empty node first. */
	strategy_case("LeastAllocated", 1, "colima-gwb-2");
}

TEST_T(scale_score_most_allocated, 60)
{
	/* Binpack: a used card that fits first, the fuller node first. */
	strategy_case("MostAllocated", 0, "colima-gwb");
}
