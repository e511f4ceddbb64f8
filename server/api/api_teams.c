/* /v1/teams: quota views for the admin and each team, and the admin's quota changes. */
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "server/api/api.h"

/* Bounds of a team quota: totals over all cards (1 PiB of memory, 10,000 cards' cores). */
#define QUOTA_MEM_MAX (1LL << 30)
#define QUOTA_CORE_MAX 1000000
#define TOKEN_MIN 8
#define TOKEN_MAX 256

void api_teams_list(struct req *r)
{
	if (r->is_admin)
		return http_reply_json(r, 200, json_pack("{s:o}", "teams",
							 store_teams_json(r->api->store)));
	json_t *arr = json_array();
	json_t *t = store_team_json(r->api->store, r->team);
	if (t)
		json_array_append_new(arr, t);
	http_reply_json(r, 200, json_pack("{s:o}", "teams", arr));
}

void api_team_get(struct req *r, const char *team)
{
	if (!api_valid_team(team))
		return http_reply_error(r, 404, "not_found", "no such team",
					json_pack("{s:s}", "team", team));
	if (!http_may_act_on(r, team))
		return;
	json_t *t = store_team_json(r->api->store, team);
	if (!t)
		return http_reply_error(r, 404, "not_found", "no such team",
					json_pack("{s:s}", "team", team));
	http_reply_json(r, 200, t);
}

static int valid_token(const char *t)
{
	for (const char *p = t; *p; p++)
		if (*p < 0x21 || *p > 0x7e)
			return 0;
	return 1;
}

void api_team_put(struct req *r, const char *team)
{
	static const char *const fields[] = { "gpu_memory_mib", "gpu_core_percent", "token",
					      "default_on_quota_full", "queueing", NULL };
	static const char *const on_full_values[] = { "refuse", "wait", NULL };
	static const char *const queueing_values[] = { "strict", "best_effort", NULL };
	if (!r->is_admin)
		return http_reply_error(r, 403, "forbidden", "only the administrator sets quotas",
					NULL);
	if (!api_valid_team(team))
		return http_reply_invalid_field(
			r, "team", "must be a DNS label: lowercase letters, digits and '-', 1-63");
	json_t *body = http_json_body(r);
	if (!body)
		return;
	struct jx_err e;
	int64_t mem, core;
	const char *token, *on_full, *queueing;
	if (jx_only_keys(body, fields, &e) ||
	    jx_enum(body, "default_on_quota_full", 0, on_full_values, NULL, &on_full, &e) ||
	    jx_enum(body, "queueing", 0, queueing_values, NULL, &queueing, &e) ||
	    jx_int(body, "gpu_memory_mib", 1, 0, 0, QUOTA_MEM_MAX, &mem, &e) ||
	    jx_int(body, "gpu_core_percent", 1, 0, 0, QUOTA_CORE_MAX, &core, &e) ||
	    jx_str(body, "token", 0, NULL, TOKEN_MIN, TOKEN_MAX, &token, &e)) {
		http_reply_invalid_field(r, e.field, e.rule);
		goto out;
	}
	if (token && !valid_token(token)) {
		http_reply_invalid_field(r, "token", "must be visible ASCII");
		goto out;
	}
	unsigned char hash[SHA256_DIGEST_LENGTH];
	if (token)
		SHA256((const unsigned char *)token, strlen(token), hash);
	if (token && auth_is_admin_hash(&r->api->auth, hash)) {
		http_reply_invalid_field(r, "token", "must differ from the admin token");
		goto out;
	}
	int created = 0;
	int rc = store_team_put(r->api->store, team, mem, core, token ? hash : NULL,
				clock_now_ms(), &created);
	if (rc == GWB_EEXISTS) {
		http_reply_error(r, 409, "token_in_use", "another team has this token",
				 json_pack("{s:s}", "field", "token"));
		goto out;
	}
	/* The line's settings (store_queue.c), then whatever the line now holds. */
	if (!rc && (on_full || queueing))
		rc = store_team_queue_put(r->api->store, team, on_full, queueing, clock_now_ms());
	if (rc) { /* busy, a storage fault (503 with Retry-After), or 500 */
		http_reply_store_error(r, rc, "the team could not be stored");
		goto out;
	}
	log_info("api", created ? "team_created" : "team_changed",
		 "team=%s mem_mib=%lld core_pct=%lld token_set=%d", team, (long long)mem,
		 (long long)core, token != NULL);
	http_reply_json(r, created ? 201 : 200, store_team_json(r->api->store, team));
out:
	json_decref(body);
}
