/* The store's reconciler side: loading a task for a decision, recording what was observed on
 * the cluster, and releasing a reservation together with the evidence that proved it. */
#ifndef GWB_STORE_RECON_H
#define GWB_STORE_RECON_H

#include <jansson.h>
#include <stdint.h>

#include "server/store.h"

/* A task as the reconciler sees it: the request, and the observed fields it maintains. */
struct task_row {
	char id[32], team[64], state[16];
	int64_t mem_mib, core_pct, count, duration_s;
	char qos[8], experiment[16];
	int cancel_requested;
	int released;
	int64_t created_ms;
	/* observed */
	char job_uid[64];
	int job_suspended;
	char pod_name[128], pod_uid[64], pod_node[64], pod_phase[16];
	int has_exit_code;
	int64_t exit_code;
	char reason[96];
	char allocation[2048];
	char pending_message[1024];
	char pending_diagnosis[8192]; /* JSON text, "" for none */
};

/* Loads a task. 0, GWB_ENOTFOUND or GWB_EDB. */
int store_task_load(struct store *s, const char *id, struct task_row *out);

/* The ids of the tasks the reconciler looks after — not final, or final with a reservation
 * not yet released — oldest first, as a new JSON array of strings. 0 or GWB_EDB. */
int store_tasks_active(struct store *s, json_t **ids);

/* Writes row's state and observed fields in one transaction, with a task event when the state
 * changes (type "state", detail borrowed, may be NULL). The write happens only if the stored
 * state still equals expected_state; otherwise GWB_ECONFLICT (reload and decide again).
 * 0, GWB_ECONFLICT, GWB_EBUSY or GWB_EDB. */
int store_task_observe(struct store *s, const struct task_row *row, const char *expected_state,
		       const json_t *detail, int64_t now_ms);

/* Appends one event to a task's history (its own transaction). detail borrowed, may be NULL. */
int store_task_note(struct store *s, const char *id, const char *type, const json_t *detail,
		    int64_t now_ms);

/* Releases the task's reservation exactly once, in one transaction that also lowers the team's
 * reserved totals, moves the task to final_state (when not NULL) and records the evidence
 * (borrowed) that proved its Pods stopped. *released is 1 when this call released it, 0 when it
 * was already released. 0, GWB_ENOTFOUND, GWB_EBUSY or GWB_EDB. */
int store_task_release(struct store *s, const char *id, const char *reason,
		       const char *final_state, const json_t *evidence, int64_t now_ms,
		       int *released);

/* The team's reserved and quota totals. 0, GWB_ENOTFOUND or GWB_EDB. */
int store_team_totals(struct store *s, const char *team, int64_t *res_mem, int64_t *res_core,
		      int64_t *quota_mem, int64_t *quota_core);

#endif
