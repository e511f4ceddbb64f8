/* The lab's experiments, in the lab guide's order, each a function of the lab context that
 * predicts, acts and observes through lab.h. This table is the order and the names of the
 * evidence records (docs/API.md "Evidence"). */
#ifndef GWB_LAB_EXP_H
#define GWB_LAB_EXP_H

#include "tools/gwb-lab/lab.h"

/* The experiments in order, ended by an entry with name NULL. */
extern const struct exp_def exp_table[];
/* How many there are. */
int exp_count(void);

/* Each returns 0 (its outcome is in l->rec); defined in exp_*.c. */
int exp_idempotent(struct lab *l);
int exp_sharing(struct lab *l);
int exp_overlimit(struct lab *l);
int exp_capacity(struct lab *l);
int exp_cancel(struct lab *l);
int exp_restart(struct lab *l);
int exp_fragmentation(struct lab *l);
int exp_health(struct lab *l);
int exp_lsbe(struct lab *l);
int exp_norelease(struct lab *l);
int exp_timeout(struct lab *l);

#endif
