/* The HTTP transport: evhttp set-up, a request's context, path, query and body, headers and
 * replies. Routing is server/api/router.c's, the group commit server/api/commit.c's. */
#include "server/api/http.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/pool.h"
#include "server/api/api.h"
#include "server/api/conn.h"

/* A submission's time from arrival to reply (seconds). */
static const double submit_bounds[] = { 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025,
					0.05,   0.1,   0.25,  0.5,   1,    2.5 };

void http_add_header(struct req *r, const char *name, const char *value)
{
	evhttp_add_header(evhttp_request_get_output_headers(r->ev), name, value);
}

static int ascii_lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

const char *http_header(struct req *r, const char *name)
{
	/* evhttp_find_header's lookup, ASCII case-insensitive, without its call per character:
	 * the first letter rules out most headers. */
	struct evkeyvalq *headers = evhttp_request_get_input_headers(r->ev);
	struct evkeyval *kv;
	int first = ascii_lower((unsigned char)name[0]);
	TAILQ_FOREACH(kv, headers, next) {
		if (ascii_lower((unsigned char)kv->key[0]) != first)
			continue;
		const char *a = kv->key, *b = name;
		while (*a && ascii_lower((unsigned char)*a) == ascii_lower((unsigned char)*b)) {
			a++;
			b++;
		}
		if (!*a && !*b)
			return kv->value;
	}
	return NULL;
}

/* A first guess at a body's size: a task is under 1 KiB; a larger body is dumped twice. */
#define DUMP_GUESS 2048

/* Appends body's text and a newline to buf, written in place into the buffer's own space:
 * no intermediate string, and not one evbuffer_add per token as a dump callback does (the
 * same text as jx_dump: compact, keys sorted). -1 when jansson cannot dump it. */
static int dump_into(struct evbuffer *buf, const json_t *body, size_t flags)
{
	size_t want = DUMP_GUESS;
	for (int attempt = 0; attempt < 2; attempt++) {
		struct evbuffer_iovec v;
		/* One contiguous extent; one byte more than the text for the newline. A space
		 * reserved and not committed is simply reserved again by the next call. */
		if (evbuffer_reserve_space(buf, (ev_ssize_t)want + 1, &v, 1) != 1)
			return -1;
		size_t n = json_dumpb(body, v.iov_base, v.iov_len, flags);
		if (n == 0)
			return -1;
		if (n < v.iov_len) {
			((char *)v.iov_base)[n] = '\n';
			v.iov_len = n + 1;
			return evbuffer_commit_space(buf, &v, 1);
		}
		want = n;
	}
	return -1;
}

/* The text of every JSON reply: compact, keys sorted (as jx_dump writes it). */
#define REPLY_FLAGS (JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY)

static void reply_buf(struct req *r, int status, struct evbuffer *buf);

static void reply_json(struct req *r, int status, json_t *body, size_t flags)
{
	struct evbuffer *buf = evbuffer_new();
	if (body && dump_into(buf, body, flags) == 0) {
		http_add_header(r, "Content-Type", "application/json");
	} else if (body) { /* never seen: jansson refuses only what it could not allocate */
		log_error("http", "reply_unencodable", "status=%d path=%s", status, log_q(r->path));
		evbuffer_drain(buf, evbuffer_get_length(buf));
		status = 500;
	}
	json_decref(body);
	reply_buf(r, status, buf);
}

void http_reply_json_text(struct req *r, int status, const char *text, size_t len)
{
	struct evbuffer *buf = evbuffer_new();
	evbuffer_add(buf, text, len);
	evbuffer_add(buf, "\n", 1);
	http_add_header(r, "Content-Type", "application/json");
	reply_buf(r, status, buf);
}

static void count_reply(struct http_server *h, int status)
{
	if (status >= 200 && status < 600)
		h->replies[status / 100]++;
}

void http_count_reply(struct req *r, int status)
{
	count_reply(&r->api->http, status);
}

void http_send(struct req *r, int status, struct evbuffer *buf)
{
	/* libevent 2.1 writes a HEAD answer's body and leaves its Content-Length out: the GET's
	 * length is announced here and the body dropped, so the next answer starts clean. */
	if (r->method == EVHTTP_REQ_HEAD && buf && status >= 200 && status != 204 &&
	    status != 304) {
		char len[32];
		snprintf(len, sizeof len, "%zu", evbuffer_get_length(buf));
		struct evkeyvalq *out = evhttp_request_get_output_headers(r->ev);
		evhttp_remove_header(out, "Content-Length");
		evhttp_add_header(out, "Content-Length", len);
		evbuffer_drain(buf, evbuffer_get_length(buf));
	}
	/* libevent 2.1 has no phrase for 431 of its own ("Client Error"). */
	evhttp_send_reply(r->ev, status, status == 431 ? "Request Header Fields Too Large" : NULL,
			  buf);
}

