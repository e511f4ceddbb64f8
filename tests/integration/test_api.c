/* The HTTP API of a real gwb-server over a real SQLite file: submission, the quota race over
 * 30 connections, idempotency across kill -9, every bad-input rule, authorization, durability,
 * pagination and the configuration's start-up errors. */
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"

static void put_team(const char *url, const char *team, int mem, int core, const char *token)
{
	char path[128], body[256];
	snprintf(path, sizeof path, "/v1/teams/%s", team);
	snprintf(body, sizeof body, "{\"gpu_memory_mib\": %d, \"gpu_core_percent\": %d%s%s%s}",
		 mem, core, token ? ", \"token\": \"" : "", token ? token : "", token ? "\"" : "");
	struct h_resp r;
	h_req(&r, "PUT", url, path, ADMIN, body, NULL);
	CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body);
	h_resp_free(&r);
}

static const char *url_of(struct h_server *s)
{
	return s->proc.url;
}

/* Starts a server with teams alpha and beta. */
static void start(struct h_server *s, int alpha_mem, int alpha_core)
{
	h_server_init(s);
	h_server_start(s);
	put_team(url_of(s), "alpha", alpha_mem, alpha_core, ALPHA);
	put_team(url_of(s), "beta", 10240, 400, BETA);
}

static long submit(struct h_resp *r, const char *url, const char *token, const char *key,
		   const char *body)
{
	char hk[200];
	snprintf(hk, sizeof hk, "Idempotency-Key: %s", key ? key : "");
	const char *headers[] = { hk, NULL };
	h_req(r, "POST", url, "/v1/tasks", token, body, key ? headers : NULL);
	return r->status;
}

static const char *jstr(json_t *o, const char *path)
{
	/* "a.b.c" walk */
	char buf[128];
	snprintf(buf, sizeof buf, "%s", path);
	json_t *cur = o;
	for (char *tok = buf, *dot; tok; tok = dot) {
		dot = strchr(tok, '.');
		if (dot)
			*dot++ = '\0';
		cur = json_object_get(cur, tok);
	}
	return json_is_string(cur) ? json_string_value(cur) : NULL;
}

static long long jint(json_t *o, const char *path)
{
	char buf[128];
	snprintf(buf, sizeof buf, "%s", path);
	json_t *cur = o;
	for (char *tok = buf, *dot; tok; tok = dot) {
		dot = strchr(tok, '.');
		if (dot)
			*dot++ = '\0';
		cur = json_object_get(cur, tok);
	}
	CHECKF(json_is_integer(cur), "%s is not an integer", path);
	return json_integer_value(cur);
}

static long long team_reserved_mem(const char *url, const char *team)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/teams/%s", team);
	struct h_resp r;
	h_req(&r, "GET", url, path, ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	long long v = jint(r.json, "reserved.gpu_memory_mib");
	h_resp_free(&r);
	return v;
}

#define LAB_TASK "{\"team\": \"alpha\", \"name\": \"demo\", \"gpu_memory_mib\": 1024, " \
		 "\"gpu_core_percent\": 25}"

TEST(api_submit_then_get_shows_reservation_and_unknown_usage)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp r;
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, LAB_TASK), 201);
	const char *id = jstr(r.json, "id");
	CHECK(id && strncmp(id, "t-", 2) == 0 && strlen(id) == 14);
	char loc[64];
	snprintf(loc, sizeof loc, "/v1/tasks/%s", id);
	CHECK_STR(h_header(&r, "Location"), loc);
	CHECK_STR(jstr(r.json, "state"), "queued");
	CHECK_STR(jstr(r.json, "usage.status"), "unknown");
	CHECK_INT(jint(r.json, "reservation.gpu_memory_mib"), 1024);
	char job[32];
	snprintf(job, sizeof job, "gwb-%s", id);
	CHECK_STR(jstr(r.json, "job.name"), job);
	struct h_resp g;
	h_req(&g, "GET", url_of(&s), loc, ALPHA, NULL, NULL);
	CHECK_INT(g.status, 200);
	CHECK_STR(jstr(g.json, "id"), id);
	CHECK_INT(jint(g.json, "request.gpu_core_percent"), 25);
	CHECK_STR(jstr(g.json, "request.qos"), "LS");
	h_resp_free(&g);
	CHECK_INT(team_reserved_mem(url_of(&s), "alpha"), 1024);
	char ev[80];
	snprintf(ev, sizeof ev, "/v1/tasks/%s/events", id);
	h_req(&g, "GET", url_of(&s), ev, ALPHA, NULL, NULL);
	CHECK_INT(g.status, 200);
	json_t *first = json_array_get(json_object_get(g.json, "events"), 0);
	CHECK_STR(jstr(first, "type"), "submitted");
	CHECK_STR(jstr(first, "to"), "queued");
	h_resp_free(&g);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* A body read straight from its text and one that needs jansson (escapes) give the same
 * task: every field taken, defaults where one is missing. */
