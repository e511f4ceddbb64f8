/* Configuration: the settings table, the config-file reader, the environment and flag passes,
 * and the validators. */
#include "config/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/addr.h"
#include "lib/dnslabel.h"
#include "lib/err.h"

enum setting_type { T_STR, T_INT, T_ENUM };

struct setting;
typedef int (*validate_fn)(const struct setting *s, const char *value, char *why, size_t len);

struct setting {
	const char *name;
	const char *env;
	enum setting_type type;
	size_t offset;
	size_t size; /* for strings */
	const char *def;
	int64_t min, max;              /* for integers */
	const char *const *values;     /* for enums, NULL-terminated */
	validate_fn validate;          /* optional extra check */
	const char *help;
};

static int v_hostport(const struct setting *s, const char *v, char *why, size_t len);
static int v_redis(const struct setting *s, const char *v, char *why, size_t len);
static int v_url(const struct setting *s, const char *v, char *why, size_t len);
static int v_dns_label(const struct setting *s, const char *v, char *why, size_t len);
static int v_token(const struct setting *s, const char *v, char *why, size_t len);
static int v_nonempty(const struct setting *s, const char *v, char *why, size_t len);
static int v_keypart(const struct setting *s, const char *v, char *why, size_t len);

static const char *const modes[] = { "sim", "kube", NULL };
static const char *const levels[] = { "debug", "info", "warn", "error", NULL };
static const char *const strategies[] = { "LeastAllocated", "MostAllocated", NULL };
static const char *const usage_formats[] = { "hami", "dcgm", NULL };

#define STR(field) T_STR, offsetof(struct gwb_config, field), sizeof(((struct gwb_config *)0)->field)
#define INT(field) T_INT, offsetof(struct gwb_config, field), 0
#define ENUM(field) T_ENUM, offsetof(struct gwb_config, field), sizeof(((struct gwb_config *)0)->field)