/* Sends buf (the body) with status, and counts the reply. */
static void reply_buf(struct req *r, int status, struct evbuffer *buf)
{
	struct http_server *h = &r->api->http;
	http_add_header(r, "Cache-Control", "no-store");
	count_reply(h, status);
	if (r->is_submit)
		prom_hist_observe(&h->submit_seconds, (double)(clock_mono_us() - r->t0_us) / 1e6);
	http_send(r, status, buf);
	/* evhttp_send_reply copies what it needs; the buffer stays ours. */
	evbuffer_free(buf);
	log_debug("http", "reply", "method=%d path=%s status=%d", (int)r->method, log_q(r->path),
		  status);
}

void http_reply_json(struct req *r, int status, json_t *body)
{
	reply_json(r, status, body, REPLY_FLAGS);
}

void http_reply_error(struct req *r, int status, const char *code, const char *message,
		      json_t *details)
{
	json_t *err = details ? details : json_object();
	json_object_set_new(err, "code", json_string(code));
	json_object_set_new(err, "message", json_string(message));
	http_reply_json(r, status, json_pack("{s:o}", "error", err));
}

void http_reply_invalid_field(struct req *r, const char *field, const char *rule)
{
	char msg[320];
	snprintf(msg, sizeof msg, "%s: %s", field, rule);
	http_reply_error(r, 400, "invalid_field", msg,
			 json_pack("{s:s, s:s}", "field", field, "rule", rule));
}

int http_json_type_ok(struct req *r)
{
	const char *ct = http_header(r, "Content-Type");
	size_t n = ct ? strcspn(ct, ";") : 0;
	while (n && ct[n - 1] == ' ')
		n--;
	if (!ct || n != strlen("application/json") || strncasecmp(ct, "application/json", n) != 0) {
		http_reply_error(r, 415, "unsupported_media_type",
				 "the body must be sent as Content-Type: application/json",
				 json_pack("{s:s?}", "content_type", ct));
		return 0;
	}
	return 1;
}

json_t *http_json_body(struct req *r)
{
	if (!http_json_type_ok(r))
		return NULL;
	struct jx_parse_err pe;
	json_t *v = jx_parse(r->body, r->body_len, &pe);
	if (!v) {
		http_reply_error(r, 400, pe.code, pe.message,
				 json_pack("{s:i, s:i, s:i}", "line", (int)pe.line, "column",
					   (int)pe.column, "position", (int)pe.position));
		return NULL;
	}
	if (!json_is_object(v)) {
		json_decref(v);
		http_reply_error(r, 400, "invalid_json", "the body must be a JSON object", NULL);
		return NULL;
	}
	return v;
}

int http_may_act_on(struct req *r, const char *team)
{
	if (r->is_admin || strcmp(r->team, team) == 0)
		return 1;
	http_reply_error(r, 403, "forbidden", "this token may not act on another team",
			 json_pack("{s:s}", "team", team));
	return 0;
}

/* Whether libevent allocates through the pool (http_mem_install). */
static int event_pool;

void http_mem_install(void)
{
	event_set_mem_functions(pool_alloc, pool_realloc, pool_free);
	event_pool = 1;
}

void http_event_free(void *p)
{
	if (event_pool)
		pool_free(p);
	else
		free(p); /* banned-ok: what libevent allocated with the C library */
}

static EVP_MD *sha256_md;

static void sha256_fetch(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

void http_sha256(const void *data, size_t n, unsigned char out[SHA256_DIGEST_LENGTH])
{
	/* OpenSSL 3's SHA256() looks the algorithm up by name on every call (locks and a hash
	 * table): fetched once here, and each thread's digest context is kept (EVP_Digest makes
	 * and frees one per call). */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static __thread EVP_MD_CTX *ctx;
	pthread_once(&once, sha256_fetch);
	if (sha256_md && !ctx)
		ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex2(ctx, sha256_md, NULL) || !EVP_DigestUpdate(ctx, data, n) ||
	    !EVP_DigestFinal_ex(ctx, out, NULL))
		SHA256(data, n, out);
}

