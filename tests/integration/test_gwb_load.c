/* gwb-load against the real stack (redis-server, kubesim whose kubelet runs gwb-worker, and
 * gwb-server): a small closed-loop run with replays, cancels and --drain whose JSON summary is
 * checked against the server's own state; a quota lowered under the team's reservation makes
 * its quota check fail; usage errors and an unreachable server exit as documented. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define TOK   "alpha-token-123"

struct stack {
	struct h_kubesim ks;
	struct h_redis redis;
	struct h_server srv;
	char env_kube[300];
	char env_redis[PATH_MAX + 32];
};

/* redis + gwb-server, with kubesim (real worker) when with_kube; team alpha with quota mem. */
static void stack_start(struct stack *st, int with_kube, long mem)
{
	int n = 0;
	h_redis_start(&st->redis);
	h_server_init(&st->srv);
	if (with_kube) {
		h_kubesim_init(&st->ks);
		snprintf(st->ks.worker, sizeof st->ks.worker, "%s", h_bin("gwb-worker"));
		h_need_exec(st->ks.worker);
		h_kubesim_start(&st->ks);
		snprintf(st->env_kube, sizeof st->env_kube, "GWB_KUBE_SERVER=%s", st->ks.url);
		st->srv.env[n++] = st->env_kube;
	}
	snprintf(st->env_redis, sizeof st->env_redis, "GWB_REDIS=%s", st->redis.url);
	st->srv.env[n++] = st->env_redis;
	st->srv.env[n++] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	st->srv.env[n++] = "GWB_RECONCILE_RESYNC_MS=500";
	st->srv.env[n] = NULL;
	h_server_start(&st->srv);
	char body[200];
	snprintf(body, sizeof body,
	         "{\"gpu_memory_mib\": %ld, \"gpu_core_percent\": 800, \"token\": \"" TOK "\"}",
	         mem);
	struct h_resp r;
	h_req(&r, "PUT", st->srv.proc.url, "/v1/teams/alpha", ADMIN, body, NULL);
	CHECKF(r.status == 201, "team: %ld %s", r.status, r.body);
	h_resp_free(&r);
}

/* Runs gwb-load with args (a word list built by the case) and returns its exit code; *out its
 * stdout parsed as JSON (or NULL), its stderr in the case file gwb-load.err. */
static int load(const char *args, json_t **out)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "'%s' %s 2>'%s'", h_bin("gwb-load"), args,
	         h_path("gwb-load.err"));
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t cap = 1 << 20, len = 0, n;
	char *buf = gwb_malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += n;
	buf[len] = '\0';
	int st = pclose(p);
	if (out) {
		*out = len ? json_loads(buf, 0, NULL) : NULL;
		if (!*out && len)
			t_log("gwb-load stdout: %.2000s", buf);
	}
	gwb_free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *err_text(void)
{
	FILE *f = fopen(h_path("gwb-load.err"), "r");
	CHECK(f != NULL);
	char *s = h_read_all(fileno(f));
	fclose(f);
	return s;
}

static json_t *jget(const json_t *o, const char *path)
{
	char buf[200];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok && o; tok = dot) {
		if ((dot = strchr(tok, '.')))
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtol(tok, NULL, 10))
		                     : json_object_get(o, tok);
	}
	return (json_t *)o;
}

