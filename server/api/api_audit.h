/* The quota audit's API side (server/api/api_audit.c): GET /v1/audit, POST /v1/audit/repair, the
 * housekeeping run that logs each drift and keeps gwb_audit_drift, and that gauge's line. */
#ifndef GWB_API_AUDIT_H
#define GWB_API_AUDIT_H

#include <event2/buffer.h>
#include <stdint.h>

#include "server/api/http.h"

struct api_ctx;

/* The audit's part of the API's context (server/api/api.h): when the last audit ran and the
 * drift it found; when the housekeeping run last started it. */
struct api_audit_state {
	int64_t at_ms, drift, cron_ms;
};

/* GET /v1/audit (admin): the audit computed now (docs/API.md "The quota audit"). Answers r
 * exactly once. */
void api_audit_get(struct req *r);
/* POST /v1/audit/repair (admin): sets each team's stored reserved totals to the sum of its
 * unreleased reservations in one transaction, records each change as a team event
 * "audit_repair", and answers with what it changed. Answers r exactly once. */
void api_audit_repair(struct req *r);
/* A server_cron_fn (arg: the struct api_ctx): runs the audit on the first tick and then every
 * audit.interval_s, logs each drift at warn level, and keeps the count for gwb_audit_drift.
 * It reports only; it never repairs. */
void api_audit_cron(void *arg, int64_t now_ms);
/* Appends the gwb_audit_drift gauge (the last audit's drift; nothing before the first audit)
 * to out. */
void api_audit_metrics(const struct api_ctx *api, struct evbuffer *out);

#endif
