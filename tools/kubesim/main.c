/* kubesim: a local Kubernetes API server with Koordinator's DeviceShare scheduler, a Job
 * controller and a kubelet that runs the worker as local processes. One process, one
 * event_base; this file owns the settings table, start-up, the reconcile loop and shutdown. */
#include <errno.h>
#include <event2/event.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "tools/kubesim/api.h"
#include "tools/kubesim/devices.h"
#include "tools/kubesim/faults.h"
#include "tools/kubesim/http.h"
#include "tools/kubesim/jobctl.h"
#include "tools/kubesim/kubelet.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/logs.h"
#include "tools/kubesim/nodemetric.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/sched.h"
#include "tools/kubesim/store.h"
#include "tools/kubesim/watch.h"

/* Housekeeping period: fault expiry, SIGKILL after grace periods and changes nobody kicked
 * for are picked up within this. */
#define TICK_MS 200
/* Timed controller work without a store change (back-offs, TTLs, deadlines, crash-loop
 * restarts) is picked up within this: a full pass at least this often. */
#define FULL_PASS_MS 1000
/* Reconcile passes per kick before yielding to the loop (each pass may cause the next). */
#define MAX_PASSES 20

enum opt_type { OPT_STR, OPT_LONG, OPT_INT, OPT_QTY, OPT_BOOL, OPT_NEG, OPT_LEVEL };

struct opt {
	const char *name;
	enum opt_type type;
	size_t off;
	size_t size;   /* OPT_STR buffer size */
	long min, max; /* OPT_LONG / OPT_INT bounds */
	const char *def;
	const char *help;
};

#define OFF(f) offsetof(struct ks_config, f)
#define SZ(f) sizeof(((struct ks_config *)0)->f)