static const struct setting settings[] = {
	{ "listen", "GWB_LISTEN", STR(listen), "127.0.0.1:8080", 0, 0, NULL, v_hostport,
	  "host:port of the HTTP API (port 0 picks a free one)" },
	{ "db", "GWB_DB", STR(db), ".runtime/gwb.db", 0, 0, NULL, v_nonempty, "SQLite file" },
	{ "redis", "GWB_REDIS", STR(redis), "", 0, 0, NULL, v_redis,
	  "redis://host[:port][/N] or unix:///path (empty: no queue)" },
	{ "kube.server", "GWB_KUBE_SERVER", STR(kube_server), "", 0, 0, NULL, v_url,
	  "API server URL (empty: kubeconfig, then in-cluster)" },
	{ "kube.config", "KUBECONFIG", STR(kubeconfig), "", 0, 0, NULL, NULL,
	  "kubeconfig file (empty: ~/.kube/config)" },
	{ "kube.namespace", "GWB_NAMESPACE", STR(kube_namespace), "gpu-workbench", 0, 0, NULL,
	  v_dns_label, "namespace of the task Jobs" },
	{ "kube.worker_image", "GWB_WORKER_IMAGE", STR(kube_worker_image), "gwb-worker:local", 0,
	  0, NULL, v_nonempty, "container image of the worker in each task's Job" },
	{ "kube.isolation_provider", "GWB_ISOLATION_PROVIDER", STR(kube_isolation), "HAMi-core",
	  0, 0, NULL, NULL,
	  "koordinator.sh/gpu-isolation-provider label on task Pods (empty: none)" },
	{ "kube.request_timeout_ms", "GWB_KUBE_REQUEST_TIMEOUT_MS", INT(kube_request_timeout_ms),
	  "30000", 100, 600000, NULL, NULL,
	  "time-out of one Kubernetes API request, counted from its send (the API server gives up "
	  "on its own at 60 s; a busy one may take seconds, and an unanswered create makes its "
	  "task unknown)" },
	{ "kube.job_ttl_seconds", "GWB_KUBE_JOB_TTL_SECONDS", INT(kube_job_ttl_seconds), "3600", 0,
	  30LL * 86400, NULL, NULL,
	  "finished task Jobs are deleted this long after they end (0: kept)" },
	{ "kube.pod_deadline_margin_seconds", "GWB_KUBE_POD_DEADLINE_MARGIN_SECONDS",
	  INT(kube_pod_deadline_margin_seconds), "300", 1, 7LL * 86400, NULL, NULL,
	  "a task Pod's activeDeadlineSeconds is the task's duration plus this (scheduling, image "
	  "pull and start-up included); it bounds how long an orphaned Pod can run, which is how "
	  "long a task whose cluster was replaced keeps its quota" },
	{ "kube.watch_timeout_seconds", "GWB_KUBE_WATCH_TIMEOUT_SECONDS",
	  INT(kube_watch_timeout_seconds), "60", 1, 3600, NULL, NULL,
	  "server-side timeoutSeconds of one watch request" },
	{ "kube.watch_idle_seconds", "GWB_KUBE_WATCH_IDLE_SECONDS", INT(kube_watch_idle_seconds),
	  "90", 1, 3600, NULL, NULL,
	  "a watch stream silent this long is treated as broken (the picture goes stale)" },
	{ "kube.max_inflight", "GWB_KUBE_MAX_INFLIGHT", INT(kube_max_inflight), "32", 1, 1024,
	  NULL, NULL, "Kubernetes API requests in flight at most (watches have their own slots)" },
	{ "kube.qps", "GWB_KUBE_QPS", INT(kube_qps), "50", 1, 100000, NULL, NULL,
	  "Kubernetes API requests started per second, sustained (token bucket)" },
	{ "kube.burst", "GWB_KUBE_BURST", INT(kube_burst), "100", 1, 100000, NULL, NULL,
	  "Kubernetes API requests started at once after a quiet time (bucket size)" },
	{ "reconcile.resync_ms", "GWB_RECONCILE_RESYNC_MS", INT(reconcile_resync_ms), "5000", 50,
	  600000, NULL, NULL, "period of the reconciler's full pass over active tasks" },
	{ "reconcile.queued_grace_ms", "GWB_RECONCILE_QUEUED_GRACE_MS",
	  INT(reconcile_queued_grace_ms), "30000", 0, 86400000, NULL, NULL,
	  "a task still queued after this long (its intent lost with a Redis restart) is handled "
	  "without it" },
	{ "admin_token", "GWB_ADMIN_TOKEN", STR(admin_token), "", 0, 0, NULL, v_token,
	  "bearer token of the administrator (empty: no admin)" },
	{ "mode", "GWB_MODE", ENUM(mode), "sim", 0, 0, modes, NULL,
	  "sim (kubesim) or kube (a real cluster), as reported by /v1/info" },
	{ "log.level", "GWB_LOG_LEVEL", ENUM(log_level), "info", 0, 0, levels, NULL,
	  "debug, info, warn or error" },
	{ "predict.strategy", "GWB_PREDICT_STRATEGY", ENUM(predict_strategy), "LeastAllocated", 0,
	  0, strategies, NULL,
	  "the DeviceShare scoring strategy the dry run predicts with (LeastAllocated, as "
	  "Koordinator's chart sets it, or MostAllocated): set it as the scheduler is set" },
	{ "http.max_body_bytes", "GWB_HTTP_MAX_BODY_BYTES", INT(http_max_body_bytes), "65536",
	  256, 16 << 20, NULL, NULL, "request bodies above this are refused with 413" },
	{ "http.max_header_bytes", "GWB_HTTP_MAX_HEADER_BYTES", INT(http_max_header_bytes),
	  "16384", 1024, 1 << 20, NULL, NULL, "request headers above this are refused" },
	{ "http.timeout_seconds", "GWB_HTTP_TIMEOUT_SECONDS", INT(http_timeout_seconds), "30", 1,
	  3600, NULL, NULL, "read/idle time-out of one HTTP connection" },
	{ "http.header_timeout_seconds", "GWB_HTTP_HEADER_TIMEOUT_SECONDS",
	  INT(http_header_timeout_seconds), "10", 1, 3600, NULL, NULL,
	  "a request's line and headers must arrive within this of their first byte (408)" },
	{ "http.body_timeout_seconds", "GWB_HTTP_BODY_TIMEOUT_SECONDS",
	  INT(http_body_timeout_seconds), "30", 1, 3600, NULL, NULL,
	  "a request's body must arrive within this of its first byte (408)" },
	{ "http.max_connections", "GWB_HTTP_MAX_CONNECTIONS", INT(http_max_connections), "4096",
	  1, 1000000, NULL, NULL,
	  "open HTTP connections in all (more are answered 503 and closed; lowered to fit the "
	  "open-files limit)" },
	{ "http.max_connections_per_address", "GWB_HTTP_MAX_CONNECTIONS_PER_ADDRESS",
	  INT(http_max_connections_per_address), "512", 1, 1000000, NULL, NULL,
	  "open HTTP connections from one client address (more are answered 503 and closed)" },
	{ "idempotency.ttl_seconds", "GWB_IDEMPOTENCY_TTL_SECONDS", INT(idempotency_ttl_seconds),
	  "86400", 60, 30LL * 86400, NULL, NULL, "how long idempotency keys are kept" },
	{ "store.busy_timeout_ms", "GWB_STORE_BUSY_TIMEOUT_MS", INT(store_busy_timeout_ms),
	  "5000", 1, 600000, NULL, NULL,
	  "how long opening the store (migrations) waits for another writer; once running, the "
	  "server never waits: SQLITE_BUSY answers 503 with Retry-After" },
	{ "store.wal_max_bytes", "GWB_STORE_WAL_MAX_BYTES", INT(store_wal_max_bytes), "67108864",
	  1 << 20, 1LL << 40, NULL, NULL,
	  "WAL bound: a commit above it runs a checkpoint at once, the file is cut back to it" },
	{ "housekeeping.interval_ms", "GWB_HOUSEKEEPING_INTERVAL_MS",
	  INT(housekeeping_interval_ms), "1000", 10, 600000, NULL, NULL,
	  "period of the housekeeping timer" },
	{ "audit.interval_s", "GWB_AUDIT_INTERVAL_S", INT(audit_interval_s), "300", 1, 86400,
	  NULL, NULL, "the housekeeping timer runs the quota audit this often (it only reports)" },
	{ "audit.grace_s", "GWB_AUDIT_GRACE_S", INT(audit_grace_s), "120", 0, 86400, NULL, NULL,
	  "a task holding quota with neither Job nor Pod is drift once it is older than this" },
	{ "http.rate_limit_per_s", "GWB_HTTP_RATE_LIMIT_PER_S", INT(http_rate_limit_per_s), "100", 0,
	  1000000, NULL, NULL,
	  "requests per second per token, sustained (token bucket; 0: no limit); over it: 429" },
	{ "http.rate_limit_burst", "GWB_HTTP_RATE_LIMIT_BURST", INT(http_rate_limit_burst), "200",
	  1, 1000000, NULL, NULL, "requests one token may send at once after a quiet time" },
	{ "http.rate_limit_admin", "GWB_HTTP_RATE_LIMIT_ADMIN", INT(http_rate_limit_admin), "0", 0,
	  1, NULL, NULL, "1: the admin token is rate-limited too (0: exempt)" },
	{ "http.stream_max_per_token", "GWB_HTTP_STREAM_MAX_PER_TOKEN",
	  INT(http_stream_max_per_token), "4", 0, 10000, NULL, NULL,
	  "open GET /v1/stream connections one team token may hold (more get 429; 0: no cap)" },
	{ "http.stream_admin_reserved", "GWB_HTTP_STREAM_ADMIN_RESERVED",
	  INT(http_stream_admin_reserved), "4", 0, 10000, NULL, NULL,
	  "of stream.max_clients, this many (at most all but one) only the admin may take" },
	{ "http.metrics_token", "GWB_HTTP_METRICS_TOKEN", STR(http_metrics_token), "", 0, 0, NULL,
	  v_token, "bearer token that reads /metrics and the detailed /readyz besides the admin's "
	  "(empty: the admin's only)" },
	{ "queue.prefix", "GWB_QUEUE_PREFIX", STR(queue_prefix), "gwb", 0, 0, NULL, v_keypart,
	  "Redis key prefix (stream <prefix>:intents)" },
	{ "queue.consumer", "GWB_QUEUE_CONSUMER", STR(queue_consumer), "", 0, 0, NULL, NULL,
	  "consumer name in group reconcilers (empty: stable name from host and db path)" },
	{ "queue.claim_idle_ms", "GWB_QUEUE_CLAIM_IDLE_MS", INT(queue_claim_idle_ms), "30000", 100,
	  86400000, NULL, NULL, "claim other consumers' entries idle longer than this" },
	{ "queue.max_failures", "GWB_QUEUE_MAX_FAILURES", INT(queue_max_failures), "5", 1, 1000,
	  NULL, NULL,
	  "failed attempts at handling one valid intent (counted in SQLite) before it is "
	  "dead-lettered; redeliveries never count" },
	{ "queue.command_timeout_ms", "GWB_QUEUE_COMMAND_TIMEOUT_MS",
	  INT(queue_command_timeout_ms), "2000", 50, 600000, NULL, NULL,
	  "time-out of one Redis command" },
	{ "queue.stream_maxlen", "GWB_QUEUE_STREAM_MAXLEN", INT(queue_stream_maxlen), "100000",
	  1000, 100000000, NULL, NULL, "approximate length the intent stream is trimmed to" },
	{ "queue.block_ms", "GWB_QUEUE_BLOCK_MS", INT(queue_block_ms), "1000", 10, 60000, NULL, NULL,
	  "how long one read of new intents waits in Redis" },
	{ "queue.handler_delay_ms", "GWB_QUEUE_HANDLER_DELAY_MS", INT(queue_handler_delay_ms), "0",
	  0, 600000, NULL, NULL,
	  "the built-in intent handler holds each intent this long before recording it (to watch "
	  "intents in flight; 0 = none)" },
	{ "queue.max_skip_seconds", "GWB_QUEUE_MAX_SKIP_SECONDS", INT(queue_max_skip_seconds), "300",
	  0, 86400, NULL, NULL,
	  "a best_effort team's waiting tasks may pass the head of its line until the head has "
	  "waited this long; then the line is strict until the head is admitted" },
	{ "stream.max_clients", "GWB_STREAM_MAX_CLIENTS", INT(stream_max_clients), "64", 0, 10000,
	  NULL, NULL, "open GET /v1/stream connections at most (more get 503; 0: no stream)" },
	{ "stream.max_buffer_bytes", "GWB_STREAM_MAX_BUFFER_BYTES", INT(stream_max_buffer_bytes),
	  "1048576", 4096, 64 << 20, NULL, NULL,
	  "a stream whose client leaves this many bytes unread is closed (it reconnects and resumes)" },
	{ "stream.poll_ms", "GWB_STREAM_POLL_MS", INT(stream_poll_ms), "250", 10, 10000, NULL, NULL,
	  "how often open streams read new task events, teams and devices" },
	{ "usage.url", "GWB_USAGE_URL", STR(usage_url), "", 0, 0, NULL, v_url,
	  "Prometheus endpoint of a GPU monitor (HAMi's vGPU monitor, dcgm-exporter or kubesim's "
	  "/sim/metrics/hami) scraped once a period for the tasks' usage (empty: none, usage "
	  "unknown)" },
	{ "usage.format", "GWB_USAGE_FORMAT", ENUM(usage_format), "hami", 0, 0, usage_formats,
	  NULL, "hami (per container) or dcgm (per card)" },
	{ "usage.period_seconds", "GWB_USAGE_PERIOD_SECONDS", INT(usage_period_seconds), "15", 1,
	  3600, NULL, NULL,
	  "one scrape of usage.url per period; a sample older than three periods is stale" },
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

static int fmt_err(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fmt_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return GWB_EINVAL;
}

static int v_nonempty(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	if (!v[0]) {
		snprintf(why, len, "must not be empty");
		return -1;
	}
	return 0;
}

int config_split_hostport(const char *s, char *host, size_t hostlen, int *port)
{
	struct addr a;
	char why[160];
	if (addr_parse(s, ADDR_F_HOSTPORT | ADDR_F_PORT0, &a, why, sizeof why) < 0 ||
	    strlen(a.host) >= hostlen)
		return GWB_EINVAL;
	memcpy(host, a.host, strlen(a.host) + 1);
	*port = a.port;
	return 0;
}

/* The address validators: lib/addr.c decides, so every binary accepts the same strings. */
static int v_addr(const char *v, unsigned allow, char *why, size_t len)
{
	struct addr a;
	return addr_parse(v, allow, &a, why, len) < 0 ? -1 : 0;
}

static int v_hostport(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	return v_addr(v, ADDR_F_HOSTPORT | ADDR_F_PORT0, why, len);
}

static int v_redis(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	return v[0] ? v_addr(v, ADDR_F_REDIS | ADDR_F_UNIX, why, len) : 0;
}

static int v_url(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	return v[0] ? v_addr(v, ADDR_F_HTTP, why, len) : 0;
}

static int v_dns_label(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	if (!dnslabel_is(v)) {
		snprintf(why, len, "must be a DNS label (lowercase letters, digits, '-', 1-63)");
		return -1;
	}
	return 0;
}

static int v_token(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	size_t n = strlen(v);
	if (n == 0)
		return 0;
	if (n < 8 || n > 256) {
		snprintf(why, len, "must be 8 to 256 characters");
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (v[i] <= ' ' || v[i] > '~') {
			snprintf(why, len, "must be visible ASCII");
			return -1;
		}
	}
	return 0;
}

static int v_keypart(const struct setting *s, const char *v, char *why, size_t len)
{
	(void)s;
	size_t n = strlen(v);
	for (size_t i = 0; i < n; i++) {
		if (v[i] <= ' ' || v[i] > '~') {
			snprintf(why, len, "must be visible ASCII");
			return -1;
		}
	}
	if (n == 0) {
		snprintf(why, len, "must not be empty");
		return -1;
	}
	return 0;
}

/* Validates and stores one value. why receives the reason on failure. */
static int setting_apply(struct gwb_config *c, const struct setting *s, const char *v, char *why,
			 size_t len)
{
	char *field = (char *)c + s->offset;
	if (s->type == T_INT) {
		char *end;
		errno = 0;
		long long x = strtoll(v, &end, 10);
		if (errno || end == v || *end) {
			snprintf(why, len, "must be an integer");
			return -1;
		}
		if (x < s->min || x > s->max) {
			snprintf(why, len, "must be from %lld to %lld", (long long)s->min,
				 (long long)s->max);
			return -1;
		}
		*(int64_t *)(void *)field = x;
		return 0;
	}
	if (strlen(v) >= s->size) {
		snprintf(why, len, "longer than %zu bytes", s->size - 1);
		return -1;
	}
	if (s->type == T_ENUM) {
		int ok = 0;
		for (const char *const *e = s->values; *e; e++)
			ok |= strcmp(*e, v) == 0;
		if (!ok) {
			size_t used = (size_t)snprintf(why, len, "must be one of:");
			for (const char *const *e = s->values; *e && used < len; e++)
				used += (size_t)snprintf(why + used, len - used, " %s", *e);
			return -1;
		}
	}
	if (s->validate && s->validate(s, v, why, len) < 0)
		return -1;
	memcpy(field, v, strlen(v) + 1);
	return 0;
}

static const struct setting *setting_find(const char *name)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].name, name) == 0)
			return &settings[i];
	return NULL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* Reads `name = value` lines; '#' starts a comment line; a value may be "double-quoted". */
