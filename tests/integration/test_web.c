/* The page's assets as a real gwb-server serves them: the page at /, content types, an ETag
 * that is the same for the same bytes, 304 on If-None-Match, 404 for what is not an asset,
 * and paths that climb ("..") refused, also when sent raw. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

static void get(struct h_resp *r, const char *url, const char *path, const char *inm)
{
	char h[256];
	snprintf(h, sizeof h, "If-None-Match: %s", inm ? inm : "");
	const char *headers[] = { h, NULL };
	h_req(r, "GET", url, path, NULL, NULL, inm ? headers : NULL);
}

TEST(web_page_and_assets)
{
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	const char *url = srv.proc.url;
	struct h_resp r;
	get(&r, url, "/", NULL);
	CHECK_INT(r.status, 200);
	CHECK(strncmp(h_header(&r, "Content-Type"), "text/html", 9) == 0);
	CHECK(strstr(r.body, "data-testid=\"submit-form\"") != NULL);
	CHECK(strstr(r.body, "/app.js") != NULL);
	CHECK(h_header(&r, "Content-Security-Policy") != NULL);
	char etag[128];
	snprintf(etag, sizeof etag, "%s", h_header(&r, "ETag"));
	CHECK(etag[0] == '"' && strlen(etag) > 10);
	CHECK_STR(h_header(&r, "Cache-Control"), "no-cache");
	h_resp_free(&r);

	/* /index.html is the same asset. */
	get(&r, url, "/index.html", NULL);
	CHECK_INT(r.status, 200);
	CHECK_STR(h_header(&r, "ETag"), etag);
	h_resp_free(&r);

	/* Revalidation: the same tag gives 304 and no body; a list or a weak tag too; another
	 * tag gives the asset. */
	get(&r, url, "/", etag);
	CHECK_INT(r.status, 304);
	CHECK_INT(r.body_len, 0);
	h_resp_free(&r);
	char list[300];
	snprintf(list, sizeof list, "\"other\", W/%s", etag);
	get(&r, url, "/", list);
	CHECK_INT(r.status, 304);
	h_resp_free(&r);
	get(&r, url, "/", "\"something-else\"");
	CHECK_INT(r.status, 200);
	h_resp_free(&r);

	get(&r, url, "/app.js", NULL);
	CHECK_INT(r.status, 200);
	CHECK(strncmp(h_header(&r, "Content-Type"), "text/javascript", 15) == 0);
	CHECK(strcmp(h_header(&r, "ETag"), etag) != 0);
	CHECK(strstr(r.body, "/v1/stream") != NULL);
	h_resp_free(&r);
	get(&r, url, "/app.css", NULL);
	CHECK_INT(r.status, 200);
	CHECK(strncmp(h_header(&r, "Content-Type"), "text/css", 8) == 0);
	h_resp_free(&r);

	/* Not an asset: 404 in the API's error shape; other methods: 405. */
	get(&r, url, "/nothing.js", NULL);
	CHECK_INT(r.status, 404);
	CHECK_STR(h_err_code(&r), "not_found");
	h_resp_free(&r);
	get(&r, url, "/web/index.html", NULL);
	CHECK_INT(r.status, 404);
	h_resp_free(&r);
	h_req(&r, "POST", url, "/", NULL, "{}", NULL);
	CHECK_INT(r.status, 405);
	h_resp_free(&r);
}

TEST(web_path_traversal_is_refused)
{
	struct h_server srv;
	h_server_init(&srv);
	h_server_start(&srv);
	/* Raw requests: a client library would clean these paths before sending them. */
	const char *paths[] = { "/../server/main.c", "/%2e%2e/%2e%2e/etc/passwd",
				"/web/../index.html", "/./app.js", "/..%5capp.js", NULL };
	for (const char *const *p = paths; *p; p++) {
		char req[512];
		int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
				 *p);
		char *ans = h_raw(srv.proc.url, req, (size_t)n, 5000);
		CHECKF(strncmp(ans, "HTTP/1.1 400", 12) == 0 || strncmp(ans, "HTTP/1.1 404", 12) == 0,
		       "%s answered: %.40s", *p, ans);
		CHECKF(strstr(ans, "<html") == NULL && strstr(ans, "#include") == NULL &&
			       strstr(ans, "root:") == NULL,
		       "%s served a file", *p);
		gwb_free(ans);
	}
}
