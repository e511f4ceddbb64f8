/* gwb-server: loads the configuration, opens the store, and runs the one event loop that
 * serves the HTTP API and (through the modules it starts) the queue and the cluster side. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/prom.h"
#include "server/api/api_audit.h"
#include "server/api/api.h"
#include "server/kube/kube.h"
#include "server/intents.h"
#include "server/recon/reconciler.h"
#include "server/recon/usage.h"
#include "server/server.h"
#include "server/store/store.h"

/* Idempotency keys are purged at most this often: the purge is one indexed DELETE. */
#define IDEM_PURGE_EVERY_MS 60000
#define SERVER_MAX_DEPS 8
#define SERVER_MAX_CRON 16

/* The process: one event base and the modules hanging off it. Private to this file; each
 * module gets its own narrow context. */
struct server {
	struct event_base *base;
	const struct gwb_config *cfg;
	struct store *store;
	struct intents *intents;  /* the Redis side; NULL without Redis */
	struct reconciler *recon; /* NULL when no Kubernetes API is configured */
	struct api_ctx api;
	struct event *cron_timer;
	struct event *ckpt_ev; /* the checkpoint thread's results */
	struct event *sig_term, *sig_int;
	int64_t idem_purged_ms;   /* last idempotency-key purge */
	int64_t batches_seen;     /* api.commit.batches at the last tick: none since means idle */
	int checkpoint_failing;   /* the last checkpoint that finished or failed, failed */
	struct {
		const char *name;
		server_health_fn fn;
		void *arg;
	} deps[SERVER_MAX_DEPS];
	int ndeps;
	struct {
		server_cron_fn fn;
		void *arg;
	} cron[SERVER_MAX_CRON];
	int ncron;
};

static int health_add(void *host, const char *name, server_health_fn fn, void *arg)
{
	struct server *srv = host;
	if (srv->ndeps == SERVER_MAX_DEPS)
		return GWB_ETOOBIG;
	srv->deps[srv->ndeps].name = name;
	srv->deps[srv->ndeps].fn = fn;
	srv->deps[srv->ndeps].arg = arg;
	srv->ndeps++;
	return 0;
}

static int cron_add(void *host, server_cron_fn fn, void *arg)
{
	struct server *srv = host;
	if (srv->ncron == SERVER_MAX_CRON)
		return GWB_ETOOBIG;
	srv->cron[srv->ncron].fn = fn;
	srv->cron[srv->ncron].arg = arg;
	srv->ncron++;
	return 0;
}

/* A checkpoint's outcome: logged when checkpoints start failing, not on every tick while a
 * disk stays full. */
static void checkpoint_outcome(struct server *srv, int rc, const char *msg)
{
	if (rc && rc != GWB_EBUSY && !srv->checkpoint_failing)
		log_warn("store", "checkpoint_failed", "error=%s db=%s", err_name(rc), log_q(msg));
	if (rc != GWB_EBUSY)
		srv->checkpoint_failing = rc != 0;
}

static void on_checkpointed(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct server *srv = arg;
	char msg[200];
	int rc = store_ckpt_done(srv->store, msg, sizeof msg);
	checkpoint_outcome(srv, rc, msg);
}

static void on_cron(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct server *srv = arg;
	int64_t now = clock_now_ms();
	if (now - srv->idem_purged_ms >= IDEM_PURGE_EVERY_MS) {
		int purged = 0;
		if (store_idem_purge(srv->store, now, &purged) == 0 && purged > 0)
			log_info("store", "idempotency_keys_purged", "count=%d", purged);
		srv->idem_purged_ms = now;
	}
	for (int i = 0; i < srv->ncron; i++)
		srv->cron[i].fn(srv->cron[i].arg, now);
	/* Checkpoints start here, never inside a request's COMMIT: PASSIVE ones on the
	 * checkpoint thread while work goes on, TRUNCATE (the WAL file emptied) on the loop
	 * once a tick passed without a write batch and the thread is not at one. */
	int idle = srv->api.commit.batches == srv->batches_seen;
	srv->batches_seen = srv->api.commit.batches;
	struct store_wal_stats w;
	store_wal_stats(srv->store, &w);
	if (w.wal_bytes <= 0 || store_ckpt_running(srv->store))
		return;
	int rc = idle ? store_checkpoint(srv->store, 1) : store_checkpoint_later(srv->store);
	/* The thread's outcome arrives later (on_checkpointed); the loop's is known now. */
	if (idle || !srv->ckpt_ev || rc)
		checkpoint_outcome(srv, rc, store_errmsg(srv->store));
}

