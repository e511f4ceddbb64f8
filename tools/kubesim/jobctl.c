#include "tools/kubesim/jobctl.h"
#include "lib/alloc.h"
struct jobctl { struct ks *ks; };
struct jobctl *jobctl_new(struct ks *ks) { struct jobctl *j = gwb_calloc(1, sizeof *j); j->ks = ks; return j; }
void jobctl_free(struct jobctl *jc) { gwb_free(jc); }
void jobctl_sync(struct jobctl *jc) { (void)jc; }