TEST(api_submit_body_with_escapes_reads_as_a_plain_one)
{
	struct h_server s;
	start(&s, 10240, 400);
	static const char *const bodies[] = {
		"{\"team\":\"alpha\",\"name\":\"caf\xc3\xa9 \\\"x\\\"\",\"gpu_memory_mib\":512,"
		"\"gpu_core_percent\":10,\"gpu_count\":2,\"duration_seconds\":90,\"qos\":\"BE\","
		"\"experiment\":\"overlimit\"}",
		"{\"team\":\"alpha\",\"name\":\"caf\\u00e9 \\\"x\\\"\",\"gpu_memory_mib\":512,"
		"\"gpu_core_percent\":10,\"gpu_count\":2,\"duration_seconds\":90,\"qos\":\"B\\u0045\","
		"\"experiment\":\"overlimit\"}",
	};
	for (int i = 0; i < 2; i++) {
		struct h_resp r;
		CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, bodies[i]), 201);
		CHECK_STR(jstr(r.json, "name"), "caf\xc3\xa9 \"x\"");
		CHECK_STR(jstr(r.json, "request.qos"), "BE");
		CHECK_STR(jstr(r.json, "request.experiment"), "overlimit");
		CHECK_INT(jint(r.json, "request.gpu_count"), 2);
		CHECK_INT(jint(r.json, "request.duration_seconds"), 90);
		CHECK_INT(jint(r.json, "reservation.gpu_memory_mib"), 1024);
		h_resp_free(&r);
	}
	struct h_resp r;
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL,
			 " {\"gpu_core_percent\" : 5 , \"team\" : \"alpha\", \"gpu_memory_mib\":1}\n"),
		  201);
	CHECK_STR(jstr(r.json, "name"), "task");
	CHECK_STR(jstr(r.json, "request.qos"), "LS");
	CHECK_INT(jint(r.json, "request.duration_seconds"), 60);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* Header names in any case: the body's type and the key are found as well. */
TEST(api_header_names_are_case_insensitive)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp r;
	const char *lower[] = { "content-type: application/json", "idempotency-key: case-1",
				NULL };
	h_req(&r, "POST", url_of(&s), "/v1/tasks", ALPHA, LAB_TASK, lower);
	CHECK_INT(r.status, 201);
	char id[32];
	snprintf(id, sizeof id, "%s", jstr(r.json, "id"));
	h_resp_free(&r);
	const char *upper[] = { "CONTENT-TYPE: application/json", "IDEMPOTENCY-KEY: case-1",
				NULL };
	h_req(&r, "POST", url_of(&s), "/v1/tasks", ALPHA, LAB_TASK, upper);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "id"), id);
	CHECK_STR(h_header(&r, "Idempotent-Replayed"), "true");
	h_resp_free(&r);
	const char *text[] = { "CONTENT-type: text/plain", NULL };
	h_req(&r, "POST", url_of(&s), "/v1/tasks", ALPHA, LAB_TASK, text);
	CHECK_INT(r.status, 415);
	h_resp_free(&r);
	h_server_stop(&s);
}

TEST(api_request_larger_than_any_card_is_accepted_within_quota)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp r;
	/* 9 GiB never fits an 8 GiB card, but the quota decides admission; the pending
	 * diagnosis explains it later. */
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL,
			 "{\"team\": \"alpha\", \"gpu_memory_mib\": 9216, \"gpu_core_percent\": 50}"),
		  201);
	h_resp_free(&r);
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL,
			 "{\"team\": \"alpha\", \"gpu_memory_mib\": 2048, \"gpu_core_percent\": 5}"),
		  403);
	CHECK_STR(h_err_code(&r), "quota_exceeded");
	json_t *e = json_object_get(r.json, "error");
	CHECK_INT(jint(e, "requested.gpu_memory_mib"), 2048);
	CHECK_INT(jint(e, "reserved.gpu_memory_mib"), 9216);
	CHECK_INT(jint(e, "quota.gpu_memory_mib"), 10240);
	h_resp_free(&r);
}

