/* Waiting for quota, as the API shows it: a waiting task's place in its team's line (in its
 * view), GET /v1/teams/{team}/queue (the line in order, paged), and the line's /metrics. The
 * places and predictions are the store's replay (store_queue_list, server/queue_predict.c). */
#include <errno.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/prom.h"
#include "server/api/api.h"

#define QUEUE_LIMIT_DEFAULT 50
#define QUEUE_LIMIT_MAX 500

static json_t *time_or_null(int64_t ms)
{
	char buf[40];
	return ms < 0 ? json_null() : json_string(clock_fmt_rfc3339_ms(ms, buf, sizeof buf));
}

/* One entry's place: {position, ahead, predicted_admit_at, basis}. */
static json_t *place_json(const struct store_queue_entry *e)
{
	json_t *basis = json_array();
	for (int i = 0; i < e->nbasis; i++)
		json_array_append_new(basis, json_string(e->basis[i]));
	json_t *ahead = jx_gpu_pair(e->ahead_mem, e->ahead_core);
	json_object_set_new(ahead, "tasks", json_integer(e->ahead_tasks));
	return json_pack("{s:I, s:o, s:o, s:o}", "position", (json_int_t)e->position, "ahead",
			 ahead, "predicted_admit_at", time_or_null(e->predicted_admit_at), "basis",
			 basis);
}

static void place_one(void *arg, const struct store_queue_entry *e)
{
	json_t **out = arg;
	*out = place_json(e);
}

void api_task_reply_waiting(struct req *r, int status, const struct task *t)
{
	json_t *view = api_task_detail_view(t);
	if (!view)
		return http_reply_error(r, 500, "internal", "the task cannot be shown", NULL);
	json_t *place = NULL;
	int64_t next;
	store_queue_list(r->api->store, t->team, t->seq, 1, clock_now_ms(), place_one, &place,
			 &next);
	json_object_set_new(view, "queue", place ? place : json_null());
	http_reply_json(r, status, view);
}

json_t *api_queue_dry_run(struct req *r, const struct task_req *q, int fits)
{
	json_t *place = NULL;
	int waits = 0;
	if (store_queue_dry_run(r->api->store, q, fits, clock_now_ms(), &waits, place_one,
				&place) ||
	    !waits) {
		json_decref(place);
		return json_null();
	}
	return place ? place : json_pack("{s:n}", "predicted_admit_at");
}

/* A listing's entry: the task's id, name, request and its place. */
static void entry_one(void *arg, const struct store_queue_entry *e)
{
	json_t *o = place_json(e);
	char created[40];
	json_object_set_new(o, "id", json_string(e->id));
	json_object_set_new(o, "name", json_string(e->name));
	json_object_set_new(o, "requested", jx_gpu_pair(e->gpu_memory_mib, e->gpu_core_percent));
	json_object_set_new(o, "duration_seconds", json_integer(e->duration_seconds));
	json_object_set_new(o, "created_at",
			    json_string(clock_fmt_rfc3339_ms(e->created_at, created, sizeof created)));
	json_array_append_new(arg, o);
}

/* A query integer from min to max into *out (absent: untouched). 0, or -1 after replying. */
static int queue_query_int(struct req *r, const char *name, int64_t min, int64_t max,
			   int64_t *out)
{
	const char *v = evhttp_find_header(&r->query, name);
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || end == v || *end || x < min || x > max) {
		char rule[96];
		snprintf(rule, sizeof rule, "must be an integer from %lld to %lld", (long long)min,
			 (long long)max);
		http_reply_invalid_field(r, name, rule);
		return -1;
	}
	*out = x;
	return 0;
}

void api_team_queue(struct req *r, const char *team)
{
	for (struct evkeyval *kv = r->query.tqh_first; kv; kv = kv->next.tqe_next)
		if (strcmp(kv->key, "limit") != 0 && strcmp(kv->key, "cursor") != 0)
			return http_reply_invalid_field(r, kv->key, "unknown query parameter");
	if (!api_valid_team(team))
		return http_reply_error(r, 404, "not_found", "no such team",
					json_pack("{s:s}", "team", team));
	if (!http_may_act_on(r, team))
		return;
	int64_t limit = QUEUE_LIMIT_DEFAULT, cursor = 0;
	if (queue_query_int(r, "limit", 1, QUEUE_LIMIT_MAX, &limit) < 0 ||
	    queue_query_int(r, "cursor", 1, INT64_MAX, &cursor) < 0)
		return;
	json_t *tasks = json_array();
	int64_t next = 0;
	int rc = store_queue_list(r->api->store, team, cursor, (int)limit, clock_now_ms(),
				  entry_one, tasks, &next);
	if (rc) {
		json_decref(tasks);
		if (rc == GWB_ENOTFOUND)
			return http_reply_error(r, 404, "not_found", "no such team",
						json_pack("{s:s}", "team", team));
		return http_reply_error(r, 500, "internal", "the line cannot be read", NULL);
	}
	char nc[32];
	snprintf(nc, sizeof nc, "%lld", (long long)next);
	http_reply_json(r, 200, json_pack("{s:s, s:o, s:o}", "team", team, "next_cursor",
					  next ? json_string(nc) : json_null(), "tasks", tasks));
}

static void waiting_line(void *arg, const char *team, int64_t n)
{
	struct prom_label l = { "team", team };
	prom_sample_int(arg, "gwb_queue_waiting", &l, 1, n);
}

void api_queue_metrics(struct store *s, struct evbuffer *out)
{
	prom_family(out, "gwb_queue_waiting", PROM_GAUGE, "tasks waiting for their team's quota");
	store_queue_waiting_counts(s, waiting_line, out);
	store_queue_metrics_write(s, out);
}
