/* gwbctl against a real gwb-server and redis-server: every command's output and exit code,
 * the API's errors passed through, usage errors, and `intents` showing pending state,
 * deliveries and decoded bodies (including a body it cannot decode). */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"

static char url_env[300], redis_env[PATH_MAX + 32];

/* Runs gwbctl with args (a shell word list built by the case, no outside input) and the
 * case's URL/Redis; returns its stdout parsed as JSON (or NULL) and its exit code. */
static json_t *ctl(const char *token, const char *args, int *code)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "%s %s GWB_TOKEN=%s '%s' %s 2>%s", url_env, redis_env,
		 token ? token : "", h_bin("gwbctl"), args, h_path("gwbctl.err"));
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t cap = 1 << 20, len = 0;
	char *buf = gwb_malloc(cap);
	size_t n;
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += n;
	buf[len] = '\0';
	int st = pclose(p);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	json_t *j = len ? json_loads(buf, 0, NULL) : NULL;
	gwb_free(buf);
	return j;
}

static int stderr_has(const char *needle)
{
	FILE *f = fopen(h_path("gwbctl.err"), "r");
	if (!f)
		return 0;
	char line[1024];
	int found = 0;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void setup(struct h_redis *r, struct h_server *s, const char *extra)
{
	h_redis_start(r);
	h_server_init(s);
	snprintf(redis_env, sizeof redis_env, "GWB_REDIS=%s", r->url);
	s->env[0] = redis_env;
	s->env[1] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	s->env[2] = extra;
	s->env[3] = NULL;
	h_server_start(s);
	snprintf(url_env, sizeof url_env, "GWB_URL=%s", s->proc.url);
	struct h_resp resp;
	h_req(&resp, "PUT", s->proc.url, "/v1/teams/alpha", ADMIN,
	      "{\"gpu_memory_mib\": 4096, \"gpu_core_percent\": 200, \"token\": \"alpha-tok-1\"}",
	      NULL);
	CHECK_INT(resp.status, 201);
	h_resp_free(&resp);
}

static const char *jget(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

TEST_T(gwbctl_commands_outputs_and_exit_codes, 60)
{
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, NULL);
	int code;
	json_t *j = ctl("alpha-tok-1",
			"submit --team alpha --mem 1024 --core 25 --name cli-demo --key k-1", &code);
	CHECK_INT(code, 0);
	CHECK(j != NULL);
	char id[64];
	snprintf(id, sizeof id, "%s", jget(j, "id"));
	CHECK_STR(jget(j, "state"), "queued");
	json_decref(j);

	/* The same key again: the same task (the API's idempotent replay). */
	j = ctl("alpha-tok-1", "submit --team alpha --mem 1024 --core 25 --name cli-demo --key k-1",
		&code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "id"), id);
	json_decref(j);

	char args[256];
	snprintf(args, sizeof args, "get %s", id);
	int64_t deadline = clock_mono_ms() + 10000;
	for (;;) {
		j = ctl("alpha-tok-1", args, &code);
		CHECK_INT(code, 0);
		int done = strcmp(jget(j, "state"), "creating") == 0;
		json_decref(j);
		if (done)
			break;
		CHECKF(clock_mono_ms() < deadline, "task never reached creating");
		h_sleep_ms(50);
	}
	j = ctl("alpha-tok-1", "list --team alpha --limit 5", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 1);
	json_decref(j);
	j = ctl("alpha-tok-1", "teams alpha", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "reserved"),
						     "gpu_memory_mib")),
		  1024);
	json_decref(j);
	j = ctl(ADMIN, "teams", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_array_size(json_object_get(j, "teams")), 1);
	json_decref(j);

	snprintf(args, sizeof args, "cancel %s", id);
	j = ctl("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "state"), "cancelling");
	CHECK_STR(jget(j, "cancel"), "requested");
	json_decref(j);
	j = ctl("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "cancel"), "already_requested");
	json_decref(j);

	/* Refusals from the API: exit 1, the code on stderr. */
	j = ctl("alpha-tok-1", "get t-doesnotexist", &code);
	CHECK_INT(code, 1);
	CHECK(stderr_has("HTTP 404 not_found"));
	json_decref(j);
	j = ctl("alpha-tok-1", "submit --team alpha --mem 999999 --core 25", &code);
	CHECK_INT(code, 1);
	CHECK(stderr_has("quota_exceeded"));
	json_decref(j);
	j = ctl("wrong-token", "teams", &code);
	CHECK_INT(code, 1);
	CHECK(stderr_has("HTTP 401"));
	json_decref(j);
	/* Usage errors: exit 2. */
	j = ctl(NULL, "frobnicate", &code);
	CHECK_INT(code, 2);
	CHECK(stderr_has("unknown command"));
	json_decref(j);
	j = ctl(NULL, "submit --team alpha", &code);
	CHECK_INT(code, 2);
	CHECK(stderr_has("needs --team, --mem and --core"));
	json_decref(j);
	j = ctl(NULL, "get 'bad/../id'", &code);
	CHECK_INT(code, 2);
	json_decref(j);
	/* No server: exit 1 with the reason. */
	snprintf(url_env, sizeof url_env, "GWB_URL=http://127.0.0.1:1");
	j = ctl("alpha-tok-1", "teams", &code);
	CHECK_INT(code, 1);
	CHECK(stderr_has("Could"));
	json_decref(j);
	h_server_stop(&s);
}

static json_t *entry_for(json_t *intents, const char *task)
{
	json_t *e;
	size_t i;
	json_array_foreach(json_object_get(intents, "entries"), i, e)
	{
		const char *t = json_string_value(json_object_get(json_object_get(e, "fields"), "task"));
		if (t && strcmp(t, task) == 0)
			return e;
	}
	return NULL;
}

TEST_T(gwbctl_intents_shows_pending_deliveries_and_bodies, 60)
{
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, "GWB_QUEUE_HANDLER_DELAY_MS=60000");
	int code;
	json_t *j = ctl("alpha-tok-1", "submit --team alpha --mem 512 --core 10 --name held",
			&code);
	CHECK_INT(code, 0);
	char id[64];
	snprintf(id, sizeof id, "%s", jget(j, "id"));
	json_decref(j);
	/* The handler holds it: delivered, pending, once. */
	json_t *e = NULL;
	int64_t deadline = clock_mono_ms() + 10000;
	for (;;) {
		j = ctl(NULL, "intents --count 10", &code);
		CHECK_INT(code, 0);
		e = entry_for(j, id);
		if (e && jget(e, "state") && strcmp(jget(e, "state"), "pending") == 0)
			break;
		json_decref(j);
		CHECKF(clock_mono_ms() < deadline, "never pending");
		h_sleep_ms(50);
	}
	CHECK_STR(jget(j, "stream"), "gwb:intents");
	CHECK_INT(json_integer_value(json_object_get(e, "deliveries")), 1);
	CHECK(json_is_integer(json_object_get(e, "idle_ms")));
	CHECK(json_is_string(json_object_get(e, "consumer")));
	json_t *body = json_object_get(e, "body");
	CHECK_STR(jget(body, "task"), id);
	CHECK_STR(jget(body, "name"), "held");
	CHECK_INT(json_integer_value(json_object_get(body, "gpu_memory_mib")), 512);
	CHECK_STR(jget(json_object_get(e, "fields"), "kind"), "create");
	json_t *g = json_array_get(json_object_get(j, "groups"), 0);
	CHECK_STR(jget(g, "name"), "reconcilers");
	json_decref(j);

	/* A body it cannot decode is shown with the reason, not a crash. */
	redisContext *c = redisConnectUnix(r.sock);
	CHECK(c && !c->err);
	redisReply *x = redisCommand(c, "XADD gwb:intents * kind create task t-junk job gwb-t-junk "
					"team alpha attempt 1 body %b",
				     "\xc1\xc1", (size_t)2);
	CHECK(x && x->type == REDIS_REPLY_STRING);
	freeReplyObject(x);
	redisFree(c);
	j = ctl(NULL, "intents", &code);
	CHECK_INT(code, 0);
	e = entry_for(j, "t-junk");
	CHECK(e != NULL);
	CHECK(json_is_string(json_object_get(json_object_get(e, "body"), "error")));
	json_decref(j);
	/* ...and the consumer dead-letters it; --dead shows the reason. */
	deadline = clock_mono_ms() + 10000;
	for (;;) {
		j = ctl(NULL, "intents --dead", &code);
		CHECK_INT(code, 0);
		if (json_integer_value(json_object_get(j, "length")) == 1)
			break;
		json_decref(j);
		CHECKF(clock_mono_ms() < deadline, "never dead-lettered");
		h_sleep_ms(50);
	}
	e = json_array_get(json_object_get(j, "entries"), 0);
	CHECK(strstr(jget(json_object_get(e, "fields"), "reason"), "malformed body") != NULL);
	json_decref(j);

	/* No Redis configured, or an unreachable one: exit 1 with the reason. */
	snprintf(redis_env, sizeof redis_env, "GWB_REDIS=");
	j = ctl(NULL, "intents", &code);
	CHECK_INT(code, 1);
	CHECK(stderr_has("set --redis or GWB_REDIS"));
	snprintf(redis_env, sizeof redis_env, "GWB_REDIS=unix://%s", h_path("nothing.sock"));
	j = ctl(NULL, "intents", &code);
	CHECK_INT(code, 1);
	CHECK(stderr_has("gwbctl: redis"));
	h_server_stop(&s);
}

