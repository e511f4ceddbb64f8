/* The Kubernetes client's flow control parts with a made-up clock: the token bucket's burst
 * and refill, the local queue's class and arrival order, Retry-After holds, the 429 delay, and
 * the verb and class of the requests the server makes. */
#include "server/kube/kubeflow.h"
#include "tests/harness/t.h"

TEST(kubeflow_bucket_burst_then_qps)
{
	struct kubeflow_bucket b;
	kubeflow_bucket_init(&b, 50, 100, 1000);
	int taken = 0;
	while (kubeflow_bucket_take(&b, 1000))
		taken++;
	CHECK_INT(taken, 100); /* the burst, at once */
	/* 50 a second: one token every 20 ms. */
	CHECK_INT(kubeflow_bucket_wait_ms(&b, 1000), 20);
	CHECK_INT(kubeflow_bucket_take(&b, 1019), 0);
	CHECK_INT(kubeflow_bucket_take(&b, 1020), 1);
	CHECK_INT(kubeflow_bucket_take(&b, 1020), 0);
	/* One second later: 50 more, never more than the burst. */
	taken = 0;
	while (kubeflow_bucket_take(&b, 2020))
		taken++;
	CHECK_INT(taken, 50);
	taken = 0;
	while (kubeflow_bucket_take(&b, 100000))
		taken++;
	CHECK_INT(taken, 100);
	/* A clock that goes back adds nothing. */
	CHECK_INT(kubeflow_bucket_take(&b, 50000), 0);
	CHECK(kubeflow_bucket_wait_ms(&b, 50000) > 0);
}

TEST(kubeflow_bucket_fractional_qps)
{
	struct kubeflow_bucket b;
	kubeflow_bucket_init(&b, 3, 1, 0);
	CHECK_INT(kubeflow_bucket_take(&b, 0), 1);
	/* 1/3 s: rounded up, so a timer set to it finds the token. */
	int64_t w = kubeflow_bucket_wait_ms(&b, 0);
	CHECK_INT(w, 334);
	CHECK_INT(kubeflow_bucket_take(&b, w - 1), 0);
	CHECK_INT(kubeflow_bucket_take(&b, w), 1);
}

static struct kubeflow_item item(enum kubeflow_class c, uint64_t seq, int watch)
{
	struct kubeflow_item it = { 0 };
	it.cls = c;
	it.seq = seq;
	it.is_watch = watch;
	return it;
}

static struct kubeflow_item *pop(struct kubeflow_queue *q, int64_t now, int w, int r)
{
	struct kubeflow_item *it = kubeflow_next(q, now, w, r);
	if (it)
		kubeflow_remove(q, it);
	return it;
}

TEST(kubeflow_queue_class_then_arrival_order)
{
	struct kubeflow_queue q = { 0 };
	/* Arrivals: create, read, create, cancel (mutate), list, watch, read. */
	struct kubeflow_item it[7] = {
		item(KUBEFLOW_CREATE, 1, 0), item(KUBEFLOW_READ, 2, 0), item(KUBEFLOW_CREATE, 3, 0),
		item(KUBEFLOW_MUTATE, 4, 0), item(KUBEFLOW_INFORMER, 5, 0),
		item(KUBEFLOW_INFORMER, 6, 1), item(KUBEFLOW_READ, 7, 0),
	};
	for (int i = 0; i < 7; i++)
		kubeflow_push(&q, &it[i]);
	CHECK_INT(q.depth, 7);
	const int want[7] = { 4, 5, 3, 1, 6, 0, 2 };
	for (int i = 0; i < 7; i++) {
		struct kubeflow_item *got = pop(&q, 0, 1, 1);
		CHECKF(got == &it[want[i]], "pop %d: seq %llu, expected %llu", i,
		       got ? (unsigned long long)got->seq : 0ULL,
		       (unsigned long long)it[want[i]].seq);
	}
	CHECK_INT(q.depth, 0);
	CHECK(kubeflow_next(&q, 0, 1, 1) == NULL);
}

