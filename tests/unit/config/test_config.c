/* gwb-server's settings (config/config.c): each row of the table refuses what its type, bounds,
 * enum or validator refuses, from a file (with file:line), from its environment variable and
 * from its flag, and stores what it accepts; the file reader's own refusals; the order file,
 * environment, flags; a valid file loads. The rows below mirror config.c's table, and a case
 * checks through config_usage that no setting is left out. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "lib/alloc.h"
#include "lib/err.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

enum kind { K_INT, K_STR, K_ENUM };
/* The validator a string row has in config.c. */
enum check { C_NONE, C_HOSTPORT, C_NONEMPTY, C_REDIS, C_URL, C_DNS, C_TOKEN, C_KEYPART };

struct row {
	const char *name, *env;
	enum kind kind;
	size_t off, size;
	int64_t min, max;  /* K_INT */
	enum check check;  /* K_STR */
	const char *values; /* K_ENUM: space-separated */
};

#define FIELD(f) offsetof(struct gwb_config, f), sizeof(((struct gwb_config *)0)->f)
#define I(n, e, f, lo, hi) { n, e, K_INT, FIELD(f), lo, hi, C_NONE, NULL }
#define S(n, e, f, c) { n, e, K_STR, FIELD(f), 0, 0, c, NULL }
#define E(n, e, f, v) { n, e, K_ENUM, FIELD(f), 0, 0, C_NONE, v }

