/* The workbench page: GET / and its assets, served from the bytes built into the binary
 * (server/api/web_assets.h), with an ETag per asset, revalidation (If-None-Match -> 304) and the
 * right content type. Only the listed assets exist: any other path outside /v1, and any path
 * that tries to climb out ("..") is refused. No token is needed: the page holds no data. */
#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>
#include <strings.h>

#include "lib/log.h"
#include "server/api/api.h"
#include "server/api/web_assets.h"

/* Browsers must ask again each time (the names carry no version), and get a 304 while the
 * content is the same. */
#define WEB_CACHE_CONTROL "no-cache"
/* The page loads only its own assets and talks only to this server. */
#define WEB_CSP                                                                                 \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "      \
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const struct web_asset *find_asset(const char *path)
{
	if (strcmp(path, "/") == 0)
		path = "/index.html";
	for (const struct web_asset *a = web_assets; a->path; a++)
		if (strcmp(a->path, path) == 0)
			return a;
	return NULL;
}

/* 1 when the If-None-Match list (tags, W/ tags or "*") names etag. */
static int etag_matches(const char *inm, const char *etag)
{
	size_t elen = strlen(etag);
	const char *p = inm;
	while (*p) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '*')
			return 1;
		if (strncmp(p, "W/", 2) == 0)
			p += 2;
		size_t n = strcspn(p, ",");
		while (n && p[n - 1] == ' ')
			n--;
		if (n == elen && strncmp(p, etag, elen) == 0)
			return 1;
		p += strcspn(p, ",");
	}
	return 0;
}

/* 1 when a segment of the path is "." or "..", or the path holds a backslash or a NUL-like
 * oddity: such a path never names an asset and is refused outright. */
static int climbs(struct req *r)
{
	for (int i = 0; i < r->nsegs; i++)
		if (strcmp(r->segs[i], "..") == 0 || strcmp(r->segs[i], ".") == 0)
			return 1;
	return strchr(r->path, '\\') != NULL;
}

void api_web(struct req *r)
{
	if (climbs(r))
		return http_reply_error(r, 400, "invalid_path",
					"the path may not contain '.', '..' or '\\' segments",
					json_pack("{s:s}", "path", r->path));
	const struct web_asset *a = find_asset(r->path);
	if (!a)
		return http_reply_error(r, 404, "not_found", "no such resource",
					json_pack("{s:s}", "path", r->path));
	if (r->method != EVHTTP_REQ_GET && r->method != EVHTTP_REQ_HEAD) {
		http_add_header(r, "Allow", "GET, HEAD");
		return http_reply_error(r, 405, "method_not_allowed",
					"this method is not allowed here",
					json_pack("{s:s}", "allow", "GET, HEAD"));
	}
	http_add_header(r, "ETag", a->etag);
	http_add_header(r, "Cache-Control", WEB_CACHE_CONTROL);
	http_add_header(r, "Referrer-Policy", "no-referrer");
	if (strncmp(a->type, "text/html", 9) == 0)
		http_add_header(r, "Content-Security-Policy", WEB_CSP);
	const char *inm = http_header(r, "If-None-Match");
	http_count_reply(r, inm && etag_matches(inm, a->etag) ? 304 : 200); /* /metrics */
	if (inm && etag_matches(inm, a->etag)) {
		http_send(r, 304, NULL);
		return;
	}
	http_add_header(r, "Content-Type", a->type);
	struct evbuffer *buf = evbuffer_new();
	/* The asset's bytes are static: referenced, not copied. */
	evbuffer_add_reference(buf, a->data, a->len, NULL, NULL);
	http_send(r, 200, buf); /* HEAD: the headers and Content-Length alone */
	/* evhttp_send_reply leaves the buffer ours. */
	evbuffer_free(buf);
	log_debug("http", "reply", "path=%s status=200 asset=%s", log_q(r->path), a->path);
}
