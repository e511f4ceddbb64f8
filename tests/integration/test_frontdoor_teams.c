/* What one team sees of another, and who gets a stream (issue 38, findings 5 and 7), on a
 * real gwb-server: stream places per token and kept for the admin, another team's task
 * answering exactly as an unknown one, /v1/info without paths for a team, /metrics and the
 * detailed /readyz for the admin's or the metrics token only, and /v1/devices showing other
 * teams' tasks as one total per card. */
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"

static void put_team(const char *url, const char *team, const char *token)
{
	char body[160];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"%s\"}", token);
	long st = h_team_put(url, ADMIN, team, body);
	CHECKF(st == 201 || st == 200, "PUT team %s: %ld", team, st);
}

static void start(struct h_server *s, const char *const *env)
{
	h_server_init(s);
	int n = 0;
	for (; env && env[n] && n < 31; n++)
		s->env[n] = env[n];
	s->env[n] = NULL;
	h_server_start(s);
	put_team(s->proc.url, "alpha", ALPHA);
	put_team(s->proc.url, "beta", BETA);
}

/* Submits a task for team with token; returns its id (static ring). */
static const char *submit(const char *url, const char *team, const char *token, int mem)
{
	static char ids[4][40];
	static int slot;
	char body[200];
	snprintf(body, sizeof body,
		 "{\"team\": \"%s\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": 10, "
		 "\"duration_seconds\": 600}",
		 team, mem);
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/tasks", token, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 4];
	snprintf(id, 40, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
	return id;
}

/* Opens GET /v1/stream with token on a raw connection and reads its status line. Returns the
 * status; *fd is the open connection (the caller closes it). */
static long stream_open(const char *url, const char *token, int *fd)
{
	char host[128];
	int port = 0;
	CHECK(sscanf(url, "http://%127[^:]:%d", host, &port) == 2);
	char ps[16];
	snprintf(ps, sizeof ps, "%d", port);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	CHECK(getaddrinfo(host, ps, &hints, &ai) == 0);
	*fd = socket(ai->ai_family, SOCK_STREAM, 0);
	CHECK(*fd >= 0 && connect(*fd, ai->ai_addr, ai->ai_addrlen) == 0);
	freeaddrinfo(ai);
	char req[512];
	int n = snprintf(req, sizeof req,
			 "GET /v1/stream HTTP/1.1\r\nHost: %s:%d\r\nAuthorization: Bearer %s\r\n"
			 "Accept: text/event-stream\r\n\r\n",
			 host, port, token);
	CHECK(write(*fd, req, (size_t)n) == n);
	struct timeval tv = { 10, 0 };
	setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	char line[64] = "";
	size_t got = 0;
	while (got < sizeof line - 1 && !strchr(line, '\n')) {
		ssize_t k = read(*fd, line + got, sizeof line - 1 - got);
		if (k <= 0)
			break;
		got += (size_t)k;
		line[got] = '\0';
	}
	long status = 0;
	CHECKF(sscanf(line, "HTTP/1.1 %ld", &status) == 1, "status line: %s", line);
	return status;
}

/* One team's token holds at most http.stream_max_per_token streams (429 after); the teams
 * together leave http.stream_admin_reserved places to the admin (503 for a team then). */
TEST(frontdoor_streams_per_token_and_kept_for_the_admin)
{
	const char *env[] = { "GWB_STREAM_MAX_CLIENTS=10", NULL };
	struct h_server s;
	start(&s, env);
	const char *url = s.proc.url;
	int fds[16], n = 0, fd;
	for (int i = 0; i < 4; i++) {
		CHECK_INT(stream_open(url, ALPHA, &fds[n]), 200);
		n++;
	}
	/* alpha's fifth: its token holds its share. */
	long st = stream_open(url, ALPHA, &fd);
	close(fd);
	CHECKF(st == 429, "alpha's fifth stream: %ld", st);
	struct h_resp r;
	/* The same JSON error from the API's client. */
	h_req(&r, "GET", url, "/v1/stream", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 429);
	CHECK_STR(h_err_code(&r), "too_many_streams");
	CHECK(h_header(&r, "Retry-After") != NULL);
	h_resp_free(&r);
	/* beta gets two more (6 = 10 - 4 kept for the admin), then 503. */
	for (int i = 0; i < 2; i++) {
		CHECK_INT(stream_open(url, BETA, &fds[n]), 200);
		n++;
	}
	h_req(&r, "GET", url, "/v1/stream", BETA, NULL, NULL);
	CHECK_INT(r.status, 503);
	CHECK_STR(h_err_code(&r), "too_many_streams");
	h_resp_free(&r);
	/* The admin still gets in, up to stream.max_clients. */
	for (int i = 0; i < 4; i++) {
		CHECK_INT(stream_open(url, ADMIN, &fds[n]), 200);
		n++;
	}
	st = stream_open(url, ADMIN, &fd);
	close(fd);
	CHECK_INT(st, 503);
	for (int i = 0; i < n; i++)
		close(fds[i]);
	h_server_stop(&s);
}

/* r's body with every occurrence of id replaced by "ID" (gwb_free). */
static char *body_without(const struct h_resp *r, const char *id)
{
	size_t idl = strlen(id);
	char *out = gwb_calloc(1, r->body_len + 1);
	size_t o = 0;
	for (const char *p = r->body; *p;) {
		if (strncmp(p, id, idl) == 0) {
			memcpy(out + o, "ID", 2);
			o += 2;
			p += idl;
		} else {
			out[o++] = *p++;
		}
	}
	return out;
}

/* Another team's task id answers exactly as an unknown one: status, body, on every per-task
 * path. */
TEST(frontdoor_other_teams_task_is_not_found)
{
	struct h_server s;
	start(&s, NULL);
	const char *url = s.proc.url;
	const char *id = submit(url, "alpha", ALPHA, 256);
	char unknown[40];
	snprintf(unknown, sizeof unknown, "%s", id);
	unknown[strlen(unknown) - 1] = unknown[strlen(unknown) - 1] == 'a' ? 'b' : 'a';
	static const char *const what[][2] = {
		{ "GET", "/v1/tasks/%s" },
		{ "GET", "/v1/tasks/%s/events" },
		{ "POST", "/v1/tasks/%s/cancel" },
	};
	for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
		char p1[96], p2[96];
		snprintf(p1, sizeof p1, what[i][1], id);
		snprintf(p2, sizeof p2, what[i][1], unknown);
		struct h_resp a, b;
		h_req(&a, what[i][0], url, p1, BETA, NULL, NULL);
		h_req(&b, what[i][0], url, p2, BETA, NULL, NULL);
		CHECKF(a.status == 404, "%s %s with another team's token: %ld %s", what[i][0], p1,
		       a.status, a.body);
		CHECK_INT(b.status, 404);
		char *ba = body_without(&a, id), *bb = body_without(&b, unknown);
		CHECKF(strcmp(ba, bb) == 0, "%s: %s vs %s", p1, ba, bb);
		CHECK(strstr(a.body, "alpha") == NULL);
		gwb_free(ba);
		gwb_free(bb);
		h_resp_free(&a);
		h_resp_free(&b);
	}
	/* The owner and the admin still see it, and it was not cancelled. */
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", url, path, ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(json_string_value(json_object_get(r.json, "state")), "queued");
	h_resp_free(&r);
	h_req(&r, "GET", url, path, ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* /v1/info names no file and no internal address to a team; the admin sees them. */
TEST(frontdoor_info_without_paths_for_teams)
{
	const char *env[] = { "GWB_KUBE_SERVER=http://127.0.0.1:1", NULL };
	struct h_server s;
	start(&s, env);
	struct h_resp r;
	h_req(&r, "GET", s.proc.url, "/v1/info", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECKF(strstr(r.body, s.db) == NULL && strstr(r.body, "127.0.0.1:1") == NULL,
	       "a team's /v1/info: %s", r.body);
	CHECK(json_object_get(json_object_get(r.json, "store"), "path") == NULL);
	CHECK(json_object_get(r.json, "cluster_url") == NULL);
	CHECK(json_is_integer(json_object_get(json_object_get(r.json, "store"), "schema_version")));
	CHECK_STR(json_string_value(json_object_get(r.json, "team")), "alpha");
	h_resp_free(&r);
	h_req(&r, "GET", s.proc.url, "/v1/info", ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "store"), "path")),
		  s.db);
	CHECK_STR(json_string_value(json_object_get(r.json, "cluster_url")), "http://127.0.0.1:1");
	h_resp_free(&r);
	h_server_stop(&s);
}

