/* Flow control of the Kubernetes client, as pure parts with no I/O: the verb and class of a
 * request, a token bucket (QPS and burst) and the local queue of requests not yet sent,
 * ordered by class and then by arrival. server/kube/kube.c owns the instances; the unit tests
 * drive them with a made-up clock. */
#ifndef GWB_KUBEFLOW_H
#define GWB_KUBEFLOW_H

#include <stdint.h>

/* The classes of the local queue, most urgent first: informers' lists and watches (the
 * picture everything else is decided on), then mutations that stop work (cancels and
 * suspends: PATCH, PUT, DELETE), then reads of one object, then creates. */
enum kubeflow_class {
	KUBEFLOW_INFORMER,
	KUBEFLOW_MUTATE,
	KUBEFLOW_READ,
	KUBEFLOW_CREATE,
	KUBEFLOW_NCLASSES
};
/* "informer", "mutate", "read", "create". */
const char *kubeflow_class_name(enum kubeflow_class c);

/* Kubernetes verbs, for the metrics and the class of a request. */
enum kubeflow_verb {
	KUBEFLOW_GET,
	KUBEFLOW_LIST,
	KUBEFLOW_WATCH,
	KUBEFLOW_CREATE_VERB,
	KUBEFLOW_PATCH,
	KUBEFLOW_UPDATE,
	KUBEFLOW_DELETE,
	KUBEFLOW_OTHER,
	KUBEFLOW_NVERBS
};
/* "get", "list", "watch", "create", "patch", "update", "delete", "other". */
const char *kubeflow_verb_name(enum kubeflow_verb v);
/* The verb of a request from its method and the shape of its path: after /api/v1 or
 * /apis/GROUP/VERSION (and namespaces/NS), one segment names a collection (a GET of it is a
 * list), two an object (get). */
enum kubeflow_verb kubeflow_verb_of(const char *method, const char *path, int is_watch);
/* The queue class of a verb: lists and watches feed the informers; PATCH, PUT and DELETE
 * (suspends, cancels) come next; a create waits behind everything else. */
enum kubeflow_class kubeflow_class_of(enum kubeflow_verb v);

/* A token bucket: holds at most burst tokens and gains qps tokens a second. */
struct kubeflow_bucket {
	double qps, burst, tokens;
	int64_t last_ms;
};

/* Starts full (burst tokens) at now_ms. qps > 0, burst >= 1. */
void kubeflow_bucket_init(struct kubeflow_bucket *b, double qps, double burst, int64_t now_ms);
/* Takes one token: 1 when taken, 0 when the bucket is empty (nothing changes then). A clock
 * that goes backwards adds nothing. */
int kubeflow_bucket_take(struct kubeflow_bucket *b, int64_t now_ms);
/* Milliseconds from now_ms until a token is there (0: one is there now). */
int64_t kubeflow_bucket_wait_ms(struct kubeflow_bucket *b, int64_t now_ms);

/* One queued request, embedded in the caller's struct. seq orders arrivals: a request that
 * goes back in (after a 429) keeps its seq and so its place. */
struct kubeflow_item {
	struct kubeflow_item *next, *prev;
	enum kubeflow_class cls;
	int is_watch;
	uint64_t seq;
	int64_t not_before_ms; /* not sent before this (a Retry-After); 0: any time */
	int queued;            /* 1 while in a queue */
};

struct kubeflow_queue {
	struct {
		struct kubeflow_item *head, *tail;
	} q[KUBEFLOW_NCLASSES];
	int depth;
};

/* Puts it in its class, after every item with a smaller seq. it must not be queued. */
void kubeflow_push(struct kubeflow_queue *q, struct kubeflow_item *it);
/* Takes it out of the queue; an item not queued is ignored. */
void kubeflow_remove(struct kubeflow_queue *q, struct kubeflow_item *it);
/* The item to send next, left in the queue: the first in class order, then arrival order,
 * whose not_before_ms has come, and that may go now (watches when watch_ok, other requests
 * when request_ok). NULL when none may. */
struct kubeflow_item *kubeflow_next(const struct kubeflow_queue *q, int64_t now_ms, int watch_ok,
				    int request_ok);
/* The earliest not_before_ms after now_ms among queued items, or 0 when there is none. */
int64_t kubeflow_next_due(const struct kubeflow_queue *q, int64_t now_ms);

/* How long to wait before sending again after a 429: the server's Retry-After (seconds, -1
 * when absent) when it gave one, otherwise 250 ms doubled per earlier 429 of the request;
 * capped at 30 s either way. tries counts the 429s so far (1 for the first). */
int64_t kubeflow_retry_delay_ms(long retry_after_s, int tries);

#endif