static const struct opt opts[] = {
	{ "listen", OPT_STR, OFF(listen), SZ(listen), 0, 0, "127.0.0.1:8001",
	  "host:port of the API (port 0 picks one)" },
	{ "node", OPT_STR, OFF(node), SZ(node), 0, 0, "colima-gwb", "name of the first node" },
	{ "nodes", OPT_INT, OFF(nodes), 0, 1, 64, "1",
	  "number of nodes: <node>, <node>-2 ... each with its Device and the same cards" },
	{ "cards", OPT_INT, OFF(cards), 0, 0, 16, "2", "GPU cards per node" },
	{ "card-memory", OPT_QTY, OFF(card_memory), 0, 1, 0, "8Gi", "memory per card" },
	{ "card-core", OPT_INT, OFF(card_core), 0, 1, 100, "100", "gpu-core per card (percent)" },
	{ "worker", OPT_STR, OFF(worker), SZ(worker), 0, 0, "bin/gwb-worker",
	  "the worker: what a container without a command (or with gwb-worker's) runs" },
	{ "exec-allow", OPT_STR, OFF(exec_allow), SZ(exec_allow), 0, 0, "",
	  "PATH[,PATH...]: absolute programs a container's command may run besides the worker" },
	{ "state-dir", OPT_STR, OFF(state_dir), SZ(state_dir), 0, 0, "",
	  "folder for pod logs and annotation files (default: a temp dir, removed at exit)" },
	{ "control-socket", OPT_STR, OFF(control_socket), SZ(control_socket), 0, 0, "",
	  "Unix socket serving /_kubesim/ (reachable while the API refuses)" },
	{ "history", OPT_LONG, OFF(history), 0, 1, 10000000, "4096",
	  "watch history kept, in events (older resourceVersions get 410)" },
	{ "bookmark-ms", OPT_LONG, OFF(bookmark_ms), 0, 10, 3600000, "60000",
	  "interval of BOOKMARK events for watches that ask" },
	{ "job-backoff-ms", OPT_LONG, OFF(job_backoff_ms), 0, 0, 3600000, "10000",
	  "first back-off after a failed Job pod (doubles, capped at 6 min)" },
	{ "metric-ms", OPT_LONG, OFF(metric_ms), 0, 100, 3600000, "10000",
	  "NodeMetric report interval" },
	{ "no-device", OPT_NEG, OFF(create_device), 0, 0, 0, "1",
	  "do not create the node's Device at start (publish it with deploy/kubesim)" },
	{ "no-gpu-shared-sync", OPT_NEG, OFF(gpu_shared_sync), 0, 0, 0, "1",
	  "emulate EnableSyncGPUSharedResource=false (no koordinator.sh/gpu.shared on the node)" },
	{ "no-hami-label", OPT_NEG, OFF(hami_label), 0, 0, 0, "1",
	  "do not label the node koordinator.sh/gpu-isolation-provider=HAMi-core" },
	{ "node-cpu", OPT_QTY, OFF(node_cpu_milli), 0, 1, 0, "16", "node cpu (quantity)" },
	{ "node-memory", OPT_QTY, OFF(node_memory), 0, 1, 0, "64Gi", "node memory (quantity)" },
	{ "node-pods", OPT_LONG, OFF(node_pods), 0, 1, 100000, "110", "node pod capacity" },
	{ "max-body", OPT_LONG, OFF(max_body), 0, 1024, 1L << 30, "3145728",
	  "request body cap in bytes" },
	{ "max-headers", OPT_LONG, OFF(max_headers), 0, 1024, 1L << 24, "65536",
	  "request header cap in bytes" },
	{ "watch-queue-max", OPT_LONG, OFF(watch_queue_max), 0, 1024, 1L << 30, "16777216",
	  "unsent bytes per watch before it is closed" },
	{ "max-watchers", OPT_LONG, OFF(max_watchers), 0, 1, 1000000, "1000",
	  "open watches at most" },
	{ "kube-minor", OPT_LONG, OFF(kube_minor), 0, 20, 99, "32",
	  "Kubernetes minor version reported by /version" },
	{ "log-level", OPT_LEVEL, OFF(log_level), 0, 0, 0, "info", "debug|info|warn|error|off" },
	{ "score-strategy", OPT_STR, OFF(score_strategy), SZ(score_strategy), 0, 0,
	  "LeastAllocated", "DeviceShare scoring: LeastAllocated (spread) | MostAllocated (binpack)" },
	{ "max-requests-inflight", OPT_LONG, OFF(max_inflight), 0, 0, 1000000, "400",
	  "non-mutating API requests in flight before 429 (0: no limit; watches do not count)" },
	{ "max-mutating-requests-inflight", OPT_LONG, OFF(max_mutating_inflight), 0, 0, 1000000,
	  "200", "mutating API requests in flight before 429 (0: no limit)" },
};
#define NOPTS (sizeof opts / sizeof opts[0])

static void usage(FILE *f)
{
	fprintf(f, "usage: kubesim [--flag value]...\n");
	for (size_t i = 0; i < NOPTS; i++)
		fprintf(f, "  --%-20s %s%s%s%s\n", opts[i].name, opts[i].help,
			opts[i].type == OPT_NEG ? "" : " (default ",
			opts[i].type == OPT_NEG ? "" : opts[i].def,
			opts[i].type == OPT_NEG ? "" : ")");
}

