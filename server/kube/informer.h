/* An informer keeps the server's picture of one kind of Kubernetes object current: it lists,
 * then watches from the list's resourceVersion with bookmarks, re-watches when the server ends
 * the stream, relists on 410 Gone, and backs off when the API server is unreachable. It tells
 * its owner about every object it sees and whether its picture is fresh; a stale picture is
 * never evidence of anything. */
#ifndef GWB_INFORMER_H
#define GWB_INFORMER_H

#include <jansson.h>
#include <stdint.h>

#include "server/kube/kube.h"

struct informer;

/* What the owner is told. Objects are borrowed for the call. */
struct informer_ops {
	/* A list begins: what follows replaces the whole picture. */
	void (*list_begin)(void *arg);
	/* An object exists (a list item, ADDED or MODIFIED). */
	void (*upsert)(void *arg, json_t *obj);
	/* An object was deleted (a DELETED event: observed, not inferred). */
	void (*remove)(void *arg, json_t *obj);
	/* A list ended: objects not upserted since list_begin no longer exist. */
	void (*list_end)(void *arg);
	/* The picture became fresh (1) or stale (0). */
	void (*fresh_changed)(void *arg, int fresh);
};

enum informer_state { INF_IDLE, INF_LISTING, INF_WATCHING, INF_BACKOFF };

/* Creates an informer for the collection at path (e.g. "/apis/batch/v1/namespaces/ns/jobs"),
 * restricted by label_selector (may be NULL). watch_timeout_s is the server-side timeoutSeconds
 * of one watch; idle_s ends a stream that sends nothing for that long. The informer does
 * nothing until informer_start. Returns it (free with informer_free). */
struct informer *informer_new(struct kube *k, struct event_base *base, const char *name,
			      const char *path, const char *label_selector, int watch_timeout_s,
			      int idle_s, const struct informer_ops *ops, void *arg);
/* Starts listing. */
void informer_start(struct informer *inf);
/* Stops and frees; no callback fires afterwards. Accepts NULL. */
void informer_free(struct informer *inf);
/* 1 while the last list succeeded and the watches since then followed one another without a
 * gap: a watch the server closed cleanly is resumed from the last resourceVersion and keeps the
 * picture fresh; a failed watch or list makes it stale, and only a new list (a consistent
 * snapshot) makes it fresh again, after a back-off. */
int informer_fresh(const struct informer *inf);
enum informer_state informer_state(const struct informer *inf);
const char *informer_state_name(const struct informer *inf);
/* The resourceVersion the picture is at ("" before the first list). */
const char *informer_rv(const struct informer *inf);
/* Adds {"state", "fresh", "stale_since" (RFC 3339 or null), "stale_seconds", "resource_version",
 * "lists", "last_error"} to o. */
void informer_describe(const struct informer *inf, json_t *o);

#endif