/* /metrics and the detailed /readyz need the admin's or the metrics token; /healthz and the
 * bare /readyz status stay open to probes. */
TEST(frontdoor_metrics_and_readyz_details_need_a_token)
{
	struct h_server s;
	start(&s, NULL);
	const char *url = s.proc.url;
	struct h_resp r;
	const char *refused[] = { NULL, ALPHA, "no-such-token" };
	for (size_t i = 0; i < 3; i++) {
		h_req(&r, "GET", url, "/metrics", refused[i], NULL, NULL);
		CHECKF(r.status == 401, "/metrics with %s: %ld", refused[i] ? refused[i] : "no token",
		       r.status);
		CHECK_STR(h_err_code(&r), "unauthorized");
		CHECK(strstr(r.body, "gwb_team") == NULL);
		h_resp_free(&r);
		h_req(&r, "GET", url, "/readyz", refused[i], NULL, NULL);
		CHECK_INT(r.status, 200);
		CHECK(json_is_true(json_object_get(r.json, "ready")));
		CHECKF(json_object_get(r.json, "dependencies") == NULL && !strstr(r.body, s.db),
		       "/readyz with %s: %s", refused[i] ? refused[i] : "no token", r.body);
		h_resp_free(&r);
	}
	const char *allowed[] = { ADMIN, H_METRICS_TOKEN };
	for (size_t i = 0; i < 2; i++) {
		h_req(&r, "GET", url, "/metrics", allowed[i], NULL, NULL);
		CHECK_INT(r.status, 200);
		CHECK(strstr(r.body, "gwb_team_quota_gpu_memory_mib{team=\"alpha\"}") != NULL);
		h_resp_free(&r);
		h_req(&r, "GET", url, "/readyz", allowed[i], NULL, NULL);
		CHECK_INT(r.status, 200);
		CHECK_STR(json_string_value(json_object_get(
				  json_object_get(json_object_get(r.json, "dependencies"), "store"),
				  "path")),
			  s.db);
		h_resp_free(&r);
	}
	h_req(&r, "GET", url, "/healthz", NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* The state of task id as token sees it. */
static int is_running(const char *url, const char *token, const char *id)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", url, path, token, NULL, NULL);
	const char *st = json_string_value(json_object_get(r.json, "state"));
	int yes = st && strcmp(st, "running") == 0;
	h_resp_free(&r);
	return yes;
}

/* Sums key of every card's object field (allocated, others) in a devices answer. */
static long long cards_sum(const json_t *dev, const char *field, const char *key)
{
	long long sum = 0;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(dev, "cards"), i, c)
		sum += json_integer_value(json_object_get(json_object_get(c, field), key));
	return sum;
}

