/* gwbctl against a real gwb-server and redis-server (and kubesim for devices and events): every
 * command's output in each mode (text, json, name; the terminal default), exit codes, the API's
 * errors passed through, usage errors naming the flag, `intents` showing pending state,
 * deliveries and decoded bodies, and gwbctl and gwb-server giving the same answer for the same
 * address strings. */
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"

static char url_env[300], redis_env[PATH_MAX + 32];

/* Runs gwbctl with args (a shell word list built by the case, no outside input) and the
 * case's URL/Redis; returns its stdout (gwb_malloc'd) and its exit code. */
static char *ctl_raw(const char *token, const char *args, int *code)
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
	return buf;
}

/* ctl_raw with stdout parsed as JSON (or NULL). */
static json_t *ctl(const char *token, const char *args, int *code)
{
	char *out = ctl_raw(token, args, code);
	json_t *j = out[0] ? json_loads(out, 0, NULL) : NULL;
	gwb_free(out);
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
	/* env_kv last: it wins over the default listen address. */
	const char *env[] = { db, "GWB_LISTEN=127.0.0.1:0", env_kv, NULL };
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
	/* Listen addresses: gwb-server and kubesim refuse the same ones (port 0 is accepted by
	 * both: every case of the harness starts them so). */
	static const char *const bad_listen[] = { "::1:8080", "127.0.0.1", "127.0.0.1:70000",
						  "[::1]8080", "http://127.0.0.1:80" };
	for (size_t i = 0; i < sizeof bad_listen / sizeof bad_listen[0]; i++) {
		char kv[300], srv_why[512];
		snprintf(kv, sizeof kv, "GWB_LISTEN=%s", bad_listen[i]);
		CHECKF(server_accepts(kv, "GWB_LISTEN", srv_why, sizeof srv_why) == 0,
		       "gwb-server accepted listen %s", bad_listen[i]);
		const char *argv[] = { h_bin("kubesim"), "--listen", bad_listen[i], "--state-dir",
				       h_path("ks-state"), "--control-socket", h_path("ks.sock"),
				       NULL };
		struct h_proc p;
		CHECK(h_proc_start(&p, argv, NULL, NULL, 0) == 0);
		for (int k = 0; k < 500 && h_proc_alive(&p); k++)
			h_sleep_ms(10);
		CHECKF(h_proc_stop(&p, SIGKILL, 100) == 1, "kubesim accepted listen %s",
		       bad_listen[i]);
		char why[256];
		reason_in(p.log, "kubesim", why, sizeof why);
		CHECKF(strncmp(why, "cannot listen on", 16) == 0, "kubesim said: %s", why);
	}
	h_server_stop(&s);
}

/* 1 when text holds line as one whole line. */
static int has_line_with(const char *text, const char *a, const char *b)
{
	for (const char *p = text; p && *p;) {
		const char *eol = strchr(p, '\n');
		size_t n = eol ? (size_t)(eol - p) : strlen(p);
		char line[1024];
		snprintf(line, sizeof line, "%.*s", (int)n, p);
		if (strstr(line, a) && (!b || strstr(line, b)))
			return 1;
		p = eol ? eol + 1 : NULL;
	}
	return 0;
}

