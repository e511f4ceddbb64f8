/* The front door's HTTP framing as a raw client sees it: a HEAD answer is the GET's headers
 * and Content-Length with no body, so the next answer on a kept-alive connection starts clean;
 * refusals the router never sees (headers or a body over the cap, an unknown method) are the
 * API's JSON errors; and every kind of answer carries X-Content-Type-Options: nosniff. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "lib/alloc.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"

/* The value of header name in the head of a raw answer (up to its blank line), copied into
 * out; NULL when absent. */
static const char *raw_header(const char *ans, const char *name, char *out, size_t len)
{
	const char *end = strstr(ans, "\r\n\r\n");
	size_t n = strlen(name);
	for (const char *p = strstr(ans, "\r\n"); p && end && p < end; p = strstr(p + 2, "\r\n")) {
		const char *line = p + 2;
		if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
			const char *v = line + n + 1;
			while (*v == ' ')
				v++;
			size_t vl = strcspn(v, "\r\n");
			snprintf(out, len, "%.*s", (int)(vl < len ? vl : len - 1), v);
			return out;
		}
	}
	return NULL;
}

/* The body of a raw answer that the peer closed after (everything past the blank line). */
static const char *raw_body(const char *ans)
{
	const char *end = strstr(ans, "\r\n\r\n");
	return end ? end + 4 : "";
}

/* One request sent raw, answered and closed: "METHOD PATH" with the token, if any. */
static char *raw_once(const char *url, const char *method, const char *path, const char *token)
{
	char req[1024];
	snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\n%s%s%sConnection: close\r\n\r\n",
	         method, path, token ? "Authorization: Bearer " : "", token ? token : "",
	         token ? "\r\n" : "");
	return h_raw(url, req, strlen(req), 5000);
}

/* HEAD path, then GET /healthz on the same connection: the second answer must begin right
 * after HEAD's blank line, HEAD must announce a Content-Length and carry nosniff. Returns
 * HEAD's Content-Length. */
static long head_then_healthz(const char *url, const char *path, const char *token)
{
	char req[1024];
	snprintf(req, sizeof req,
	         "HEAD %s HTTP/1.1\r\nHost: x\r\n%s%s%s\r\n"
	         "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
	         path, token ? "Authorization: Bearer " : "", token ? token : "",
	         token ? "\r\n" : "");
	char *ans = h_raw(url, req, strlen(req), 5000);
	char v[64];
	CHECKF(strncmp(ans, "HTTP/1.1 ", 9) == 0, "HEAD %s: %.200s", path, ans);
	const char *cl = raw_header(ans, "Content-Length", v, sizeof v);
	CHECKF(cl != NULL, "HEAD %s: no Content-Length: %.300s", path, ans);
	long n = cl ? strtol(cl, NULL, 10) : -1;
	CHECKF(raw_header(ans, "X-Content-Type-Options", v, sizeof v) && strcmp(v, "nosniff") == 0,
	       "HEAD %s: no nosniff: %.300s", path, ans);
	const char *next = raw_body(ans);
	CHECKF(strncmp(next, "HTTP/1.1 200", 12) == 0,
	       "HEAD %s: stray bytes before the next answer: %.200s", path, next);
	gwb_free(ans);
	return n;
}