TEST_T(api_http_race_30_connections_exactly_two_accepted, 120)
{
	struct h_server s;
	start(&s, 2048, 400);
	enum { N = 30 };
	int gate[2];
	CHECK(pipe(gate) == 0);
	pid_t pids[N];
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			close(gate[1]);
			char b;
			if (read(gate[0], &b, 1) < 0)
				_exit(20);
			struct h_resp r;
			char url[300];
			snprintf(url, sizeof url, "%s/v1/tasks", url_of(&s));
			h_http(&r, "POST", url, ALPHA, LAB_TASK, NULL);
			int code = r.status == 201 ? 0
				   : r.status == 403 && strcmp(h_err_code(&r), "quota_exceeded") == 0
					   ? 3
					   : 10;
			_exit(code);
		}
	}
	close(gate[0]);
	close(gate[1]);
	int created = 0, refused = 0, other = 0;
	for (int i = 0; i < N; i++) {
		int st;
		waitpid(pids[i], &st, 0);
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
		created += code == 0;
		refused += code == 3;
		other += code != 0 && code != 3;
	}
	CHECK_INT(other, 0);
	CHECK_INT(created, 2);
	CHECK_INT(refused, 28);
	CHECK_INT(team_reserved_mem(url_of(&s), "alpha"), 2048);
	h_server_stop(&s);
}

TEST(api_idempotency_replay_conflict_scope_and_kill9)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp a, b;
	CHECK_INT(submit(&a, url_of(&s), ALPHA, "lab-1", LAB_TASK), 201);
	const char *id = jstr(a.json, "id");
	CHECK_INT(submit(&b, url_of(&s), ALPHA, "lab-1", LAB_TASK), 200);
	CHECK_STR(h_header(&b, "Idempotent-Replayed"), "true");
	CHECK_STR(jstr(b.json, "id"), id);
	h_resp_free(&b);
	/* The same parameters written differently (defaults spelled out) are the same request. */
	CHECK_INT(submit(&b, url_of(&s), ALPHA, "lab-1",
			 "{\"gpu_core_percent\": 25, \"qos\": \"LS\", \"gpu_count\": 1, "
			 "\"duration_seconds\": 60, \"experiment\": \"normal\", \"team\": "
			 "\"alpha\", \"name\": \"demo\", \"gpu_memory_mib\": 1024}"),
		  200);
	h_resp_free(&b);
	CHECK_INT(submit(&b, url_of(&s), ALPHA, "lab-1",
			 "{\"team\": \"alpha\", \"name\": \"demo\", \"gpu_memory_mib\": 2048, "
			 "\"gpu_core_percent\": 25}"),
		  409);
	CHECK_STR(h_err_code(&b), "idempotency_key_reused");
	h_resp_free(&b);
	CHECK_INT(team_reserved_mem(url_of(&s), "alpha"), 1024);
	/* Keys are scoped by team: beta's "lab-1" is its own. */
	CHECK_INT(submit(&b, url_of(&s), BETA, "lab-1",
			 "{\"team\": \"beta\", \"name\": \"demo\", \"gpu_memory_mib\": 1024, "
			 "\"gpu_core_percent\": 25}"),
		  201);
	CHECK(strcmp(jstr(b.json, "id"), id) != 0);
	h_resp_free(&b);
	/* The key survives kill -9. */
	h_server_kill9(&s);
	h_server_start(&s);
	CHECK_INT(submit(&b, url_of(&s), ALPHA, "lab-1", LAB_TASK), 200);
	CHECK_STR(jstr(b.json, "id"), id);
	h_resp_free(&b);
	CHECK_INT(team_reserved_mem(url_of(&s), "alpha"), 1024);
	h_resp_free(&a);
	h_server_stop(&s);
}

struct bad_case {
	const char *name;
	const char *content_type; /* NULL: application/json */
	const char *body;
	const char *key;          /* Idempotency-Key, NULL for none */
	long status;
	const char *code;
	const char *field;        /* expected error.field, or NULL */
};

