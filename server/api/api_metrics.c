/* GET /metrics: Prometheus text exposition of what an operator watches: tasks by state, team
 * quota and reservations, unpublished intents, the cluster picture, HTTP replies and the
 * bytes the allocation wrapper holds. Unauthenticated, like /healthz; it names teams but no
 * task. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>

#include "lib/alloc.h"
#include "server/api/api.h"
#include "server/recon/reconciler.h"

void api_hist_observe(struct api_hist *h, double v)
{
	int i = 0;
	while (i < h->nbounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void api_hist_write(const struct api_hist *h, const char *name, struct evbuffer *out)
{
	int64_t cum = 0;
	evbuffer_add_printf(out, "# TYPE %s histogram\n", name);
	for (int i = 0; i < h->nbounds; i++) {
		cum += h->counts[i];
		evbuffer_add_printf(out, "%s_bucket{le=\"%g\"} %lld\n", name, h->bounds[i],
				    (long long)cum);
	}
	cum += h->counts[h->nbounds];
	evbuffer_add_printf(out, "%s_bucket{le=\"+Inf\"} %lld\n%s_sum %.6f\n%s_count %lld\n",
			    name, (long long)cum, name, h->sum, name, (long long)h->count);
}

static void team_lines(struct evbuffer *b, json_t *teams)
{
	size_t i;
	json_t *t;
	static const char *const fields[][2] = { { "quota", "gwb_team_quota" },
						 { "reserved", "gwb_team_reserved" } };
	for (int f = 0; f < 2; f++) {
		evbuffer_add_printf(b, "# TYPE %s_gpu_memory_mib gauge\n", fields[f][1]);
		json_array_foreach(teams, i, t)
			evbuffer_add_printf(
				b, "%s_gpu_memory_mib{team=\"%s\"} %lld\n", fields[f][1],
				json_string_value(json_object_get(t, "team")),
				(long long)json_integer_value(json_object_get(
					json_object_get(t, fields[f][0]), "gpu_memory_mib")));
		evbuffer_add_printf(b, "# TYPE %s_gpu_core_percent gauge\n", fields[f][1]);
		json_array_foreach(teams, i, t)
			evbuffer_add_printf(
				b, "%s_gpu_core_percent{team=\"%s\"} %lld\n", fields[f][1],
				json_string_value(json_object_get(t, "team")),
				(long long)json_integer_value(json_object_get(
					json_object_get(t, fields[f][0]), "gpu_core_percent")));
	}
}

void api_metrics(struct req *r)
{
	struct api_ctx *api = r->api;
	struct evbuffer *b = evbuffer_new();
	evbuffer_add_printf(b, "# TYPE gwb_build_info gauge\ngwb_build_info{version=\"%s\","
			       "mode=\"%s\"} 1\n",
			    GWB_VERSION, api->cfg->mode);
	int64_t counts[TASK_NSTATES];
	store_task_counts(api->store, counts); /* kept in memory: no scan on the loop */
	evbuffer_add_printf(b, "# TYPE gwb_tasks gauge\n");
	for (int i = 0; i < TASK_NSTATES; i++)
		evbuffer_add_printf(b, "gwb_tasks{state=\"%s\"} %lld\n",
				    task_state_name((enum task_state)i), (long long)counts[i]);
	/* Transitions since this process opened the store (a counter restarts with it); "none"
	 * is a submission creating its task. Only the pairs that happened are written. */
	evbuffer_add_printf(b, "# TYPE gwb_task_transitions_total counter\n");
	for (int f = -1; f < TASK_NSTATES; f++)
		for (int t = 0; t < TASK_NSTATES; t++) {
			int64_t n = store_task_transitions(api->store, (enum task_state)f,
							   (enum task_state)t);
			if (n)
				evbuffer_add_printf(
					b, "gwb_task_transitions_total{from=\"%s\",to=\"%s\"} %lld\n",
					f < 0 ? "none" : task_state_name((enum task_state)f),
					task_state_name((enum task_state)t), (long long)n);
		}
	json_t *teams = store_teams_json(api->store); /* team names are DNS labels: no escaping */
	team_lines(b, teams);
	json_decref(teams);
	int64_t unpublished;
	if (store_outbox_unpublished_count(api->store, &unpublished) == 0)
		evbuffer_add_printf(b, "# TYPE gwb_outbox_unpublished gauge\n"
				       "gwb_outbox_unpublished %lld\n",
				    (long long)unpublished);
	if (api->recon)
		evbuffer_add_printf(b, "# TYPE gwb_kube_picture_fresh gauge\ngwb_kube_picture_fresh %d\n"
				       "# TYPE gwb_kube_reachable gauge\ngwb_kube_reachable %d\n",
				    reconciler_fresh(api->recon), reconciler_reachable(api->recon));
	if (api->metrics)
		api->metrics(api->metrics_arg, b);
	evbuffer_add_printf(b, "# TYPE gwb_http_replies_total counter\n");
	for (int c = 2; c <= 5; c++)
		evbuffer_add_printf(b, "gwb_http_replies_total{class=\"%dxx\"} %lld\n", c,
				    (long long)api->http.replies[c]);
	evbuffer_add_printf(b, "# TYPE gwb_store_batches_total counter\ngwb_store_batches_total %lld\n"
			       "# TYPE gwb_store_batch_requests_total counter\n"
			       "gwb_store_batch_requests_total %lld\n"
			       "# TYPE gwb_store_batches_failed_total counter\n"
			       "gwb_store_batches_failed_total %lld\n"
			       "# TYPE gwb_http_replies_client_gone_total counter\n"
			       "gwb_http_replies_client_gone_total %lld\n",
			    (long long)api->commit.batches, (long long)api->commit.batch_requests,
			    (long long)api->commit.batches_failed,
			    (long long)api->commit.replies_gone);
	api_hist_write(&api->commit.batch_size, "gwb_store_batch_size", b);
	api_hist_write(&api->http.submit_seconds, "gwb_submit_duration_seconds", b);
	struct store_sync_stats sy;
	store_sync_stats(api->store, &sy);
	evbuffer_add_printf(b, "# TYPE gwb_store_wal_syncs_total counter\ngwb_store_wal_syncs_total %lld\n"
			       "# TYPE gwb_store_wal_syncs_failed_total counter\n"
			       "gwb_store_wal_syncs_failed_total %lld\n"
			       "# TYPE gwb_store_wal_synced_commits_total counter\n"
			       "gwb_store_wal_synced_commits_total %lld\n"
			       "# TYPE gwb_store_wal_sync_seconds_total counter\n"
			       "gwb_store_wal_sync_seconds_total %.6f\n"
			       "# TYPE gwb_store_commits_not_durable gauge\n"
			       "gwb_store_commits_not_durable %lld\n",
			    (long long)sy.syncs, (long long)sy.failed, (long long)sy.commits, sy.seconds,
			    (long long)sy.pending);
	struct store_wal_stats w;
	store_wal_stats(api->store, &w);
	evbuffer_add_printf(b, "# TYPE gwb_store_wal_bytes gauge\ngwb_store_wal_bytes %lld\n"
			       "# TYPE gwb_store_checkpoints_total counter\n"
			       "gwb_store_checkpoints_total %lld\n"
			       "# TYPE gwb_store_checkpoints_busy_total counter\n"
			       "gwb_store_checkpoints_busy_total %lld\n"
			       "# TYPE gwb_store_checkpoints_thread_total counter\n"
			       "gwb_store_checkpoints_thread_total %lld\n"
			       "# TYPE gwb_store_checkpoint_seconds_total counter\n"
			       "gwb_store_checkpoint_seconds_total{on=\"loop\"} %.6f\n"
			       "gwb_store_checkpoint_seconds_total{on=\"thread\"} %.6f\n",
			    (long long)w.wal_bytes, (long long)w.checkpoints,
			    (long long)w.checkpoints_busy, (long long)w.checkpoints_thread,
			    w.loop_seconds, w.thread_seconds);
	evbuffer_add_printf(b, "# TYPE gwb_alloc_bytes gauge\ngwb_alloc_bytes %zu\n",
			    gwb_alloc_bytes());
	evhttp_add_header(evhttp_request_get_output_headers(r->ev), "Content-Type",
			  "text/plain; version=0.0.4");
	http_count_reply(r, 200);
	evhttp_send_reply(r->ev, 200, NULL, b);
	evbuffer_free(b); /* evhttp_send_reply leaves the buffer ours */
}
