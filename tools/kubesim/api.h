/* The Kubernetes REST surface (kube-api.md §1, §2, §6): routing of /api and /apis paths,
 * get/list/watch/create/update/patch/delete with Status errors, selectors, Tables, pod logs and
 * binding. The writes themselves are the registry's (registry.h). */
#ifndef KUBESIM_API_H
#define KUBESIM_API_H

#include "tools/kubesim/http.h"

/* The http handler for every non-control request. arg is the struct ks. */
void api_handle(struct hreq *h, void *arg);

/* Parses a boolean the way Go's strconv.ParseBool does. Returns 0 with *out, or -1. */
int api_parse_bool(const char *s, int *out);

#endif