/* /readyz: every registered dependency's state. */
static void readiness(void *arg, json_t *deps, int *ready)
{
	struct server *srv = arg;
	for (int i = 0; i < srv->ndeps; i++) {
		json_t *detail = json_object();
		int dep_ready = 1;
		const char *state = srv->deps[i].fn(srv->deps[i].arg, detail, &dep_ready);
		json_object_set_new(detail, "state", json_string(state));
		json_object_set_new(deps, srv->deps[i].name, detail);
		*ready &= dep_ready;
	}
}

/* ---- the intent sink ---- */

/* The queue hands each intent to the reconciler; the entry is acknowledged once the
 * reconciler has recorded its outcome. */
static void on_intent(void *arg, const struct q_intent *in, intents_done_fn done, void *ctx)
{
	reconciler_intent(arg, in->kind, in->task, done, ctx);
}

/* Back-pressure: the consumer takes no more intents than the Kubernetes client has room
 * for, and reads again when requests end. The reconciler starts an intent's request at its
 * next safe point, so room alone can lag behind what was just handed over: the intents held
 * are capped by the same window too. */
static int on_intent_capacity(void *arg, int held)
{
	struct kube *k = reconciler_kube(arg);
	int room = kube_room(k), left = kube_window(k) - held;
	return room < left ? room : left;
}

static void on_intents_lost(void *arg, int64_t now_ms)
{
	reconciler_intents_lost(arg, now_ms);
}

static void on_kube_room(void *arg)
{
	intents_poke(arg);
}

/* /metrics of the modules that the API does not see: the Kubernetes client's flow, the
 * queue's dead letters and the last audit's drift. */
static void write_metrics(void *arg, struct evbuffer *out)
{
	struct server *srv = arg;
	if (srv->recon)
		kube_metrics_write(reconciler_kube(srv->recon), out);
	usage_metrics_write(out);
	api_audit_metrics(&srv->api, out);
	if (srv->intents)
		prom_counter(out, "gwb_intents_dead_lettered_total", NULL,
			     intents_dead_lettered(srv->intents));
}

/* Without a queue, a submission or cancel goes straight to the reconciler. */
static void on_task_changed(void *arg, const char *task_id)
{
	struct server *srv = arg;
	reconciler_kick(srv->recon, task_id);
}

/* The one place that decides how intents reach the reconciler: with Redis, the outbox relay
 * publishes them and the consumer hands each to the reconciler (or, without a cluster, to
 * the queue's built-in handler); without Redis, the API tells the reconciler directly. */
static void bind_intents(struct server *srv)
{
	srv->api.metrics = write_metrics;
	srv->api.metrics_arg = srv;
	if (srv->intents) {
		if (srv->recon) {
			intents_set_handler(srv->intents, on_intent, srv->recon);
			intents_set_capacity(srv->intents, on_intent_capacity, srv->recon);
			intents_on_lost(srv->intents, on_intents_lost, srv->recon);
			kube_on_room(reconciler_kube(srv->recon), on_kube_room, srv->intents);
		}
		srv->api.task_changed = NULL;
	} else {
		srv->api.task_changed = on_task_changed;
		srv->api.task_changed_arg = srv;
		/* A task a line admits goes to the reconciler the same way. */
		store_queue_on_admit(srv->store, on_task_changed, srv);
	}
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct server *srv = arg;
	log_info("server", "stopping", "signal=%d", (int)sig);
	event_base_loopexit(srv->base, NULL);
}

/* Creates the folder that holds the database file, when it is missing (one level). */
static void ensure_db_dir(const char *db)
{
	char dir[CONFIG_STR_MAX];
	snprintf(dir, sizeof dir, "%s", db);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		log_warn("server", "mkdir_failed", "dir=%s error=%s", log_q(dir),
			 log_q(strerror(errno)));
}