TEST(kubeflow_queue_slots_and_retry_after)
{
	struct kubeflow_queue q = { 0 };
	struct kubeflow_item watch = item(KUBEFLOW_INFORMER, 1, 1);
	struct kubeflow_item list = item(KUBEFLOW_INFORMER, 2, 0);
	struct kubeflow_item create = item(KUBEFLOW_CREATE, 3, 0);
	kubeflow_push(&q, &watch);
	kubeflow_push(&q, &list);
	kubeflow_push(&q, &create);
	/* No request slot free: only the watch may go; no watch slot: the list first. */
	CHECK(kubeflow_next(&q, 0, 1, 0) == &watch);
	CHECK(kubeflow_next(&q, 0, 0, 1) == &list);
	CHECK(kubeflow_next(&q, 0, 0, 0) == NULL);
	/* The list got a 429 with Retry-After 1 s: it goes back in at its place, held. */
	kubeflow_remove(&q, &list);
	list.not_before_ms = 1000;
	kubeflow_push(&q, &list);
	CHECK(kubeflow_next(&q, 10, 0, 1) == &create);
	CHECK_INT(kubeflow_next_due(&q, 10), 1000);
	CHECK(kubeflow_next(&q, 1000, 0, 1) == &list);
	CHECK_INT(kubeflow_next_due(&q, 1000), 0);
	/* A request that comes back keeps its arrival order within its class. */
	struct kubeflow_item c4 = item(KUBEFLOW_CREATE, 4, 0);
	kubeflow_push(&q, &c4);
	kubeflow_remove(&q, &create);
	kubeflow_push(&q, &create);
	kubeflow_remove(&q, &list);
	kubeflow_remove(&q, &watch);
	CHECK(pop(&q, 2000, 1, 1) == &create);
	CHECK(pop(&q, 2000, 1, 1) == &c4);
	kubeflow_remove(&q, &c4); /* not queued: ignored */
	CHECK_INT(q.depth, 0);
}

TEST(kubeflow_retry_delay_honours_server_and_caps)
{
	CHECK_INT(kubeflow_retry_delay_ms(1, 1), 1000);
	CHECK_INT(kubeflow_retry_delay_ms(7, 3), 7000);
	CHECK_INT(kubeflow_retry_delay_ms(0, 1), 50);
	CHECK_INT(kubeflow_retry_delay_ms(86400, 1), 30000);
	CHECK_INT(kubeflow_retry_delay_ms(-1, 1), 250);
	CHECK_INT(kubeflow_retry_delay_ms(-1, 2), 500);
	CHECK_INT(kubeflow_retry_delay_ms(-1, 4), 2000);
	CHECK_INT(kubeflow_retry_delay_ms(-1, 40), 30000);
}

TEST(kubeflow_verbs_and_classes_of_our_requests)
{
	static const struct {
		const char *method, *path;
		int watch;
		enum kubeflow_verb verb;
		enum kubeflow_class cls;
	} cases[] = {
		/* The informers' lists and watches. */
		{ "GET", "/apis/batch/v1/namespaces/gpu-workbench/jobs?labelSelector=gwb.io%2Fmanaged"
			 "%3Dtrue",
		  0, KUBEFLOW_LIST, KUBEFLOW_INFORMER },
		{ "GET", "/api/v1/namespaces/gpu-workbench/pods", 0, KUBEFLOW_LIST,
		  KUBEFLOW_INFORMER },
		{ "GET", "/apis/scheduling.koordinator.sh/v1alpha1/devices", 0, KUBEFLOW_LIST,
		  KUBEFLOW_INFORMER },
		{ "GET", "/api/v1/namespaces/gpu-workbench/events?watch=1&resourceVersion=5", 1,
		  KUBEFLOW_WATCH, KUBEFLOW_INFORMER },
		{ "GET", "/api/v1/nodes", 0, KUBEFLOW_LIST, KUBEFLOW_INFORMER },
		/* The reconciler: suspend, observe, create. */
		{ "PATCH", "/apis/batch/v1/namespaces/gpu-workbench/jobs/gwb-t-1", 0, KUBEFLOW_PATCH,
		  KUBEFLOW_MUTATE },
		{ "DELETE", "/api/v1/namespaces/ns/pods/p", 0, KUBEFLOW_DELETE, KUBEFLOW_MUTATE },
		{ "PUT", "/apis/batch/v1/namespaces/ns/jobs/j", 0, KUBEFLOW_UPDATE, KUBEFLOW_MUTATE },
		{ "GET", "/apis/batch/v1/namespaces/gpu-workbench/jobs/gwb-t-1", 0, KUBEFLOW_GET,
		  KUBEFLOW_READ },
		{ "GET", "/api/v1/namespaces/gpu-workbench", 0, KUBEFLOW_GET, KUBEFLOW_READ },
		{ "GET", "/api/v1/nodes/colima-gwb", 0, KUBEFLOW_GET, KUBEFLOW_READ },
		{ "GET", "/version", 0, KUBEFLOW_GET, KUBEFLOW_READ },
		{ "POST", "/apis/batch/v1/namespaces/gpu-workbench/jobs", 0, KUBEFLOW_CREATE_VERB,
		  KUBEFLOW_CREATE },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		enum kubeflow_verb v = kubeflow_verb_of(cases[i].method, cases[i].path, cases[i].watch);
		CHECKF(v == cases[i].verb, "%s %s: %s", cases[i].method, cases[i].path,
		       kubeflow_verb_name(v));
		CHECKF(kubeflow_class_of(v) == cases[i].cls, "%s %s: class %s", cases[i].method,
		       cases[i].path, kubeflow_class_name(kubeflow_class_of(v)));
	}
}