static const struct bad_case bad_cases[] = {
	{ "malformed JSON", NULL, "{\"team\": \"alpha\",", NULL, 400, "invalid_json", NULL },
	{ "not an object", NULL, "[1, 2]", NULL, 400, "invalid_json", NULL },
	{ "invalid UTF-8", NULL, "{\"team\": \"alpha\", \"name\": \"\xc3\x28\"}", NULL, 400,
	  "invalid_utf8", NULL },
	{ "duplicate key", NULL, "{\"team\": \"alpha\", \"team\": \"beta\"}", NULL, 400,
	  "invalid_json", NULL },
	{ "unknown field", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": "
	  "1, \"priority\": 5}", NULL, 400, "invalid_field", "priority" },
	{ "team missing", NULL, "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", NULL, 400,
	  "invalid_field", "team" },
	{ "team not a label", NULL, "{\"team\": \"Alpha_1\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "team" },
	{ "memory missing", NULL, "{\"team\": \"alpha\", \"gpu_core_percent\": 1}", NULL, 400,
	  "invalid_field", "gpu_memory_mib" },
	{ "memory as string", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": \"1024\", "
	  "\"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "gpu_memory_mib" },
	{ "memory as real", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024.0, "
	  "\"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "gpu_memory_mib" },
	{ "memory zero", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 0, \"gpu_core_percent\": 1}",
	  NULL, 400, "invalid_field", "gpu_memory_mib" },
	{ "memory too large", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1048577, "
	  "\"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "gpu_memory_mib" },
	{ "core zero", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 0}",
	  NULL, 400, "invalid_field", "gpu_core_percent" },
	{ "core above 100", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": 101}", NULL, 400, "invalid_field", "gpu_core_percent" },
	{ "memory null", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": null, "
	  "\"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "gpu_memory_mib" },
	{ "qos as integer", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": 1, \"qos\": 1}", NULL, 400, "invalid_field", "qos" },
	{ "core as bool", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": true}", NULL, 400, "invalid_field", "gpu_core_percent" },
	{ "count zero", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	  "\"gpu_count\": 0}", NULL, 400, "invalid_field", "gpu_count" },
	{ "count nine", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	  "\"gpu_count\": 9}", NULL, 400, "invalid_field", "gpu_count" },
	{ "duration zero", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": "
	  "1, \"duration_seconds\": 0}", NULL, 400, "invalid_field", "duration_seconds" },
	{ "duration above a day", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": 1, \"duration_seconds\": 86401}", NULL, 400, "invalid_field",
	  "duration_seconds" },
	{ "qos unknown", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	  "\"qos\": \"LSR\"}", NULL, 400, "invalid_field", "qos" },
	{ "experiment unknown", NULL, "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": 1, \"experiment\": \"oom\"}", NULL, 400, "invalid_field",
	  "experiment" },
	{ "name empty", NULL, "{\"team\": \"alpha\", \"name\": \"\", \"gpu_memory_mib\": 1, "
	  "\"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "name" },
	{ "name with control", NULL, "{\"team\": \"alpha\", \"name\": \"a\\u0007b\", "
	  "\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", NULL, 400, "invalid_field", "name" },
	{ "key with space", NULL, LAB_TASK, "a b", 400, "invalid_field", "Idempotency-Key" },
	{ "key too long", NULL, LAB_TASK,
	  "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
	  "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk", 400, "invalid_field", "Idempotency-Key" },
	{ "text/plain", "Content-Type: text/plain", LAB_TASK, NULL, 415, "unsupported_media_type",
	  NULL },
	{ "form encoding", "Content-Type: application/x-www-form-urlencoded", LAB_TASK, NULL, 415,
	  "unsupported_media_type", NULL },
};

TEST(api_bad_input_each_rule_and_nothing_stored)
{
	struct h_server s;
	start(&s, 10240, 400);
	for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
		const struct bad_case *c = &bad_cases[i];
		char hk[300];
		const char *headers[3] = { 0 };
		int n = 0;
		if (c->content_type)
			headers[n++] = c->content_type;
		if (c->key) {
			snprintf(hk, sizeof hk, "Idempotency-Key: %s", c->key);
			headers[n++] = hk;
		}
		struct h_resp r;
		h_req(&r, "POST", url_of(&s), "/v1/tasks", ALPHA, c->body, headers);
		CHECKF(r.status == c->status, "%s: status %ld, expected %ld (%s)", c->name,
		       r.status, c->status, r.body);
		CHECKF(strcmp(h_err_code(&r), c->code) == 0, "%s: code %s, expected %s", c->name,
		       h_err_code(&r), c->code);
		CHECKF(strstr(h_header(&r, "Content-Type") ? h_header(&r, "Content-Type") : "",
			      "application/json") != NULL,
		       "%s: error is not JSON", c->name);
		if (c->field) {
			const char *f = jstr(r.json, "error.field");
			CHECKF(f && strcmp(f, c->field) == 0, "%s: field %s, expected %s",
			       c->name, f ? f : "(none)", c->field);
		}
		h_resp_free(&r);
	}
	/* Malformed JSON says where. */
	struct h_resp r;
	h_req(&r, "POST", url_of(&s), "/v1/tasks", ALPHA, "{\"team\":\n  \"alpha\" x}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_INT(jint(r.json, "error.line"), 2);
	CHECK(jint(r.json, "error.position") > 0);
	h_resp_free(&r);
	/* A body past the cap: 413 with a JSON error. */
	size_t big = 70000;
	char *body = gwb_malloc(big + 1);
	memset(body, ' ', big);
	memcpy(body, "{\"team\": \"alpha\"", 16);
	body[big - 1] = '}';
	body[big] = '\0';
	h_req(&r, "POST", url_of(&s), "/v1/tasks", ALPHA, body, NULL);
	CHECK_INT(r.status, 413);
	CHECK_STR(h_err_code(&r), "body_too_large");
	h_resp_free(&r);
	gwb_free(body);
	/* No Content-Type at all. */
	char raw[512];
	snprintf(raw, sizeof raw,
		 "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
		 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		 ALPHA, strlen(LAB_TASK), LAB_TASK);
	char *ans = h_raw(url_of(&s), raw, strlen(raw), 5000);
	CHECKF(strstr(ans, " 415 ") && strstr(ans, "unsupported_media_type"), "got: %s", ans);
	gwb_free(ans);
	/* Garbage on the wire does not hurt the server. */
	const char *junk = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 not http at all\r\n\r\n";
	ans = h_raw(url_of(&s), junk, strlen(junk), 1000);
	gwb_free(ans);
	/* Query and routing errors. */
	static const struct {
		const char *method, *path;
		long status;
		const char *code;
	} q[] = {
		{ "GET", "/v1/tasks?limit=0", 400, "invalid_field" },
		{ "GET", "/v1/tasks?limit=501", 400, "invalid_field" },
		{ "GET", "/v1/tasks?cursor=abc", 400, "invalid_field" },
		{ "GET", "/v1/tasks?state=sleeping", 400, "invalid_field" },
		{ "GET", "/v1/tasks?colour=red", 400, "invalid_field" },
		{ "DELETE", "/v1/tasks", 405, "method_not_allowed" },
		{ "GET", "/v1/nothing", 404, "not_found" },
		{ "GET", "/v1/tasks/t-doesnotexist", 404, "not_found" },
		{ "GET", "/v1/tasks/..%2f..%2fetc", 404, "not_found" },
	};
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
		h_req(&r, q[i].method, url_of(&s), q[i].path, ALPHA, NULL, NULL);
		CHECKF(r.status == q[i].status && strcmp(h_err_code(&r), q[i].code) == 0,
		       "%s %s: %ld %s", q[i].method, q[i].path, r.status, r.body);
		h_resp_free(&r);
	}
	/* The server still answers, nothing was stored, and the database is intact. */
	h_req(&r, "GET", url_of(&s), "/healthz", NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/tasks", ADMIN, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "tasks")), 0);
	h_resp_free(&r);
	CHECK_INT(team_reserved_mem(url_of(&s), "alpha"), 0);
	h_server_stop(&s);
	sqlite3 *db;
	CHECK_INT(sqlite3_open_v2(s.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_stmt *st;
	CHECK_INT(sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	CHECK_STR((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	sqlite3_close(db);
}

TEST(api_authorization_tokens_and_teams)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp r;
	h_req(&r, "GET", url_of(&s), "/v1/tasks", NULL, NULL, NULL);
	CHECK_INT(r.status, 401);
	CHECK_STR(h_err_code(&r), "unauthorized");
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/tasks", "wrong-token", NULL, NULL);
	CHECK_INT(r.status, 401);
	h_resp_free(&r);
	/* beta's token cannot submit for alpha. */
	CHECK_INT(submit(&r, url_of(&s), BETA, NULL, LAB_TASK), 403);
	CHECK_STR(h_err_code(&r), "forbidden");
	h_resp_free(&r);
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, LAB_TASK), 201);
	char path[64];
	snprintf(path, sizeof path, "/v1/tasks/%s", jstr(r.json, "id"));
	h_resp_free(&r);
	/* Another team's task answers as an unknown one (issue 38). */
	h_req(&r, "GET", url_of(&s), path, BETA, NULL, NULL);
	CHECK_INT(r.status, 404);
	CHECK_STR(h_err_code(&r), "not_found");
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), path, ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	/* beta lists its own (none); asking for alpha's is refused; the admin sees alpha's. */
	h_req(&r, "GET", url_of(&s), "/v1/tasks", BETA, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(json_array_size(json_object_get(r.json, "tasks")), 0);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/tasks?team=alpha", BETA, NULL, NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/tasks", ADMIN, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "tasks")), 1);
	h_resp_free(&r);
	/* Teams: a team sees only itself; only the admin sets quotas. */
	h_req(&r, "GET", url_of(&s), "/v1/teams", BETA, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "teams")), 1);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/teams", ADMIN, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "teams")), 2);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/teams/alpha", BETA, NULL, NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	h_req(&r, "PUT", url_of(&s), "/v1/teams/beta", BETA,
	      "{\"gpu_memory_mib\": 99999, \"gpu_core_percent\": 999}", NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	/* A token is stored as a hash only, and may not be shared by two teams. */
	h_req(&r, "PUT", url_of(&s), "/v1/teams/gamma", ADMIN,
	      "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"token\": \"" ALPHA "\"}", NULL);
	CHECK_INT(r.status, 409);
	h_resp_free(&r);
	h_server_stop(&s);
	FILE *f = fopen(s.db, "rb");
	CHECK(f != NULL);
	char buf[65536];
	size_t n;
	int found = 0;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		found |= memmem(buf, n, ALPHA, strlen(ALPHA)) != NULL;
	fclose(f);
	CHECKF(!found, "the team token is stored in clear");
}

/* The server remembers the tokens it found; a PUT that changes a team's token is obeyed from
 * the next request on: the old token is refused at once, the new one accepted, and a token
 * handed from one team to another acts for its new team only. */
TEST(api_token_change_takes_effect_at_once)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp r;
	for (int i = 0; i < 3; i++) { /* found, then remembered */
		h_req(&r, "GET", url_of(&s), "/v1/teams", ALPHA, NULL, NULL);
		CHECK_INT(r.status, 200);
		h_resp_free(&r);
	}
	put_team(url_of(&s), "alpha", 10240, 400, "alpha-second-token");
	h_req(&r, "GET", url_of(&s), "/v1/teams", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 401);
	CHECK_STR(h_err_code(&r), "unauthorized");
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/teams/alpha", "alpha-second-token", NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	/* beta takes alpha's first token: it now acts for beta, never for alpha. */
	h_req(&r, "GET", url_of(&s), "/v1/teams/beta", BETA, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	put_team(url_of(&s), "beta", 10240, 400, ALPHA);
	h_req(&r, "GET", url_of(&s), "/v1/teams/beta", BETA, NULL, NULL);
	CHECK_INT(r.status, 401);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/teams/beta", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/teams/alpha", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* Many teams' tokens, more than the server's memo of token hashes has slots, used in turn:
 * each acts for its own team every time, and a token one character off any of them, of the
 * same length, is refused. */
TEST(api_many_tokens_each_acts_for_its_own_team)
{
	struct h_server s;
	start(&s, 10240, 400);
	enum { NT = 40 };
	char team[NT][16], tok[NT][40];
	for (int i = 0; i < NT; i++) {
		snprintf(team[i], sizeof team[i], "team%02d", i);
		snprintf(tok[i], sizeof tok[i], "memo-token-%02d-0123456789", i);
		put_team(url_of(&s), team[i], 1024, 100, tok[i]);
	}
	struct h_resp r;
	for (int round = 0; round < 3; round++) {
		for (int k = 0; k < NT; k++) {
			int i = (k * 7 + round) % NT; /* a different order each round */
			h_req(&r, "GET", url_of(&s), "/v1/teams", tok[i], NULL, NULL);
			CHECK_INT(r.status, 200);
			json_t *teams = json_object_get(r.json, "teams");
			CHECK_INT(json_array_size(teams), 1);
			CHECK_STR(json_string_value(json_object_get(json_array_get(teams, 0), "team")),
				  team[i]);
			h_resp_free(&r);
			char near[40];
			snprintf(near, sizeof near, "%s", tok[i]);
			near[strlen(near) - 1] = 'x';
			h_req(&r, "GET", url_of(&s), "/v1/teams", near, NULL, NULL);
			CHECK_INT(r.status, 401);
			h_resp_free(&r);
		}
	}
	h_server_stop(&s);
}

TEST(api_team_put_validation_and_lowered_quota)
{
	struct h_server s;
	start(&s, 10240, 400);
	struct h_resp r;
	h_req(&r, "PUT", url_of(&s), "/v1/teams/alpha", ADMIN, "{\"gpu_memory_mib\": -1, "
	      "\"gpu_core_percent\": 1}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_STR(jstr(r.json, "error.field"), "gpu_memory_mib");
	h_resp_free(&r);
	h_req(&r, "PUT", url_of(&s), "/v1/teams/BAD_NAME", ADMIN, "{\"gpu_memory_mib\": 1, "
	      "\"gpu_core_percent\": 1}", NULL);
	CHECK_INT(r.status, 400);
	h_resp_free(&r);
	h_req(&r, "PUT", url_of(&s), "/v1/teams/alpha", ADMIN, "{\"gpu_memory_mib\": 1, "
	      "\"gpu_core_percent\": 1, \"token\": \"short\"}", NULL);
	CHECK_INT(r.status, 400);
	CHECK_STR(jstr(r.json, "error.field"), "token");
	h_resp_free(&r);
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, LAB_TASK), 201);
	h_resp_free(&r);
	/* Lowered below the reservation: allowed (200), available 0, new work refused. */
	h_req(&r, "PUT", url_of(&s), "/v1/teams/alpha", ADMIN, "{\"gpu_memory_mib\": 512, "
	      "\"gpu_core_percent\": 400}", NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(jint(r.json, "available.gpu_memory_mib"), 0);
	CHECK_INT(jint(r.json, "reserved.gpu_memory_mib"), 1024);
	CHECK_INT(jint(r.json, "active_tasks"), 1);
	h_resp_free(&r);
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL,
			 "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}"),
		  403);
	h_resp_free(&r);
	/* The token still works after a quota change that does not name one. */
	h_req(&r, "GET", url_of(&s), "/v1/teams/alpha", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_server_stop(&s);
}

TEST_T(api_acknowledged_tasks_survive_kill9, 120)
{
	struct h_server s;
	start(&s, 1 << 20, 100000);
	char ids[20][32];
	for (int i = 0; i < 20; i++) {
		struct h_resp r;
		CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, LAB_TASK), 201);
		snprintf(ids[i], sizeof ids[i], "%s", jstr(r.json, "id"));
		h_resp_free(&r);
	}
	h_server_kill9(&s);
	h_server_start(&s);
	for (int i = 0; i < 20; i++) {
		char path[64];
		snprintf(path, sizeof path, "/v1/tasks/%s", ids[i]);
		struct h_resp r;
		h_req(&r, "GET", url_of(&s), path, ALPHA, NULL, NULL);
		CHECKF(r.status == 200, "%s lost after kill -9", ids[i]);
		CHECK_INT(jint(r.json, "reservation.gpu_memory_mib"), 1024);
		h_resp_free(&r);
	}
	CHECK_INT(team_reserved_mem(url_of(&s), "alpha"), 20 * 1024);
	h_server_stop(&s);
}

TEST(api_list_pagination_and_filters)
{
	struct h_server s;
	start(&s, 1 << 20, 100000);
	for (int i = 0; i < 7; i++) {
		struct h_resp r;
		CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, LAB_TASK), 201);
		h_resp_free(&r);
	}
	char path[128] = "/v1/tasks?limit=3";
	int pages = 0, total = 0;
	char seen[8][32];
	for (;;) {
		struct h_resp r;
		h_req(&r, "GET", url_of(&s), path, ALPHA, NULL, NULL);
		CHECK_INT(r.status, 200);
		json_t *tasks = json_object_get(r.json, "tasks");
		for (size_t i = 0; i < json_array_size(tasks); i++) {
			const char *id = jstr(json_array_get(tasks, i), "id");
			for (int k = 0; k < total; k++)
				CHECKF(strcmp(seen[k], id) != 0, "%s listed twice", id);
			CHECK(total < 8);
			snprintf(seen[total++], sizeof seen[0], "%s", id);
		}
		pages++;
		const char *next = jstr(r.json, "next_cursor");
		if (!next) {
			h_resp_free(&r);
			break;
		}
		snprintf(path, sizeof path, "/v1/tasks?limit=3&cursor=%s", next);
		h_resp_free(&r);
		CHECK(pages < 10);
	}
	CHECK_INT(pages, 3);
	CHECK_INT(total, 7);
	struct h_resp r;
	h_req(&r, "GET", url_of(&s), "/v1/tasks?state=queued&team=alpha", ADMIN, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "tasks")), 7);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/v1/tasks?state=running", ADMIN, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "tasks")), 0);
	h_resp_free(&r);
	h_server_stop(&s);
}

