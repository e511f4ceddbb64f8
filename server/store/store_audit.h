/* The store's side of the quota audit: each team's stored reserved totals beside the sum of
 * its tasks' unreleased reservations, the tasks that hold quota, and the repair that makes the
 * stored totals equal the sums again, recorded as team events. It reads rows; the API shapes
 * the answer (server/api/api_audit.c). */
#ifndef GWB_STORE_AUDIT_H
#define GWB_STORE_AUDIT_H

#include <stdint.h>

#include "server/store/store.h"

/* One team's totals: stored in teams, and computed from its unreleased reservations. */
struct store_audit_team {
	const char *team;
	int64_t stored_mem, stored_core;
	int64_t computed_mem, computed_core;
};
/* Receives one team, borrowed for the call. */
typedef void (*store_audit_team_fn)(void *arg, const struct store_audit_team *t);
/* Calls fn for every team, sorted by name (one statement: one consistent snapshot). 0 or
 * GWB_EDB (fn may have fired for some teams). */
int store_audit_teams(struct store *s, store_audit_team_fn fn, void *arg);

/* One task whose reservation is not released. */
struct store_audit_task {
	const char *id, *team;
	enum task_state state;
	int64_t created_at;
	int64_t mem, core;       /* its reservation */
	const char *reason;      /* the task's reason ("" when none) */
	int64_t pod_deadline_at; /* wall ms; 0 when none is recorded */
};
/* Receives one task, borrowed for the call. */
typedef void (*store_audit_task_fn)(void *arg, const struct store_audit_task *t);
/* Calls fn for every task whose reservation is unreleased, oldest first. 0 or GWB_EDB (fn may
 * have fired for some). A stored state outside the lifecycle table is passed as TASK_NONE. */
int store_audit_holding(struct store *s, store_audit_task_fn fn, void *arg);

/* Sets every team's stored reserved totals to the sum of its unreleased reservations, in one
 * BEGIN IMMEDIATE transaction, and for each team it changed appends a team event
 * "audit_repair" with {"stored": before, "computed": after}. fn fires for each changed team
 * before the commit (the caller discards what it collected when this fails). *changed counts
 * the teams changed. 0, GWB_EBUSY or GWB_EDB (nothing written). */
int store_audit_repair(struct store *s, int64_t now_ms, store_audit_team_fn fn, void *arg,
		       int *changed);

/* One team-level record, borrowed for the call. */
struct store_team_event {
	int64_t seq, ts_ms;
	const char *team, *type, *detail; /* detail: JSON text or NULL */
};
typedef void (*store_team_event_fn)(void *arg, const struct store_team_event *ev);
/* Calls fn for each of team's last limit records, newest first (team NULL: every team's).
 * 0 or GWB_EDB (fn may have fired for some). */
int store_team_events(struct store *s, const char *team, int limit, store_team_event_fn fn,
		      void *arg);

#endif
