/* Fault injection for tests and the lab, through the control endpoint /_kubesim/faults (also
 * served on the optional control socket): the API refusing or hanging, slow answers, creates
 * stored but answered never, pods stuck Terminating, a Job deleted with its pods orphaned,
 * device health flips, watch streams cut, and watch resumes answered 410 Expired. The wire format is documented in tools/kubesim/README.md. */
#ifndef KUBESIM_FAULTS_H
#define KUBESIM_FAULTS_H

#include <jansson.h>

#include "tools/kubesim/http.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/res.h"

struct faults;

/* No fault active. Never NULL. */
struct faults *faults_new(struct ks *ks);
/* Accepts NULL. */
void faults_free(struct faults *f);
/* The http handler for /_kubesim/ paths. arg is the struct ks. */
void faults_handle(struct hreq *h, void *arg);
/* Returns 1 when the answer to this verb on r must be withheld (and counts it). */
int faults_withhold_answer(struct faults *f, const char *verb, const struct res_def *r);
/* Returns 1 when the kubelet must ignore the deletion of this pod (stuck Terminating). */
int faults_pod_stuck(const struct faults *f, const json_t *pod);
/* Answers h with 429 and Retry-After, and returns 1, while the throttle fault has requests
 * left (watches pass); 0 otherwise. */
int faults_throttle(struct faults *f, struct hreq *h);
/* Returns 1 (and counts it) when this watch resume must be answered with an ERROR event of
 * code 410 (the watch_gone fault); 0 otherwise. */
int faults_watch_gone(struct faults *f);
/* Expires faults set with a duration, and cuts the watch streams when that is due. Called from the housekeeping timer. */
void faults_tick(struct faults *f);

#endif