TEST(api_info_healthz_readyz)
{
	struct h_server s;
	start(&s, 10, 10);
	struct h_resp r;
	h_req(&r, "GET", url_of(&s), "/v1/info", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "mode"), "sim");
	CHECK_STR(jstr(r.json, "namespace"), "gpu-workbench");
	CHECK(jstr(r.json, "version") != NULL);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/readyz", H_METRICS_TOKEN, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(jstr(r.json, "dependencies.store.state"), "ok");
	CHECK(json_object_get(json_object_get(r.json, "dependencies"), "redis") != NULL);
	CHECK(json_object_get(json_object_get(r.json, "dependencies"), "kube") != NULL);
	h_resp_free(&r);
	/* /metrics: the metrics token reads it; the numbers follow the store. */
	put_team(url_of(&s), "alpha", 10240, 400, NULL);
	CHECK_INT(submit(&r, url_of(&s), ALPHA, NULL, LAB_TASK), 201);
	h_resp_free(&r);
	h_req(&r, "GET", url_of(&s), "/metrics", H_METRICS_TOKEN, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECKF(strstr(r.body, "gwb_tasks{state=\"queued\"} 1\n") != NULL, "%s", r.body);
	CHECK(strstr(r.body, "gwb_team_reserved_gpu_memory_mib{team=\"alpha\"} 1024\n") != NULL);
	CHECK(strstr(r.body, "gwb_team_quota_gpu_core_percent{team=\"alpha\"} 400\n") != NULL);
	CHECK(strstr(r.body, "gwb_alloc_bytes ") != NULL);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* Runs gwb-server with env and args, expecting it to refuse to start; returns its log. */
static char *start_fails(const char *const *env, const char *const *args)
{
	const char *argv[8] = { h_bin("gwb-server") };
	int n = 1;
	for (const char *const *a = args; a && *a && n < 7; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	struct h_proc p;
	CHECK(h_proc_start(&p, argv, env, NULL, 0) == 0);
	for (int i = 0; i < 500 && h_proc_alive(&p); i++)
		h_sleep_ms(10);
	int code = h_proc_stop(&p, SIGKILL, 100);
	CHECKF(code == 2, "exit %d, expected 2", code);
	FILE *f = fopen(p.log, "r");
	char *buf = gwb_calloc(1, 4096);
	if (f) {
		size_t got = fread(buf, 1, 4095, f);
		buf[got] = '\0';
		fclose(f);
	}
	return buf;
}

TEST(config_invalid_values_are_fatal_with_origin)
{
	const char *db = h_path("c.db");
	char dbenv[300];
	snprintf(dbenv, sizeof dbenv, "GWB_DB=%s", db);
	const char *env1[] = { dbenv, "GWB_LISTEN=127.0.0.1:99999", NULL };
	char *log = start_fails(env1, NULL);
	CHECKF(strstr(log, "GWB_LISTEN") != NULL, "log: %s", log);
	gwb_free(log);
	const char *env2[] = { dbenv, "GWB_REDIS=http://nope", NULL };
	log = start_fails(env2, NULL);
	CHECKF(strstr(log, "GWB_REDIS") != NULL, "log: %s", log);
	gwb_free(log);
	const char *conf = h_path("gwb.conf");
	FILE *f = fopen(conf, "w");
	fprintf(f, "# comment\nlisten = 127.0.0.1:0\n\nhttp.max_body_bytes = lots\n");
	fclose(f);
	const char *env3[] = { dbenv, NULL };
	const char *args3[] = { "-c", conf, NULL };
	log = start_fails(env3, args3);
	char want[400];
	snprintf(want, sizeof want, "%s:4:", conf);
	CHECKF(strstr(log, want) && strstr(log, "http.max_body_bytes"), "log: %s", log);
	gwb_free(log);
	const char *args4[] = { "--no-such-setting=1", NULL };
	log = start_fails(env3, args4);
	CHECKF(strstr(log, "no-such-setting") != NULL, "log: %s", log);
	gwb_free(log);
	/* Flags win over the environment, which wins over the file. */
	f = fopen(conf, "w");
	fprintf(f, "listen = \"127.0.0.1:1\"\nkube.namespace = from-file\n");
	fclose(f);
	const char *env5[] = { dbenv, "GWB_NAMESPACE=from-env", "GWB_ADMIN_TOKEN=" ADMIN, NULL };
	const char *argv5[] = { h_bin("gwb-server"), "-c", conf, "--listen", "127.0.0.1:0", NULL };
	struct h_proc p;
	CHECK(h_proc_start(&p, argv5, env5, "gwb-server listening on", 10000) == 0);
	struct h_resp r;
	h_req(&r, "GET", p.url, "/v1/info", ADMIN, NULL, NULL);
	CHECK_STR(jstr(r.json, "namespace"), "from-env");
	h_resp_free(&r);
	CHECK_INT(h_proc_stop(&p, SIGTERM, 5000), 0);
}