static int set_opt(struct ks_config *c, const struct opt *o, const char *v, char *err,
		   size_t errlen)
{
	char *base = (char *)c + o->off;
	char *end;
	long x;
	int64_t q;
	switch (o->type) {
	case OPT_STR:
		if (strlen(v) >= o->size) {
			snprintf(err, errlen, "--%s: longer than %zu bytes", o->name, o->size - 1);
			return -1;
		}
		snprintf(base, o->size, "%s", v);
		return 0;
	case OPT_LONG:
	case OPT_INT:
		errno = 0;
		x = strtol(v, &end, 10);
		if (!v[0] || *end || errno || x < o->min || x > o->max) {
			snprintf(err, errlen, "--%s: \"%s\" is not an integer in [%ld, %ld]", o->name,
				 v, o->min, o->max);
			return -1;
		}
		if (o->type == OPT_INT)
			*(int *)(void *)base = (int)x;
		else
			*(long *)(void *)base = x;
		return 0;
	case OPT_QTY:
		if (quantity_parse(v, &q) < 0 || q < o->min) {
			snprintf(err, errlen, "--%s: \"%s\" is not a positive quantity", o->name, v);
			return -1;
		}
		/* node-cpu is kept in milli-cores. */
		if (o->off == OFF(node_cpu_milli)) {
			double d = strtod(v, &end);
			if (*end == 'm')
				q = (int64_t)d;
			else if (*end == '\0')
				q = (int64_t)(d * 1000.0);
			else {
				snprintf(err, errlen, "--node-cpu: use cores (\"16\") or millicores");
				return -1;
			}
		}
		*(int64_t *)(void *)base = q;
		return 0;
	case OPT_BOOL:
	case OPT_NEG:
		*(int *)(void *)base = !strcmp(v, "1");
		return 0;
	case OPT_LEVEL:
		x = log_level_parse(v);
		if (x < 0) {
			snprintf(err, errlen, "--log-level: unknown level \"%s\"", v);
			return -1;
		}
		*(int *)(void *)base = (int)x;
		return 0;
	}
	return -1;
}

/* --exec-allow: every entry an absolute path (the kubelet compares command[0] with them). */
static int check_exec_allow(const char *list)
{
	const char *p = list;
	while (*p) {
		size_t n = strcspn(p, ",");
		if (n == 0 || p[0] != '/') {
			fprintf(stderr, "kubesim: --exec-allow: \"%.*s\" is not an absolute path\n",
				(int)n, p);
			return -1;
		}
		p += n;
		if (*p == ',' && !*++p) {
			fprintf(stderr, "kubesim: --exec-allow: empty entry at the end\n");
			return -1;
		}
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct ks_config *c)
{
	char err[300];
	for (size_t i = 0; i < NOPTS; i++)
		if (set_opt(c, &opts[i], opts[i].def, err, sizeof err) < 0) {
			fprintf(stderr, "kubesim: bad default: %s\n", err);
			return -1;
		}
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		}
		if (strncmp(a, "--", 2) != 0) {
			fprintf(stderr, "kubesim: unexpected argument \"%s\"\n", a);
			return -1;
		}
		char name[64];
		const char *eq = strchr(a + 2, '=');
		size_t n = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
		snprintf(name, sizeof name, "%.*s", (int)n, a + 2);
		const struct opt *o = NULL;
		for (size_t k = 0; k < NOPTS; k++)
			if (!strcmp(opts[k].name, name))
				o = &opts[k];
		if (!o) {
			fprintf(stderr, "kubesim: unknown flag --%s\n", name);
			usage(stderr);
			return -1;
		}
		const char *v;
		if (o->type == OPT_NEG) {
			v = "0";
		} else if (eq) {
			v = eq + 1;
		} else if (i + 1 < argc) {
			v = argv[++i];
		} else {
			fprintf(stderr, "kubesim: --%s needs a value\n", name);
			return -1;
		}
		if (set_opt(c, o, v, err, sizeof err) < 0) {
			fprintf(stderr, "kubesim: %s\n", err);
			return -1;
		}
	}
	if (!strcmp(c->score_strategy, "MostAllocated")) {
		c->score_most = 1;
	} else if (strcmp(c->score_strategy, "LeastAllocated") != 0) {
		fprintf(stderr, "kubesim: --score-strategy: \"%s\" is not LeastAllocated or "
				"MostAllocated\n", c->score_strategy);
		return -1;
	}
	if (check_exec_allow(c->exec_allow) < 0)
		return -1;
	/* "<node>-N" must stay a DNS label-sized name. */
	if (c->nodes > 1 && strlen(c->node) + 3 >= sizeof c->node) {
		fprintf(stderr, "kubesim: --node is too long for --nodes %d\n", c->nodes);
		return -1;
	}
	return 0;
}

