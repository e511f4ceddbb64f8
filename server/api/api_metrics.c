/* GET /metrics: Prometheus text exposition of what an operator watches: tasks by state, team
 * quota and reservations, unpublished intents, the cluster picture, HTTP replies and the
 * bytes the allocation wrapper holds. Unauthenticated, like /healthz; it names teams but no
 * task. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>

#include "lib/alloc.h"
#include "lib/prom.h"
#include "server/api/api.h"
#include "server/api/conn.h"
#include "server/recon/reconciler.h"

/* The memory a monitor says each team's running tasks use, with a collector only. */
static void team_usage_lines(struct evbuffer *b, struct store *st, json_t *teams)
{
	size_t i;
	json_t *t;
	int first = 1;
	json_array_foreach(teams, i, t) {
		const char *name = json_string_value(json_object_get(t, "team"));
		json_t *u = api_team_usage(st, name);
		if (!u)
			return;
		if (first)
			prom_family(b, "gwb_team_used_gpu_memory_mib", PROM_GAUGE,
				    "GPU memory the monitor says the team's running tasks use");
		first = 0;
		struct prom_label team = { "team", name };
		prom_sample_int(b, "gwb_team_used_gpu_memory_mib", &team, 1,
				json_integer_value(json_object_get(u, "gpu_memory_mib")));
		json_decref(u);
	}
}

static void team_lines(struct evbuffer *b, json_t *teams)
{
	static const char *const groups[][2] = { { "quota", "gwb_team_quota" },
						 { "reserved", "gwb_team_reserved" } };
	static const char *const fields[] = { "gpu_memory_mib", "gpu_core_percent" };
	for (int g = 0; g < 2; g++)
		for (int f = 0; f < 2; f++) {
			char name[64];
			snprintf(name, sizeof name, "%s_%s", groups[g][1], fields[f]);
			prom_family(b, name, PROM_GAUGE, NULL);
			size_t i;
			json_t *t;
			json_array_foreach(teams, i, t) {
				struct prom_label team = {
					"team", json_string_value(json_object_get(t, "team")) };
				json_t *amount = json_object_get(t, groups[g][0]);
				json_t *v = json_object_get(amount, fields[f]);
				prom_sample_int(b, name, &team, 1, json_integer_value(v));
			}
		}
}

static void task_lines(struct evbuffer *b, struct store *st)
{
	int64_t counts[TASK_NSTATES];
	store_task_counts(st, counts); /* kept in memory: no scan on the loop */
	prom_family(b, "gwb_tasks", PROM_GAUGE, NULL);
	for (int i = 0; i < TASK_NSTATES; i++) {
		struct prom_label state = { "state", task_state_name((enum task_state)i) };
		prom_sample_int(b, "gwb_tasks", &state, 1, counts[i]);
	}
	/* Transitions since this process opened the store (a counter restarts with it); "none"
	 * is a submission creating its task. Only the pairs that happened are written. */
	prom_family(b, "gwb_task_transitions_total", PROM_COUNTER, NULL);
	for (int f = -1; f < TASK_NSTATES; f++)
		for (int t = 0; t < TASK_NSTATES; t++) {
			int64_t n =
				store_task_transitions(st, (enum task_state)f, (enum task_state)t);
			struct prom_label l[2] = {
				{ "from", f < 0 ? "none" : task_state_name((enum task_state)f) },
				{ "to", task_state_name((enum task_state)t) },
			};
			if (n)
				prom_sample_int(b, "gwb_task_transitions_total", l, 2, n);
		}
}

