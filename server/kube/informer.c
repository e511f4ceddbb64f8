/* Informer: list, watch, re-watch, relist, back off; one explicit state machine. */
#include "server/kube/informer.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/backoff.h"
#include "lib/clock.h"
#include "lib/log.h"

#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 5000
#define LIST_TIMEOUT_MS 30000
/* One watch line holds one object; Kubernetes objects stay well below this. */
#define WATCH_MAX_LINE (8u << 20)

struct informer {
	struct kube *k;
	struct event_base *base;
	char name[32];
	char path[512];
	char selector[256]; /* escaped for a query */
	int watch_timeout_s, idle_s;
	const struct informer_ops *ops;
	void *arg;
	enum informer_state state;
	int fresh;
	int64_t stale_since_ms; /* wall clock of the last fresh → stale change, or of creation */
	char rv[64];
	long req;              /* the list request or watch in flight, 0 when none */
	struct backoff bo; /* between failed lists and watches */
	int relists;
	char last_error[160];
	struct event *timer;
};

static const char *const state_names[] = { "idle", "listing", "watching", "backoff" };

const char *informer_state_name(const struct informer *inf)
{
	return state_names[inf->state];
}

enum informer_state informer_state(const struct informer *inf)
{
	return inf->state;
}

int informer_fresh(const struct informer *inf)
{
	return inf->fresh;
}

const char *informer_rv(const struct informer *inf)
{
	return inf->rv;
}

static void set_fresh(struct informer *inf, int fresh)
{
	if (inf->fresh == fresh)
		return;
	inf->fresh = fresh;
	if (!fresh)
		inf->stale_since_ms = clock_now_ms();
	log_info("informer", fresh ? "fresh" : "stale", "name=%s rv=%s", inf->name, log_q(inf->rv));
	if (inf->ops->fresh_changed)
		inf->ops->fresh_changed(inf->arg, fresh);
}

static void start_list(struct informer *inf);
static void start_watch(struct informer *inf);

static void backoff(struct informer *inf, const char *why)
{
	snprintf(inf->last_error, sizeof inf->last_error, "%s", why);
	set_fresh(inf, 0);
	inf->state = INF_BACKOFF;
	inf->req = 0;
	int64_t wait_ms = backoff_next(&inf->bo);
	log_warn("informer", "backoff", "name=%s wait_ms=%lld reason=%s", inf->name,
		 (long long)wait_ms, log_q(why));
	struct timeval tv = { (time_t)(wait_ms / 1000), (suseconds_t)((wait_ms % 1000) * 1000) };
	evtimer_add(inf->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct informer *inf = arg;
	/* After a failure the picture is stale, and only a list makes it fresh again: a watch
	 * resumed from the old resourceVersion would deliver what was missed, but nothing in the
	 * protocol says when it has caught up (bookmarks are optional, resourceVersions are
	 * compared only for equality). A list is a consistent snapshot at one resourceVersion,
	 * so it is the proof; the watch then resumes from that list's version. */
	start_list(inf);
}

static void set_rv(struct informer *inf, json_t *obj)
{
	json_t *rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
	if (json_is_string(rv))
		snprintf(inf->rv, sizeof inf->rv, "%s", json_string_value(rv));
}

static void on_list(void *arg, const struct kube_result *res)
{
	struct informer *inf = arg;
	inf->req = 0;
	if (res->outcome != KUBE_OK || !json_is_array(json_object_get(res->body, "items"))) {
		char why[160];
		snprintf(why, sizeof why, "list failed: status %ld %s", res->status,
			 res->reason ? res->reason : "");
		inf->rv[0] = '\0'; /* a failed list leaves nothing to resume from */
		return backoff(inf, why);
	}
	inf->relists++;
	inf->ops->list_begin(inf->arg);
	/* Items and watch objects are handed over unchanged and never touched afterwards: the
	 * picture keeps references to them instead of copies. */
	size_t i;
	json_t *it;
	json_array_foreach(json_object_get(res->body, "items"), i, it)
		inf->ops->upsert(inf->arg, it);
	inf->ops->list_end(inf->arg);
	set_rv(inf, res->body);
	backoff_reset(&inf->bo);
	start_watch(inf);
	set_fresh(inf, 1);
}

static void start_list(struct informer *inf)
{
	char path[1024];
	snprintf(path, sizeof path, "%s%s%s", inf->path, inf->selector[0] ? "?labelSelector=" : "",
		 inf->selector);
	inf->state = INF_LISTING;
	inf->req = kube_request(inf->k, "GET", path, NULL, NULL, LIST_TIMEOUT_MS, on_list, inf);
	if (inf->req < 0)
		backoff(inf, "cannot start the list request");
}

static void on_event(void *arg, const char *type, json_t *obj)
{
	struct informer *inf = arg;
	if (strcmp(type, "ERROR") == 0) {
		json_t *code = json_object_get(obj, "code");
		if (json_integer_value(code) == 410) {
			log_info("informer", "gone", "name=%s rv=%s", inf->name, log_q(inf->rv));
			kube_cancel(inf->k, inf->req);
			inf->req = 0;
			inf->rv[0] = '\0';
			set_fresh(inf, 0);
			start_list(inf);
			return;
		}
		kube_cancel(inf->k, inf->req);
		return backoff(inf, "watch ERROR event");
	}
	set_rv(inf, obj);
	if (strcmp(type, "BOOKMARK") == 0)
		return;
	if (strcmp(type, "DELETED") == 0)
		inf->ops->remove(inf->arg, obj);
	else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0)
		inf->ops->upsert(inf->arg, obj);
}

