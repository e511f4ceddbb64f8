#include "tools/kubesim/nodemetric.h"
#include "lib/alloc.h"
struct nodemetric { struct ks *ks; };
struct nodemetric *nodemetric_new(struct ks *ks) { struct nodemetric *n = gwb_calloc(1, sizeof *n); n->ks = ks; return n; }
void nodemetric_free(struct nodemetric *nm) { gwb_free(nm); }