static int load_file(struct gwb_config *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return fmt_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
	char line[2048];
	int lineno = 0, rc = 0;
	while (fgets(line, sizeof line, f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			rc = fmt_err(err, errlen, "%s:%d: line too long", path, lineno);
			break;
		}
		char *s = trim(line);
		if (!*s || *s == '#')
			continue;
		char *eq = strchr(s, '=');
		if (!eq) {
			rc = fmt_err(err, errlen, "%s:%d: expected name = value", path, lineno);
			break;
		}
		*eq = '\0';
		char *name = trim(s), *val = trim(eq + 1);
		size_t vl = strlen(val);
		if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') {
			val[vl - 1] = '\0';
			val++;
		}
		const struct setting *st = setting_find(name);
		char why[256];
		if (!st) {
			rc = fmt_err(err, errlen, "%s:%d: unknown setting '%s'", path, lineno, name);
			break;
		}
		if (setting_apply(c, st, val, why, sizeof why) < 0) {
			rc = fmt_err(err, errlen, "%s:%d: %s: %s", path, lineno, name, why);
			break;
		}
	}
	fclose(f);
	return rc;
}

int config_env_known(const char *env)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strcmp(settings[i].env, env) == 0)
			return 1;
	return 0;
}

void config_usage(FILE *out)
{
	fprintf(out, "usage: gwb-server [-c FILE] [--SETTING=VALUE ...]\n\n"
		     "Settings (file `name = value`, then environment, then flags):\n");
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		fprintf(out, "  --%-26s %-30s %s (default: %s)\n", s->name, s->env, s->help,
			s->def[0] ? s->def : "empty");
	}
}

