/* The Kubernetes client's token bucket and local priority queue. Pure functions of their
 * state and the clock passed in, so their order and arithmetic are tested without a server. */
#include "server/kube/kubeflow.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* A server that asks for more than this is not followed further: the request goes again
 * after 30 s, which still counts as "not acted on". */
#define RETRY_MAX_MS 30000
#define RETRY_BASE_MS 250

const char *kubeflow_class_name(enum kubeflow_class c)
{
	switch (c) {
	case KUBEFLOW_INFORMER: return "informer";
	case KUBEFLOW_MUTATE: return "mutate";
	case KUBEFLOW_READ: return "read";
	case KUBEFLOW_CREATE: return "create";
	case KUBEFLOW_NCLASSES: break;
	}
	return "?";
}

static const char *const verb_names[KUBEFLOW_NVERBS] = { "get",   "list",	 "watch",
							  "create", "patch", "update",
							  "delete", "other" };

const char *kubeflow_verb_name(enum kubeflow_verb v)
{
	return v < KUBEFLOW_NVERBS ? verb_names[v] : "other";
}

enum kubeflow_verb kubeflow_verb_of(const char *method, const char *path, int is_watch)
{
	if (is_watch)
		return KUBEFLOW_WATCH;
	if (strcmp(method, "POST") == 0)
		return KUBEFLOW_CREATE_VERB;
	if (strcmp(method, "PATCH") == 0)
		return KUBEFLOW_PATCH;
	if (strcmp(method, "PUT") == 0)
		return KUBEFLOW_UPDATE;
	if (strcmp(method, "DELETE") == 0)
		return KUBEFLOW_DELETE;
	if (strcmp(method, "GET") != 0)
		return KUBEFLOW_OTHER;
	/* Segments up to the query; only their count and the first few names matter. */
	char seg[12][64];
	int n = 0;
	const char *p = path;
	while (*p == '/' && n < 12) {
		p++;
		size_t len = strcspn(p, "/?");
		snprintf(seg[n++], sizeof seg[0], "%.*s", (int)(len < 63 ? len : 63), p);
		p += len;
	}
	int i = n >= 2 && strcmp(seg[0], "api") == 0	? 2
		: n >= 3 && strcmp(seg[0], "apis") == 0 ? 3
							: n;
	if (n - i >= 3 && strcmp(seg[i], "namespaces") == 0)
		i += 2;
	return n - i == 1 ? KUBEFLOW_LIST : KUBEFLOW_GET;
}

enum kubeflow_class kubeflow_class_of(enum kubeflow_verb v)
{
	switch (v) {
	case KUBEFLOW_LIST:
	case KUBEFLOW_WATCH: return KUBEFLOW_INFORMER;
	case KUBEFLOW_GET: return KUBEFLOW_READ;
	case KUBEFLOW_CREATE_VERB: return KUBEFLOW_CREATE;
	default: return KUBEFLOW_MUTATE;
	}
}

void kubeflow_bucket_init(struct kubeflow_bucket *b, double qps, double burst, int64_t now_ms)
{
	b->qps = qps > 0 ? qps : 1;
	b->burst = burst >= 1 ? burst : 1;
	b->tokens = b->burst;
	b->last_ms = now_ms;
}

static void refill(struct kubeflow_bucket *b, int64_t now_ms)
{
	if (now_ms <= b->last_ms)
		return;
	b->tokens += (double)(now_ms - b->last_ms) * b->qps / 1000.0;
	if (b->tokens > b->burst)
		b->tokens = b->burst;
	b->last_ms = now_ms;
}

int kubeflow_bucket_take(struct kubeflow_bucket *b, int64_t now_ms)
{
	refill(b, now_ms);
	if (b->tokens < 1.0)
		return 0;
	b->tokens -= 1.0;
	return 1;
}

int64_t kubeflow_bucket_wait_ms(struct kubeflow_bucket *b, int64_t now_ms)
{
	refill(b, now_ms);
	if (b->tokens >= 1.0)
		return 0;
	double ms = (1.0 - b->tokens) * 1000.0 / b->qps;
	int64_t w = (int64_t)ms;
	return w < ms ? w + 1 : w; /* round up: waking early finds the bucket still empty */
}

void kubeflow_push(struct kubeflow_queue *q, struct kubeflow_item *it)
{
	int c = it->cls < KUBEFLOW_NCLASSES ? (int)it->cls : KUBEFLOW_CREATE;
	struct kubeflow_item *after = q->q[c].tail;
	while (after && after->seq > it->seq)
		after = after->prev;
	it->prev = after;
	it->next = after ? after->next : q->q[c].head;
	if (it->next)
		it->next->prev = it;
	else
		q->q[c].tail = it;
	if (after)
		after->next = it;
	else
		q->q[c].head = it;
	it->cls = (enum kubeflow_class)c;
	it->queued = 1;
	q->depth++;
}

void kubeflow_remove(struct kubeflow_queue *q, struct kubeflow_item *it)
{
	if (!it->queued)
		return;
	int c = it->cls;
	if (it->prev)
		it->prev->next = it->next;
	else
		q->q[c].head = it->next;
	if (it->next)
		it->next->prev = it->prev;
	else
		q->q[c].tail = it->prev;
	it->next = it->prev = NULL;
	it->queued = 0;
	q->depth--;
}

struct kubeflow_item *kubeflow_next(const struct kubeflow_queue *q, int64_t now_ms, int watch_ok,
				    int request_ok)
{
	for (int c = 0; c < KUBEFLOW_NCLASSES; c++) {
		for (struct kubeflow_item *it = q->q[c].head; it; it = it->next) {
			if (it->not_before_ms > now_ms)
				continue;
			if (it->is_watch ? watch_ok : request_ok)
				return it;
		}
	}
	return NULL;
}

int64_t kubeflow_next_due(const struct kubeflow_queue *q, int64_t now_ms)
{
	int64_t due = 0;
	for (int c = 0; c < KUBEFLOW_NCLASSES; c++)
		for (struct kubeflow_item *it = q->q[c].head; it; it = it->next)
			if (it->not_before_ms > now_ms && (!due || it->not_before_ms < due))
				due = it->not_before_ms;
	return due;
}

int64_t kubeflow_retry_delay_ms(long retry_after_s, int tries)
{
	int64_t ms;
	if (retry_after_s >= 0) {
		ms = retry_after_s > RETRY_MAX_MS / 1000 ? RETRY_MAX_MS : retry_after_s * 1000;
	} else {
		int shift = tries > 1 ? tries - 1 : 0;
		ms = shift >= 8 ? RETRY_MAX_MS : (int64_t)RETRY_BASE_MS << shift;
	}
	/* Retry-After: 0 is legal; some pause still keeps a throttled server from a spin. */
	if (ms < 50)
		ms = 50;
	return ms > RETRY_MAX_MS ? RETRY_MAX_MS : ms;
}
