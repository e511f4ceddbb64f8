/* GET /v1/tasks/ID/logs against gwb-server on kubesim, whose kubelet runs a worker script that
 * writes numbered lines and waits at a gate file the case creates: tail, the bound on bytes
 * (a 100 MiB log), team scoping, query errors, a task without a Pod, a container that has not
 * started, and follow streaming until the container ends or the client goes. */
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
#define TOK "alpha-token-1"
#define BETA "beta-token-1"

/* Lines 1 to 300 ("task=ID line=N"), with 100 MiB of 999-byte lines after the first when the
 * duration is 77, then waits for <case>/gate-ID and writes "task=ID end". */
static const char worker_body[] =
	"echo \"task=$GWB_TASK_ID line=1\"\n"
	"if [ \"$GWB_DURATION_SECONDS\" = 77 ]; then yes \"$(printf '%%0998d' 0)\" |"
	" head -n 104962; fi\n"
	"i=2; while [ $i -le 300 ]; do echo \"task=$GWB_TASK_ID line=$i\"; i=$((i+1)); done\n"
	"while [ ! -e \"%s/gate-$GWB_TASK_ID\" ]; do sleep 0.05; done\n"
	"echo \"task=$GWB_TASK_ID end\"\n";

struct stack {
	struct h_kubesim ks;
	struct h_server srv;
	char env_kube[300];
};

static void put_team(struct stack *st, const char *team, const char *token)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"%s\"}", token);
	CHECK_INT(h_team_put(st->srv.proc.url, ADMIN, team, body), 201);
}

/* kubesim (with flag, may be NULL) running the script, gwb-server on it, teams alpha and beta. */
static void start(struct stack *st, const char *flag)
{
	h_kubesim_init(&st->ks);
	char body[1024];
	snprintf(body, sizeof body, worker_body, h_tmpdir());
	snprintf(st->ks.worker, sizeof st->ks.worker, "%s", h_kubesim_script("lines.sh", body));
	st->ks.args[0] = flag;
	h_kubesim_start(&st->ks);
	h_server_init(&st->srv);
	snprintf(st->env_kube, sizeof st->env_kube, "GWB_KUBE_SERVER=%s", st->ks.url);
	st->srv.env[0] = st->env_kube;
	st->srv.env[1] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	st->srv.env[2] = "GWB_RECONCILE_RESYNC_MS=500";
	st->srv.env[3] = NULL;
	h_server_start(&st->srv);
	put_team(st, "alpha", TOK);
	put_team(st, "beta", BETA);
}

static const char *submit(const char *url, int secs)
{
	static char ids[4][40];
	static int slot;
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 25, "
		 "\"duration_seconds\": %d, \"experiment\": \"normal\"}",
		 secs);
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/tasks", TOK, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 4];
	snprintf(id, 40, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
	return id;
}

static long get_logs(const char *url, const char *id, const char *query, const char *token,
		     struct h_resp *r)
{
	char path[256];
	snprintf(path, sizeof path, "/v1/tasks/%s/logs%s", id, query ? query : "");
	h_req(r, "GET", url, path, token, NULL, NULL);
	return r->status;
}

/* Waits until the log's last line is want (the script got that far). */
static void wait_last_line(const char *url, const char *id, const char *want)
{
	int64_t deadline = clock_mono_ms() + 20000;
	for (;;) {
		struct h_resp r;
		long st = get_logs(url, id, "?tail=1", TOK, &r);
		int ok = st == 200 && r.body_len > 0 && strncmp(r.body, want, strlen(want)) == 0;
		h_resp_free(&r);
		if (ok)
			return;
		CHECKF(clock_mono_ms() < deadline, "%s: the log never reached \"%s\"", id, want);
		h_sleep_ms(50);
	}
}