/* The worker command: as given when it exists, else next to (or relative to) kubesim. */
static void resolve_worker(struct ks_config *c)
{
	if (c->worker[0] == '/' || access(c->worker, X_OK) == 0) {
		char real[PATH_MAX];
		if (c->worker[0] != '/' && realpath(c->worker, real))
			snprintf(c->worker, sizeof c->worker, "%s", real);
		return;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return;
	*slash = '\0';
	const char *base = strrchr(c->worker, '/') ? strrchr(c->worker, '/') + 1 : c->worker;
	char cand[2][PATH_MAX + 300];
	snprintf(cand[0], sizeof cand[0], "%s/%s", exe, base);
	snprintf(cand[1], sizeof cand[1], "%s/../%s", exe, c->worker);
	for (int i = 0; i < 2; i++) {
		char real[PATH_MAX];
		if (access(cand[i], X_OK) == 0 && realpath(cand[i], real)) {
			snprintf(c->worker, sizeof c->worker, "%s", real);
			return;
		}
	}
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void ks_node_name(const struct ks *ks, int i, char *buf, size_t len)
{
	if (i == 0)
		snprintf(buf, len, "%s", ks->cfg.node);
	else
		snprintf(buf, len, "%s-%d", ks->cfg.node, i + 1);
}

/* Asks for one reconcile of every controller at the next loop turn (idempotent). */
static void ks_kick(struct ks *ks)
{
	if (ks->kick_ev && !ks->stopping)
		event_active(ks->kick_ev, EV_TIMEOUT, 0);
}

/* The registry's commit hook: a commit wakes the controllers. A commit made by a pass wakes
 * nobody: the reconcile runs another pass when its passes moved the resourceVersion. */
static void wake_on_commit(enum res_id res, void *arg)
{
	(void)res;
	struct ks *ks = arg;
	if (!ks->reconciling)
		ks_kick(ks);
}

static void reconcile(struct ks *ks)
{
	ks->reconciling = 1;
	for (int i = 0; i < MAX_PASSES && !ks->stopping; i++) {
		uint64_t rv = store_rv(ks->store);
		devices_sync(ks);
		jobctl_sync(ks->jobctl);
		sched_sync(ks);
		kubelet_sync(ks->kubelet);
		if (store_rv(ks->store) == rv)
			break;
	}
	ks->reconciling = 0;
	ks->settled_rv = store_rv(ks->store);
	ks->last_pass_ms = clock_mono_ms();
	watch_reap(ks->watch);
	logs_reap(ks->logs);
}

static void kick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	reconcile(arg);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct ks *ks = arg;
	faults_tick(ks->faults);
	if (store_rv(ks->store) != ks->settled_rv || kubelet_terminating(ks->kubelet) ||
	    clock_mono_ms() - ks->last_pass_ms >= FULL_PASS_MS) {
		reconcile(ks);
	} else {
		watch_reap(ks->watch);
		logs_reap(ks->logs);
	}
}

static void stop_cb(evutil_socket_t sig, short what, void *arg)
{
	(void)what;
	struct ks *ks = arg;
	log_info("kubesim", "stopping", "signal=%d", (int)sig);
	ks->stopping = 1;
	event_base_loopbreak(ks->base);
}

int main(int argc, char **argv)
{
	static struct ks ks;
	gwb_alloc_init();
	signal(SIGPIPE, SIG_IGN);
	if (parse_args(argc, argv, &ks.cfg) < 0)
		return 2;
	log_level_min = ks.cfg.log_level;
	resolve_worker(&ks.cfg);
	if (!ks.cfg.state_dir[0]) {
		snprintf(ks.cfg.state_dir, sizeof ks.cfg.state_dir, "/tmp/kubesim.XXXXXX");
		if (!mkdtemp(ks.cfg.state_dir)) {
			fprintf(stderr, "kubesim: mkdtemp: %s\n", strerror(errno));
			return 1;
		}
		ks.cfg.state_is_temp = 1;
	} else if (mkdir(ks.cfg.state_dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "kubesim: --state-dir %s: %s\n", ks.cfg.state_dir, strerror(errno));
		return 1;
	}
	ks.base = event_base_new();
	/* resourceVersions start at the wall clock in ms, so a restarted kubesim answers the
	 * versions of its previous life with 410 instead of silently misreading them. */
	ks.store = store_new((size_t)ks.cfg.history, (uint64_t)clock_now_ms());
	ks.registry = registry_new(&ks);
	ks.faults = faults_new(&ks);
	ks.watch = watch_hub_new(&ks);
	ks.logs = logs_new(&ks);
	ks.http = http_new(&ks, api_handle, faults_handle, &ks);
	ks.jobctl = jobctl_new(&ks);
	ks.sched = sched_new(&ks);
	ks.kubelet = kubelet_new(&ks);
	ks.kick_ev = event_new(ks.base, -1, 0, kick_cb, &ks);
	registry_hook_add(ks.registry, wake_on_commit, &ks);
	ks.tick_ev = event_new(ks.base, -1, EV_PERSIST, tick_cb, &ks);
	struct event *sigterm = evsignal_new(ks.base, SIGTERM, stop_cb, &ks);
	struct event *sigint = evsignal_new(ks.base, SIGINT, stop_cb, &ks);
	evsignal_add(sigterm, NULL);
	evsignal_add(sigint, NULL);
	int rc = 0;
	char url[320];
	if (devices_bootstrap(&ks) < 0) {
		fprintf(stderr, "kubesim: bootstrap failed\n");
		rc = 1;
		goto out;
	}
	int err = http_listen_tcp(ks.http, ks.cfg.listen, url, sizeof url);
	if (err < 0) {
		fprintf(stderr, "kubesim: cannot listen on %s: %s\n", ks.cfg.listen, err_str(err));
		rc = 1;
		goto out;
	}
	if (ks.cfg.control_socket[0] && http_listen_unix(ks.http, ks.cfg.control_socket) < 0) {
		fprintf(stderr, "kubesim: cannot listen on %s\n", ks.cfg.control_socket);
		rc = 1;
		goto out;
	}
	ks.nodemetric = nodemetric_new(&ks);
	struct timeval tv = { 0, TICK_MS * 1000 };
	evtimer_add(ks.tick_ev, &tv);
	log_info("kubesim", "started",
		 "url=%s node=%s nodes=%d cards=%d score=%s worker=%s exec_allow=%s state=%s", url,
		 ks.cfg.node, ks.cfg.nodes, ks.cfg.cards, ks.cfg.score_strategy,
		 log_q(ks.cfg.worker), log_q(ks.cfg.exec_allow), log_q(ks.cfg.state_dir));
	printf("kubesim listening on %s\n", url);
	fflush(stdout);
	ks_kick(&ks);
	event_base_dispatch(ks.base);
out:
	ks.stopping = 1;
	watch_hub_free(ks.watch);
	logs_free(ks.logs);
	kubelet_free(ks.kubelet);
	nodemetric_free(ks.nodemetric);
	http_free(ks.http);
	jobctl_free(ks.jobctl);
	sched_free(ks.sched);
	faults_free(ks.faults);
	event_free(ks.kick_ev);
	event_free(ks.tick_ev);
	event_free(sigterm);
	event_free(sigint);
	registry_free(ks.registry);
	store_free(ks.store);
	event_base_free(ks.base);
	libevent_global_shutdown();
	if (ks.cfg.state_is_temp)
		nftw(ks.cfg.state_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	log_info("kubesim", "stopped", "rc=%d", rc);
	return rc;
}