static int server_run(struct server *srv)
{
	char err[512];
	const struct gwb_config *cfg = srv->cfg;
	ensure_db_dir(cfg->db);
	/* The loop's connection never sleeps on a lock (busy 0); only opening may wait. */
	if (store_open_ex(&srv->store, cfg->db, (int)cfg->store_busy_timeout_ms, 0,
			  cfg->store_wal_max_bytes, err, sizeof err)) {
		fprintf(stderr, "gwb-server: store: %s\n", err);
		return 1;
	}
	/* PASSIVE checkpoints on a thread of their own (server/store/store_ckpt.c); without it the
	 * housekeeping timer runs them on the loop, as the WAL's bound always does. */
	store_queue_configure(srv->store, cfg->queue_max_skip_seconds * 1000);
	int rc = store_ckpt_start(srv->store);
	if (rc == 0) {
		srv->ckpt_ev = event_new(srv->base, store_ckpt_fd(srv->store),
					 EV_READ | EV_PERSIST, on_checkpointed, srv);
		event_add(srv->ckpt_ev, NULL);
	} else {
		log_warn("store", "checkpoint_thread_off", "error=%s reason=%s", err_name(rc),
			 log_q("checkpoints run on the loop"));
	}
	struct server_hooks hooks = { health_add, cron_add, srv };
	struct api_ctx *api = &srv->api;
	api->base = srv->base;
	api->cfg = cfg;
	api->store = srv->store;
	api->readiness = readiness;
	api->readiness_arg = srv;
	api->started_ms = clock_now_ms();
	if (!cfg->admin_token[0]) /* the API keeps the admin token's hash (auth_start) */
		log_warn("server", "no_admin_token", "hint=%s",
			 log_q("set GWB_ADMIN_TOKEN to manage teams"));
	/* The queue side first: whether it exists decides how intents reach the reconciler. */
	struct intents_ctx ictx = { srv->base, cfg, srv->store, hooks };
	if (intents_start(&srv->intents, &ictx, err, sizeof err)) {
		fprintf(stderr, "gwb-server: %s\n", err);
		return 1;
	}
	struct reconciler_ctx rctx = { srv->base, cfg, srv->store, srv->intents != NULL, hooks };
	rc = reconciler_new(&srv->recon, &rctx, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "gwb-server: kubernetes: %s\n", err);
		return 2;
	}
	if (srv->recon)
		kube_set_flow(reconciler_kube(srv->recon), (int)cfg->kube_max_inflight,
			      (double)cfg->kube_qps, (int)cfg->kube_burst);
	if (rc == 1)
		log_warn("server", "no_kubernetes", "hint=%s",
			 log_q("set GWB_KUBE_SERVER or a kubeconfig to run tasks on a cluster"));
	api->recon = srv->recon;
	if (usage_start(srv->base, cfg, err, sizeof err)) {
		fprintf(stderr, "gwb-server: usage.url: %s\n", err);
		return 1;
	}
	if (http_start(api, err, sizeof err)) {
		fprintf(stderr, "gwb-server: %s\n", err);
		return 1;
	}
	bind_intents(srv);
	/* The audit: it reports only, on the housekeeping timer, off the request path. */
	if (cron_add(srv, api_audit_cron, api))
		log_warn("server", "audit_not_scheduled", "reason=%s", "housekeeping table full");
	struct timeval tv = { cfg->housekeeping_interval_ms / 1000,
			      (cfg->housekeeping_interval_ms % 1000) * 1000 };
	srv->cron_timer = event_new(srv->base, -1, EV_PERSIST, on_cron, srv);
	event_add(srv->cron_timer, &tv);
	srv->sig_term = evsignal_new(srv->base, SIGTERM, on_signal, srv);
	srv->sig_int = evsignal_new(srv->base, SIGINT, on_signal, srv);
	event_add(srv->sig_term, NULL);
	event_add(srv->sig_int, NULL);
	log_info("server", "started", "version=%s mode=%s db=%s url=%s", GWB_VERSION, cfg->mode,
		 log_q(cfg->db), api->http.url);
	/* Scripts look for exactly this line to find the port. */
	printf("gwb-server listening on %s\n", api->http.url);
	fflush(stdout);
	event_base_dispatch(srv->base);
	return 0;
}

int main(int argc, char **argv)
{
	static struct gwb_config cfg;
	char err[1024];
	http_mem_install(); /* before anything libevent allocates */
	gwb_alloc_init();
	signal(SIGPIPE, SIG_IGN);
	int rc = config_load(&cfg, argc, argv, stdout, err, sizeof err);
	if (rc == 1)
		return 0;
	if (rc) {
		fprintf(stderr, "gwb-server: configuration: %s\n", err);
		return 2;
	}
	log_level_min = log_level_parse(cfg.log_level);
	struct server srv;
	memset(&srv, 0, sizeof srv);
	srv.cfg = &cfg;
	srv.base = event_base_new();
	if (!srv.base) {
		fprintf(stderr, "gwb-server: cannot create the event base\n");
		return 1;
	}
	rc = server_run(&srv);
	http_stop(&srv.api);
	usage_stop();
	reconciler_free(srv.recon);
	intents_stop(srv.intents); /* after the reconciler: it may hold intents being handled */
	if (srv.cron_timer)
		event_free(srv.cron_timer);
	if (srv.ckpt_ev)
		event_free(srv.ckpt_ev);
	if (srv.sig_term)
		event_free(srv.sig_term);
	if (srv.sig_int)
		event_free(srv.sig_int);
	store_close(srv.store);
	event_base_free(srv.base);
	libevent_global_shutdown();
	log_info("server", "stopped", "rc=%d", rc);
	return rc;
}