static long long ji(const json_t *o, const char *path)
{
	json_t *v = jget(o, path);
	CHECKF(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

static const char *check_detail(const json_t *s, const char *name, int *ok)
{
	size_t i;
	json_t *c;
	json_array_foreach (json_object_get(s, "checks"), i, c)
		if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0) {
			*ok = json_is_true(json_object_get(c, "ok")) &&
			      !json_is_true(json_object_get(c, "skipped"));
			return json_string_value(json_object_get(c, "detail"));
		}
	t_fail(__FILE__, __LINE__, "no check %s", name);
}

/* Every task of team alpha through the API (all pages): the count, how many are in state, and
 * how many still hold a reservation. */
static void api_tasks(struct stack *st, const char *state, long *all, long *in_state,
                      long *unreleased)
{
	*all = *in_state = *unreleased = 0;
	char path[128] = "/v1/tasks?team=alpha&limit=500";
	for (;;) {
		struct h_resp r;
		h_req(&r, "GET", st->srv.proc.url, path, TOK, NULL, NULL);
		CHECKF(r.status == 200, "list: %ld %s", r.status, r.body);
		size_t i;
		json_t *t;
		json_array_foreach (json_object_get(r.json, "tasks"), i, t) {
			(*all)++;
			*in_state +=
			    strcmp(json_string_value(json_object_get(t, "state")), state) == 0;
			*unreleased += !json_is_true(jget(t, "reservation.released"));
		}
		const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
		if (next)
			snprintf(path, sizeof path, "/v1/tasks?team=alpha&limit=500&cursor=%s",
			         next);
		h_resp_free(&r);
		if (!next)
			return;
	}
}

TEST_T(gwb_load_closed_drain_json_matches_the_server, 240)
{
	struct stack st;
	stack_start(&st, 1, 40960);
	char args[1024];
	snprintf(args, sizeof args,
	         "--url %s --token " TOK " --metrics-token " H_METRICS_TOKEN " --closed --connections 4 --count 60 "
	         "--mix submit=50,replay=25,cancel=25 --mem 16 --core 1 --task-seconds 1 "
	         "--drain --drain-timeout 150 --poll-ms 200 --redis %s --json",
	         st.srv.proc.url, st.redis.url);
	json_t *s = NULL;
	int code = load(args, &s);
	char *err = err_text();
	CHECKF(s != NULL, "no JSON summary; stderr: %.3000s", err);
	if (code != 0 || !json_is_true(json_object_get(s, "passed"))) {
		char *d = json_dumps(s, JSON_COMPACT);
		t_log("summary: %s", d);
		t_log("stderr: %.3000s", err);
		gwb_free(d); /* jansson allocates through gwb_malloc */
		h_proc_dump_log(&st.srv.proc, 20);
		t_fail(__FILE__, __LINE__, "gwb-load exited %d", code);
	}
	gwb_free(err);

	/* Every request answered as its operation expects. */
	CHECK_INT(ji(s, "send.sent"), 60);
	CHECK_INT(ji(s, "send.answered"), 60);
	CHECK_INT(ji(s, "send.errors"), 0);
	long long accepted = ji(s, "tasks.accepted");
	CHECK_INT(accepted, ji(s, "operations.submit.status.201"));
	CHECK_INT(accepted, ji(s, "operations.submit.sent")); /* the quota holds them all */
	CHECK(accepted > 0);
	CHECK(ji(s, "operations.replay.sent") > 0);
	CHECK(ji(s, "operations.cancel.sent") > 0);
	/* Replays came back with the first task's id: none made a task of its own. */
	CHECK_INT(ji(s, "replays.mismatched"), 0);
	CHECK_INT(ji(s, "replays.same_id"), ji(s, "operations.replay.sent"));
	CHECK_INT(ji(s, "operations.replay.status.200"), ji(s, "operations.replay.sent"));
	CHECK_INT(ji(s, "tasks.strays"), 0);

	/* The server's own state agrees: as many tasks as accepted submissions, all ended, the
	 * cancelled ones counted alike, and nothing reserved. */
	long all, cancelled, unreleased;
	api_tasks(&st, "cancelled", &all, &cancelled, &unreleased);
	CHECK_INT(all, accepted);
	CHECK_INT(unreleased, 0);
	CHECK_INT(ji(s, "drain.tasks"), accepted);
	CHECK_INT(ji(s, "drain.ended"), accepted);
	CHECK_INT(ji(s, "drain.not_ended"), 0);
	json_t *c = jget(s, "drain.states.cancelled");
	CHECK_INT(json_is_integer(c) ? json_integer_value(c) : 0, cancelled);
	json_t *sc = jget(s, "drain.states.succeeded");
	CHECK_INT((json_is_integer(sc) ? json_integer_value(sc) : 0) + cancelled, all);
	struct h_resp r;
	h_req(&r, "GET", st.srv.proc.url, "/v1/teams/alpha", TOK, NULL, NULL);
	CHECK_INT(ji(r.json, "reserved.gpu_memory_mib"), 0);
	CHECK_INT(ji(r.json, "reserved.gpu_core_percent"), 0);
	h_resp_free(&r);
	CHECK_INT(ji(s, "quota.teams.0.end.reserved.gpu_memory_mib"), 0);
	CHECK(json_is_true(jget(s, "quota.teams.0.end.exact")));
	CHECK(ji(s, "quota.samples") >= 2);
	CHECK_INT(ji(s, "quota.over"), 0);
	CHECK(ji(s, "quota.teams.0.max_reserved.gpu_memory_mib") <= 40960);

	/* The end-to-end figures come from the histories of the tasks that got a Job. */
	CHECK_INT(ji(s, "drain.events_read"), accepted);
	CHECK(ji(s, "drain.intent_to_job_ms.count") >= all - cancelled); /* the succeeded ones */
	/* A binding is known only when the server recorded the scheduler's event or saw the Pod
	 * running, which a 1 s task can outrun: no count is promised, only that each binding
	 * follows a Job. */
	CHECK(ji(s, "drain.job_to_pod_ms.count") <= ji(s, "drain.intent_to_job_ms.count"));
	/* The server exports gwb_intents_dead_lettered_total, which gwb-load prefers to Redis. */
	CHECK_STR(json_string_value(jget(s, "dead_letters.source")), "metrics");
	CHECK_INT(ji(s, "dead_letters.during_run"), 0);
	int ok;
	check_detail(s, "all_tasks_ended", &ok);
	CHECK(ok);
	json_decref(s);
}

/* The quota check is a real one: with the team's quota lowered under what its tasks already
 * hold (the API allows it), the first sample is over and the run fails, while the submission
 * refused for quota is an expected answer, not an error. */
TEST_T(gwb_load_quota_over_fails_the_run, 60)
{
	struct stack st;
	stack_start(&st, 0, 4096); /* no cluster: the tasks keep their reservations */
	char args[1024];
	snprintf(args, sizeof args,
	         "--url %s --token " TOK " --metrics-token " H_METRICS_TOKEN " --count 5 --mix submit=1 --mem 100 --core 2 --json",
	         st.srv.proc.url);
	json_t *s = NULL;
	int code = load(args, &s);
	CHECKF(code == 0 && s, "first run: exit %d", code);
	CHECK_INT(ji(s, "tasks.accepted"), 5);
	CHECK_INT(ji(s, "quota.teams.0.end.reserved.gpu_memory_mib"), 500);
	CHECK_INT(ji(s, "quota.teams.0.end.active_sum.gpu_memory_mib"), 500);
	CHECK_INT(ji(s, "quota.teams.0.end.active_tasks"), 5);
	json_decref(s);

	struct h_resp r;
	h_req(&r, "PUT", st.srv.proc.url, "/v1/teams/alpha", ADMIN,
	      "{\"gpu_memory_mib\": 200, \"gpu_core_percent\": 800}", NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	code = load(args, &s);
	CHECKF(s != NULL, "no summary");
	CHECK_INT(code, 1);
	CHECK(json_is_false(json_object_get(s, "passed")));
	CHECK(ji(s, "quota.over") >= 1);
	CHECK_INT(ji(s, "quota.teams.0.max_reserved.gpu_memory_mib"), 500);
	CHECK_INT(ji(s, "operations.submit.status.403"), 5);
	CHECK_INT(ji(s, "tasks.refused_quota"), 5);
	CHECK_INT(ji(s, "send.errors"), 0);
	int ok;
	check_detail(s, "quota_never_over", &ok);
	CHECK(!ok);
	check_detail(s, "answers", &ok);
	CHECK(ok);
	json_decref(s);
}

static void expect_in_err(const char *needle)
{
	char *e = err_text();
	CHECKF(strstr(e, needle) != NULL, "stderr does not say \"%s\": %.2000s", needle, e);
	gwb_free(e);
}

TEST_T(gwb_load_usage_errors_exit_2_naming_the_flag, 30)
{
	CHECK_INT(load("--token t --bogus-flag 3", NULL), 2);
	expect_in_err("--bogus-flag: unknown flag");
	expect_in_err("usage: gwb-load");
	CHECK_INT(load("--token t --connections 0", NULL), 2);
	expect_in_err("--connections: must be 1-1024");
	CHECK_INT(load("--token t --rate 10 --closed", NULL), 2);
	expect_in_err("--rate:");
	CHECK_INT(load("--token t --mix submit=5,nuke=1", NULL), 2);
	expect_in_err("--mix:");
	CHECK_INT(load("--token t --url ftp://127.0.0.1:1", NULL), 2);
	expect_in_err("--url:");
	CHECK_INT(load("--help", NULL), 0);
}

/* A loopback port with nothing listening: bound, then closed again. */
static int dead_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(fd >= 0);
	struct sockaddr_in a = {0};
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof a;
	CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
	close(fd);
	return ntohs(a.sin_port);
}

TEST_T(gwb_load_unreachable_or_refused_exits_1_clearly, 60)
{
	char args[256];
	snprintf(args, sizeof args, "--url http://127.0.0.1:%d --token t --count 3", dead_port());
	json_t *s = NULL;
	CHECK_INT(load(args, &s), 1);
	CHECK(s == NULL); /* nothing on stdout */
	expect_in_err("cannot connect to 127.0.0.1:");
	expect_in_err("Connection refused");

	/* A server that refuses the token, and a team that does not exist: said before any
	 * load is sent. */
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	snprintf(args, sizeof args, "--url %s --token wrong-token-1 --count 3", srv.proc.url);
	CHECK_INT(load(args, NULL), 1);
	expect_in_err("GET /v1/teams/alpha: 401 unauthorized");
	snprintf(args, sizeof args, "--url %s --token " ADMIN " --teams nosuch --count 3",
	         srv.proc.url);
	CHECK_INT(load(args, NULL), 1);
	expect_in_err("GET /v1/teams/nosuch: 404 not_found");
	struct h_resp r;
	h_req(&r, "GET", srv.proc.url, "/v1/tasks", ADMIN, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "tasks")), 0);
	h_resp_free(&r);
}