static const struct row rows[] = {
	S("listen", "GWB_LISTEN", listen, C_HOSTPORT),
	S("db", "GWB_DB", db, C_NONEMPTY),
	S("redis", "GWB_REDIS", redis, C_REDIS),
	S("kube.server", "GWB_KUBE_SERVER", kube_server, C_URL),
	S("kube.config", "KUBECONFIG", kubeconfig, C_NONE),
	S("kube.namespace", "GWB_NAMESPACE", kube_namespace, C_DNS),
	S("kube.worker_image", "GWB_WORKER_IMAGE", kube_worker_image, C_NONEMPTY),
	S("kube.isolation_provider", "GWB_ISOLATION_PROVIDER", kube_isolation, C_NONE),
	I("kube.request_timeout_ms", "GWB_KUBE_REQUEST_TIMEOUT_MS", kube_request_timeout_ms, 100,
	  600000),
	I("kube.job_ttl_seconds", "GWB_KUBE_JOB_TTL_SECONDS", kube_job_ttl_seconds, 0,
	  30LL * 86400),
	I("kube.pod_deadline_margin_seconds", "GWB_KUBE_POD_DEADLINE_MARGIN_SECONDS",
	  kube_pod_deadline_margin_seconds, 1, 7LL * 86400),
	I("kube.watch_timeout_seconds", "GWB_KUBE_WATCH_TIMEOUT_SECONDS",
	  kube_watch_timeout_seconds, 1, 3600),
	I("kube.watch_idle_seconds", "GWB_KUBE_WATCH_IDLE_SECONDS", kube_watch_idle_seconds, 1,
	  3600),
	I("kube.max_inflight", "GWB_KUBE_MAX_INFLIGHT", kube_max_inflight, 1, 1024),
	I("kube.qps", "GWB_KUBE_QPS", kube_qps, 1, 100000),
	I("kube.burst", "GWB_KUBE_BURST", kube_burst, 1, 100000),
	I("reconcile.resync_ms", "GWB_RECONCILE_RESYNC_MS", reconcile_resync_ms, 50, 600000),
	I("reconcile.queued_grace_ms", "GWB_RECONCILE_QUEUED_GRACE_MS", reconcile_queued_grace_ms,
	  0, 86400000),
	S("admin_token", "GWB_ADMIN_TOKEN", admin_token, C_TOKEN),
	E("mode", "GWB_MODE", mode, "sim kube"),
	E("log.level", "GWB_LOG_LEVEL", log_level, "debug info warn error"),
	E("predict.strategy", "GWB_PREDICT_STRATEGY", predict_strategy,
	  "LeastAllocated MostAllocated"),
	I("http.max_body_bytes", "GWB_HTTP_MAX_BODY_BYTES", http_max_body_bytes, 256, 16 << 20),
	I("http.max_header_bytes", "GWB_HTTP_MAX_HEADER_BYTES", http_max_header_bytes, 1024,
	  1 << 20),
	I("http.timeout_seconds", "GWB_HTTP_TIMEOUT_SECONDS", http_timeout_seconds, 1, 3600),
	I("http.header_timeout_seconds", "GWB_HTTP_HEADER_TIMEOUT_SECONDS",
	  http_header_timeout_seconds, 1, 3600),
	I("http.body_timeout_seconds", "GWB_HTTP_BODY_TIMEOUT_SECONDS", http_body_timeout_seconds,
	  1, 3600),
	I("http.max_connections", "GWB_HTTP_MAX_CONNECTIONS", http_max_connections, 1, 1000000),
	I("http.max_connections_per_address", "GWB_HTTP_MAX_CONNECTIONS_PER_ADDRESS",
	  http_max_connections_per_address, 1, 1000000),
	I("idempotency.ttl_seconds", "GWB_IDEMPOTENCY_TTL_SECONDS", idempotency_ttl_seconds, 60,
	  30LL * 86400),
	I("store.busy_timeout_ms", "GWB_STORE_BUSY_TIMEOUT_MS", store_busy_timeout_ms, 1, 600000),
	I("store.wal_max_bytes", "GWB_STORE_WAL_MAX_BYTES", store_wal_max_bytes, 1 << 20,
	  1LL << 40),
	I("housekeeping.interval_ms", "GWB_HOUSEKEEPING_INTERVAL_MS", housekeeping_interval_ms, 10,
	  600000),
	I("audit.interval_s", "GWB_AUDIT_INTERVAL_S", audit_interval_s, 1, 86400),
	I("audit.grace_s", "GWB_AUDIT_GRACE_S", audit_grace_s, 0, 86400),
	I("http.rate_limit_per_s", "GWB_HTTP_RATE_LIMIT_PER_S", http_rate_limit_per_s, 0, 1000000),
	I("http.rate_limit_burst", "GWB_HTTP_RATE_LIMIT_BURST", http_rate_limit_burst, 1, 1000000),
	I("http.rate_limit_admin", "GWB_HTTP_RATE_LIMIT_ADMIN", http_rate_limit_admin, 0, 1),
	I("http.stream_max_per_token", "GWB_HTTP_STREAM_MAX_PER_TOKEN", http_stream_max_per_token,
	  0, 10000),
	I("http.stream_admin_reserved", "GWB_HTTP_STREAM_ADMIN_RESERVED",
	  http_stream_admin_reserved, 0, 10000),
	S("http.metrics_token", "GWB_HTTP_METRICS_TOKEN", http_metrics_token, C_TOKEN),
	S("queue.prefix", "GWB_QUEUE_PREFIX", queue_prefix, C_KEYPART),
	S("queue.consumer", "GWB_QUEUE_CONSUMER", queue_consumer, C_NONE),
	I("queue.claim_idle_ms", "GWB_QUEUE_CLAIM_IDLE_MS", queue_claim_idle_ms, 100, 86400000),
	I("queue.max_failures", "GWB_QUEUE_MAX_FAILURES", queue_max_failures, 1, 1000),
	I("queue.command_timeout_ms", "GWB_QUEUE_COMMAND_TIMEOUT_MS", queue_command_timeout_ms, 50,
	  600000),
	I("queue.stream_maxlen", "GWB_QUEUE_STREAM_MAXLEN", queue_stream_maxlen, 1000, 100000000),
	I("queue.block_ms", "GWB_QUEUE_BLOCK_MS", queue_block_ms, 10, 60000),
	I("queue.handler_delay_ms", "GWB_QUEUE_HANDLER_DELAY_MS", queue_handler_delay_ms, 0,
	  600000),
	I("queue.max_skip_seconds", "GWB_QUEUE_MAX_SKIP_SECONDS", queue_max_skip_seconds, 0, 86400),
	I("stream.max_clients", "GWB_STREAM_MAX_CLIENTS", stream_max_clients, 0, 10000),
	I("stream.max_buffer_bytes", "GWB_STREAM_MAX_BUFFER_BYTES", stream_max_buffer_bytes, 4096,
	  64 << 20),
	I("stream.poll_ms", "GWB_STREAM_POLL_MS", stream_poll_ms, 10, 10000),
	S("usage.url", "GWB_USAGE_URL", usage_url, C_URL),
	E("usage.format", "GWB_USAGE_FORMAT", usage_format, "hami dcgm"),
	I("usage.period_seconds", "GWB_USAGE_PERIOD_SECONDS", usage_period_seconds, 1, 3600),
};
#define NROWS (sizeof rows / sizeof rows[0])