/* The line after "VAR: " in a file (a refusal's reason), in buf; "" when absent. */
static const char *reason_in(const char *path, const char *var, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char line[1024], key[64];
	snprintf(key, sizeof key, "%s: ", var);
	buf[0] = '\0';
	while (f && fgets(line, sizeof line, f)) {
		const char *p = strstr(line, key);
		if (p) {
			snprintf(buf, len, "%s", p + strlen(key));
			buf[strcspn(buf, "\n")] = '\0';
			break;
		}
	}
	if (f)
		fclose(f);
	return buf;
}

/* Starts gwb-server with env_kv added. Returns 1 when it came up (then stopped cleanly), 0 when
 * it refused to start (exit 2) with the reason after "var: " copied into why. */
static int server_accepts(const char *env_kv, const char *var, char *why, size_t len)
{
	char db[PATH_MAX + 8];
	static int n;
	snprintf(db, sizeof db, "GWB_DB=%s/agree-%d.db", h_tmpdir(), n++);
	const char *env[] = { db, env_kv, "GWB_LISTEN=127.0.0.1:0", NULL };
	const char *argv[] = { h_bin("gwb-server"), NULL };
	struct h_proc p;
	if (h_proc_start(&p, argv, env, "gwb-server listening on", 15000) == 0) {
		CHECK_INT(h_proc_stop(&p, SIGTERM, 10000), 0);
		why[0] = '\0';
		return 1;
	}
	CHECK_INT(h_proc_stop(&p, SIGKILL, 1000), 2);
	reason_in(p.log, var, why, len);
	CHECKF(why[0], "gwb-server with %s: no reason in its log", env_kv);
	return 0;
}