TEST_T(gwbctl_output_modes_text_json_name, 60)
{
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, NULL);
	int code;
	/* -o name: only the id, so that ID=$(gwbctl submit ... -o name) works. */
	char *out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 1024 --core 25 --key m-1 -o name",
			    &code);
	CHECK_INT(code, 0);
	char id[64];
	CHECKF(strlen(out) > 2 && out[strlen(out) - 1] == '\n', "stdout: '%s'", out);
	snprintf(id, sizeof id, "%.*s", (int)strlen(out) - 1, out);
	CHECKF(strncmp(id, "t-", 2) == 0 && !strchr(id, '\n') && !strchr(id, ' '), "id '%s'", id);
	gwb_free(out);
	/* The same submission, shown as text: the replay's 200 is visible. */
	out = ctl_raw("alpha-tok-1", "-o text submit --team alpha --mem 1024 --core 25 --key m-1",
		      &code);
	CHECK_INT(code, 0);
	CHECKF(strncmp(out, "200 OK (idempotent replay", 25) == 0, "stdout: %s", out);
	CHECK(has_line_with(out, "id ", id));
	/* queued, or creating once the built-in handler took its intent */
	CHECK(has_line_with(out, "state ", "queued") || has_line_with(out, "state ", "creating"));
	CHECK(has_line_with(out, "reservation ", "1024 MiB, 25% core, held"));
	CHECK(has_line_with(out, "card ", "-"));
	gwb_free(out);
	/* A new one as text: 201. */
	out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 512 --core 10 -o text", &code);
	CHECK_INT(code, 0);
	CHECKF(strncmp(out, "201 Created\n", 12) == 0, "stdout: %s", out);
	char id2[64];
	CHECK(sscanf(strstr(out, "id "), "id %63s", id2) == 1);
	gwb_free(out);
	/* get -q is -o name; get -o json is the whole body. */
	char args[256];
	snprintf(args, sizeof args, "get %s -q", id2);
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	char want[80];
	snprintf(want, sizeof want, "%s\n", id2);
	CHECK_STR(out, want);
	gwb_free(out);
	snprintf(args, sizeof args, "get %s -o json", id2);
	json_t *j = ctl("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "id"), id2);
	CHECK(json_is_object(json_object_get(j, "reservation")));
	json_decref(j);
	/* cancel as text: 202, then 200 for the repeat. */
	snprintf(args, sizeof args, "--output=text cancel %s", id2);
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECKF(strncmp(out, "202 Accepted\n", 13) == 0, "stdout: %s", out);
	CHECK(has_line_with(out, "state ", "cancelling"));
	CHECK(has_line_with(out, "cancel ", "requested"));
	gwb_free(out);
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECKF(strncmp(out, "200 OK\n", 7) == 0, "stdout: %s", out);
	CHECK(has_line_with(out, "cancel ", "already_requested"));
	gwb_free(out);
	/* list: a table with both, names one a line. */
	out = ctl_raw("alpha-tok-1", "list -o text", &code);
	CHECK_INT(code, 0);
	CHECK(has_line_with(out, "ID ", "STATE"));
	CHECK(has_line_with(out, id, "alpha"));
	CHECK(has_line_with(out, id2, "cancelling"));
	gwb_free(out);
	out = ctl_raw("alpha-tok-1", "list -o name", &code);
	CHECK_INT(code, 0);
	snprintf(want, sizeof want, "%s\n%s\n", id2, id);
	CHECK_STR(out, want);
	gwb_free(out);
	/* teams as text. */
	out = ctl_raw("alpha-tok-1", "teams alpha -o text", &code);
	CHECK_INT(code, 0);
	CHECK(has_line_with(out, "alpha ", "4096/200%"));
	gwb_free(out);
	/* An API refusal in text mode: the code and its details on stderr, nothing on stdout. */
	out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 999999 --core 25 -o text", &code);
	CHECK_INT(code, 1);
	CHECK_STR(out, "");
	CHECK(stderr_has("HTTP 403 quota_exceeded"));
	CHECK(stderr_has("details: "));
	gwb_free(out);

	/* On a terminal the default is text; through a pipe it is the whole JSON body. */
	snprintf(args, sizeof args, "script -qec \"env %s GWB_TOKEN=alpha-tok-1 %s get %s\" /dev/null",
		 url_env, h_bin("gwbctl"), id);
	fflush(stdout);
	FILE *p = popen(args, "r");
	CHECK(p != NULL);
	char tty[8192];
	size_t n = fread(tty, 1, sizeof tty - 1, p);
	tty[n] = '\0';
	CHECK_INT(pclose(p), 0);
	CHECKF(strncmp(tty, "200 OK", 6) == 0 && strstr(tty, "\nstate        "),
	       "on a terminal: %s", tty);
	snprintf(args, sizeof args, "get %s", id);
	j = ctl("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "id"), id);
	json_decref(j);
	h_server_stop(&s);
}

TEST_T(gwbctl_list_active_and_cancel_all, 60)
{
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, NULL);
	int code;
	char ids[3][64];
	for (int i = 0; i < 3; i++) {
		char *out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 256 --core 5 -q", &code);
		CHECK_INT(code, 0);
		snprintf(ids[i], sizeof ids[i], "%.*s", (int)strcspn(out, "\n"), out);
		gwb_free(out);
	}
	/* Another team's task is not touched by alpha's cancel --all. */
	struct h_resp resp;
	h_req(&resp, "PUT", s.proc.url, "/v1/teams/beta", ADMIN,
	      "{\"gpu_memory_mib\": 1024, \"gpu_core_percent\": 100}", NULL);
	CHECK_INT(resp.status, 201);
	h_resp_free(&resp);
	json_t *j = ctl(ADMIN, "submit --team beta --mem 256 --core 5", &code);
	CHECK_INT(code, 0);
	char beta[64];
	snprintf(beta, sizeof beta, "%s", jget(j, "id"));
	json_decref(j);
	char args[256];
	snprintf(args, sizeof args, "cancel %s", ids[0]);
	json_decref(ctl("alpha-tok-1", args, &code));
	CHECK_INT(code, 0);

	/* --active: every state that holds quota (queued or creating, and cancelling here). */
	j = ctl(ADMIN, "list --active", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 4);
	json_decref(j);
	j = ctl("alpha-tok-1", "list --active --team alpha -o json", &code);
	CHECK_INT(code, 0);
	json_t *tasks = json_object_get(j, "tasks");
	CHECK_INT(json_array_size(tasks), 3);
	/* newest first, as the API lists */
	CHECK_STR(jget(json_array_get(tasks, 0), "id"), ids[2]);
	CHECK_STR(jget(json_array_get(tasks, 2), "id"), ids[0]);
	CHECK_STR(jget(json_array_get(tasks, 2), "state"), "cancelling");
	json_decref(j);
	j = ctl(ADMIN, "list --active --limit 2", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 2);
	json_decref(j);
	json_decref(ctl(ADMIN, "list --active --state queued", &code));
	CHECK_INT(code, 2);
	CHECK(stderr_has("--active cannot be combined with --state"));

	/* cancel --all refuses without --yes, and without --team. */
	char *out = ctl_raw("alpha-tok-1", "cancel --all --team alpha", &code);
	CHECK_INT(code, 2);
	CHECK_STR(out, "");
	CHECK(stderr_has("add --yes"));
	gwb_free(out);
	json_decref(ctl("alpha-tok-1", "cancel --all --yes", &code));
	CHECK_INT(code, 2);
	CHECK(stderr_has("--all needs --team"));
	snprintf(args, sizeof args, "cancel %s --yes", ids[1]);
	json_decref(ctl("alpha-tok-1", args, &code));
	CHECK_INT(code, 2);
	CHECK(stderr_has("--yes goes with --all"));
	/* Nothing was cancelled by the refusals. */
	j = ctl("alpha-tok-1", "list --active --team alpha", &code);
	int cancelling = 0;
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(j, "tasks"), i, t)
		cancelling += strcmp(jget(t, "state"), "cancelling") == 0;
	CHECK_INT(cancelling, 1);
	json_decref(j);

	/* With --yes: the two not yet cancelling, one line each. */
	out = ctl_raw("alpha-tok-1", "cancel --all --team alpha --yes -o text", &code);
	CHECK_INT(code, 0);
	CHECK(has_line_with(out, "202 ", ids[1]));
	CHECK(has_line_with(out, "202 ", ids[2]));
	CHECK(!strstr(out, ids[0]));
	CHECK(!strstr(out, beta));
	gwb_free(out);
	j = ctl("alpha-tok-1", "list --active --team alpha", &code);
	json_array_foreach(json_object_get(j, "tasks"), i, t)
		CHECK_STR(jget(t, "state"), "cancelling");
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 3);
	json_decref(j);
	snprintf(args, sizeof args, "get %s", beta);
	j = ctl(ADMIN, args, &code);
	CHECKF(strcmp(jget(j, "state"), "cancelling") != 0, "beta's task was cancelled");
	json_decref(j);
	/* Again: nothing left to cancel. */
	j = ctl("alpha-tok-1", "cancel --all --team alpha --yes -o json", &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "team"), "alpha");
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 0);
	json_decref(j);
	/* A team token cannot cancel another team's tasks: the API refuses, exit 1. */
	json_decref(ctl("alpha-tok-1", "cancel --all --team beta --yes", &code));
	CHECK_INT(code, 1);
	CHECK(stderr_has("HTTP 403"));
	h_server_stop(&s);
}

