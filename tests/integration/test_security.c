/* The API's security promises on real parts: SQL injection through every string the API takes
 * is stored verbatim or refused with a 400 (never a 500, never a changed database), odd and
 * traversing paths never reach a file, the per-token request limit answers 429 with
 * Retry-After, no token or Authorization header reaches any log (server, kubesim, redis),
 * and the admin and team tokens never stand in for each other. */
#include <dirent.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"

static void put_team(const char *url, const char *admin, const char *team, const char *token)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/teams/%s", team);
	json_t *b = json_pack("{s:i, s:i, s:s}", "gpu_memory_mib", 40960, "gpu_core_percent", 800,
			      "token", token);
	char *body = json_dumps(b, JSON_COMPACT);
	json_decref(b);
	struct h_resp r;
	h_req(&r, "PUT", url, path, admin, body, NULL);
	gwb_free(body);
	CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body);
	h_resp_free(&r);
}

/* One integer from a one-row query on the database file (read-only, beside the server). */
static long long db_int(const char *db, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	CHECK_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	CHECKF(sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
	       sqlite3_errmsg(h));
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	long long v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

static void db_intact(const char *db)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	CHECK_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	CHECK_INT(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	CHECK_STR((const char *)sqlite3_column_text(st, 0), "ok");
	sqlite3_finalize(st);
	sqlite3_close(h);
}

/* What a request may answer: anything but a 5xx, and no answer at all is a failure. */
static long req_no5xx(struct h_resp *r, const char *method, const char *url, const char *path,
		      const char *token, const char *body, const char *const *headers)
{
	h_req(r, method, url, path, token, body, headers);
	CHECKF(r->status > 0 && r->status < 500, "%s %s: %ld %s", method, path, r->status,
	       r->body);
	return r->status;
}

/* Percent-encodes s for a URL path segment or query value into out. */
static void pct(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < len; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_') {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
}

static const char *const attacks[] = {
	"x'); DROP TABLE tasks; --",
	"' OR '1'='1",
	"\" OR 1=1 --",
	"a'; DELETE FROM reservations; UPDATE teams SET reserved_mem_mib = 0; --",
	"%' OR name LIKE '%",
	"1 UNION SELECT token_hash FROM teams",
	"Robert'); ATTACH DATABASE '/tmp/x.db' AS x; --",
	"\xc3\xa9t\xc3\xa9 \\' ; /* */ `$(id)`",
};
#define NATTACKS (sizeof attacks / sizeof attacks[0])
/* Idempotency keys are visible ASCII without spaces: the same ideas in that alphabet. */
static const char *const key_attacks[NATTACKS] = {
	"k');DROP/**/TABLE/**/tasks;--",
	"k'OR'1'='1",
	"k\"OR\"1\"=\"1\"--",
	"k';DELETE/**/FROM/**/idempotency_keys;--",
	"k%'OR/**/key/**/LIKE/**/'%",
	"k'/**/UNION/**/SELECT/**/token_hash/**/FROM/**/teams--",
	"k\\';ATTACH/**/'/tmp/x.db'/**/AS/**/x;--",
	"k`$(id)`;/*",
};

TEST_T(security_sql_injection_is_stored_verbatim_or_refused, 90)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, ADMIN, "alpha", ALPHA);
	put_team(url, ADMIN, "beta", BETA);
	long long masters = db_int(s.db, "SELECT COUNT(*) FROM sqlite_master");
	int created = 0;
	char ids[NATTACKS][32];
	for (size_t i = 0; i < NATTACKS; i++) {
		const char *a = attacks[i];
		char enc[512], path[700], hk[300];
		struct h_resp r;
		/* The name and the Idempotency-Key are stored verbatim. */
		json_t *b = json_pack("{s:s, s:s, s:i, s:i}", "team", "alpha", "name", a,
				      "gpu_memory_mib", 256, "gpu_core_percent", 5);
		char *body = json_dumps(b, JSON_COMPACT);
		json_decref(b);
		snprintf(hk, sizeof hk, "Idempotency-Key: %s", key_attacks[i]);
		const char *hdrs[] = { hk, NULL };
		CHECK_INT(req_no5xx(&r, "POST", url, "/v1/tasks", ALPHA, body, hdrs), 201);
		snprintf(ids[i], sizeof ids[i], "%s", json_string_value(json_object_get(r.json, "id")));
		CHECK_STR(json_string_value(json_object_get(r.json, "name")), a);
		h_resp_free(&r);
		created++;
		/* The same key again is a replay of the same task, not a new one. */
		CHECK_INT(req_no5xx(&r, "POST", url, "/v1/tasks", ALPHA, body, hdrs), 200);
		CHECK_STR(json_string_value(json_object_get(r.json, "id")), ids[i]);
		h_resp_free(&r);
		gwb_free(body);
		snprintf(path, sizeof path, "/v1/tasks/%s", ids[i]);
		req_no5xx(&r, "GET", url, path, ALPHA, NULL, NULL);
		CHECK_STR(json_string_value(json_object_get(r.json, "name")), a);
		CHECK_STR(json_string_value(json_object_get(r.json, "idempotency_key")),
			  key_attacks[i]);
		h_resp_free(&r);

		/* The team, in the body, in the path and as a filter: refused by its rule. */
		b = json_pack("{s:s, s:s, s:i, s:i}", "team", a, "name", "n", "gpu_memory_mib",
			      256, "gpu_core_percent", 5);
		body = json_dumps(b, JSON_COMPACT);
		json_decref(b);
		CHECK_INT(req_no5xx(&r, "POST", url, "/v1/tasks", ALPHA, body, NULL), 400);
		h_resp_free(&r);
		CHECK_INT(req_no5xx(&r, "POST", url, "/v1/tasks", ADMIN, body, NULL), 400);
		h_resp_free(&r);
		gwb_free(body);
		pct(a, enc, sizeof enc);
		snprintf(path, sizeof path, "/v1/teams/%s", enc);
		long st = req_no5xx(&r, "GET", url, path, ADMIN, NULL, NULL);
		CHECKF(st == 404 || st == 400, "GET %s: %ld", path, st);
		h_resp_free(&r);
		st = req_no5xx(&r, "PUT", url, path, ADMIN,
			       "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", NULL);
		CHECKF(st == 400 || st == 404, "PUT %s: %ld", path, st); /* a '/' adds a segment */
		h_resp_free(&r);
		static const char *const params[] = { "team", "state", "cursor", "limit" };
		for (size_t k = 0; k < 4; k++) {
			snprintf(path, sizeof path, "/v1/tasks?%s=%s", params[k], enc);
			CHECK_INT(req_no5xx(&r, "GET", url, path, ADMIN, NULL, NULL), 400);
			h_resp_free(&r);
		}
		/* A task id in the path: no such task (or not even an id). */
		snprintf(path, sizeof path, "/v1/tasks/%s", enc);
		st = req_no5xx(&r, "GET", url, path, ADMIN, NULL, NULL);
		CHECKF(st == 404 || st == 400, "GET %s: %ld", path, st);
		h_resp_free(&r);
		snprintf(path, sizeof path, "/v1/tasks/%s/cancel", enc);
		st = req_no5xx(&r, "POST", url, path, ADMIN, NULL, NULL);
		CHECKF(st == 404 || st == 400, "POST %s: %ld", path, st);
		h_resp_free(&r);
		/* As a bearer token: not valid, and nothing else. */
		CHECK_INT(req_no5xx(&r, "GET", url, "/v1/tasks", key_attacks[i], NULL, NULL), 401);
		h_resp_free(&r);
	}
	/* A token with quotes in it is stored as a hash and works for its team only. */
	put_team(url, ADMIN, "gamma", "g'OR'1'='1--");
	struct h_resp r;
	CHECK_INT(req_no5xx(&r, "GET", url, "/v1/teams", "g'OR'1'='1--", NULL, NULL), 200);
	CHECK_INT(json_array_size(json_object_get(r.json, "teams")), 1);
	CHECK_STR(json_string_value(json_object_get(json_array_get(json_object_get(r.json, "teams"),
								   0),
						    "team")),
		  "gamma");
	h_resp_free(&r);
	/* Every name reads back in the list as it was sent. */
	req_no5xx(&r, "GET", url, "/v1/tasks?team=alpha&limit=100", ADMIN, NULL, NULL);
	json_t *tasks = json_object_get(r.json, "tasks");
	CHECK_INT(json_array_size(tasks), created);
	size_t found = 0, i;
	json_t *t;
	json_array_foreach(tasks, i, t)
		for (size_t k = 0; k < NATTACKS; k++)
			found += strcmp(json_string_value(json_object_get(t, "name")),
					attacks[k]) == 0;
	CHECK_INT(found, NATTACKS);
	h_resp_free(&r);
	/* Nothing 5xx, and the database is whole with exactly the rows the API made. */
	req_no5xx(&r, "GET", url, "/metrics", H_METRICS_TOKEN, NULL, NULL);
	CHECKF(strstr(r.body, "gwb_http_replies_total{class=\"5xx\"} 0\n") != NULL, "5xx seen");
	h_resp_free(&r);
	h_server_stop(&s);
	db_intact(s.db);
	CHECK_INT(db_int(s.db, "SELECT COUNT(*) FROM sqlite_master"), masters);
	CHECK_INT(db_int(s.db, "SELECT COUNT(*) FROM tasks"), created);
	CHECK_INT(db_int(s.db, "SELECT COUNT(*) FROM reservations WHERE released = 0"), created);
	CHECK_INT(db_int(s.db, "SELECT COUNT(*) FROM teams"), 3);
	CHECK_INT(db_int(s.db, "SELECT COUNT(*) FROM idempotency_keys"), created);
	CHECK_INT(db_int(s.db, "SELECT reserved_mem_mib FROM teams WHERE name = 'alpha'"),
		  256LL * created);
	CHECK_INT(db_int(s.db, "SELECT reserved_mem_mib FROM teams WHERE name = 'beta'"), 0);
}

