/* The API's OpenAPI document (docs/openapi.yaml) against a real gwb-server: it is served at
 * /v1/openapi.json as built, every operation's answers match it (the harness checks each
 * answer h_http receives, tests/harness/h_schema.c), and the check refuses an answer with a
 * field renamed, dropped, added or of the wrong type, naming where. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "server/api/openapi_doc.h"
#include "tests/harness/h_schema.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"

static void start(struct h_server *s)
{
	h_server_init(s);
	h_server_start(s);
	h_team_put(s->proc.url, s->admin, "alpha",
		   "{\"gpu_memory_mib\": 8192, \"gpu_core_percent\": 400, "
		   "\"token\": \"" ALPHA "\"}");
	h_team_put(s->proc.url, s->admin, "beta",
		   "{\"gpu_memory_mib\": 8192, \"gpu_core_percent\": 400, "
		   "\"token\": \"" BETA "\"}");
}

/* The id of a new task of alpha's. */
static void submit(struct h_server *s, char *id, size_t len)
{
	struct h_resp r;
	h_req(&r, "POST", s->proc.url, "/v1/tasks", ALPHA,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10}", NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	snprintf(id, len, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
}

/* HEAD path over a raw socket (libcurl would wait for the announced body): the status, and the
 * Content-Length into *len; fails the case when a body follows. */
static long head(struct h_server *s, const char *path, const char *token, long *len)
{
	char req[512];
	snprintf(req, sizeof req,
		 "HEAD %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
		 "Connection: close\r\n\r\n",
		 path, token);
	char *ans = h_raw(s->proc.url, req, strlen(req), 5000);
	long status = 0;
	sscanf(ans, "HTTP/1.1 %ld", &status);
	const char *cl = strcasestr(ans, "\r\nContent-Length: ");
	*len = cl ? strtol(cl + 18, NULL, 10) : -1;
	const char *end = strstr(ans, "\r\n\r\n");
	CHECKF(end && end[4] == '\0', "HEAD %s: a body follows the headers: %s", path, ans);
	gwb_free(ans);
	return status;
}

