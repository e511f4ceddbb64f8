/* Version, discovery, OpenAPI and health documents (kube-api.md §6.1-6.3): legacy discovery
 * for /api, /apis and every group-version, and minimal OpenAPI v3 documents that let
 * `kubectl create/apply -f` validate through fieldValidation. */
#ifndef KUBESIM_DISCOVERY_H
#define KUBESIM_DISCOVERY_H

#include "tools/kubesim/http.h"

/* Answers h when its path is /version, /api, /apis, a group-version root, /openapi/..., or a
 * health check, and returns 1 (h is then gone); returns 0 otherwise (h untouched). */
int discovery_handle(struct hreq *h);

#endif
