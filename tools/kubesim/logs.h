/* Followed pod logs (GET .../pods/{name}/log?follow=true): a chunked stream that sends what
 * the container writes to its log file until the container ends or the client leaves. Each
 * stream is a small state machine polled by a timer. */
#ifndef KUBESIM_LOGS_H
#define KUBESIM_LOGS_H

#include <stddef.h>

#include "tools/kubesim/http.h"
#include "tools/kubesim/kubesim.h"

struct logs;

/* Never NULL. */
struct logs *logs_new(struct ks *ks);
/* Ends every stream and frees them. Accepts NULL. */
void logs_free(struct logs *l);
/* Answers h (taken) with initial (len bytes already selected by tail/limit options) and then
 * follows the file at path from offset, for the pod ns/name with that uid, until the
 * container ended and the file is drained, or limit bytes (> 0; 0: no limit) were sent in
 * all. */
void logs_follow(struct logs *l, struct hreq *h, const char *path, long offset,
		 const char *initial, size_t len, long limit, const char *ns, const char *pod,
		 const char *uid);
/* Frees streams whose clients left or that ended (the safe point). */
void logs_reap(struct logs *l);

#endif
