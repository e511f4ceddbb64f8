#include "tools/kubesim/faults.h"
#include "lib/alloc.h"
struct faults { struct ks *ks; };
struct faults *faults_new(struct ks *ks) { struct faults *f = gwb_calloc(1, sizeof *f); f->ks = ks; return f; }
void faults_free(struct faults *f) { gwb_free(f); }
void faults_handle(struct hreq *h, void *arg) { (void)arg; http_reply(h, 404, "text/plain", "no\n", 3); }
int faults_withhold_answer(struct faults *f, const char *verb, const struct res_def *r) { (void)f;(void)verb;(void)r; return 0; }
int faults_pod_stuck(const struct faults *f, const json_t *pod) { (void)f;(void)pod; return 0; }
void faults_tick(struct faults *f) { (void)f; }
