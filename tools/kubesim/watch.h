/* Watch streams (kube-api.md §2): chunked newline-ended events, replay from a
 * resourceVersion out of the store's history, ERROR 410 for versions that are too old,
 * BOOKMARK events only when asked, timeoutSeconds, selector-aware ADDED/DELETED on label
 * changes, one-row Tables when the client asked for Tables, and a per-stream cap on unsent
 * bytes. Each stream is an explicit state machine. */
#ifndef KUBESIM_WATCH_H
#define KUBESIM_WATCH_H

#include "tools/kubesim/http.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/res.h"
#include "tools/kubesim/selector.h"
#include "tools/kubesim/table.h"

struct watch_hub;

struct watch_params {
	const struct res_def *r;
	const char *ns;              /* NULL: every namespace */
	struct selector *labels;     /* stolen */
	struct selector *fields;     /* stolen */
	const char *rv;              /* NULL/"" or "0": initial ADDED events; else resume */
	int bookmarks;
	long timeout_s;              /* <= 0: the server's default */
	int send_initial_events;     /* sendInitialEvents=true (+ the end bookmark) */
	const char *table_version;   /* non-NULL: encode objects as one-row Tables */
	enum table_include include;
};

/* A hub on ks (store subscription made lazily per stream). Never NULL. */
struct watch_hub *watch_hub_new(struct ks *ks);
/* Ends every stream cleanly and frees the hub. Accepts NULL. */
void watch_hub_free(struct watch_hub *hub);
/* Starts a stream answering h (taken). Fails only by answering h with a Status (429 when too
 * many streams are open). */
void watch_start(struct watch_hub *hub, struct hreq *h, struct watch_params *p);
/* Shuts down the connection under every open stream, without the terminating chunk (a
 * network cut: the client sees the transfer end early); the streams end as if their clients
 * had left. Returns how many were cut. */
int watch_cut_all(struct watch_hub *hub);
/* Open streams. */
int watch_count(const struct watch_hub *hub);
/* Frees streams whose clients left (the safe point after callbacks). */
void watch_reap(struct watch_hub *hub);

#endif