/* A value and, when refused, a piece of the reason. */
struct val {
	const char *v;
	const char *why; /* NULL: accepted */
};

#define NS63 "abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefghij-abcdefgh"

static const struct val hostport_vals[] = {
	{ "127.0.0.1:8080", NULL }, { "127.0.0.1:0", NULL },	   { "[::1]:9000", NULL },
	{ "localhost:1", NULL },    { "", "empty" },		   { "127.0.0.1", "port is missing" },
	{ ":8080", "host is missing" }, { "127.0.0.1:65536", "from 0 to 65535" },
	{ "::1:8080", "brackets" }, { "redis://h:1", "" },	   { NULL, NULL },
};
static const struct val nonempty_vals[] = {
	{ "x", NULL }, { "a b/c:d", NULL }, { "", "must not be empty" }, { NULL, NULL },
};
static const struct val redis_vals[] = {
	{ "", NULL },
	{ "redis://127.0.0.1:6380/3", NULL },
	{ "redis://cache", NULL },
	{ "unix:///tmp/r.sock", NULL },
	{ "redis://:6379", "host is missing" },
	{ "redis://h:1/16", "database number" },
	{ "http://h:80", "" },
	{ "127.0.0.1:6379", "" },
	{ NULL, NULL },
};
static const struct val url_vals[] = {
	{ "", NULL },
	{ "http://127.0.0.1:6443", NULL },
	{ "https://kube.example/prefix", NULL },
	{ "ftp://h", "" },
	{ "kube.example:6443", "" },
	{ "unix:///tmp/k.sock", "" },
	{ NULL, NULL },
};
static const struct val dns_vals[] = {
	{ "a", NULL },
	{ "gpu-workbench", NULL },
	{ "0ns9", NULL },
	{ NS63, NULL },
	{ "", "DNS label" },
	{ "Upper", "DNS label" },
	{ "-lead", "DNS label" },
	{ "trail-", "DNS label" },
	{ "under_score", "DNS label" },
	{ "dot.ted", "DNS label" },
	{ NS63 "x", "longer than 63 bytes" },
	{ NULL, NULL },
};
static const struct val token_vals[] = {
	{ "", NULL },		    { "12345678", NULL },
	{ "!~visible-ASCII~!", NULL }, { "1234567", "8 to 256 characters" },
	{ "has space1", "visible ASCII" }, { "tab\there1", "visible ASCII" },
	{ "caf\xc3\xa9-token", "visible ASCII" }, { NULL, NULL },
};
static const struct val keypart_vals[] = {
	{ "gwb", NULL },	       { "a:b{c}", NULL },	    { "", "must not be empty" },
	{ "a b", "visible ASCII" }, { "caf\xc3\xa9", "visible ASCII" }, { NULL, NULL },
};
static const struct val none_vals[] = {
	{ "", NULL }, { "any thing at all", NULL }, { NULL, NULL },
};

static const struct val *check_vals(enum check c)
{
	switch (c) {
	case C_HOSTPORT: return hostport_vals;
	case C_NONEMPTY: return nonempty_vals;
	case C_REDIS: return redis_vals;
	case C_URL: return url_vals;
	case C_DNS: return dns_vals;
	case C_TOKEN: return token_vals;
	case C_KEYPART: return keypart_vals;
	case C_NONE: return none_vals;
	}
	return none_vals;
}

/* Every setting's variable is cleared: the case's environment is its own (it runs forked). */
static void clear_env(void)
{
	for (size_t i = 0; i < NROWS; i++)
		unsetenv(rows[i].env);
}

/* config_load on argv (NULL-terminated, argv[0] added). */
static int load(struct gwb_config *c, const char *const *args, char *err, size_t len)
{
	char *argv[16] = { (char *)"gwb-server" };
	int argc = 1;
	for (; args[argc - 1] && argc < 15; argc++)
		argv[argc] = (char *)args[argc - 1];
	argv[argc] = NULL;
	err[0] = '\0';
	FILE *out = fopen("/dev/null", "w");
	int rc = config_load(c, argc, argv, out, err, len);
	fclose(out);
	return rc;
}

enum origin { O_FILE, O_ENV, O_FLAG };
static const char *const origin_names[] = { "file", "environment", "flag" };

