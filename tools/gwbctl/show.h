/* gwbctl's output: the three ways an answer is shown (a short text summary for people, the whole
 * JSON body, or only the names), one function per kind of answer. It writes, never requests. */
#ifndef GWB_GWBCTL_SHOW_H
#define GWB_GWBCTL_SHOW_H

#include <jansson.h>
#include <stdio.h>

enum show_mode { SHOW_TEXT, SHOW_JSON, SHOW_NAME };

/* Parses "text", "json" or "name". 0, or -1 for anything else. */
int show_mode_parse(const char *s, enum show_mode *m);

/* The status line of text mode: "201 Created", "200 OK (idempotent replay: the same task)". */
void show_status(FILE *out, long status, int replayed);

/* One task (submit, get, cancel): id, state, reason, reservation, card, and the pending
 * diagnosis or the cancel outcome when there is one. */
void show_task(FILE *out, enum show_mode m, const json_t *task);
/* A list answer {"tasks": [...], "next_cursor"}: a table in text mode, ids in name mode. */
void show_tasks(FILE *out, enum show_mode m, const json_t *list);
/* {"task", "events": [...]}: one line per event in text mode; the task id in name mode. */
void show_events(FILE *out, enum show_mode m, const json_t *ev);
/* {"cards": [...], "fresh"}: one line per card; "node/minor" per card in name mode. */
void show_devices(FILE *out, enum show_mode m, const json_t *dev);
/* One team or {"teams": [...]}: one line per team; the names in name mode. */
void show_teams(FILE *out, enum show_mode m, const json_t *teams);
/* A dry run's answer: whether the quota admits the task, and the predicted node and cards or
 * the pending diagnosis with what would unblock it; in name mode the outcome ("bind",
 * "pending", "refused"). */
void show_dry_run(FILE *out, enum show_mode m, const json_t *d);
/* An audit (GET /v1/audit): the drift and each team and task that drifted; in name mode the
 * drifted teams and task ids. */
void show_audit(FILE *out, enum show_mode m, const json_t *a);
/* A repair's answer: each team's reserved totals before and after; the teams in name mode. */
void show_audit_repair(FILE *out, enum show_mode m, const json_t *a);
/* A team's line (GET /v1/teams/T/queue): one row per waiting task with its place and
 * predicted admission; the ids in name mode. */
void show_queue(FILE *out, enum show_mode m, const json_t *q);
/* {"queues": [...]}: each team's line after its name. */
void show_queues(FILE *out, enum show_mode m, const json_t *qs);
/* Any JSON value, indented with sorted keys. */
void show_json(FILE *out, const json_t *v);

#endif
