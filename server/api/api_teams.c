/* /v1/teams: quota views for the admin and each team, and the admin's quota and workload
 * policy changes. */
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/imageref.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "server/api/api.h"
#include "server/api/workload.h"
#include "server/recon/usage.h"

/* Bounds of a team quota: totals over all cards (1 PiB of memory, 10,000 cards' cores). */
#define QUOTA_MEM_MAX (1LL << 30)
#define QUOTA_CORE_MAX 1000000
#define TOKEN_MIN 8
#define TOKEN_MAX 256

/* Running tasks of a team looked at for its usage, at most (a page of the store's list). */
#define USAGE_TASKS_MAX 1000

struct team_usage {
	int64_t mem, running, measured, simulated;
	json_t *underused;
};

static void usage_of_task(void *arg, const struct task *t)
{
	struct team_usage *u = arg;
	u->running++;
	json_t *v = usage_task_json(t);
	const char *st = json_string_value(json_object_get(v, "status"));
	if (st && (!strcmp(st, "measured") || !strcmp(st, "simulated"))) {
		int64_t mem = json_integer_value(json_object_get(v, "gpu_memory_mib"));
		u->mem += mem;
		u->measured += !strcmp(st, "measured");
		u->simulated += !strcmp(st, "simulated");
		if (mem * 4 < t->reserved_mem_mib)
			json_array_append_new(u->underused,
					      json_pack("{s:s, s:I, s:I}", "task", t->id,
							"gpu_memory_mib", (json_int_t)mem,
							"reserved_gpu_memory_mib",
							(json_int_t)t->reserved_mem_mib));
	}
	json_decref(v);
}

json_t *api_team_usage(struct store *s, const char *team)
{
	if (!usage_task_json_varies())
		return NULL;
	struct team_usage u = { 0, 0, 0, 0, json_array() };
	int64_t next = 0;
	store_task_list(s, team, "running", 0, USAGE_TASKS_MAX, usage_of_task, &u, &next);
	const char *status = u.measured ? "measured" : u.simulated ? "simulated" : "unknown";
	return json_pack("{s:s, s:I, s:I, s:I, s:o}", "status", status, "gpu_memory_mib",
			 (json_int_t)u.mem, "running_tasks", (json_int_t)u.running, "tasks_with_figures",
			 (json_int_t)(u.measured + u.simulated), "underused", u.underused);
}

/* Adds usage to a team's view when a collector runs. */
static json_t *with_usage(struct req *r, json_t *t)
{
	json_t *u = t ? api_team_usage(r->api->store, json_string_value(json_object_get(t, "team")))
		      : NULL;
	if (u)
		json_object_set_new(t, "usage", u);
	return t;
}

void api_teams_list(struct req *r)
{
	if (r->is_admin) {
		json_t *teams = store_teams_json(r->api->store);
		size_t i;
		json_t *t;
		json_array_foreach(teams, i, t)
			with_usage(r, t);
		return http_reply_json(r, 200, json_pack("{s:o}", "teams", teams));
	}
	json_t *arr = json_array();
	json_t *t = with_usage(r, store_team_json(r->api->store, r->team));
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
	json_t *t = with_usage(r, store_team_json(r->api->store, team));
	if (!t)
		return http_reply_error(r, 404, "not_found", "no such team",
					json_pack("{s:s}", "team", team));
	http_reply_json(r, 200, t);
}

#define ALLOWED_IMAGES_MAX 32

/* One amount of the policy ({"default", "max"} under key): quantities above 0 within the
 * workload's bounds, or null/absent (not set); the default at most the maximum. */