/* Reads the body into r (capped by http.max_body_bytes). Returns 0, or -1 after replying. */
static int read_body(struct req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->ev);
	size_t n = evbuffer_get_length(in);
	if ((int64_t)n > r->api->cfg->http_max_body_bytes) {
		http_reply_error(r, 413, "body_too_large", "the request body is too large",
				 json_pack("{s:I}", "max_bytes",
					   (json_int_t)r->api->cfg->http_max_body_bytes));
		return -1;
	}
	r->body = gwb_try_malloc(n + 1);
	if (!r->body) {
		http_reply_error(r, 503, "overloaded", "cannot hold the request body now", NULL);
		return -1;
	}
	evbuffer_copyout(in, r->body, n);
	r->body[n] = '\0';
	r->body_len = n;
	return 0;
}

/* Seconds a client waits after a storage fault: space or a remount comes back from an
 * operator or a clean-up job, not within the second a lock takes. */
#define STORAGE_RETRY_AFTER "5"

void http_reply_store_error(struct req *r, int rc, const char *message)
{
	if (rc == GWB_EBUSY) {
		http_add_header(r, "Retry-After", "1");
		return http_reply_error(r, 503, "busy", "the database is busy; retry", NULL);
	}
	if (rc == GWB_EUNAVAIL) {
		struct store_fault f;
		store_fault_get(r->api->store, &f);
		const char *code = f.kind == STORE_FAULT_FULL	? "storage_full"
				   : f.kind == STORE_FAULT_READONLY ? "storage_read_only"
								    : "storage_error";
		char since[40];
		clock_fmt_rfc3339_ms(f.since_ms, since, sizeof since);
		http_add_header(r, "Retry-After", STORAGE_RETRY_AFTER);
		json_t *details = json_pack("{s:s, s:s}", "storage", store_fault_name(f.kind),
					    "since", since);
		return http_reply_error(r, 503, code,
					"the database's storage refuses writes; nothing of this "
					"request was stored; retry",
					details);
	}
	if (rc == GWB_EIO) { /* the sync after a commit failed (server/store/store_sync.c) */
		http_add_header(r, "Retry-After", STORAGE_RETRY_AFTER);
		return http_reply_error(r, 503, "storage_error",
					"the disk did not confirm the write: this request may or "
					"may not be stored; retry (with the same Idempotency-Key a "
					"retry cannot make it twice)",
					NULL);
	}
	http_reply_error(r, 500, "internal", message, NULL);
}

/* The methods HTTP/1.1 names: libevent passes any other as EVHTTP_REQ_UNKNOWN_. */
#define KNOWN_METHODS                                                                           \
	(EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | \
	 EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH)
/* What evhttp_set_allowed_methods lets through: every method, the unknown ones too (libevent
 * 2.1's (1 << 15)), so that the router, not libevent's HTML 501, answers each. */
#define ALLOWED_METHODS (KNOWN_METHODS | (1 << 15))

/* The request line and header lines' size, as the client sent them (CRLFs aside). */
static size_t header_bytes(struct evhttp_request *ev)
{
	const char *uri = evhttp_request_get_uri(ev);
	size_t n = (uri ? strlen(uri) : 0) + sizeof "OPTIONS  HTTP/1.1" - 1;
	struct evkeyval *kv;
	TAILQ_FOREACH(kv, evhttp_request_get_input_headers(ev), next)
		n += strlen(kv->key) + 2 + strlen(kv->value);
	return n;
}

/* Refuses what the router never sees: a method HTTP does not name (501) and headers over
 * http.max_header_bytes (431), as JSON. A body declared on a method libevent reads none for
 * (all but POST, PUT and PATCH) would be read as the next request: the answer closes.
 * 0, or -1 after replying. */
static int check_request(struct req *r)
{
	const char *cl = http_header(r, "Content-Length");
	if (!(r->method & (EVHTTP_REQ_POST | EVHTTP_REQ_PUT | EVHTTP_REQ_PATCH)) &&
	    ((cl && strcmp(cl, "0") != 0) || http_header(r, "Transfer-Encoding")))
		http_add_header(r, "Connection", "close");
	if (!(r->method & KNOWN_METHODS)) {
		http_add_header(r, "Connection", "close");
		http_reply_error(r, 501, "not_implemented", "this method is not implemented", NULL);
		return -1;
	}
	int64_t cap = r->api->cfg->http_max_header_bytes;
	if ((int64_t)header_bytes(r->ev) > cap) {
		http_add_header(r, "Connection", "close");
		http_reply_error(r, 431, "headers_too_large", "the request's headers are too large",
				 json_pack("{s:I}", "max_bytes", (json_int_t)cap));
		return -1;
	}
	return 0;
}