TEST_T(gwbctl_teams_set_and_usage_errors_name_the_flag, 60)
{
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, NULL);
	int code;
	char *out = ctl_raw(ADMIN, "teams set gamma --mem 2048 --core 100 --token gamma-tok-1 -o text",
			    &code);
	CHECK_INT(code, 0);
	CHECKF(strncmp(out, "201 Created\n", 12) == 0, "stdout: %s", out);
	CHECK(has_line_with(out, "gamma ", "2048/100%"));
	gwb_free(out);
	json_t *j = ctl(ADMIN, "teams set gamma --mem 4096 --core 150", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "quota"), "gpu_memory_mib")),
		  4096);
	json_decref(j);
	/* The token set above works for the team's own requests; a global --token before the
	 * command is the caller's bearer token. */
	j = ctl(NULL, "--token gamma-tok-1 teams gamma", &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "team"), "gamma");
	json_decref(j);
	/* A trailing slash on the URL is not doubled into the path. */
	snprintf(url_env, sizeof url_env, "GWB_URL=%s/", s.proc.url);
	json_decref(ctl(ADMIN, "teams gamma", &code));
	CHECK_INT(code, 0);
	snprintf(url_env, sizeof url_env, "GWB_URL=%s", s.proc.url);
	/* Only the admin sets quotas. */
	json_decref(ctl("gamma-tok-1", "teams set gamma --mem 1 --core 1", &code));
	CHECK_INT(code, 1);
	CHECK(stderr_has("HTTP 403 forbidden"));

	static const struct {
		const char *args, *says;
	} bad[] = {
		{ "submit --team alpha --mem 10 --core 5 --bogus 1", "submit: unknown flag --bogus" },
		{ "submit --team alpha --core 5 --mem", "submit: --mem needs a value" },
		{ "submit --team alpha --mem lots --core 5", "--mem must be a whole number" },
		{ "submit --core 5", "missing: --team --mem" },
		{ "get", "get: expected one task id" },
		{ "get t-1 t-2", "get: unexpected argument 't-2'" },
		{ "list --state", "list: --state needs a value" },
		{ "list --limit 0", "--limit must be a whole number from 1 to 500" },
		{ "list --active=yes", "list: --active takes no value" },
		{ "events", "events: expected one task id" },
		{ "devices extra", "devices: unexpected argument 'extra'" },
		{ "teams set gamma --core 5", "missing: --mem" },
		{ "teams set --mem 1 --core 1", "teams set: expected one team name" },
		{ "-o yaml teams", "-o must be text, json or name, not 'yaml'" },
		{ "--nope teams", "unknown flag --nope" },
		{ "teams -x", "teams: unknown flag -x" },
		{ "intents --count 0", "--count must be a whole number from 1 to 10000" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		out = ctl_raw(ADMIN, bad[i].args, &code);
		CHECKF(code == 2, "'%s': exit %d", bad[i].args, code);
		CHECKF(out[0] == '\0', "'%s' printed: %s", bad[i].args, out);
		CHECKF(stderr_has(bad[i].says), "'%s': stderr lacks '%s'", bad[i].args,
		       bad[i].says);
		gwb_free(out);
	}
	h_server_stop(&s);
}