/* Sets row r to v from origin o on top of the defaults. Returns config_load's code; err
 * holds its message. The file has the value on line 3. */
static int set_from(struct gwb_config *c, const struct row *r, enum origin o, const char *v,
		    char *err, size_t len, char *file, size_t filelen)
{
	clear_env();
	file[0] = '\0';
	if (o == O_FILE) {
		char text[1024];
		snprintf(text, sizeof text, "# settings\n\n%s = \"%s\"\n", r->name, v);
		snprintf(file, filelen, "%s", h_write_file("gwb.conf", text));
		const char *args[] = { "-c", file, NULL };
		return load(c, args, err, len);
	}
	if (o == O_ENV) {
		setenv(r->env, v, 1);
		const char *args[] = { NULL };
		int rc = load(c, args, err, len);
		unsetenv(r->env);
		return rc;
	}
	char flag[1200];
	snprintf(flag, sizeof flag, "--%s=%s", r->name, v);
	const char *args[] = { flag, NULL };
	return load(c, args, err, len);
}

/* The origin a refusal must name, before the setting and the reason. */
static void want_prefix(const struct row *r, enum origin o, const char *file, char *out,
			size_t len)
{
	if (o == O_FILE)
		snprintf(out, len, "%s:3: %s: ", file, r->name);
	else if (o == O_ENV)
		snprintf(out, len, "environment %s: ", r->env);
	else
		snprintf(out, len, "flag --%s: ", r->name);
}

static void stored_is(const struct gwb_config *c, const struct row *r, const char *v)
{
	const char *field = (const char *)c + r->off;
	if (r->kind == K_INT)
		CHECKF(*(const int64_t *)(const void *)field == strtoll(v, NULL, 10),
		       "%s = %s stored as %lld", r->name, v,
		       (long long)*(const int64_t *)(const void *)field);
	else
		CHECKF(strcmp(field, v) == 0, "%s = \"%s\" stored as \"%s\"", r->name, v, field);
}

/* v must be refused from every origin with the origin, the name and why in the message;
 * or (why NULL) accepted from every origin and stored. */
static void expect_value(const struct row *r, const char *v, const char *why)
{
	for (int o = O_FILE; o <= O_FLAG; o++) {
		struct gwb_config *c = gwb_calloc(1, sizeof *c);
		char err[1024], file[512], prefix[700];
		int rc = set_from(c, r, (enum origin)o, v, err, sizeof err, file, sizeof file);
		if (!why) {
			CHECKF(rc == 0, "%s = \"%s\" from the %s refused: %s", r->name, v,
			       origin_names[o], err);
			stored_is(c, r, v);
		} else {
			CHECKF(rc == GWB_EINVAL, "%s = \"%s\" from the %s accepted (%d)", r->name, v,
			       origin_names[o], rc);
			want_prefix(r, (enum origin)o, file, prefix, sizeof prefix);
			CHECKF(strncmp(err, prefix, strlen(prefix)) == 0 && strlen(err) > strlen(prefix),
			       "%s = \"%s\" from the %s: \"%s\" does not start with \"%s\" and a "
			       "reason",
			       r->name, v, origin_names[o], err, prefix);
			CHECKF(strstr(err + strlen(prefix), why) != NULL,
			       "%s = \"%s\" from the %s: \"%s\" does not say \"%s\"", r->name, v,
			       origin_names[o], err, why);
		}
		gwb_free(c);
	}
}

static const struct row *row_named(const char *name)
{
	for (size_t i = 0; i < NROWS; i++)
		if (strcmp(rows[i].name, name) == 0)
			return &rows[i];
	t_fail(__FILE__, __LINE__, "no row %s", name);
}

TEST(config_table_rows_are_all_tested)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	config_usage(f);
	fclose(f);
	size_t seen = 0;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char name[128], env[128];
		if (sscanf(line, " --%127s %127s", name, env) != 2)
			continue;
		seen++;
		const struct row *r = NULL;
		for (size_t i = 0; i < NROWS && !r; i++)
			if (strcmp(rows[i].name, name) == 0)
				r = &rows[i];
		CHECKF(r != NULL, "setting %s has no row in test_config.c", name);
		CHECK_STR(env, r->env);
		CHECKF(config_env_known(env), "%s unknown to config_env_known", env);
	}
	free(text); /* banned-ok: open_memstream's buffer */
	CHECK_INT(seen, NROWS);
	CHECK(!config_env_known("GWB_NO_SUCH_SETTING"));
	CHECK(!config_env_known("GWB_BIN"));
}