/* The HTTP replies, the group commit's batches and their histograms. */
static void http_lines(struct evbuffer *b, const struct api_ctx *api)
{
	prom_family(b, "gwb_http_replies_total", PROM_COUNTER, NULL);
	for (int c = 2; c <= 5; c++) {
		char class[4];
		snprintf(class, sizeof class, "%dxx", c);
		struct prom_label l = { "class", class };
		prom_sample_int(b, "gwb_http_replies_total", &l, 1, api->http.replies[c]);
	}
	conn_guard_metrics(api->http.guard, b);
	prom_counter(b, "gwb_store_batches_total", NULL, api->commit.batches);
	prom_counter(b, "gwb_store_batch_requests_total", NULL, api->commit.batch_requests);
	prom_counter(b, "gwb_store_batches_failed_total", NULL, api->commit.batches_failed);
	prom_counter(b, "gwb_http_replies_client_gone_total", NULL, api->commit.replies_gone);
	prom_hist_write(b, "gwb_store_batch_size", NULL, &api->commit.batch_size);
	prom_hist_write(b, "gwb_submit_duration_seconds", NULL, &api->http.submit_seconds);
}

/* The WAL's syncs and checkpoints. */
static void wal_lines(struct evbuffer *b, struct store *st)
{
	struct store_sync_stats sy;
	store_sync_stats(st, &sy);
	prom_counter(b, "gwb_store_wal_syncs_total", NULL, sy.syncs);
	prom_counter(b, "gwb_store_wal_syncs_failed_total", NULL, sy.failed);
	prom_counter(b, "gwb_store_wal_synced_commits_total", NULL, sy.commits);
	prom_counter_real(b, "gwb_store_wal_sync_seconds_total", NULL, sy.seconds);
	prom_gauge(b, "gwb_store_commits_not_durable", NULL, sy.pending);
	struct store_wal_stats w;
	store_wal_stats(st, &w);
	prom_gauge(b, "gwb_store_wal_bytes", NULL, w.wal_bytes);
	prom_counter(b, "gwb_store_checkpoints_total", NULL, w.checkpoints);
	prom_counter(b, "gwb_store_checkpoints_busy_total", NULL, w.checkpoints_busy);
	prom_counter(b, "gwb_store_checkpoints_thread_total", NULL, w.checkpoints_thread);
	static const struct prom_label on_loop = { "on", "loop" }, on_thread = { "on", "thread" };
	prom_family(b, "gwb_store_checkpoint_seconds_total", PROM_COUNTER, NULL);
	prom_sample_real(b, "gwb_store_checkpoint_seconds_total", &on_loop, 1, w.loop_seconds);
	prom_sample_real(b, "gwb_store_checkpoint_seconds_total", &on_thread, 1, w.thread_seconds);
}

void api_metrics(struct req *r)
{
	struct api_ctx *api = r->api;
	struct evbuffer *b = evbuffer_new();
	const struct prom_label build[2] = { { "version", GWB_VERSION },
					     { "mode", api->cfg->mode } };
	prom_family(b, "gwb_build_info", PROM_GAUGE, NULL);
	prom_sample_int(b, "gwb_build_info", build, 2, 1);
	task_lines(b, api->store);
	json_t *teams = store_teams_json(api->store);
	team_lines(b, teams);
	team_usage_lines(b, api->store, teams);
	json_decref(teams);
	int64_t unpublished;
	if (store_outbox_unpublished_count(api->store, &unpublished) == 0)
		prom_gauge(b, "gwb_outbox_unpublished", NULL, unpublished);
	if (api->recon) {
		prom_gauge(b, "gwb_kube_picture_fresh", NULL, reconciler_fresh(api->recon));
		prom_gauge(b, "gwb_kube_reachable", NULL, reconciler_reachable(api->recon));
	}
	if (api->metrics)
		api->metrics(api->metrics_arg, b);
	api_queue_metrics(api->store, b);
	http_lines(b, api);
	wal_lines(b, api->store);
	prom_gauge(b, "gwb_alloc_bytes", NULL, (int64_t)gwb_alloc_bytes());
	evhttp_add_header(evhttp_request_get_output_headers(r->ev), "Content-Type",
			  "text/plain; version=0.0.4");
	http_count_reply(r, 200);
	http_send(r, 200, b);
	evbuffer_free(b); /* evhttp_send_reply leaves the buffer ours */
}
