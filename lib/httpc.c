/* Blocking HTTP + JSON requests over one reused libcurl easy handle. */
#include "lib/httpc.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"

struct httpc {
	CURL *curl;
};

/* The body being received, bounded by the request's max_body. */
struct sink {
	char *buf;
	size_t len, cap, max;
	int overflow;
	CURL *curl;
	const struct httpc_req *req; /* its on_data takes a 2xx answer's bytes */
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t add = size * n;
	long status = 0;
	if (s->req->on_data && curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status) ==
				       CURLE_OK && status / 100 == 2) {
		s->req->on_data(s->req->on_data_arg, data, add);
		return add;
	}
	if (add > s->max - s->len) {
		s->overflow = 1;
		return 0; /* libcurl stops with CURLE_WRITE_ERROR */
	}
	if (s->len + add + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		while (cap < s->len + add + 1)
			cap *= 2;
		s->buf = gwb_realloc(s->buf, cap);
		s->cap = cap;
	}
	memcpy(s->buf + s->len, data, add);
	s->len += add;
	s->buf[s->len] = '\0';
	return add;
}

static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct httpc_resp *r = arg;
	size_t add = size * n;
	/* A new status line (after 100 Continue, or a redirect) starts the block over. */
	if (add >= 5 && strncmp(data, "HTTP/", 5) == 0)
		r->headers[0] = '\0';
	size_t used = strlen(r->headers);
	if (used + add < sizeof r->headers) {
		memcpy(r->headers + used, data, add);
		r->headers[used + add] = '\0';
	}
	return add;
}

struct httpc *httpc_new(void)
{
	/* libcurl initialises itself on the first easy handle; doing it here once says so. */
	static int inited;
	if (!inited) {
		curl_global_init(CURL_GLOBAL_DEFAULT);
		inited = 1;
	}
	struct httpc *c = gwb_calloc(1, sizeof *c);
	c->curl = curl_easy_init();
	if (!c->curl) {
		fprintf(stderr, "httpc: curl_easy_init failed\n");
		abort(); /* only out of memory makes it fail; the allocator aborts likewise */
	}
	return c;
}

void httpc_free(struct httpc *c)
{
	if (!c)
		return;
	curl_easy_cleanup(c->curl);
	gwb_free(c);
}

const char *httpc_header(const struct httpc_resp *r, const char *name, char *buf, size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = r->headers; *p;) {
		const char *eol = strstr(p, "\r\n");
		size_t ll = eol ? (size_t)(eol - p) : strlen(p);
		if (ll > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			size_t vl = ll - (size_t)(v - p);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			snprintf(buf, len, "%.*s", (int)vl, v);
			return buf;
		}
		if (!eol)
			break;
		p = eol + 2;
	}
	return NULL;
}

/* Fills the headers callers act on from the raw block. */
static void known_headers(struct httpc_resp *r)
{
	char v[64];
	httpc_header(r, "Location", r->location, sizeof r->location); /* "" when absent */
	r->replayed = httpc_header(r, "Idempotent-Replayed", v, sizeof v) &&
		      strcasecmp(v, "true") == 0;
	r->retry_after_s = -1;
	if (httpc_header(r, "Retry-After", v, sizeof v)) {
		char *end;
		long s = strtol(v, &end, 10);
		if (end != v && !*end && s >= 0)
			r->retry_after_s = s;
	}
}

static int transport_error(CURLcode rc, int overflow)
{
	if (overflow)
		return GWB_ETOOBIG;
	switch (rc) {
	case CURLE_OPERATION_TIMEDOUT:
		return GWB_ETIMEOUT;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return GWB_EUNAVAIL;
	default:
		return GWB_EIO;
	}
}

/* With GWB_HTTPC_RECORD naming a file, each answer is appended there as one JSON line
 * (method, url, status, the header block, the body unless it streamed), so that a test can
 * hold what a client received to the API's document (tests/e2e/test_guide.sh). */