/* 1 when the answer carries bytes of a file it must never show. */
static int shows_a_file(const struct h_resp *r)
{
	return r->body && (strstr(r->body, "root:") || strstr(r->body, "SQLite format") ||
			   strstr(r->body, "gwb-server-sentinel"));
}

TEST_T(security_odd_and_traversing_paths_never_reach_a_file, 60)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	const char *url = s.proc.url;
	h_write_file("sentinel.txt", "gwb-server-sentinel\n");
	static const char *const paths[] = {
		"/../../../../etc/passwd",
		"/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
		"/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
		"/v1/../../etc/passwd",
		"/v1/teams/..%2f..%2f..%2fetc%2fpasswd",
		"/v1/tasks/%2e%2e",
		"/v1/./info",
		"/v1//info",
		"/v1/info%00",
		"/v1/tasks%00/../../etc/passwd",
		"/static/../../sentinel.txt",
		"/web/..%5c..%5csentinel.txt",
		"/index.html/../gwb.db",
		"/gwb.db",
		"/sentinel.txt",
		"/.%2e/.%2e/etc/passwd",
	};
	/* Sent raw: an HTTP client library would tidy the dots away before they left. */
	for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
		for (int auth = 0; auth < 2; auth++) {
			char req[1024];
			snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\n%s%s%s"
				 "Connection: close\r\n\r\n",
				 paths[i], auth ? "Authorization: Bearer " : "", auth ? ADMIN : "",
				 auth ? "\r\n" : "");
			char *ans = h_raw(url, req, strlen(req), 5000);
			CHECKF(strncmp(ans, "HTTP/1.1 404 ", 13) == 0 ||
				       strncmp(ans, "HTTP/1.1 400 ", 13) == 0,
			       "%s: %.200s", paths[i], ans);
			struct h_resp r = { .body = ans };
			CHECKF(!shows_a_file(&r), "%s showed a file", paths[i]);
			gwb_free(ans);
		}
	}
	/* A very long path, and a NUL byte sent raw: refused, and the server stays up. */
	size_t n = 20000;
	char *req = gwb_malloc(n + 200);
	memcpy(req, "GET /", 5);
	memset(req + 5, 'a', n);
	snprintf(req + 5 + n, 195, " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
	char *ans = h_raw(url, req, strlen(req), 5000);
	CHECKF(ans[0] == '\0' || strstr(ans, " 400 ") || strstr(ans, " 404 ") ||
		       strstr(ans, " 414 ") || strstr(ans, " 431 ") || strstr(ans, " 413 "),
	       "long path: %.200s", ans);
	gwb_free(ans);
	gwb_free(req);
	static const char nul_req[] = "GET /v1/info\0/../../etc/passwd HTTP/1.1\r\nHost: x\r\n"
				      "Authorization: Bearer " ADMIN "\r\nConnection: close\r\n\r\n";
	ans = h_raw(url, nul_req, sizeof nul_req - 1, 5000);
	CHECKF(strstr(ans, "\"admin\"") == NULL && strstr(ans, "root:") == NULL,
	       "a path with a NUL was answered as another: %.300s", ans);
	gwb_free(ans);
	struct h_resp r;
	h_req(&r, "GET", url, "/healthz", NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* GET /v1/tasks with token; returns the status and copies Retry-After (or "") into ra. */
static long get_tasks(const char *url, const char *token, char *ra, size_t len)
{
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/tasks", token, NULL, NULL);
	long st = r.status;
	const char *h = h_header(&r, "Retry-After");
	snprintf(ra, len, "%s", h ? h : "");
	if (st == 429)
		CHECK_STR(h_err_code(&r), "rate_limited");
	h_resp_free(&r);
	return st;
}

TEST_T(security_per_token_rate_limit_answers_429_with_retry_after, 90)
{
	struct h_server s;
	h_server_init(&s);
	s.env[0] = "GWB_HTTP_RATE_LIMIT_PER_S=1";
	s.env[1] = "GWB_HTTP_RATE_LIMIT_BURST=3";
	s.env[2] = NULL;
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, ADMIN, "alpha", ALPHA);
	put_team(url, ADMIN, "beta", BETA);
	char ra[32];
	/* The burst passes; well past it, 429 with Retry-After in whole seconds. */
	int ok = 0, limited = 0;
	for (int i = 0; i < 12; i++) {
		long st = get_tasks(url, ALPHA, ra, sizeof ra);
		CHECKF(st == 200 || st == 429, "status %ld", st);
		if (st == 200) {
			ok++;
			continue;
		}
		limited++;
		char *end;
		long secs = strtol(ra, &end, 10);
		CHECKF(ra[0] && !*end && secs >= 1 && secs <= 2, "Retry-After '%s'", ra);
	}
	CHECKF(ok >= 3 && limited >= 1, "ok %d limited %d", ok, limited);
	/* Per token: beta's bucket is its own, and the admin is exempt by default. */
	CHECK_INT(get_tasks(url, BETA, ra, sizeof ra), 200);
	for (int i = 0; i < 20; i++)
		CHECK_INT(get_tasks(url, ADMIN, ra, sizeof ra), 200);
	/* No token, or a wrong one: 401 first, never counted against anyone. */
	CHECK_INT(get_tasks(url, NULL, ra, sizeof ra), 401);
	CHECK_INT(get_tasks(url, "not-a-token-at-all", ra, sizeof ra), 401);
	/* After waiting what Retry-After said, alpha is served again. */
	long st = get_tasks(url, ALPHA, ra, sizeof ra);
	if (st == 429) {
		h_sleep_ms((int)strtol(ra, NULL, 10) * 1000 + 100);
		st = get_tasks(url, ALPHA, ra, sizeof ra);
	}
	CHECK_INT(st, 200);
	/* Unauthenticated probes are not limited. */
	for (int i = 0; i < 10; i++) {
		struct h_resp r;
		h_req(&r, "GET", url, "/healthz", NULL, NULL, NULL);
		CHECK_INT(r.status, 200);
		h_resp_free(&r);
	}
	h_server_stop(&s);

	/* A setting limits the admin too. */
	s.env[2] = "GWB_HTTP_RATE_LIMIT_ADMIN=1";
	s.env[3] = NULL;
	h_server_start(&s);
	limited = 0;
	for (int i = 0; i < 12; i++)
		limited += get_tasks(s.proc.url, ADMIN, ra, sizeof ra) == 429;
	CHECK(limited >= 1);
	h_server_stop(&s);

	/* Off by default: a quick run of requests is never limited. */
	s.env[0] = NULL;
	h_server_start(&s);
	put_team(s.proc.url, ADMIN, "alpha", ALPHA);
	for (int i = 0; i < 60; i++)
		CHECK_INT(get_tasks(s.proc.url, ALPHA, ra, sizeof ra), 200);
	h_server_stop(&s);
}

TEST_T(security_admin_and_team_tokens_never_stand_in_for_each_other, 60)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, ADMIN, "alpha", ALPHA);
	put_team(url, ADMIN, "beta", BETA);
	struct h_resp r;
	/* A team cannot be given the admin token as its own. */
	h_req(&r, "PUT", url, "/v1/teams/gamma", ADMIN,
	      "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"token\": \"" ADMIN "\"}", NULL);
	CHECK_INT(r.status, 400);
	h_resp_free(&r);
	/* The admin token is the admin, never a team. */
	h_req(&r, "GET", url, "/v1/info", ADMIN, NULL, NULL);
	CHECK(json_is_true(json_object_get(r.json, "admin")));
	CHECK(json_is_null(json_object_get(r.json, "team")));
	h_resp_free(&r);
	/* A team token is its team, never the admin. */
	h_req(&r, "GET", url, "/v1/info", ALPHA, NULL, NULL);
	CHECK(json_is_false(json_object_get(r.json, "admin")));
	CHECK_STR(json_string_value(json_object_get(r.json, "team")), "alpha");
	h_resp_free(&r);
	/* Everything only the admin may do is refused to a team token. */
	static const char *const admin_only[][3] = {
		{ "PUT", "/v1/teams/alpha", "{\"gpu_memory_mib\": 99999, \"gpu_core_percent\": 1}" },
		{ "PUT", "/v1/teams/newteam", "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}" },
		{ "GET", "/v1/audit", NULL },
		{ "POST", "/v1/audit/repair", NULL },
		{ "GET", "/v1/teams/beta", NULL },
		{ "GET", "/v1/tasks?team=beta", NULL },
	};
	for (size_t i = 0; i < sizeof admin_only / sizeof admin_only[0]; i++) {
		h_req(&r, admin_only[i][0], url, admin_only[i][1], ALPHA, admin_only[i][2], NULL);
		CHECKF(r.status == 403, "%s %s with a team token: %ld", admin_only[i][0],
		       admin_only[i][1], r.status);
		h_resp_free(&r);
	}
	/* A team token acts on its own team only. */
	h_req(&r, "POST", url, "/v1/tasks", BETA,
	      "{\"team\": \"beta\", \"gpu_memory_mib\": 256, \"gpu_core_percent\": 5}", NULL);
	CHECK_INT(r.status, 201);
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel",
		 json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
	h_req(&r, "POST", url, path, ALPHA, NULL, NULL);
	CHECK_INT(r.status, 404); /* another team's task is not found (issue 38) */
	h_resp_free(&r);
	h_req(&r, "POST", url, "/v1/tasks", ALPHA,
	      "{\"team\": \"beta\", \"gpu_memory_mib\": 256, \"gpu_core_percent\": 5}", NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	h_req(&r, "GET", url, "/v1/teams", ALPHA, NULL, NULL);
	CHECK_INT(json_array_size(json_object_get(r.json, "teams")), 1);
	h_resp_free(&r);
	/* Near misses of either token are nobody. */
	static const char *const near[] = { ADMIN "x", "x" ADMIN, "ADMIN-SECRET", "admin-secre",
					    ALPHA "0", "Alpha-token-123", "alpha-token-12", "alpha" };
	for (size_t i = 0; i < sizeof near / sizeof near[0]; i++) {
		h_req(&r, "GET", url, "/v1/info", near[i], NULL, NULL);
		CHECKF(r.status == 401, "token '%s': %ld", near[i], r.status);
		h_resp_free(&r);
	}
	/* Not a bearer scheme: refused, even with the admin token in it. */
	const char *basic[] = { "Authorization: Basic " ADMIN, NULL };
	h_req(&r, "GET", url, "/v1/info", NULL, NULL, basic);
	CHECK_INT(r.status, 401);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* Fails the case when any file under dir (recursively) holds one of the needles. */
static void scan_dir(const char *dir, const char *const *needles, int *files)
{
	DIR *d = opendir(dir);
	CHECKF(d != NULL, "cannot open %s", dir);
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char p[PATH_MAX];
		snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
		struct stat st;
		if (lstat(p, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			scan_dir(p, needles, files);
			continue;
		}
		size_t n = strlen(e->d_name);
		if (!S_ISREG(st.st_mode) || n < 4 || strcmp(e->d_name + n - 4, ".log") != 0)
			continue;
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		(*files)++;
		char *buf = gwb_malloc((size_t)st.st_size + 1);
		size_t got = fread(buf, 1, (size_t)st.st_size, f);
		buf[got] = '\0';
		fclose(f);
		for (const char *const *nd = needles; *nd; nd++) {
			/* memmem: a log may hold NUL bytes; a token found past one still counts. */
			const char *hit = memmem(buf, got, *nd, strlen(*nd));
			CHECKF(!hit, "%s holds '%s': ...%.120s", p, *nd, hit);
		}
		gwb_free(buf);
	}
	closedir(d);
}

TEST_T(security_no_token_or_authorization_header_in_any_log, 120)
{
	/* Known token strings, each used in a way a careless log line would repeat. */
#define SEC_ADMIN "admin-SECRET-7f3a9c"
#define SEC_TEAM "team-SECRET-91c2d4"
#define SEC_WRONG "wrong-SECRET-55e1b0"
#define SEC_QUERY "query-SECRET-0a7e22"
#define SEC_REJECT "reject SECRET 3b9f"
	struct h_redis redis;
	h_redis_start(&redis);
	struct h_kubesim ks;
	h_kubesim_init(&ks);
	snprintf(ks.worker, sizeof ks.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(ks.worker);
	h_kubesim_start(&ks);
	struct h_server s;
	h_server_init(&s);
	snprintf(s.admin, sizeof s.admin, "%s", SEC_ADMIN);
	char kenv[300], renv[PATH_MAX + 32];
	snprintf(kenv, sizeof kenv, "GWB_KUBE_SERVER=%s", ks.url);
	snprintf(renv, sizeof renv, "GWB_REDIS=%s", redis.url);
	s.env[0] = kenv;
	s.env[1] = renv;
	s.env[2] = "GWB_LOG_LEVEL=debug"; /* the most a log can say */
	s.env[3] = "GWB_HTTP_RATE_LIMIT_PER_S=1";
	s.env[4] = "GWB_HTTP_RATE_LIMIT_BURST=2";
	s.env[5] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	s.env[6] = NULL;
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, SEC_ADMIN, "alpha", SEC_TEAM);
	struct h_resp r;
	h_req(&r, "PUT", url, "/v1/teams/beta", SEC_ADMIN,
	      "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"token\": \"" SEC_REJECT "\"}",
	      NULL);
	CHECK_INT(r.status, 400);
	h_resp_free(&r);
	h_req(&r, "POST", url, "/v1/tasks", SEC_TEAM,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 256, \"gpu_core_percent\": 5, "
	      "\"duration_seconds\": 1}",
	      NULL);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);
	h_req(&r, "GET", url, "/v1/tasks", SEC_WRONG, NULL, NULL);
	CHECK_INT(r.status, 401);
	h_resp_free(&r);
	h_req(&r, "GET", url, "/v1/tasks?access_token=" SEC_QUERY, SEC_TEAM, NULL, NULL);
	h_resp_free(&r);
	const char *hdr[] = { "Authorization: Basic " SEC_WRONG, "X-Api-Key: " SEC_WRONG, NULL };
	h_req(&r, "GET", url, "/v1/info", NULL, NULL, hdr);
	CHECK_INT(r.status, 401);
	h_resp_free(&r);
	for (int i = 0; i < 5; i++) { /* past the limit: 429s */
		h_req(&r, "GET", url, "/v1/tasks", SEC_TEAM, NULL, NULL);
		h_resp_free(&r);
	}
	h_req(&r, "GET", url, "/v1/audit", SEC_ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_req(&r, "GET", url, "/v1/audit", SEC_TEAM, NULL, NULL);
	h_resp_free(&r);
	/* Let the task run through the reconciler and kubesim so their logs have their say. */
	int64_t deadline = clock_mono_ms() + 30000;
	for (;;) {
		h_req(&r, "GET", url, "/v1/tasks", SEC_ADMIN, NULL, NULL);
		const char *st = json_string_value(
			json_object_get(json_array_get(json_object_get(r.json, "tasks"), 0), "state"));
		int done = st && strcmp(st, "succeeded") == 0;
		h_resp_free(&r);
		if (done)
			break;
		CHECKF(clock_mono_ms() < deadline, "the task never finished");
		h_sleep_ms(200);
	}
	h_server_stop(&s);
	h_kubesim_stop(&ks);
	h_proc_stop(&redis.proc, 15, 5000);
	static const char *const needles[] = { SEC_ADMIN, SEC_TEAM, SEC_WRONG, SEC_QUERY,
					       "reject SECRET", "Authorization", "Bearer ",
					       "SECRET", NULL };
	int files = 0;
	scan_dir(h_tmpdir(), needles, &files);
	CHECKF(files >= 3, "only %d log files were scanned", files);
	t_log("%d log files scanned", files);
}