/* Polls `gwbctl get id` until the task is in state (or fails the case). */
static void wait_state(const char *token, const char *id, const char *state)
{
	char args[128];
	snprintf(args, sizeof args, "get %s -o json", id);
	int64_t deadline = clock_mono_ms() + 30000;
	for (;;) {
		int code;
		json_t *j = ctl(token, args, &code);
		int done = code == 0 && jget(j, "state") && strcmp(jget(j, "state"), state) == 0;
		json_decref(j);
		if (done)
			return;
		CHECKF(clock_mono_ms() < deadline, "%s never reached %s", id, state);
		h_sleep_ms(100);
	}
}

TEST_T(gwbctl_devices_and_events_against_kubesim, 90)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	snprintf(k.worker, sizeof k.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(k.worker);
	h_kubesim_start(&k);
	char kube_env[300];
	snprintf(kube_env, sizeof kube_env, "GWB_KUBE_SERVER=%s", k.url);
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, kube_env);
	int code;
	char *out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 1024 --core 25 --duration 120 -q",
			    &code);
	CHECK_INT(code, 0);
	char id[64];
	snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
	gwb_free(out);
	wait_state("alpha-tok-1", id, "running");

	/* One line per card: node, minor, health, memory and core used/total, tasks. */
	out = ctl_raw("alpha-tok-1", "devices -o text", &code);
	CHECK_INT(code, 0);
	CHECKF(strncmp(out, "200 OK\n", 7) == 0, "stdout: %s", out);
	CHECK(has_line_with(out, "NODE ", "TASKS"));
	CHECKF(has_line_with(out, "1024/8192", id) && has_line_with(out, "25/100", id),
	       "no card line holds %s: %s", id, out);
	CHECKF(has_line_with(out, "0/8192", "healthy"), "the other card: %s", out);
	gwb_free(out);
	out = ctl_raw("alpha-tok-1", "devices -o name", &code);
	CHECK_INT(code, 0);
	CHECK_STR(out, "colima-gwb/0\ncolima-gwb/1\n");
	gwb_free(out);
	json_t *j = ctl("alpha-tok-1", "devices", &code);
	CHECK_INT(code, 0);
	CHECK_INT(json_array_size(json_object_get(j, "cards")), 2);
	json_decref(j);
	/* The task's text summary names its card and node. */
	char args[128];
	snprintf(args, sizeof args, "get %s -o text", id);
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECKF(has_line_with(out, "card ", " on colima-gwb"), "stdout: %s", out);
	gwb_free(out);

	/* submit --dry-run: the card the next task would get, and nothing written. */
	j = ctl("alpha-tok-1", "submit --team alpha --mem 2048 --core 25 --dry-run", &code);
	CHECK_INT(code, 0);
	CHECK(json_is_true(json_object_get(j, "dry_run")));
	CHECK_STR(jget(json_object_get(j, "placement"), "outcome"), "bind");
	json_decref(j);
	out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 2048 --core 25 --dry-run -o text",
		      &code);
	CHECK_INT(code, 0);
	CHECKF(has_line_with(out, "quota:", "admitted") &&
		       has_line_with(out, "placement: binds now on colima-gwb, card", NULL),
	       "stdout: %s", out);
	gwb_free(out);
	/* The quota (4096 MiB, 1024 held) would refuse 4000 MiB more. */
	out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 4000 --core 25 --dry-run -o name",
		      &code);
	CHECK_INT(code, 0);
	CHECK_STR(out, "refused\n");
	gwb_free(out);
	j = ctl("alpha-tok-1", "list --team alpha", &code);
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 1);
	json_decref(j);

	/* events: the history, as JSON and as one line per event. */
	snprintf(args, sizeof args, "events %s", id);
	j = ctl("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "task"), id);
	CHECK(json_array_size(json_object_get(j, "events")) >= 3);
	CHECK_STR(jget(json_array_get(json_object_get(j, "events"), 0), "type"), "submitted");
	json_decref(j);
	snprintf(args, sizeof args, "events %s -o text", id);
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK(has_line_with(out, "submitted", "-> queued"));
	CHECK(has_line_with(out, "-> running", NULL));
	gwb_free(out);
	json_decref(ctl("alpha-tok-1", "events t-nonesuch", &code));
	CHECK_INT(code, 1);
	CHECK(stderr_has("HTTP 404"));

	/* Clean-up the way the lab does it: every active task of the team, then none holds quota. */
	json_decref(ctl("alpha-tok-1", "cancel --all --team alpha --yes", &code));
	CHECK_INT(code, 0);
	wait_state("alpha-tok-1", id, "cancelled");
	j = ctl("alpha-tok-1", "list --active --team alpha", &code);
	CHECK_INT(json_array_size(json_object_get(j, "tasks")), 0);
	json_decref(j);
	h_server_stop(&s);
	h_kubesim_stop(&k);
}