static void record_answer(const char *method, const struct httpc_req *req,
			  const struct httpc_resp *r)
{
	const char *path = getenv("GWB_HTTPC_RECORD");
	if (!path || !*path || !r->status)
		return;
	int streamed = req->on_data && r->status >= 200 && r->status < 300;
	json_t *line = json_pack("{s:s, s:s, s:I, s:s, s:s%, s:b}", "method", method, "url",
				 req->url, "status", (json_int_t)r->status, "headers", r->headers,
				 "body", r->body, r->body_len, "streamed", streamed);
	char *text = line ? jx_dump(line) : NULL;
	json_decref(line);
	FILE *f = text ? fopen(path, "a") : NULL;
	if (f) {
		fprintf(f, "%s\n", text);
		fclose(f);
	}
	gwb_free(text);
}

int httpc_do(struct httpc *c, const struct httpc_req *req, struct httpc_resp *r)
{
	memset(r, 0, sizeof *r);
	r->retry_after_s = -1;
	CURL *h = c->curl;
	/* Reset forgets the last request's options, not its kept-alive connection. */
	curl_easy_reset(h);
	struct curl_slist *hl = NULL;
	char auth[600];
	char *payload = NULL;
	const char *body = req->body;
	size_t body_len = req->body_len;
	if (req->json) {
		payload = jx_dump(req->json);
		body = payload;
		body_len = strlen(payload);
	} else if (body && !body_len) {
		body_len = strlen(body);
	}
	if (req->token) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", req->token);
		hl = curl_slist_append(hl, auth);
	}
	int has_ct = 0;
	for (const char *const *x = req->headers; x && *x; x++) {
		has_ct |= strncasecmp(*x, "Content-Type:", 13) == 0;
		hl = curl_slist_append(hl, *x);
	}
	if (body && !has_ct)
		hl = curl_slist_append(hl, "Content-Type: application/json");
	hl = curl_slist_append(hl, "Expect:"); /* no 100-continue round trip */
	const char *method = req->method ? req->method : "GET";
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	struct sink sink = { 0 };
	sink.max = req->max_body ? req->max_body : HTTPC_BODY_MAX_DEFAULT;
	sink.curl = h;
	sink.req = req;
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	if (req->unix_socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 req->timeout_ms > 0    ? req->timeout_ms
			 : req->timeout_ms == 0 ? (long)HTTPC_TIMEOUT_MS_DEFAULT
						: 0L);
	if (req->timeout_ms < 0)
		curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)HTTPC_TIMEOUT_MS_DEFAULT);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* time-outs without SIGALRM */
	CURLcode rc = curl_easy_perform(h);
	int out = 0;
	if (rc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
		known_headers(r);
	} else {
		out = transport_error(rc, sink.overflow);
		snprintf(r->error, sizeof r->error, "%s",
			 sink.overflow ? "answer too large" : curl_easy_strerror(rc));
	}
	curl_slist_free_all(hl);
	gwb_free(payload);
	r->body = sink.buf ? sink.buf : gwb_strdup("");
	r->body_len = sink.len;
	if (rc == CURLE_OK && r->body_len)
		r->json = json_loadb(r->body, r->body_len, 0, NULL);
	record_answer(method, req, r);
	return out;
}

int httpc_request(const struct httpc_req *req, struct httpc_resp *r)
{
	struct httpc *c = httpc_new();
	int rc = httpc_do(c, req, r);
	httpc_free(c);
	return rc;
}

const char *httpc_error_code(const struct httpc_resp *r)
{
	const char *code =
		json_string_value(json_object_get(json_object_get(r->json, "error"), "code"));
	return code ? code : "";
}

void httpc_resp_free(struct httpc_resp *r)
{
	gwb_free(r->body);
	json_decref(r->json);
	memset(r, 0, sizeof *r);
	r->retry_after_s = -1;
}
