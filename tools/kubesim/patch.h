/* PATCH bodies (kube-api.md §1.8): JSON merge patch (RFC 7386), strategic merge patch for the
 * built-in kinds (list merge keys, $patch, $retainKeys, $deleteFromPrimitiveList and
 * $setElementOrder directives), and JSON patch (RFC 6902). Pure functions over documents. */
#ifndef KUBESIM_PATCH_H
#define KUBESIM_PATCH_H

#include <jansson.h>
#include <stddef.h>

enum patch_type { PATCH_MERGE, PATCH_STRATEGIC, PATCH_JSON };

/* Applies patch to doc. Returns 0 with *out a new document (caller owns it; doc untouched), or
 * GWB_EINVAL with a reason in err (a malformed patch or a failed JSON-patch operation; a failed
 * "test" says so). */
int patch_apply(enum patch_type type, const json_t *doc, const json_t *patch, json_t **out,
		char *err, size_t errlen);

#endif
