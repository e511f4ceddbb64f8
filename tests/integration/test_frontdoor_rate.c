/* The per-token request limit is on by default: a server started with no rate setting answers
 * one team token that floods with 429 (Retry-After and the API's JSON error) while another
 * team's token and the admin are still served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"
#define FLOOD 600

static void put_team(const char *url, const char *team, const char *token)
{
	char path[128], body[256];
	snprintf(path, sizeof path, "/v1/teams/%s", team);
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"%s\"}", token);
	struct h_resp r;
	h_req(&r, "PUT", url, path, ADMIN, body, NULL);
	CHECKF(r.status == 201 || r.status == 200, "PUT %s: %ld %s", path, r.status, r.body);
	h_resp_free(&r);
}

static long status_of(const char *url, const char *token)
{
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/tasks", token, NULL, NULL);
	long st = r.status;
	h_resp_free(&r);
	return st;
}

/* Counts the answers in raw that start with status line line. */
static int count_status(const char *raw, const char *line)
{
	int n = 0;
	for (const char *p = strstr(raw, line); p; p = strstr(p + 1, line))
		n++;
	return n;
}

TEST_T(frontdoor_rate_limit_is_on_by_default, 90)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, "alpha", ALPHA);
	put_team(url, "beta", BETA);

	/* FLOOD pipelined requests on one kept-alive connection: far past any default burst. */
	static const char one[] = "GET /v1/tasks HTTP/1.1\r\nHost: x\r\n"
				  "Authorization: Bearer " ALPHA "\r\n\r\n";
	static const char last[] = "GET /v1/tasks HTTP/1.1\r\nHost: x\r\n"
				   "Authorization: Bearer " ALPHA "\r\nConnection: close\r\n\r\n";
	size_t len = (sizeof one - 1) * (FLOOD - 1) + sizeof last - 1;
	char *req = gwb_malloc(len + 1), *w = req;
	for (int i = 0; i < FLOOD - 1; i++, w += sizeof one - 1)
		memcpy(w, one, sizeof one - 1);
	memcpy(w, last, sizeof last);
	char *ans = h_raw(url, req, len, 20000);
	gwb_free(req);
	int ok = count_status(ans, "HTTP/1.1 200"), limited = count_status(ans, "HTTP/1.1 429");
	CHECKF(ok >= 1 && limited >= 1 && ok + limited == FLOOD, "200: %d, 429: %d of %d", ok,
	       limited, FLOOD);

	/* A 429 carries Retry-After in whole seconds and the API's JSON error. */
	const char *a = strstr(ans, "HTTP/1.1 429");
	const char *end = a ? strstr(a, "\r\n\r\n") : NULL;
	CHECK(end != NULL);
	if (end) {
		char head[2048];
		snprintf(head, sizeof head, "%.*s", (int)(end - a), a);
		const char *ra = strstr(head, "Retry-After: ");
		CHECKF(ra && strtol(ra + 13, NULL, 10) >= 1, "no Retry-After in %s", head);
		CHECKF(strstr(head, "application/json") != NULL, "not JSON: %s", head);
		CHECKF(strncmp(end + 4, "{", 1) == 0 && strstr(end + 4, "\"rate_limited\"") != NULL,
		       "body %.200s", end + 4);
	}
	gwb_free(ans);

	/* Another team's token and the admin are served. */
	CHECK_INT(status_of(url, BETA), 200);
	CHECK_INT(status_of(url, ADMIN), 200);
	h_server_stop(&s);
}