/* The open loop starts rate x duration requests whatever the answers (slots 0, 20 ms, ...,
 * 980 ms), and every submission it counts as accepted is a task on the server. */
TEST_T(gwb_load_open_loop_sends_its_schedule, 60)
{
	struct stack st;
	stack_start(&st, 0, 40960);
	char args[1024];
	snprintf(args, sizeof args,
	         "--url %s --token " TOK " --metrics-token " H_METRICS_TOKEN " --rate 50 --duration 1 --connections 2 "
	         "--mix submit=8,replay=1,cancel=1 --json",
	         st.srv.proc.url);
	json_t *s = NULL;
	int code = load(args, &s);
	CHECKF(s != NULL, "no summary");
	CHECK_INT(code, 0);
	CHECK_STR(json_string_value(jget(s, "run.loop")), "open");
	CHECK_INT(ji(s, "send.sent"), 50);
	CHECK_INT(ji(s, "send.answered"), 50);
	CHECK_INT(ji(s, "operations.submit.sent") + ji(s, "operations.replay.sent") +
	              ji(s, "operations.cancel.sent"),
	          50);
	CHECK_INT(ji(s, "replays.mismatched"), 0);
	long all, cancelling, unreleased;
	api_tasks(&st, "cancelling", &all, &cancelling, &unreleased);
	CHECK_INT(all, ji(s, "tasks.accepted"));
	CHECK_INT(ji(s, "quota.teams.0.end.active_tasks"), unreleased);
	CHECK(json_is_null(json_object_get(s, "drain")));
	json_decref(s);
}
