/* The object store: every served object as an immutable jansson document keyed by resource,
 * namespace and name; one global, increasing resourceVersion counter; synchronous fan-out of
 * every change to subscribers; and a bounded history of change events so that watches can
 * resume from a resourceVersion (older ones are "too old": 410 Expired).
 *
 * Stored documents are never modified in place: to change one, deep-copy it, edit the copy and
 * hand it back with store_update. History events and watchers may still hold the old one.
 *
 * Secondary indexes (namespace, label "key=value", ownerReference uid, and for Pods the node)
 * are kept in step inside every create, update and remove, so controllers and label-selector
 * lists find their objects without scanning the resource.
 *
 * kubesim writes only through the registry (registry.h), which adds the API's rules over the
 * write functions here. */
#ifndef KUBESIM_STORE_H
#define KUBESIM_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/kubesim/res.h"

enum store_ev_type { STORE_ADDED, STORE_MODIFIED, STORE_DELETED };

/* The secondary indexes. Values: IDX_NS the namespace (namespaced resources only); IDX_LABEL
 * "key=value" for every label; IDX_OWNER the uid of every ownerReference; IDX_NODE (Pods
 * only) spec.nodeName, "" while unbound; IDX_NODE_LIVE the same for the Pods that have not
 * ended (phase neither Succeeded nor Failed): what a node's scheduling accounts, without the
 * ended Pods that stay until their Job is deleted; IDX_INVOLVED (Events only)
 * involvedObject.uid. */
enum store_index { STORE_IDX_NS, STORE_IDX_LABEL, STORE_IDX_OWNER, STORE_IDX_NODE,
		   STORE_IDX_NODE_LIVE, STORE_IDX_INVOLVED, STORE_IDX_COUNT };

/* One change. obj is the object at rv (for DELETED its final state carrying the deletion's
 * rv); prev the object before (NULL for ADDED). Both borrowed for the callback's duration. */
struct store_event {
	uint64_t rv;
	enum store_ev_type type;
	enum res_id res;
	json_t *obj;
	json_t *prev;
};

/* Called for every change, synchronously, inside the write. Must not write to the store. */
typedef void (*store_watch_fn)(const struct store_event *ev, void *arg);

struct store;

/* A new empty store keeping the last history_cap events (>= 1). The first resourceVersion
 * handed out is first_rv + 1; versions at or below first_rv are too old from the start, which
 * lets a restarted kubesim refuse resourceVersions of its previous life. */
struct store *store_new(size_t history_cap, uint64_t first_rv);
/* Frees the store, its objects and its history. Accepts NULL. */
void store_free(struct store *s);

/* The current resourceVersion (the last one handed out). */
uint64_t store_rv(const struct store *s);
/* Returns 1 when every event after rv is still in the history (a watch can resume from rv). */
int store_can_resume(const struct store *s, uint64_t rv);
/* The oldest resourceVersion a watch can resume from (for "too old" messages). */
uint64_t store_oldest_rv(const struct store *s);

/* The object, borrowed (valid until the next write of that object), or NULL. ns is "" or NULL
 * for cluster-scoped resources. */
json_t *store_get(const struct store *s, enum res_id res, const char *ns, const char *name);
/* Objects of res (in namespace ns, or all when ns is NULL), sorted by namespace then name.
 * *out is a gwb_malloc'd array of borrowed pointers the caller frees with gwb_free (NULL when
 * empty). Returns the count. */
size_t store_list(const struct store *s, enum res_id res, const char *ns, json_t ***out);
/* A page of store_list: the objects of res (in namespace ns, or all when ns is NULL) whose
 * "namespace/name" sorts after `after` (a list's continue key: "ns/name", "/name" for
 * cluster-scoped objects; "" for the start), at most max of them (0: no cap), in order. *out
 * as for store_list; *rest (when not NULL) the number of objects after the page. Costs in
 * proportion to the page, not to the resource. */
size_t store_list_after(const struct store *s, enum res_id res, const char *ns,
			const char *after, size_t max, json_t ***out, size_t *rest);
/* Objects of res whose index idx holds value (and in namespace ns, or all when ns is NULL),
 * sorted like store_list; same ownership of *out. Returns the count. Costs in proportion to
 * the objects under that value, not to the resource. */
size_t store_list_index(const struct store *s, enum res_id res, enum store_index idx,
			const char *value, const char *ns, json_t ***out);
/* Number of objects of res under value in index idx. */
size_t store_index_count(const struct store *s, enum res_id res, enum store_index idx,
			 const char *value);
/* Number of objects of res. */
size_t store_count(const struct store *s, enum res_id res);

/* Stores a new object (stolen) after setting metadata.resourceVersion. Returns 0 (ADDED is
 * fanned out), or GWB_EEXISTS (obj released). */
int store_create(struct store *s, enum res_id res, json_t *obj);
/* Replaces an existing object (stolen). When it equals the stored one apart from
 * metadata.resourceVersion nothing is written and nothing fanned out. Returns 0 with *out (if
 * not NULL) the stored object (borrowed), or GWB_ENOTFOUND (obj released). */
int store_update(struct store *s, enum res_id res, json_t *obj, json_t **out);
/* Removes an object. final (stolen, may be NULL for "as stored") is its last state, stamped
 * with the deletion's resourceVersion. Returns 0 with *out (if not NULL) a new reference to the
 * final state, or GWB_ENOTFOUND. */
int store_remove(struct store *s, enum res_id res, const char *ns, const char *name,
		 json_t *final, json_t **out);

/* Registers a subscriber. Returns its id (> 0). */
int store_subscribe(struct store *s, store_watch_fn fn, void *arg);
/* Removes a subscriber; safe inside a fan-out (it gets no further events). */
void store_unsubscribe(struct store *s, int id);
/* Calls fn for every retained event with rv > after, oldest first. Returns 0, or GWB_ESTATE
 * when events after `after` were already dropped (fn not called). */
int store_replay(const struct store *s, uint64_t after, store_watch_fn fn, void *arg);

#endif