static void open_gate(const char *id)
{
	char name[64];
	snprintf(name, sizeof name, "gate-%s", id);
	h_write_file(name, "");
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void expect_field(const char *url, const char *id, const char *query, const char *field)
{
	struct h_resp r;
	CHECK_INT(get_logs(url, id, query, TOK, &r), 400);
	CHECK_STR(h_err_code(&r), "invalid_field");
	json_t *e = json_object_get(r.json, "error");
	CHECKF(json_string_value(json_object_get(e, "field")) &&
		       !strcmp(json_string_value(json_object_get(e, "field")), field),
	       "%s: %s", query, r.body);
	h_resp_free(&r);
}

TEST_T(logs_tail_scope_and_follow_to_the_end, 90)
{
	struct stack st;
	start(&st, NULL);
	const char *url = st.srv.proc.url;
	const char *id = submit(url, 30);
	char want[128];
	snprintf(want, sizeof want, "task=%s line=300\n", id);
	wait_last_line(url, id, want);

	struct h_resp r;
	CHECK_INT(get_logs(url, id, "?tail=3", TOK, &r), 200);
	char exp[512];
	snprintf(exp, sizeof exp, "task=%s line=298\ntask=%s line=299\ntask=%s line=300\n", id, id,
		 id);
	CHECK_STR(r.body, exp);
	CHECKF(strncmp(h_header(&r, "Content-Type"), "text/plain", 10) == 0, "%s",
	       h_header(&r, "Content-Type"));
	h_resp_free(&r);
	/* The default tail: the last 100 lines. */
	CHECK_INT(get_logs(url, id, NULL, TOK, &r), 200);
	CHECK_INT(count_lines(r.body), 100);
	snprintf(exp, sizeof exp, "task=%s line=201\n", id);
	CHECKF(strncmp(r.body, exp, strlen(exp)) == 0, "%.80s", r.body);
	h_resp_free(&r);
	CHECK_INT(get_logs(url, id, "?tail=0", TOK, &r), 200);
	CHECK_INT((long)r.body_len, 0);
	h_resp_free(&r);
	/* The admin sees every task's log; another team's token gets what an unknown id gets. */
	CHECK_INT(get_logs(url, id, "?tail=1", ADMIN, &r), 200);
	h_resp_free(&r);
	struct h_resp unknown;
	CHECK_INT(get_logs(url, id, NULL, BETA, &r), 404);
	CHECK_INT(get_logs(url, "no-such-task", NULL, BETA, &unknown), 404);
	CHECK_STR(h_err_code(&r), "not_found");
	CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "error"), "message")),
		  json_string_value(
			  json_object_get(json_object_get(unknown.json, "error"), "message")));
	h_resp_free(&r);
	h_resp_free(&unknown);
	/* Bad queries name their field. */
	expect_field(url, id, "?tail=-1", "tail");
	expect_field(url, id, "?tail=10001", "tail");
	expect_field(url, id, "?tail=3x", "tail");
	expect_field(url, id, "?follow=yes", "follow");
	expect_field(url, id, "?since=1", "since");

	/* follow: the tail, then what comes, until the container ends. */
	char path[256];
	snprintf(path, sizeof path, "/v1/tasks/%s/logs?tail=2&follow=true", id);
	struct h_watch w;
	CHECK(h_watch_open_url(&w, url, path, TOK, "text/plain") == 0);
	CHECK_INT(w.status, 200);
	CHECK(w.chunked);
	char *line = h_watch_line(&w, 10000);
	snprintf(exp, sizeof exp, "task=%s line=299", id);
	CHECKF(line && !strcmp(line, exp), "%s", line ? line : "(none)");
	gwb_free(line);
	line = h_watch_line(&w, 10000);
	snprintf(exp, sizeof exp, "task=%s line=300", id);
	CHECKF(line && !strcmp(line, exp), "%s", line ? line : "(none)");
	gwb_free(line);
	/* The stream stays open while the script waits: other requests are answered. */
	CHECK_INT(get_logs(url, id, "?tail=1", TOK, &r), 200);
	h_resp_free(&r);
	open_gate(id);
	line = h_watch_line(&w, 15000);
	snprintf(exp, sizeof exp, "task=%s end", id);
	CHECKF(line && !strcmp(line, exp), "%s", line ? line : "(none)");
	gwb_free(line);
	line = h_watch_line(&w, 15000);
	CHECKF(!line && w.ended, "the stream went on: %s", line ? line : "(open)");
	gwb_free(line);
	h_watch_close(&w);
}