TEST(openapi_document_is_served_as_built_without_a_token)
{
	struct h_server s;
	start(&s);
	struct h_resp r;
	h_req(&r, "GET", s.proc.url, "/v1/openapi.json", NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(r.body_len, openapi_json_len + 1); /* every JSON answer ends with a newline */
	CHECK(memcmp(r.body, openapi_json, openapi_json_len) == 0);
	CHECK_STR(json_string_value(json_object_get(r.json, "openapi")), "3.1.0");
	CHECK_STR(h_header(&r, "Content-Type"), "application/json");
	h_resp_free(&r);

	long len = -1;
	CHECK_INT(head(&s, "/v1/openapi.json", "not-a-token", &len), 200);
	CHECK_INT(len, openapi_json_len + 1);

	h_req(&r, "POST", s.proc.url, "/v1/openapi.json", NULL, "{}", NULL);
	CHECK_INT(r.status, 405);
	CHECK_STR(h_header(&r, "Allow"), "GET, HEAD");
	h_resp_free(&r);
}

/* Sends one request and checks its status (the harness checks the answer's body). */
static void expect(struct h_server *s, const char *method, const char *path, const char *token,
		   const char *body, long status)
{
	struct h_resp r;
	h_req(&r, method, s->proc.url, path, token, body, NULL);
	CHECKF(r.status == status, "%s %s: %ld, expected %ld: %s", method, path, r.status, status,
	       r.body);
	h_resp_free(&r);
}

TEST(openapi_every_operation_answers_as_the_document_says)
{
	struct h_server s;
	start(&s);
	const char *A = s.admin;
	char id[64], path[160];
	submit(&s, id, sizeof id);
	expect(&s, "POST", "/v1/tasks?dry_run=true", ALPHA,
	       "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10}", 200);
	expect(&s, "POST", "/v1/tasks?dry_run=true", ALPHA,
	       "{\"team\": \"alpha\", \"gpu_memory_mib\": 9999, \"gpu_core_percent\": 10}", 200);
	expect(&s, "POST", "/v1/tasks", ALPHA,
	       "{\"team\": \"alpha\", \"gpu_memory_mib\": 9999, \"gpu_core_percent\": 10}", 403);
	expect(&s, "POST", "/v1/tasks", BETA,
	       "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", 403);
	expect(&s, "POST", "/v1/tasks", A,
	       "{\"team\": \"nobody\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", 404);
	expect(&s, "POST", "/v1/tasks", A, "{\"team\": \"alpha\", \"gpu_count\": 9}", 400);
	expect(&s, "POST", "/v1/tasks", A, "{\"team\": ", 400);
	expect(&s, "GET", "/v1/tasks", A, NULL, 200);
	expect(&s, "GET", "/v1/tasks?team=alpha&state=queued&limit=1", ALPHA, NULL, 200);
	expect(&s, "GET", "/v1/tasks?team=alpha", BETA, NULL, 403);
	expect(&s, "GET", "/v1/tasks?limit=0", A, NULL, 400);
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	expect(&s, "GET", path, ALPHA, NULL, 200);
	long len;
	CHECK_INT(head(&s, path, ALPHA, &len), 200);
	CHECK(len > 0);
	expect(&s, "GET", path, BETA, NULL, 404);
	expect(&s, "DELETE", path, A, NULL, 405);
	snprintf(path, sizeof path, "/v1/tasks/%s/events", id);
	expect(&s, "GET", path, A, NULL, 200);
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	expect(&s, "POST", path, ALPHA, NULL, 202);
	expect(&s, "POST", path, ALPHA, NULL, 200);
	expect(&s, "POST", "/v1/tasks/t-nope/cancel", ALPHA, NULL, 404);
	expect(&s, "GET", "/v1/teams", A, NULL, 200);
	expect(&s, "GET", "/v1/teams", BETA, NULL, 200);
	expect(&s, "GET", "/v1/teams/alpha", ALPHA, NULL, 200);
	expect(&s, "GET", "/v1/teams/alpha", BETA, NULL, 403);
	expect(&s, "GET", "/v1/teams/nobody", A, NULL, 404);
	expect(&s, "PUT", "/v1/teams/gamma", A, "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}",
	       201);
	expect(&s, "PUT", "/v1/teams/gamma", A,
	       "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"token\": \"" BETA "\"}", 409);
	expect(&s, "PUT", "/v1/teams/gamma", ALPHA,
	       "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", 403);
	expect(&s, "GET", "/v1/devices", A, NULL, 503); /* no cluster */
	expect(&s, "GET", "/v1/info", A, NULL, 200);
	expect(&s, "GET", "/v1/info", ALPHA, NULL, 200);
	expect(&s, "GET", "/v1/audit", A, NULL, 200);
	expect(&s, "GET", "/v1/audit", ALPHA, NULL, 403);
	expect(&s, "POST", "/v1/audit/repair", A, NULL, 200);
	expect(&s, "GET", "/v1/stream?bogus=1", A, NULL, 400);
	CHECK_INT(head(&s, "/v1/stream", A, &len), 405);
	expect(&s, "GET", "/v1/nothing", A, NULL, 404);
	expect(&s, "GET", "/v1/info", NULL, NULL, 401);
	expect(&s, "GET", "/v1/info", "wrong-token", NULL, 401);
	expect(&s, "GET", "/healthz", NULL, NULL, 200);
	expect(&s, "GET", "/readyz", NULL, NULL, 200);
	expect(&s, "GET", "/readyz", A, NULL, 200);
	expect(&s, "GET", "/metrics", A, NULL, 200);
	expect(&s, "GET", "/metrics", NULL, NULL, 401);
	expect(&s, "GET", "/", NULL, NULL, 200);
	expect(&s, "GET", "/app.js", NULL, NULL, 200);
	expect(&s, "GET", "/nothing.txt", NULL, NULL, 404);
}

/* Checks a as h_http does, and returns why it fails ("" when it passes), in a static buffer. */
static const char *verdict(const char *method, const char *path, long status, const json_t *v)
{
	static char why[1024];
	char *text = json_dumps(v, JSON_COMPACT);
	struct h_answer a = { method, path, status, "application/json", 1, "", strlen(text), v };
	why[0] = '\0';
	h_schema_check(&a, why, sizeof why);
	gwb_free(text);
	return why;
}

/* A copy of v whose member key (of v, or of its member parent) is renamed, dropped or set. */
static json_t *edited(const json_t *v, const char *parent, const char *key, json_t *value,
		      const char *rename)
{
	json_t *c = json_deep_copy(v);
	json_t *o = parent ? json_object_get(c, parent) : c;
	json_t *old = json_incref(json_object_get(o, key));
	json_object_del(o, key);
	if (rename)
		json_object_set(o, rename, old);
	if (value)
		json_object_set_new(o, key, value);
	json_decref(old);
	return c;
}

TEST(openapi_check_refuses_a_field_renamed_dropped_added_or_mistyped)
{
	struct h_server s;
	start(&s);
	char id[64], path[160];
	submit(&s, id, sizeof id);
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", s.proc.url, path, ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	const json_t *task = r.json;
	CHECK_STR(verdict("GET", path, 200, task), "");

	json_t *bad = edited(task, NULL, "reservation", NULL, "reservations");
	const char *why = verdict("GET", path, 200, bad);
	CHECKF(strstr(why, "\"reservation\" is missing"), "renamed: %s", why);
	json_decref(bad);

	bad = edited(task, "usage", "status", NULL, NULL);
	why = verdict("GET", path, 200, bad);
	CHECKF(strstr(why, "/usage: the required member \"status\" is missing"), "dropped: %s",
	       why);
	json_decref(bad);

	bad = edited(task, NULL, "workloads", json_string("x"), NULL);
	why = verdict("GET", path, 200, bad);
	CHECKF(strstr(why, "\"workloads\" is not in the schema"), "added: %s", why);
	json_decref(bad);

	bad = edited(task, "pod", "waiting", json_pack("{s:s}", "reason", "ErrImagePull"), NULL);
	why = verdict("GET", path, 200, bad);
	CHECKF(strstr(why, "/pod/waiting"), "waiting without its message: %s", why);
	json_decref(bad);

	bad = edited(task, "request", "gpu_count", json_string("1"), NULL);
	why = verdict("GET", path, 200, bad);
	CHECKF(strstr(why, "/request/gpu_count: expected integer, got string"), "type: %s", why);
	json_decref(bad);

	bad = edited(task, NULL, "state", json_string("runnin"), NULL);
	why = verdict("GET", path, 200, bad);
	CHECKF(strstr(why, "/state: \"runnin\" is not one of"), "enum: %s", why);
	json_decref(bad);

	why = verdict("GET", path, 299, task);
	CHECKF(strstr(why, "a status the document does not list"), "status: %s", why);
	h_resp_free(&r);

	/* An error answer with another endpoint's code. */
	h_req(&r, "GET", s.proc.url, "/v1/tasks/t-nope", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 404);
	CHECK_STR(verdict("GET", "/v1/tasks/t-nope", 404, r.json), "");
	bad = edited(r.json, "error", "code", json_string("team_not_found"), NULL);
	why = verdict("GET", "/v1/tasks/t-nope", 404, bad);
	CHECKF(strstr(why, "/error/code"), "error code: %s", why);
	json_decref(bad);
	h_resp_free(&r);
}

TEST(openapi_workloads_policies_and_logs_answer_as_the_document_says)
{
	struct h_server s;
	start(&s);
	const char *A = s.admin;
	expect(&s, "PUT", "/v1/teams/gamma", A,
	       "{\"gpu_memory_mib\": 8192, \"gpu_core_percent\": 400, \"workload_policy\": "
	       "{\"allowed_images\": [\"reg.example.com/gamma/\"], \"cpu\": {\"default\": "
	       "\"500m\", \"max\": \"2\"}, \"memory\": {\"default\": null, \"max\": \"4Gi\"}}}",
	       201);
	expect(&s, "GET", "/v1/teams/gamma", A, NULL, 200);
	expect(&s, "PUT", "/v1/teams/gamma", A,
	       "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"workload_policy\": "
	       "{\"cpu\": {\"default\": \"3\", \"max\": \"2\"}}}",
	       400);
	const char *wl = "{\"team\": \"gamma\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10, "
			 "\"workload\": {\"image\": \"reg.example.com/gamma/train:v3\", \"command\": "
			 "[\"/bin/sh\", \"-c\"], \"args\": [\"exit 0\"], \"env\": {\"EPOCHS\": \"3\"}, "
			 "\"working_dir\": \"/work\", \"memory\": \"1024Mi\"}}";
	struct h_resp r;
	h_req(&r, "POST", s.proc.url, "/v1/tasks", A, wl, NULL);
	CHECKF(r.status == 201, "a workload: %ld %s", r.status, r.body);
	char path[160];
	snprintf(path, sizeof path, "/v1/tasks/%s",
		 json_string_value(json_object_get(r.json, "id")));
	CHECK_STR(json_string_value(json_object_get(json_object_get(r.json, "workload"), "cpu")),
		  "500m");
	h_resp_free(&r);
	expect(&s, "GET", path, A, NULL, 200);
	expect(&s, "GET", "/v1/tasks?team=gamma", A, NULL, 200);
	expect(&s, "POST", "/v1/tasks?dry_run=true", A, wl, 200);
	expect(&s, "POST", "/v1/tasks", A,
	       "{\"team\": \"gamma\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	       "\"workload\": {\"image\": \"docker.io/library/busybox\"}}",
	       403);
	expect(&s, "POST", "/v1/tasks", A,
	       "{\"team\": \"gamma\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	       "\"workload\": {\"image\": \"reg.example.com/gamma/x\", \"cpu\": \"3\"}}",
	       400);
	/* A log: no Pod without a cluster; the query's rules; another team's task. */
	char logs[200];
	snprintf(logs, sizeof logs, "%s/logs?tail=5", path);
	expect(&s, "GET", logs, A, NULL, 409);
	snprintf(logs, sizeof logs, "%s/logs?tail=10001", path);
	expect(&s, "GET", logs, A, NULL, 400);
	snprintf(logs, sizeof logs, "%s/logs?follow=yes", path);
	expect(&s, "GET", logs, A, NULL, 400);
	snprintf(logs, sizeof logs, "%s/logs", path);
	expect(&s, "GET", logs, ALPHA, NULL, 404);
	expect(&s, "GET", logs, NULL, NULL, 401);
	/* The front door's 413 names its limit, as the router's does. */
	char *big = gwb_malloc(70000);
	memset(big, ' ', 69999);
	big[0] = '{';
	big[69998] = '}';
	big[69999] = '\0';
	expect(&s, "POST", "/v1/tasks", A, big, 413);
	gwb_free(big);
}

/* The answer to raw request bytes, checked as h_http checks an answer: "" when it holds. */
static const char *raw_verdict(struct h_server *s, const char *method, const char *path,
			       const char *bytes, long *status)
{
	static char why[1024];
	char *ans = h_raw(s->proc.url, bytes, strlen(bytes), 5000);
	*status = 0;
	sscanf(ans, "HTTP/1.1 %ld", status);
	char *body = strstr(ans, "\r\n\r\n");
	why[0] = '\0';
	if (!body) {
		snprintf(why, sizeof why, "no answer: %s", ans);
		gwb_free(ans);
		return why;
	}
	*body = '\0';
	body += 4;
	const char *eol = strstr(ans, "\r\n");
	json_t *v = json_loads(body, 0, NULL);
	struct h_answer a = { method, path, *status, "application/json", 1, eol ? eol + 2 : "",
			      strlen(body), v };
	h_schema_check(&a, why, sizeof why);
	json_decref(v);
	gwb_free(ans);
	return why;
}

TEST(openapi_front_door_refusals_hold_on_any_path)
{
	struct h_server s;
	start(&s);
	long st;
	CHECK_STR(raw_verdict(&s, "GET", "/v1/teams", "GET /v1/teams HTTP/1.1\r\n\r\n", &st), "");
	CHECK_INT(st, 400); /* missing_host */
	CHECK_STR(raw_verdict(&s, "GET", "/healthz", "GET /healthz HTTP/1.7\r\nHost: x\r\n\r\n",
			      &st),
		  "");
	CHECK_INT(st, 505);
	CHECK_STR(raw_verdict(&s, "POST", "/v1/tasks",
			      "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
			      "Transfer-Encoding: chunked\r\n\r\n{}",
			      &st),
		  "");
	CHECK_INT(st, 400); /* ambiguous_framing */
	/* A front door code under a status it is not documented for is still refused. */
	json_t *v = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "missing_host", "message",
			      "x", "id", "t-nope");
	const char *why = verdict("GET", "/v1/tasks/t-nope", 404, v);
	CHECKF(strstr(why, "/error/code"), "a front door code under 404: %s", why);
	json_decref(v);
}