TEST_T(gwbctl_and_server_agree_on_addresses, 120)
{
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, NULL);
	static const struct {
		const char *value;
		int accepted;
	} redis[] = {
		{ "redis://localhost/0", 1 },      /* refused by gwb-server before lib/addr.c */
		{ "redis://127.0.0.1:6390/2", 1 },
		{ "redis://[::1]:6390", 1 },
		{ "unix:///tmp/gwb-agree-none.sock", 1 },
		{ "redis://h:0/1", 0 },
		{ "redis://h/16", 0 },
		{ "redis://u:p@h", 0 },
		{ "http://nope", 0 },
		{ "localhost:6379", 0 },
		{ "unix://relative", 0 },
	};
	for (size_t i = 0; i < sizeof redis / sizeof redis[0]; i++) {
		char kv[300], srv_why[512], ctl_why[512];
		snprintf(kv, sizeof kv, "GWB_REDIS=%s", redis[i].value);
		int srv_ok = server_accepts(kv, "GWB_REDIS", srv_why, sizeof srv_why);
		snprintf(redis_env, sizeof redis_env, "GWB_REDIS='%s'", redis[i].value);
		int code;
		json_t *j = ctl(ADMIN, "teams", &code);
		json_decref(j);
		reason_in(h_path("gwbctl.err"), "GWB_REDIS", ctl_why, sizeof ctl_why);
		CHECKF(srv_ok == redis[i].accepted, "%s: gwb-server %s (%s)", redis[i].value,
		       srv_ok ? "accepted" : "refused", srv_why);
		CHECKF(code == (redis[i].accepted ? 0 : 2), "%s: gwbctl exit %d (%s)",
		       redis[i].value, code, ctl_why);
		CHECK_STR(ctl_why, srv_why);
	}
	/* The API server URL of gwb-server and gwbctl's --url share the http(s):// grammar. */
	static const char *const bad_urls[] = { "127.0.0.1:8080", "http://", "https://h:70000",
						"ftp://h", "http://h/a#b" };
	for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
		char kv[300], srv_why[512], ctl_why[512];
		snprintf(kv, sizeof kv, "GWB_KUBE_SERVER=%s", bad_urls[i]);
		CHECK_INT(server_accepts(kv, "GWB_KUBE_SERVER", srv_why, sizeof srv_why), 0);
		snprintf(url_env, sizeof url_env, "GWB_URL='%s'", bad_urls[i]);
		int code;
		json_decref(ctl(ADMIN, "teams", &code));
		CHECK_INT(code, 2);
		CHECK_STR(reason_in(h_path("gwbctl.err"), "GWB_URL", ctl_why, sizeof ctl_why),
			  srv_why);
	}
	h_server_stop(&s);
}