static int apply_defaults(struct gwb_config *c)
{
	char why[256];
	memset(c, 0, sizeof *c);
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		/* Defaults skip the validators so an empty default may mean "not set". */
		if (s->type == T_INT) {
			if (setting_apply(c, s, s->def, why, sizeof why) < 0)
				return GWB_EINVAL;
		} else {
			snprintf((char *)c + s->offset, s->size, "%s", s->def);
		}
	}
	return 0;
}

/* Splits "--name=value" or "--name value"; advances *i past what it used. */
static int flag_value(int argc, char **argv, int *i, const char **name, const char **val,
		      char *namebuf, size_t namelen)
{
	const char *a = argv[*i] + 2;
	const char *eq = strchr(a, '=');
	if (eq) {
		snprintf(namebuf, namelen, "%.*s", (int)(eq - a), a);
		*name = namebuf;
		*val = eq + 1;
		return 0;
	}
	snprintf(namebuf, namelen, "%s", a);
	*name = namebuf;
	if (*i + 1 >= argc)
		return -1;
	*val = argv[++*i];
	return 0;
}

int config_load(struct gwb_config *c, int argc, char **argv, FILE *out, char *err, size_t errlen)
{
	if (apply_defaults(c) < 0)
		return fmt_err(err, errlen, "internal: a default is invalid");
	const char *file = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			config_usage(out);
			return 1;
		}
		if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
			if (i + 1 >= argc)
				return fmt_err(err, errlen, "flag %s: needs a file", argv[i]);
			file = argv[++i];
		}
	}
	if (file) {
		snprintf(c->config_file, sizeof c->config_file, "%s", file);
		int rc = load_file(c, file, err, errlen);
		if (rc)
			return rc;
	}
	char why[256];
	for (size_t i = 0; i < NSETTINGS; i++) {
		const char *v = getenv(settings[i].env);
		if (!v)
			continue;
		if (setting_apply(c, &settings[i], v, why, sizeof why) < 0)
			return fmt_err(err, errlen, "environment %s: %s", settings[i].env, why);
	}
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 || strcmp(argv[i], "--config") == 0) {
			i++;
			continue;
		}
		if (strncmp(argv[i], "--", 2) != 0)
			return fmt_err(err, errlen, "argument '%s': expected --setting=value",
				       argv[i]);
		const char *name, *val;
		char namebuf[128];
		if (flag_value(argc, argv, &i, &name, &val, namebuf, sizeof namebuf) < 0)
			return fmt_err(err, errlen, "flag --%s: needs a value", namebuf);
		const struct setting *st = setting_find(name);
		if (!st)
			return fmt_err(err, errlen, "flag --%s: unknown setting", name);
		if (setting_apply(c, st, val, why, sizeof why) < 0)
			return fmt_err(err, errlen, "flag --%s: %s", name, why);
	}
	return 0;
}