static void on_watch_end(void *arg, const struct kube_result *res)
{
	struct informer *inf = arg;
	/* Only the watch in progress moves the informer: the end of a watch it has left (an
	 * ERROR event made it list again or back off, and the client cancels the watch then) is
	 * not reported, and if one ever were, taking it for a clean end would start a second
	 * watch beside the list's, one more per 410. */
	if (inf->state != INF_WATCHING)
		return;
	inf->req = 0;
	if (res->status == 410) {
		inf->rv[0] = '\0';
		set_fresh(inf, 0);
		return start_list(inf);
	}
	if (res->outcome == KUBE_OK) {
		/* The server closed the stream at timeoutSeconds: resume where we are. Nothing
		 * was missed, so the picture stays fresh across the reconnect. */
		return start_watch(inf);
	}
	char why[160];
	snprintf(why, sizeof why, "watch ended: status %ld %s", res->status,
		 res->reason ? res->reason : "");
	backoff(inf, why);
}

static void start_watch(struct informer *inf)
{
	char path[1400];
	snprintf(path, sizeof path,
		 "%s?watch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%d%s%s",
		 inf->path, inf->rv, inf->watch_timeout_s, inf->selector[0] ? "&labelSelector=" : "",
		 inf->selector);
	inf->state = INF_WATCHING;
	inf->req = kube_watch(inf->k, path, WATCH_MAX_LINE, inf->idle_s, on_event, on_watch_end,
			      inf);
	if (inf->req < 0)
		backoff(inf, "cannot start the watch");
}

struct informer *informer_new(struct kube *k, struct event_base *base, const char *name,
			      const char *path, const char *label_selector, int watch_timeout_s,
			      int idle_s, const struct informer_ops *ops, void *arg)
{
	struct informer *inf = gwb_calloc(1, sizeof *inf);
	inf->k = k;
	inf->base = base;
	snprintf(inf->name, sizeof inf->name, "%s", name);
	snprintf(inf->path, sizeof inf->path, "%s", path);
	if (label_selector)
		kube_query_escape(label_selector, inf->selector, sizeof inf->selector);
	inf->watch_timeout_s = watch_timeout_s;
	inf->idle_s = idle_s;
	inf->ops = ops;
	inf->arg = arg;
	inf->timer = evtimer_new(base, on_timer, inf);
	backoff_init(&inf->bo, BACKOFF_MIN_MS, BACKOFF_MAX_MS,
		     (uint64_t)(uintptr_t)inf ^ (uint64_t)clock_now_ms());
	inf->stale_since_ms = clock_now_ms();
	return inf;
}

void informer_start(struct informer *inf)
{
	start_list(inf);
}

void informer_free(struct informer *inf)
{
	if (!inf)
		return;
	if (inf->req > 0)
		kube_cancel(inf->k, inf->req);
	event_free(inf->timer);
	gwb_free(inf);
}

void informer_describe(const struct informer *inf, json_t *o)
{
	json_object_set_new(o, "state", json_string(informer_state_name(inf)));
	json_object_set_new(o, "fresh", json_boolean(inf->fresh));
	if (inf->fresh) {
		json_object_set_new(o, "stale_since", json_null());
		json_object_set_new(o, "stale_seconds", json_integer(0));
	} else {
		char ts[40];
		int64_t for_ms = clock_now_ms() - inf->stale_since_ms;
		json_object_set_new(o, "stale_since",
				    json_string(clock_fmt_rfc3339_ms(inf->stale_since_ms, ts, sizeof ts)));
		json_object_set_new(o, "stale_seconds", json_integer(for_ms > 0 ? for_ms / 1000 : 0));
	}
	json_object_set_new(o, "resource_version", json_string(inf->rv));
	json_object_set_new(o, "lists", json_integer(inf->relists));
	json_object_set_new(o, "last_error",
			    inf->last_error[0] ? json_string(inf->last_error) : json_null());
}