TEST(config_integers_refuse_non_numbers_and_out_of_bounds)
{
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		if (r->kind != K_INT)
			continue;
		char lo[32], hi[32], below[32], above[32], bounds[80];
		snprintf(lo, sizeof lo, "%lld", (long long)r->min);
		snprintf(hi, sizeof hi, "%lld", (long long)r->max);
		snprintf(below, sizeof below, "%lld", (long long)r->min - 1);
		snprintf(above, sizeof above, "%lld", (long long)r->max + 1);
		snprintf(bounds, sizeof bounds, "must be from %lld to %lld", (long long)r->min,
			 (long long)r->max);
		expect_value(r, lo, NULL);
		expect_value(r, hi, NULL);
		expect_value(r, below, bounds);
		expect_value(r, above, bounds);
		expect_value(r, "", "must be an integer");
		expect_value(r, "ten", "must be an integer");
		expect_value(r, "12x", "must be an integer");
		expect_value(r, "1.5", "must be an integer");
		expect_value(r, "99999999999999999999", "must be an integer");
	}
}

TEST(config_enums_refuse_values_outside_their_list)
{
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		if (r->kind != K_ENUM)
			continue;
		char list[128], want[160];
		snprintf(list, sizeof list, "%s", r->values);
		snprintf(want, sizeof want, "must be one of: %s", r->values);
		char *save = NULL;
		for (char *v = strtok_r(list, " ", &save); v; v = strtok_r(NULL, " ", &save)) {
			expect_value(r, v, NULL);
			char upper[64];
			snprintf(upper, sizeof upper, "%s", v);
			for (char *p = upper; *p; p++)
				*p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
			if (strcmp(upper, v) != 0)
				expect_value(r, upper, want); /* the names are case-sensitive */
		}
		expect_value(r, "", want);
		expect_value(r, "nope", want);
		expect_value(r, "toolongforthefield", "longer than");
	}
}

TEST(config_strings_refuse_what_their_validator_refuses)
{
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		if (r->kind != K_STR)
			continue;
		for (const struct val *v = check_vals(r->check); v->v; v++) {
			/* A value longer than the field is refused before the validator. */
			if (strlen(v->v) >= r->size)
				continue;
			expect_value(r, v->v, v->why);
		}
		/* Every string field: its size - 1 bytes fit (if the validator allows that
		 * shape), one more is refused. */
		char *big = gwb_calloc(1, r->size + 1);
		memset(big, 'a', r->size);
		char want[64];
		snprintf(want, sizeof want, "longer than %zu bytes", r->size - 1);
		expect_value(r, big, want);
		gwb_free(big);
	}
	/* The DNS label's full length fits kube.namespace exactly. */
	CHECK_INT(row_named("kube.namespace")->size, 64);
}

TEST(config_token_length_bounds)
{
	const struct row *r = row_named("admin_token");
	char t[300];
	memset(t, 'x', sizeof t);
	t[256] = '\0';
	expect_value(r, t, NULL);
	t[256] = 'x';
	t[257] = '\0';
	expect_value(r, t, "8 to 256 characters");
}

TEST(config_defaults_are_valid_and_documented)
{
	clear_env();
	struct gwb_config c;
	char err[512];
	const char *args[] = { NULL };
	CHECKF(load(&c, args, err, sizeof err) == 0, "%s", err);
	CHECK_STR(c.listen, "127.0.0.1:8080");
	CHECK_STR(c.kube_namespace, "gpu-workbench");
	CHECK_STR(c.mode, "sim");
	CHECK_STR(c.redis, "");
	CHECK_INT(c.kube_request_timeout_ms, 30000);
	CHECK_INT(c.kube_max_inflight, 32);
	CHECK_STR(c.config_file, "");
	/* Each integer default is inside its bounds (apply_defaults runs them through the
	 * same check, so an out-of-bounds default would fail every load). */
	for (size_t i = 0; i < NROWS; i++) {
		if (rows[i].kind != K_INT)
			continue;
		int64_t v = *(const int64_t *)(const void *)((const char *)&c + rows[i].off);
		CHECKF(v >= rows[i].min && v <= rows[i].max, "%s default %lld", rows[i].name,
		       (long long)v);
	}
}

