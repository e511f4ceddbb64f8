/* kubesim's resource table: every kind the simulated API server serves, with the facts that
 * discovery, routing, lists and patch handling need (group, version, plural, scope, whether it
 * is a custom resource, subresources, short names, supported field selectors). Static data. */
#ifndef KUBESIM_RES_H
#define KUBESIM_RES_H

#include <stddef.h>

enum res_id {
	RES_NAMESPACES,
	RES_NODES,
	RES_PODS,
	RES_EVENTS,
	RES_JOBS,
	RES_PRIORITYCLASSES,
	RES_DEVICES,
	RES_CCPS,
	RES_NODEMETRICS,
	RES_NODESLOS,
	RES_COUNT
};

struct res_def {
	enum res_id id;
	const char *group; /* "" for the core group */
	const char *version;
	const char *plural;
	const char *singular;
	const char *kind;
	const char *list_kind;
	const char *api_version; /* "v1", "batch/v1", ... */
	int namespaced;
	int crd;        /* custom resource: strategic-merge-patch refused, list items keep kind */
	int has_status; /* a status subresource exists: main-resource writes keep status */
	int has_log;    /* pods/log */
	int has_binding;
	int spec_generation; /* metadata.generation counts spec changes */
	const char *short_names[3];
	const char *categories[2];
	const char *field_selectors[12]; /* NULL-terminated; metadata.name/namespace are implied */
};

/* The table entry for id. Never NULL for a valid id. */
const struct res_def *res_get(enum res_id id);

/* Finds a resource by group, version and plural. NULL when not served. */
const struct res_def *res_find(const char *group, const char *version, const char *plural);

/* Finds a resource by apiVersion ("batch/v1") and kind ("Job"). NULL when not served. */
const struct res_def *res_find_kind(const char *api_version, const char *kind);

/* Returns 1 when group/version is served (for discovery and 404s). */
int res_gv_served(const char *group, const char *version);

/* "jobs.batch" or "pods": the qualified resource name used in Status messages. Static. */
const char *res_qualified(const struct res_def *r);

/* Returns 1 when field is a supported field selector label for r. */
int res_field_supported(const struct res_def *r, const char *field);

#endif