static void on_request(struct evhttp_request *ev, void *arg)
{
	struct req r;
	memset(&r, 0, sizeof r);
	r.t0_us = clock_mono_us();
	r.ev = ev;
	r.api = arg;
	r.method = evhttp_request_get_command(ev);
	TAILQ_INIT(&r.query);
	snprintf(r.path, sizeof r.path, "?");
	/* Every answer, whatever sends it: no browser guesses another type from its bytes. */
	http_add_header(&r, "X-Content-Type-Options", "nosniff");
	if (check_request(&r) < 0)
		return;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(ev);
	const char *raw = uri ? evhttp_uri_get_path(uri) : NULL;
	size_t path_len = 0;
	char *path = raw ? evhttp_uridecode(raw, 0, &path_len) : NULL;
	/* A decoded NUL (%00) would cut the path short and route it as another one. */
	int path_ok = path && path[0] == '/' && path_len < sizeof r.path &&
		      strlen(path) == path_len && path_len == strcspn(path, "\r\n");
	snprintf(r.path, sizeof r.path, "%s", path_ok ? path : "?");
	http_event_free(path);
	if (!path_ok) {
		http_reply_error(&r, 400, "invalid_path", "the request path is not valid", NULL);
		return;
	}
	if (router_split(&r) < 0)
		return;
	const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
	if (q && evhttp_parse_query_str(q, &r.query) < 0) {
		http_reply_error(&r, 400, "invalid_query", "the query string is not valid", NULL);
		goto out;
	}
	if (read_body(&r) < 0)
		goto out;
	router_route(&r);
out:
	evhttp_clear_headers(&r.query);
	gwb_free(r.body);
}

int http_start(struct api_ctx *api, char *err, size_t errlen)
{
	const struct gwb_config *cfg = api->cfg;
	struct http_server *h = &api->http;
	char host[256];
	int port;
	if (config_split_hostport(cfg->listen, host, sizeof host, &port) < 0) {
		snprintf(err, errlen, "listen: invalid address %s", cfg->listen);
		return GWB_EINVAL;
	}
	auth_start(&api->auth, cfg);
	commit_start(&api->commit, api->base, api->store);
	prom_hist_init(&h->submit_seconds, submit_bounds,
		       (int)(sizeof submit_bounds / sizeof submit_bounds[0]));
	h->evh = evhttp_new(api->base);
	/* evhttp's own caps (an HTML answer) sit far past ours: the connection guard's framing
	 * (lib/framing.c) refuses first, as JSON, as do read_body and check_request. */
	evhttp_set_max_body_size(h->evh, (ev_ssize_t)cfg->http_max_body_bytes * 4 + 4096);
	evhttp_set_max_headers_size(h->evh, (ev_ssize_t)cfg->http_max_header_bytes * 4 + 4096);
	evhttp_set_timeout(h->evh, (int)cfg->http_timeout_seconds);
	evhttp_set_allowed_methods(h->evh, ALLOWED_METHODS);
	evhttp_set_gencb(h->evh, on_request, api);
	struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(h->evh, host,
									(ev_uint16_t)port);
	if (!bs) {
		snprintf(err, errlen, "listen: cannot bind %s", cfg->listen);
		return GWB_EIO;
	}
	h->guard = conn_guard_start(api->base, h->evh, bs, cfg);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char addr[INET6_ADDRSTRLEN] = "?";
	int real_port = port;
	if (getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *in = (struct sockaddr_in *)&ss;
			inet_ntop(AF_INET, &in->sin_addr, addr, sizeof addr);
			real_port = ntohs(in->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
			inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof addr);
			real_port = ntohs(in6->sin6_port);
		}
	}
	if (ss.ss_family == AF_INET6)
		snprintf(h->url, sizeof h->url, "http://[%s]:%d", addr, real_port);
	else
		snprintf(h->url, sizeof h->url, "http://%s:%d", addr, real_port);
	return 0;
}

void http_stop(struct api_ctx *api)
{
	/* Decisions still waiting are made and answered before evhttp frees their requests. */
	commit_stop(&api->commit);
	if (api->http.evh)
		evhttp_free(api->http.evh);
	api->http.evh = NULL;
	conn_guard_stop(api->http.guard);
	api->http.guard = NULL;
	auth_stop(&api->auth);
	api_tasks_spares_free(api);
}
