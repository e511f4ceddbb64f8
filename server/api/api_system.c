/* /healthz, /readyz and /v1/info: liveness, each dependency's state, and what this server is. */
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "server/api/api.h"

void api_healthz(struct req *r)
{
	http_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

void api_readyz(struct req *r)
{
	struct api_ctx *api = r->api;
	json_t *deps = json_object();
	int ready = 1;
	/* A cheap read, not an integrity check: probes come often, and a scan of the whole
	 * database would block the loop for as long as it takes. */
	int store_ok = store_schema_version(api->store) == store_schema_latest();
	/* A storage fault (a full disk, a read-only or failing filesystem) refuses every write
	 * until one commits again: not ready, named, with when it began. Reads still work. */
	struct store_fault f;
	store_fault_get(api->store, &f);
	/* The WAL's size from memory; above its bound the checkpoints are being held back (a
	 * long reader): worth a look, but the server still serves. */
	struct store_wal_stats w;
	store_wal_stats(api->store, &w);
	json_t *store = json_pack(
		"{s:s, s:s, s:{s:I, s:I, s:b, s:I, s:I, s:I, s:I, s:I, s:I}}", "state",
		!store_ok ? "failed" : f.kind != STORE_FAULT_NONE ? store_fault_name(f.kind) : "ok",
		"path", api->cfg->db, "wal", "bytes", (json_int_t)w.wal_bytes, "max_bytes",
		(json_int_t)w.wal_max_bytes, "over_bound", w.wal_bytes > w.wal_max_bytes,
		"checkpoints", (json_int_t)w.checkpoints, "checkpoints_busy",
		(json_int_t)w.checkpoints_busy, "checkpoints_failed",
		(json_int_t)w.checkpoints_failed, "checkpoints_thread",
		(json_int_t)w.checkpoints_thread, "checkpoint_loop_ms",
		(json_int_t)(w.loop_seconds * 1000), "checkpoint_thread_ms",
		(json_int_t)(w.thread_seconds * 1000));
	if (f.kind != STORE_FAULT_NONE) {
		char since[40];
		clock_fmt_rfc3339_ms(f.since_ms, since, sizeof since);
		json_object_set_new(store, "fault",
				    json_pack("{s:s, s:s, s:I}", "kind", store_fault_name(f.kind),
					      "since", since, "writes_failed",
					      (json_int_t)f.writes_failed));
	}
	json_object_set_new(deps, "store", store);
	ready &= store_ok && f.kind == STORE_FAULT_NONE;
	if (api->readiness)
		api->readiness(api->readiness_arg, deps, &ready);
	/* Dependencies not wired in yet are named, so a reader sees they are absent, not fine. */
	if (!json_object_get(deps, "redis"))
		json_object_set_new(deps, "redis", json_pack("{s:s}", "state", "not_configured"));
	if (!json_object_get(deps, "kube"))
		json_object_set_new(deps, "kube", json_pack("{s:s}", "state", "not_configured"));
	/* Probes get the bare status; what each dependency is and where (the database path, the
	 * cluster's URL, Redis's socket) only the admin's or the metrics token. */
	if (!auth_is_operator(r)) {
		json_decref(deps);
		return http_reply_json(r, ready ? 200 : 503, json_pack("{s:b}", "ready", ready));
	}
	http_reply_json(r, ready ? 200 : 503,
			json_pack("{s:b, s:o}", "ready", ready, "dependencies", deps));
}

void api_info(struct req *r)
{
	const struct gwb_config *cfg = r->api->cfg;
	char started[40];
	clock_fmt_rfc3339_ms(r->api->started_ms, started, sizeof started);
	json_t *store = json_pack("{s:i}", "schema_version", store_schema_version(r->api->store));
	json_t *out = json_pack("{s:s, s:s, s:s, s:s, s:o, s:b, s:o}", "version", GWB_VERSION,
				"mode", cfg->mode, "namespace", cfg->kube_namespace, "started_at",
				started, "store", store, "admin", r->is_admin, "team",
				r->team[0] ? json_string(r->team) : json_null());
	/* Where the files and the cluster are is the operator's business: only the admin sees. */
	if (r->is_admin) {
		json_object_set_new(out, "cluster_url",
				    cfg->kube_server[0] ? json_string(cfg->kube_server)
							: json_null());
		json_object_set_new(store, "path", json_string(cfg->db));
	}
	http_reply_json(r, 200, out);
}