TEST(frontdoor_head_is_get_without_body)
{
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	const char *url = srv.proc.url;
	/* Targets whose GET answers the same bytes each time: HEAD's length is the GET's. */
	static const struct {
		const char *path, *token, *get_method;
	} same[] = {
	    {"/", NULL, "GET"},
	    {"/index.html", NULL, "GET"},
	    {"/app.css", NULL, "GET"},
	    {"/app.js", NULL, "GET"},
	    {"/healthz", NULL, "GET"},
	    {"/nothing-here", NULL, "GET"},         /* 404 */
	    {"/v1/info", NULL, "GET"},              /* 401 */
	    {"/v1/tasks/t-1/cancel", ADMIN, "GET"}, /* 405, Allow: POST */
	    {"/v1/stream", ADMIN, "DELETE"},        /* 405: the stream takes GET alone */
	    {"/v1/audit/repair", ADMIN, "GET"},     /* 405, Allow: POST */
	};
	for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
		long n = head_then_healthz(url, same[i].path, same[i].token);
		char *get = raw_once(url, same[i].get_method, same[i].path, same[i].token);
		CHECKF((long)strlen(raw_body(get)) == n, "HEAD %s: Content-Length %ld, %s body %zu",
		       same[i].path, n, same[i].get_method, strlen(raw_body(get)));
		gwb_free(get);
	}
	/* Answers that change between two requests: a length is announced, no body sent. */
	static const char *const varying[] = {"/readyz", "/metrics", "/v1/info", "/v1/teams"};
	for (size_t i = 0; i < sizeof varying / sizeof varying[0]; i++) {
		const char *token = strncmp(varying[i], "/v1/", 4) == 0 ? ADMIN : NULL;
		long n = head_then_healthz(url, varying[i], token);
		CHECKF(n > 0, "HEAD %s: Content-Length %ld", varying[i], n);
	}
	/* A body sent with HEAD (libevent reads none) would be read as the next request: it is
	 * refused with one JSON answer, and the connection closes. */
	static const char head_body[] = "HEAD /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
	                                "\r\nhelloGET /healthz HTTP/1.1\r\nHost: x\r\n"
	                                "Connection: close\r\n\r\n";
	char *hb = h_raw(url, head_body, sizeof head_body - 1, 5000);
	CHECKF(strncmp(hb, "HTTP/1.1 400 ", 13) == 0, "HEAD with a body: %.200s", hb);
	const char *after = raw_body(hb);
	CHECKF(strstr(after, "\"body_not_allowed\"") && !strstr(after, "HTTP/1.1"),
	       "HEAD's body was read as a request: %.300s", after);
	gwb_free(hb);
	/* HEAD on the stream is refused as JSON's 405, never opened. */
	char *ans = raw_once(url, "HEAD", "/v1/stream", ADMIN);
	char v[64];
	CHECKF(strncmp(ans, "HTTP/1.1 405 ", 13) == 0, "HEAD /v1/stream: %.200s", ans);
	CHECKF(raw_header(ans, "Allow", v, sizeof v) && strcmp(v, "GET") == 0, "%.300s", ans);
	CHECKF(raw_body(ans)[0] == '\0', "HEAD /v1/stream sent a body: %.200s", raw_body(ans));
	gwb_free(ans);
	h_server_stop(&srv);
}

/* An answer with status that is one JSON error with a code and message, and nosniff. */
static void check_json_error(const char *what, const char *ans, int status, const char *code)
{
	char want[32], v[128];
	snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
	CHECKF(strncmp(ans, want, strlen(want)) == 0, "%s: %.300s", what, ans);
	CHECKF(raw_header(ans, "Content-Type", v, sizeof v) && strcmp(v, "application/json") == 0,
	       "%s: not JSON: %.300s", what, ans);
	CHECKF(raw_header(ans, "X-Content-Type-Options", v, sizeof v) && strcmp(v, "nosniff") == 0,
	       "%s: no nosniff: %.300s", what, ans);
	json_error_t je;
	json_t *j = json_loads(raw_body(ans), 0, &je);
	const char *c =
	    j ? json_string_value(json_object_get(json_object_get(j, "error"), "code")) : NULL;
	const char *m =
	    j ? json_string_value(json_object_get(json_object_get(j, "error"), "message")) : NULL;
	CHECKF(c && strcmp(c, code) == 0 && m && m[0], "%s: %.300s", what, raw_body(ans));
	json_decref(j);
}