/* gwbctl wait: returns once the task is in the state (or released), fails after --timeout
 * naming the last state, stops at once when the task ended otherwise, and refuses usage errors
 * by naming the flag. */
TEST_T(gwbctl_wait_polls_until_state_or_release, 90)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	snprintf(k.worker, sizeof k.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(k.worker);
	h_kubesim_start(&k);
	char kube_env[300];
	snprintf(kube_env, sizeof kube_env, "GWB_KUBE_SERVER=%s", k.url);
	struct h_redis r;
	struct h_server s;
	setup(&r, &s, kube_env);
	int code;
	char *out = ctl_raw("alpha-tok-1", "submit --team alpha --mem 1024 --core 25 --duration 3 -q",
			    &code);
	CHECK_INT(code, 0);
	char id[64], args[256];
	snprintf(id, sizeof id, "%.*s", (int)strcspn(out, "\n"), out);
	gwb_free(out);

	/* running, within the time allowed; the task is shown (its id in name mode). */
	snprintf(args, sizeof args, "wait %s --state running --timeout 30 -o name", id);
	int64_t t0 = clock_mono_ms();
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	char want[80];
	snprintf(want, sizeof want, "%s\n", id);
	CHECK_STR(out, want);
	gwb_free(out);
	/* Already true: at once. */
	snprintf(args, sizeof args, "wait %s --state running -o json", id);
	json_t *j = ctl("alpha-tok-1", args, &code);
	CHECK_INT(code, 0);
	CHECK_STR(jget(j, "state"), "running");
	json_decref(j);
	/* A state it does not reach in time: exit 1, the last state on stderr. */
	snprintf(args, sizeof args, "wait %s --state cancelled --timeout 1", id);
	int64_t t1 = clock_mono_ms();
	json_decref(ctl("alpha-tok-1", args, &code));
	CHECK_INT(code, 1);
	CHECKF(clock_mono_ms() - t1 < 5000, "--timeout 1 took %lld ms",
	       (long long)(clock_mono_ms() - t1));
	CHECK(stderr_has("timed out after 1 s: task"));
	CHECK(stderr_has("is running"));
	/* Every condition given must hold: the state is right, the reason is not. */
	snprintf(args, sizeof args, "wait %s --state running --reason no_such_reason --timeout 1",
		 id);
	json_decref(ctl("alpha-tok-1", args, &code));
	CHECK_INT(code, 1);
	CHECK(stderr_has("timed out after 1 s"));
	/* The task runs 3 s and ends succeeded: --released returns once the quota is back. */
	snprintf(args, sizeof args, "wait %s --released --timeout 30 -o text", id);
	out = ctl_raw("alpha-tok-1", args, &code);
	CHECKF(code == 0, "exit %d: %s", code, out);
	CHECK(has_line_with(out, "state", "succeeded"));
	CHECK(has_line_with(out, "reservation", "released"));
	/* The worker's verdict from its termination message. */
	CHECK(has_line_with(out, "result", "done (exit 0), simulated ledger peak 768 of 1024 MiB"));
	CHECK(has_line_with(out, "isolation", "(the worker's verdict)"));
	gwb_free(out);
	CHECKF(clock_mono_ms() - t0 < 30000, "took %lld ms", (long long)(clock_mono_ms() - t0));
	/* A final state other than the one asked for: no point waiting. */
	snprintf(args, sizeof args, "wait %s --state running --timeout 30", id);
	t1 = clock_mono_ms();
	json_decref(ctl("alpha-tok-1", args, &code));
	CHECK_INT(code, 1);
	CHECK(clock_mono_ms() - t1 < 5000);
	CHECK(stderr_has("ended succeeded"));
	/* No such task: the API's 404, at once. */
	json_decref(ctl("alpha-tok-1", "wait t-nonesuch --state running --timeout 30", &code));
	CHECK_INT(code, 1);
	CHECK(stderr_has("HTTP 404"));

	static const struct {
		const char *args, *says;
	} bad[] = {
		{ "wait", "wait: expected one task id" },
		{ "wait t-1", "wait: needs --state S, --reason R or --released" },
		{ "wait t-1 --state done", "--state must be a task state" },
		{ "wait t-1 --state running --timeout soon", "--timeout must be a whole number" },
		{ "wait t-1 --released=yes", "wait: --released takes no value" },
		{ "wait t-1 --state running --every 1", "wait: unknown flag --every" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		out = ctl_raw("alpha-tok-1", bad[i].args, &code);
		CHECKF(code == 2, "'%s': exit %d", bad[i].args, code);
		CHECKF(stderr_has(bad[i].says), "'%s': stderr lacks '%s'", bad[i].args,
		       bad[i].says);
		gwb_free(out);
	}
	h_server_stop(&s);
	h_kubesim_stop(&k);
}
