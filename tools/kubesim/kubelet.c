#include "tools/kubesim/kubelet.h"
#include "lib/alloc.h"
struct kubelet { struct ks *ks; };
struct kubelet *kubelet_new(struct ks *ks) { struct kubelet *k = gwb_calloc(1, sizeof *k); k->ks = ks; return k; }
void kubelet_free(struct kubelet *k) { gwb_free(k); }
void kubelet_sync(struct kubelet *k) { (void)k; }
int kubelet_log_path(struct kubelet *k, const json_t *pod, const char *c, char *buf, size_t len) { (void)k;(void)pod;(void)c;(void)buf;(void)len; return -1; }
int kubelet_running(const struct kubelet *k) { (void)k; return 0; }