TEST(frontdoor_refusals_are_json)
{
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	const char *url = srv.proc.url;
	size_t cap = 65536; /* http.max_body_bytes's default */

	/* A body over the cap. */
	size_t n = cap + 1;
	char *req = gwb_malloc(n + 512);
	int hl = snprintf(req, 512,
	                  "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " ADMIN
	                  "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
	                  "Connection: close\r\n\r\n",
	                  n);
	memset(req + hl, ' ', n);
	char *ans = h_raw(url, req, (size_t)hl + n, 5000);
	check_json_error("body over the cap", ans, 413, "body_too_large");
	gwb_free(ans);
	gwb_free(req);

	/* Headers over http.max_header_bytes (default 16384), well inside one header line. */
	size_t hn = 20000;
	req = gwb_malloc(hn + 512);
	hl = snprintf(req, 512, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: ");
	memset(req + hl, 'a', hn);
	snprintf(req + hl + hn, 512 - (size_t)hl, "\r\nConnection: close\r\n\r\n");
	ans = h_raw(url, req, strlen(req), 5000);
	check_json_error("headers over the cap", ans, 431, "headers_too_large");
	gwb_free(ans);
	gwb_free(req);

	/* A method HTTP does not name, and one it names that no path takes. */
	ans = raw_once(url, "BREW", "/healthz", NULL);
	check_json_error("unknown method", ans, 501, "not_implemented");
	gwb_free(ans);
	ans = raw_once(url, "TRACE", "/healthz", NULL);
	check_json_error("TRACE", ans, 405, "method_not_allowed");
	gwb_free(ans);
	ans = raw_once(url, "OPTIONS", "/v1/info", ADMIN);
	check_json_error("OPTIONS", ans, 405, "method_not_allowed");
	gwb_free(ans);

	/* The server still answers after each. */
	struct h_resp r;
	h_req(&r, "GET", url, "/healthz", NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_server_stop(&srv);
}

TEST(frontdoor_nosniff_on_every_answer)
{
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	const char *url = srv.proc.url;
	static const struct {
		const char *method, *path, *token;
	} cases[] = {
	    {"GET", "/", NULL},         {"GET", "/app.js", NULL},  {"GET", "/app.css", NULL},
	    {"GET", "/healthz", NULL},  {"GET", "/readyz", NULL},  {"GET", "/metrics", NULL},
	    {"GET", "/v1/info", ADMIN}, {"GET", "/v1/info", NULL}, {"GET", "/v1/tasks/x", ADMIN},
	    {"POST", "/healthz", NULL}, {"GET", "/missing", NULL}, {"GET", "/v1/stream", ADMIN},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		/* The stream never ends: what came within the timeout holds its headers. */
		char *ans = raw_once(url, cases[i].method, cases[i].path, cases[i].token);
		char v[64];
		CHECKF(strncmp(ans, "HTTP/1.1 ", 9) == 0, "%s %s: %.200s", cases[i].method,
		       cases[i].path, ans);
		CHECKF(raw_header(ans, "X-Content-Type-Options", v, sizeof v) &&
		           strcmp(v, "nosniff") == 0,
		       "%s %s: no nosniff: %.300s", cases[i].method, cases[i].path, ans);
		gwb_free(ans);
	}
	/* A 304 too. */
	struct h_resp r;
	h_req(&r, "GET", url, "/", NULL, NULL, NULL);
	char inm[160];
	snprintf(inm, sizeof inm, "If-None-Match: %s", h_header(&r, "ETag"));
	h_resp_free(&r);
	const char *headers[] = {inm, NULL};
	h_req(&r, "GET", url, "/", NULL, NULL, headers);
	CHECK_INT(r.status, 304);
	CHECKF(h_header(&r, "X-Content-Type-Options") &&
	           strcmp(h_header(&r, "X-Content-Type-Options"), "nosniff") == 0,
	       "304: %s", r.headers);
	h_resp_free(&r);
	h_server_stop(&srv);
}