/* The client of a followed log goes: the server ends its stream to the API server too. */
TEST_T(logs_follow_ends_when_the_client_goes, 60)
{
	struct stack st;
	start(&st, NULL);
	const char *url = st.srv.proc.url;
	const char *id = submit(url, 30);
	char want[128];
	snprintf(want, sizeof want, "task=%s line=300\n", id);
	wait_last_line(url, id, want);
	char path[256];
	snprintf(path, sizeof path, "/v1/tasks/%s/logs?tail=1&follow=true", id);
	struct h_watch w;
	CHECK(h_watch_open_url(&w, url, path, TOK, "text/plain") == 0);
	CHECK_INT(w.status, 200);
	char *line = h_watch_line(&w, 10000);
	CHECK(line != NULL);
	gwb_free(line);
	CHECKF(h_metric(url, "gwb_kube_streams_open", NULL) == 1, "%g",
	       h_metric(url, "gwb_kube_streams_open", NULL));
	h_watch_close(&w);
	int64_t deadline = clock_mono_ms() + 15000;
	while (h_metric(url, "gwb_kube_streams_open", NULL) != 0) {
		CHECKF(clock_mono_ms() < deadline, "the stream to the API server stayed open");
		h_sleep_ms(50);
	}
	open_gate(id);
}

/* A 100 MiB log is served bounded: the tail's first MiB at most. */
TEST_T(logs_big_log_bounded, 90)
{
	struct stack st;
	start(&st, NULL);
	const char *url = st.srv.proc.url;
	const char *id = submit(url, 77);
	char want[128];
	snprintf(want, sizeof want, "task=%s line=300\n", id);
	wait_last_line(url, id, want);
	struct h_resp r;
	CHECK_INT(get_logs(url, id, "?tail=10000", TOK, &r), 200);
	CHECK_INT((long)r.body_len, 1L << 20);
	CHECKF(strncmp(r.body, "0000", 4) == 0, "%.40s", r.body);
	h_resp_free(&r);
	CHECK_INT(get_logs(url, id, "?tail=300", TOK, &r), 200);
	CHECK_INT(count_lines(r.body), 300);
	h_resp_free(&r);
	/* Followed, 10,000 lines of it (10 MB) to a client that reads nothing for a while: the
	 * reader sets the pace and gets every line, in order, then the end. */
	char path[256];
	snprintf(path, sizeof path, "/v1/tasks/%s/logs?tail=10000&follow=true", id);
	struct h_watch w;
	CHECK(h_watch_open_url(&w, url, path, TOK, "text/plain") == 0);
	CHECK_INT(w.status, 200);
	h_sleep_ms(500);
	int n = 0;
	char *line;
	for (;;) {
		line = h_watch_line(&w, 15000);
		CHECKF(line, "the stream stopped after %d lines", n);
		n++;
		if (strncmp(line, "task=", 5) == 0)
			break;
		CHECKF(strlen(line) == 998, "line %d: %zu bytes", n, strlen(line));
		gwb_free(line);
	}
	gwb_free(line);
	CHECK_INT(n, 10000 - 298); /* the x lines, then line=2 (line=1 came first of all) */
	open_gate(id);
	int rest = 0;
	while ((line = h_watch_line(&w, 15000)) != NULL) {
		rest++;
		gwb_free(line);
	}
	CHECKF(w.ended, "the stream did not end with the container");
	CHECK_INT(rest, 298 + 1); /* line=3 to line=300, then the end */
	h_watch_close(&w);
}

/* A task whose Pod cannot be scheduled has a Pod whose container never started: 409 with the
 * API server's reason. */
TEST_T(logs_container_not_started, 60)
{
	struct stack st;
	start(&st, "--no-gpu-shared-sync");
	const char *url = st.srv.proc.url;
	const char *id = submit(url, 30);
	int64_t deadline = clock_mono_ms() + 20000;
	struct h_resp r;
	for (;;) {
		long s = get_logs(url, id, NULL, TOK, &r);
		if (s == 409 && !strcmp(h_err_code(&r), "container_not_started"))
			break;
		CHECKF(s == 409 && !strcmp(h_err_code(&r), "no_pod_yet"), "%ld %s", s, r.body);
		CHECKF(clock_mono_ms() < deadline, "no Pod came: %s", r.body);
		h_resp_free(&r);
		h_sleep_ms(50);
	}
	const char *msg = json_string_value(json_object_get(json_object_get(r.json, "error"),
							    "message"));
	CHECKF(msg && strstr(msg, "is waiting to start"), "%s", r.body);
	h_resp_free(&r);
}

