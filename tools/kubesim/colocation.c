#include "tools/kubesim/colocation.h"
int colocation_admit_pod(struct ks *ks, json_t *pod, struct kerr *e) { (void)ks;(void)pod;(void)e; return 0; }