TEST(config_file_with_every_setting_loads)
{
	clear_env();
	char text[8192];
	size_t n = (size_t)snprintf(text, sizeof text, "# every setting, set\n");
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		char v[64];
		if (r->kind == K_INT)
			snprintf(v, sizeof v, "%lld", (long long)r->max);
		else if (r->kind == K_ENUM)
			snprintf(v, sizeof v, "%.*s", (int)strcspn(r->values, " "), r->values);
		else
			snprintf(v, sizeof v, "%s", check_vals(r->check)[1].v);
		n += (size_t)snprintf(text + n, sizeof text - n, "%s%s = %s\n\n",
				      i % 2 ? "  " : "", r->name, v);
	}
	const char *path = h_write_file("all.conf", text);
	struct gwb_config c;
	char err[512];
	const char *args[] = { "--config", path, NULL };
	CHECKF(load(&c, args, err, sizeof err) == 0, "%s", err);
	CHECK_STR(c.config_file, path);
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		char v[64];
		if (r->kind == K_INT)
			snprintf(v, sizeof v, "%lld", (long long)r->max);
		else if (r->kind == K_ENUM)
			snprintf(v, sizeof v, "%.*s", (int)strcspn(r->values, " "), r->values);
		else
			snprintf(v, sizeof v, "%s", check_vals(r->check)[1].v);
		stored_is(&c, r, v);
	}
}

TEST(config_file_refusals_name_the_file_and_line)
{
	clear_env();
	struct gwb_config c;
	char err[1024], want[700];
	static const struct {
		const char *text;
		int line;
		const char *why;
	} v[] = {
		{ "listen = 127.0.0.1:1\nno_such = 1\n", 2, "unknown setting 'no_such'" },
		{ "# c\n\njust words\n", 3, "expected name = value" },
		{ "mode = sim\nkube.qps = 0\n", 2, "kube.qps: must be from 1 to 100000" },
		{ "\n\n\n\nmode = \"real\"\n", 5, "mode: must be one of: sim kube" },
		{ "kube.namespace = Bad_NS\n", 1, "kube.namespace: must be a DNS label" },
		{ "kube.max_inflight = 2x\n", 1, "kube.max_inflight: must be an integer" },
		{ "GWB_LISTEN = 127.0.0.1:1\n", 1, "unknown setting 'GWB_LISTEN'" },
		{ "--listen = 127.0.0.1:1\n", 1, "unknown setting '--listen'" },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		const char *path = h_write_file("bad.conf", v[i].text);
		const char *args[] = { "-c", path, NULL };
		CHECKF(load(&c, args, err, sizeof err) == GWB_EINVAL, "case %zu accepted", i);
		snprintf(want, sizeof want, "%s:%d: %s", path, v[i].line, v[i].why);
		CHECKF(strncmp(err, want, strlen(want)) == 0, "case %zu: \"%s\", expected \"%s\"", i,
		       err, want);
	}
	/* A line longer than the reader's buffer. */
	char *longline = gwb_calloc(1, 5000);
	memset(longline, 'a', 4000);
	memcpy(longline, "db = ", 5);
	longline[4000] = '\n';
	const char *path = h_write_file("long.conf", longline);
	gwb_free(longline);
	const char *args[] = { "-c", path, NULL };
	CHECK_INT(load(&c, args, err, sizeof err), GWB_EINVAL);
	snprintf(want, sizeof want, "%s:1: line too long", path);
	CHECK_STR(err, want);
	/* A file that is not there. */
	const char *absent[] = { "-c", h_path("absent.conf"), NULL };
	CHECK_INT(load(&c, absent, err, sizeof err), GWB_EINVAL);
	snprintf(want, sizeof want, "%s: cannot open", h_path("absent.conf"));
	CHECKF(strncmp(err, want, strlen(want)) == 0, "%s", err);
}

TEST(config_file_comments_blanks_quotes_and_spaces)
{
	clear_env();
	const char *path = h_write_file("ok.conf", "# a comment\n\n   \n"
						   "  listen   =   127.0.0.1:9   \n"
						   "kube.isolation_provider = \"\"\n"
						   "queue.consumer = \"two words\"\n"
						   "db=x.db\n"
						   "   # indented comment = ignored\n");
	struct gwb_config c;
	char err[512];
	const char *args[] = { "-c", path, NULL };
	CHECKF(load(&c, args, err, sizeof err) == 0, "%s", err);
	CHECK_STR(c.listen, "127.0.0.1:9");
	CHECK_STR(c.kube_isolation, "");
	CHECK_STR(c.queue_consumer, "two words");
	CHECK_STR(c.db, "x.db");
}