/* Without a cluster a task never gets a Pod: 409 no_pod_yet with its state. */
TEST_T(logs_no_pod_yet, 30)
{
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	CHECK_INT(h_team_put(srv.proc.url, ADMIN, "alpha",
			     "{\"gpu_memory_mib\": 4096, \"gpu_core_percent\": 100, \"token\": \"" TOK
			     "\"}"),
		  201);
	const char *id = submit(srv.proc.url, 30);
	struct h_resp r;
	CHECK_INT(get_logs(srv.proc.url, id, "?tail=5", TOK, &r), 409);
	CHECK_STR(h_err_code(&r), "no_pod_yet");
	json_t *e = json_object_get(r.json, "error");
	CHECK_STR(json_string_value(json_object_get(e, "task")), id);
	CHECKF(json_string_value(json_object_get(e, "state")), "%s", r.body);
	h_resp_free(&r);
	/* The checks come first: a bad query is still a 400, another team's task a 404. */
	CHECK_INT(get_logs(srv.proc.url, id, "?tail=x", TOK, &r), 400);
	h_resp_free(&r);
}

/* Runs gwbctl with args (a word list built by the case) against url with token; returns its
 * stdout (gwb_malloc'd), its stderr in err (gwb_malloc'd) and its exit code. */
static char *gwbctl(const char *url, const char *token, const char *args, int *code, char **err)
{
	char cmd[4096];
	const char *errpath = h_path("gwbctl.err");
	snprintf(cmd, sizeof cmd, "GWB_URL=%s GWB_TOKEN=%s '%s' %s 2>%s", url, token,
		 h_bin("gwbctl"), args, errpath);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	char *out = h_read_all(fileno(p));
	int st = pclose(p);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	FILE *f = fopen(errpath, "r");
	CHECK(f != NULL);
	*err = h_read_all(fileno(f));
	fclose(f);
	return out;
}

TEST_T(logs_gwbctl, 60)
{
	struct stack st;
	start(&st, NULL);
	const char *url = st.srv.proc.url;
	const char *id = submit(url, 30);
	char want[128], args[256], exp[256];
	snprintf(want, sizeof want, "task=%s line=300\n", id);
	wait_last_line(url, id, want);
	int code;
	char *err;
	snprintf(args, sizeof args, "logs %s --tail 2", id);
	char *out = gwbctl(url, TOK, args, &code, &err);
	snprintf(exp, sizeof exp, "task=%s line=299\ntask=%s line=300\n", id, id);
	CHECKF(code == 0, "exit %d: %s", code, err);
	CHECK_STR(out, exp);
	gwb_free(out);
	gwb_free(err);
	/* -f on a container that ended: its last lines, then the end of the stream. */
	open_gate(id);
	snprintf(want, sizeof want, "task=%s end\n", id);
	wait_last_line(url, id, want);
	snprintf(args, sizeof args, "logs -f %s --tail=2", id);
	out = gwbctl(url, TOK, args, &code, &err);
	snprintf(exp, sizeof exp, "task=%s line=300\ntask=%s end\n", id, id);
	CHECKF(code == 0, "exit %d: %s", code, err);
	CHECK_STR(out, exp);
	gwb_free(out);
	gwb_free(err);

	static const struct {
		const char *args, *err;
		int code;
	} bad[] = {
		{ "logs", "logs: expected one task id", 2 },
		{ "logs a b", "logs: unexpected argument", 2 },
		{ "logs ID --tail x", "--tail must be a whole number", 2 },
		{ "logs ID --tail 10001", "--tail must be a whole number", 2 },
		{ "logs ID --tail", "--tail needs a value", 2 },
		{ "logs ID --follow=1", "--follow takes no value", 2 },
		{ "logs no-such-task", "HTTP 404 not_found", 1 },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char a[256];
		const char *at = strstr(bad[i].args, "ID");
		if (at)
			snprintf(a, sizeof a, "%.*s%s%s", (int)(at - bad[i].args), bad[i].args, id,
				 at + 2);
		else
			snprintf(a, sizeof a, "%s", bad[i].args);
		out = gwbctl(url, TOK, a, &code, &err);
		CHECKF(code == bad[i].code && strstr(err, bad[i].err), "%s: exit %d: %s", a, code,
		       err);
		gwb_free(out);
		gwb_free(err);
	}
	/* Another team's token: the task is not found, exit 1 (stdout, not a terminal, gets the
	 * error body as every command gives it, and no log). */
	snprintf(args, sizeof args, "logs %s", id);
	out = gwbctl(url, BETA, args, &code, &err);
	CHECKF(code == 1 && strstr(err, "HTTP 404 not_found"), "exit %d: %s", code, err);
	CHECKF(strstr(out, "\"not_found\"") && !strstr(out, "task="), "%s", out);
	gwb_free(out);
	gwb_free(err);
}