static int policy_amount(const json_t *o, const char *key, int milli, int64_t *def,
			 int64_t *max, struct jx_err *e)
{
	*def = *max = 0;
	const json_t *a = json_object_get(o, key);
	snprintf(e->field, sizeof e->field, "workload_policy.%s", key);
	if (!a || json_is_null(a))
		return 0;
	static const char *const keys[] = { "default", "max", NULL };
	struct jx_err ke;
	if (!json_is_object(a) || jx_only_keys(a, keys, &ke)) {
		snprintf(e->rule, sizeof e->rule, "must be an object {\"default\", \"max\"}");
		return GWB_EINVAL;
	}
	int64_t *out[2] = { def, max };
	for (int i = 0; i < 2; i++) {
		const json_t *v = json_object_get(a, keys[i]);
		if (!v || json_is_null(v))
			continue;
		const char *q = json_string_value(v);
		int64_t bound = milli ? WORKLOAD_CPU_MAX_MILLI : WORKLOAD_MEMORY_MAX;
		if (!q || (milli ? quantity_parse_milli : quantity_parse)(q, out[i]) ||
		    *out[i] <= 0 || *out[i] > bound) {
			snprintf(e->field, sizeof e->field, "workload_policy.%s.%s", key, keys[i]);
			snprintf(e->rule, sizeof e->rule,
				 "must be a Kubernetes quantity above 0 (e.g. %s), or null",
				 milli ? "\"500m\"" : "\"4Gi\"");
			return GWB_EINVAL;
		}
	}
	if (*def && *max && *def > *max) {
		snprintf(e->field, sizeof e->field, "workload_policy.%s.default", key);
		snprintf(e->rule, sizeof e->rule, "must be at most the maximum");
		return GWB_EINVAL;
	}
	return 0;
}

/* The body's workload_policy into *pol (allowed_images borrowed from body). 0, or GWB_EINVAL
 * with *e. */
static int policy_parse(const json_t *o, struct team_policy *pol, struct jx_err *e)
{
	static const char *const keys[] = { "allowed_images", "cpu", "memory", NULL };
	memset(pol, 0, sizeof *pol);
	if (!json_is_object(o)) {
		snprintf(e->field, sizeof e->field, "workload_policy");
		snprintf(e->rule, sizeof e->rule, "must be an object");
		return GWB_EINVAL;
	}
	if (jx_only_keys(o, keys, e)) {
		char f[sizeof e->field];
		snprintf(f, sizeof f, "%s", e->field);
		snprintf(e->field, sizeof e->field, "workload_policy.%s", f);
		return GWB_EINVAL;
	}
	json_t *imgs = json_object_get(o, "allowed_images");
	if (imgs && !json_is_array(imgs)) {
		snprintf(e->field, sizeof e->field, "workload_policy.allowed_images");
		snprintf(e->rule, sizeof e->rule, "must be an array of at most %d prefixes",
			 ALLOWED_IMAGES_MAX);
		return GWB_EINVAL;
	}
	size_t i;
	json_t *p;
	json_array_foreach(imgs, i, p) {
		if (i >= ALLOWED_IMAGES_MAX || !json_is_string(p) ||
		    strlen(json_string_value(p)) != json_string_length(p) ||
		    !imageref_prefix_valid(json_string_value(p))) {
			snprintf(e->field, sizeof e->field, "workload_policy.allowed_images[%zu]",
				 i);
			snprintf(e->rule, sizeof e->rule,
				 i >= ALLOWED_IMAGES_MAX
					 ? "too many: at most 32 prefixes"
					 : "must be an image reference prefix: 1 to %d of letters, "
					   "digits and . _ - / : @",
				 IMAGEREF_MAX);
			return GWB_EINVAL;
		}
	}
	pol->allowed_images = imgs;
	if (policy_amount(o, "cpu", 1, &pol->cpu_default, &pol->cpu_max, e) ||
	    policy_amount(o, "memory", 0, &pol->memory_default, &pol->memory_max, e))
		return GWB_EINVAL;
	return 0;
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
					      "workload_policy", "default_on_quota_full", "queueing",
					      NULL };
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
	struct team_policy pol;
	json_t *pol_in = json_object_get(body, "workload_policy");
	if (pol_in && policy_parse(pol_in, &pol, &e)) {
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
	int rc = store_team_put_policy(r->api->store, team, mem, core, token ? hash : NULL,
				       pol_in ? &pol : NULL, clock_now_ms(), &created);
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
		 "team=%s mem_mib=%lld core_pct=%lld token_set=%d policy_set=%d", team,
		 (long long)mem, (long long)core, token != NULL, pol_in != NULL);
	http_reply_json(r, created ? 201 : 200, store_team_json(r->api->store, team));
out:
	json_decref(body);
}