TEST(config_flag_and_argument_refusals)
{
	clear_env();
	struct gwb_config c;
	char err[512];
	static const struct {
		const char *args[4];
		const char *want;
	} v[] = {
		{ { "--no-such=1" }, "flag --no-such: unknown setting" },
		{ { "--listen" }, "flag --listen: needs a value" },
		{ { "listen=127.0.0.1:1" }, "argument 'listen=127.0.0.1:1': expected --setting=value" },
		{ { "-c" }, "flag -c: needs a file" },
		{ { "--config" }, "flag --config: needs a file" },
		{ { "--kube.qps", "0" }, "flag --kube.qps: must be from 1 to 100000" },
		{ { "--mode=Sim" }, "flag --mode: must be one of: sim kube" },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		CHECKF(load(&c, v[i].args, err, sizeof err) == GWB_EINVAL, "%s accepted",
		       v[i].args[0]);
		CHECK_STR(err, v[i].want);
	}
	/* "--name value" is the same as "--name=value". */
	const char *spaced[] = { "--kube.qps", "7", "--mode", "kube", NULL };
	CHECKF(load(&c, spaced, err, sizeof err) == 0, "%s", err);
	CHECK_INT(c.kube_qps, 7);
	CHECK_STR(c.mode, "kube");
}

TEST(config_flags_win_over_environment_over_file)
{
	clear_env();
	const char *path = h_write_file("order.conf", "kube.qps = 5\nkube.burst = 6\n"
						      "kube.max_inflight = 7\n");
	setenv("GWB_KUBE_BURST", "60", 1);
	setenv("GWB_KUBE_MAX_INFLIGHT", "70", 1);
	struct gwb_config c;
	char err[512];
	const char *args[] = { "--kube.max_inflight=700", "-c", path, NULL };
	CHECKF(load(&c, args, err, sizeof err) == 0, "%s", err);
	CHECK_INT(c.kube_qps, 5);
	CHECK_INT(c.kube_burst, 60);
	CHECK_INT(c.kube_max_inflight, 700);
	/* A bad file stops the load before a good environment or flag could mend it. */
	path = h_write_file("bad.conf", "kube.qps = 0\n");
	const char *bad[] = { "-c", path, "--kube.qps=5", NULL };
	CHECK_INT(load(&c, bad, err, sizeof err), GWB_EINVAL);
	CHECKF(strstr(err, "bad.conf:1: kube.qps") != NULL, "%s", err);
	/* A bad environment value is refused even when a flag sets the same setting. */
	setenv("GWB_KUBE_QPS", "0", 1);
	const char *flag[] = { "--kube.qps=5", NULL };
	CHECK_INT(load(&c, flag, err, sizeof err), GWB_EINVAL);
	CHECK_STR(err, "environment GWB_KUBE_QPS: must be from 1 to 100000");
}

TEST(config_help_prints_the_table_and_returns_1)
{
	clear_env();
	struct gwb_config c;
	char err[128];
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	char *argv[] = { (char *)"gwb-server", (char *)"--help", NULL };
	CHECK_INT(config_load(&c, 2, argv, f, err, sizeof err), 1);
	fclose(f);
	CHECKF(strstr(text, "usage: gwb-server") != NULL, "%s", text);
	CHECKF(strstr(text, "--kube.qps") && strstr(text, "GWB_KUBE_QPS"), "%s", text);
	free(text); /* banned-ok: open_memstream's buffer */
}

TEST(config_split_hostport_takes_port_0_and_ipv6)
{
	char host[64];
	int port = -1;
	CHECK_INT(config_split_hostport("127.0.0.1:0", host, sizeof host, &port), 0);
	CHECK_STR(host, "127.0.0.1");
	CHECK_INT(port, 0);
	CHECK_INT(config_split_hostport("[::1]:8080", host, sizeof host, &port), 0);
	CHECK_STR(host, "::1");
	CHECK_INT(port, 8080);
	CHECK_INT(config_split_hostport("nohost", host, sizeof host, &port), GWB_EINVAL);
	char small[4];
	CHECK_INT(config_split_hostport("localhost:1", small, sizeof small, &port), GWB_EINVAL);
}