/* /v1/devices with a team token: its own tasks in full, other teams' only as the capacity
 * they hold ("others" per card, inside "allocated"); the admin sees every task. */
TEST_T(frontdoor_devices_hide_other_teams_tasks, 120)
{
	struct h_stack st;
	h_stack_start(&st, 0, NULL, NULL, "alpha",
		      "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"" ALPHA
		      "\"}");
	const char *url = st.srv.proc.url;
	CHECK_INT(h_team_put(url, st.srv.admin, "beta",
			     "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"" BETA
			     "\"}"),
		  201);
	char a[40], b[40];
	snprintf(a, sizeof a, "%s", submit(url, "alpha", ALPHA, 1024));
	snprintf(b, sizeof b, "%s", submit(url, "beta", BETA, 2048));
	int64_t deadline = clock_mono_ms() + 60000;
	while (!(is_running(url, ALPHA, a) && is_running(url, BETA, b))) {
		CHECKF(clock_mono_ms() < deadline, "the two tasks never ran");
		h_sleep_ms(200);
	}
	struct h_resp r;
	deadline = clock_mono_ms() + 30000;
	for (;;) { /* the picture follows the Pods' annotations */
		h_req(&r, "GET", url, "/v1/devices", ADMIN, NULL, NULL);
		CHECK_INT(r.status, 200);
		if (strstr(r.body, a) && strstr(r.body, b))
			break;
		h_resp_free(&r);
		CHECKF(clock_mono_ms() < deadline, "the admin's devices never showed both tasks");
		h_sleep_ms(200);
	}
	CHECK_INT(cards_sum(r.json, "allocated", "gpu_memory_mib"), 3072);
	h_resp_free(&r);
	h_req(&r, "GET", url, "/v1/devices", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECKF(strstr(r.body, a) != NULL, "alpha's own task is shown: %s", r.body);
	CHECKF(strstr(r.body, b) == NULL, "beta's task id shown to alpha: %s", r.body);
	CHECK_INT(cards_sum(r.json, "allocated", "gpu_memory_mib"), 3072);
	CHECK_INT(cards_sum(r.json, "others", "gpu_memory_mib"), 2048);
	size_t i, k;
	json_t *c, *t;
	json_array_foreach(json_object_get(r.json, "cards"), i, c)
		json_array_foreach(json_object_get(c, "tasks"), k, t)
			CHECK_STR(json_string_value(json_object_get(t, "task")), a);
	h_resp_free(&r);
	h_req(&r, "GET", url, "/v1/devices", BETA, NULL, NULL);
	CHECK(strstr(r.body, a) == NULL && strstr(r.body, b) != NULL);
	CHECK_INT(cards_sum(r.json, "others", "gpu_memory_mib"), 1024);
	h_resp_free(&r);
	h_server_stop(&st.srv);
	h_kubesim_stop(&st.ks);
}
