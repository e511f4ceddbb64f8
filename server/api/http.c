/* The HTTP layer: evhttp set-up, request context, authentication, routing and replies, and the
 * group commit: the decisions deferred in one loop turn, committed together, then answered. */
#include "server/api/http.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>
#include <malloc.h>
#include <netinet/in.h>
#include <openssl/crypto.h>
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
#include "lib/strmap.h"
#include "server/api/api_audit.h"
#include "server/api/ratelimit.h"

/* Decisions per batch, and a submission's time from arrival to reply (seconds). */
static const double batch_bounds[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256, 512 };
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

/* Free heap kept rather than given back to the kernel (see http_start): 16 MiB. */
#define HTTP_HEAP_KEEP (16 << 20)

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

/* Sends buf (the body) with status, and counts the reply. */
static void reply_buf(struct req *r, int status, struct evbuffer *buf)
{
	http_add_header(r, "Cache-Control", "no-store");
	if (status >= 200 && status < 600)
		r->api->replies[status / 100]++;
	if (r->is_submit)
		prom_hist_observe(&r->api->submit_seconds,
				  (double)(clock_mono_us() - r->t0_us) / 1e6);
	evhttp_send_reply(r->ev, status, NULL, buf);
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
	 * table): a third of its time for a token. Fetched once here, and each thread's digest
	 * context is kept (EVP_Digest makes and frees one per call). */
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	static __thread EVP_MD_CTX *ctx;
	pthread_once(&once, sha256_fetch);
	if (sha256_md && !ctx)
		ctx = EVP_MD_CTX_new();
	if (!ctx || !EVP_DigestInit_ex2(ctx, sha256_md, NULL) || !EVP_DigestUpdate(ctx, data, n) ||
	    !EVP_DigestFinal_ex(ctx, out, NULL))
		SHA256(data, n, out);
}

/* The SHA-256 of bearer token tok, from the memo when it was seen lately: hashing it costs a
 * submission about 2 % of the loop's time, and the same few tokens come again and again. The
 * slot is chosen by the token's strmap_hash and the comparison is constant-time over the
 * whole slot, so the memo's timing tells nothing of a token beyond whether it is there. */
static void token_hash(struct api_ctx *api, const char *tok, unsigned char out[32])
{
	size_t n = strlen(tok);
	if (n == 0 || n > HTTP_TOKEN_MEMO_BYTES) {
		http_sha256(tok, n, out);
		return;
	}
	struct http_token_memo *m = &api->token_memo[strmap_hash(tok) % HTTP_TOKEN_MEMO_SLOTS];
	char padded[HTTP_TOKEN_MEMO_BYTES] = { 0 };
	memcpy(padded, tok, n);
	/* Constant-time, a word at a time (CRYPTO_memcmp goes byte by byte: 1.4k instructions
	 * for the slot, two thirds of what the memo saves). */
	uint64_t diff = m->len ^ n;
	for (size_t i = 0; i < sizeof padded; i += 8) {
		uint64_t a, b;
		memcpy(&a, m->tok + i, 8);
		memcpy(&b, padded + i, 8);
		diff |= a ^ b;
	}
	if (diff == 0) {
		memcpy(out, m->hash, 32);
		return;
	}
	http_sha256(tok, n, out);
	m->len = n;
	memcpy(m->tok, padded, sizeof padded);
	memcpy(m->hash, out, 32);
}

/* Authenticates the bearer token: the admin's, or a team's (looked up by its SHA-256). Returns
 * 1, or 0 after replying 401. */
static int authenticate(struct req *r)
{
	const char *h = http_header(r, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0 || !h[7]) {
		http_add_header(r, "WWW-Authenticate", "Bearer");
		http_reply_error(r, 401, "unauthorized", "an Authorization: Bearer token is required",
				 NULL);
		return 0;
	}
	const char *tok = h + 7;
	unsigned char hash[SHA256_DIGEST_LENGTH];
	token_hash(r->api, tok, hash);
	if (r->api->has_admin && CRYPTO_memcmp(hash, r->api->admin_hash, sizeof hash) == 0) {
		r->is_admin = 1;
		return 1;
	}
	/* Teams are found by the hash of their token; only hashes are stored, and the lookup's
	 * timing can reveal nothing about a token beyond its hash. */
	if (store_team_by_token(r->api->store, hash, r->team, sizeof r->team) == 0)
		return 1;
	http_add_header(r, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
	http_reply_error(r, 401, "unauthorized", "the token is not valid", NULL);
	return 0;
}

/* The per-token request limit (http.rate_limit_*): 1 when r may go on, or 0 after replying
 * 429 with Retry-After. The admin is exempt unless http.rate_limit_admin says otherwise. */
static int rate_ok(struct req *r)
{
	const struct gwb_config *cfg = r->api->cfg;
	if (!r->api->rl || (r->is_admin && !cfg->http_rate_limit_admin))
		return 1;
	const char *tok = http_header(r, "Authorization") + 7; /* authenticate checked it */
	unsigned char hash[SHA256_DIGEST_LENGTH];
	token_hash(r->api, tok, hash);
	int64_t wait_s = 1;
	if (ratelimit_take(r->api->rl, hash, clock_mono_ms(), &wait_s))
		return 1;
	char ra[24];
	snprintf(ra, sizeof ra, "%lld", (long long)wait_s);
	http_add_header(r, "Retry-After", ra);
	http_reply_error(r, 429, "rate_limited", "too many requests with this token; retry later",
			 json_pack("{s:I, s:I}", "retry_after_seconds", (json_int_t)wait_s,
				   "limit_per_second", (json_int_t)cfg->http_rate_limit_per_s));
	return 0;
}

static int split_path(struct req *r)
{
	snprintf(r->segbuf, sizeof r->segbuf, "%s", r->path);
	r->nsegs = 0;
	for (char *p = r->segbuf; *p;) {
		while (*p == '/')
			*p++ = '\0';
		if (!*p)
			break;
		if (r->nsegs == (int)(sizeof r->segs / sizeof r->segs[0]))
			return -1;
		r->segs[r->nsegs++] = p;
		while (*p && *p != '/')
			p++;
	}
	return 0;
}

static void method_not_allowed(struct req *r, const char *allow)
{
	http_add_header(r, "Allow", allow);
	http_reply_error(r, 405, "method_not_allowed", "this method is not allowed here",
			 json_pack("{s:s}", "allow", allow));
}

static int seg_is(struct req *r, int i, const char *s)
{
	return i < r->nsegs && strcmp(r->segs[i], s) == 0;
}

/* Routes an authenticated /v1 request. */
static void route_v1(struct req *r)
{
	int get = r->method == EVHTTP_REQ_GET, post = r->method == EVHTTP_REQ_POST;
	if (seg_is(r, 1, "tasks")) {
		if (r->nsegs == 2) {
			if (get)
				return api_tasks_list(r);
			if (post)
				return api_tasks_submit(r);
			return method_not_allowed(r, "GET, POST");
		}
		if (r->nsegs == 3) {
			if (get)
				return api_task_get(r, r->segs[2]);
			return method_not_allowed(r, "GET");
		}
		if (r->nsegs == 4 && seg_is(r, 3, "events")) {
			if (get)
				return api_task_events(r, r->segs[2]);
			return method_not_allowed(r, "GET");
		}
		if (r->nsegs == 4 && seg_is(r, 3, "cancel")) {
			if (post)
				return api_task_cancel(r, r->segs[2]);
			return method_not_allowed(r, "POST");
		}
	} else if (seg_is(r, 1, "teams")) {
		if (r->nsegs == 2) {
			if (get)
				return api_teams_list(r);
			return method_not_allowed(r, "GET");
		}
		if (r->nsegs == 3) {
			if (get)
				return api_team_get(r, r->segs[2]);
			if (r->method == EVHTTP_REQ_PUT)
				return api_team_put(r, r->segs[2]);
			return method_not_allowed(r, "GET, PUT");
		}
	} else if (seg_is(r, 1, "devices") && r->nsegs == 2) {
		if (get)
			return api_devices(r);
		return method_not_allowed(r, "GET");
	} else if (seg_is(r, 1, "stream") && r->nsegs == 2) {
		if (get)
			return api_stream(r);
		return method_not_allowed(r, "GET");
	} else if (seg_is(r, 1, "audit") && r->nsegs <= 3) {
		if (r->nsegs == 2)
			return get ? api_audit_get(r) : method_not_allowed(r, "GET");
		if (seg_is(r, 2, "repair"))
			return post ? api_audit_repair(r) : method_not_allowed(r, "POST");
	} else if (seg_is(r, 1, "info") && r->nsegs == 2) {
		if (get)
			return api_info(r);
		return method_not_allowed(r, "GET");
	}
	http_reply_error(r, 404, "not_found", "no such resource",
			 json_pack("{s:s}", "path", r->path));
}

static void route(struct req *r)
{
	if (r->nsegs == 1 && (seg_is(r, 0, "healthz") || seg_is(r, 0, "readyz") ||
			      seg_is(r, 0, "metrics"))) {
		if (r->method != EVHTTP_REQ_GET && r->method != EVHTTP_REQ_HEAD)
			return method_not_allowed(r, "GET");
		if (seg_is(r, 0, "metrics"))
			return api_metrics(r);
		return seg_is(r, 0, "healthz") ? api_healthz(r) : api_readyz(r);
	}
	if (!seg_is(r, 0, "v1"))
		return api_web(r);
	if (!authenticate(r) || !rate_ok(r))
		return;
	route_v1(r);
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

/* 1 when the decoded path has an empty segment ("//") or a "." or ".." segment: no resource
 * is named so, and answering 404 here, before routing, keeps every handler, and any file
 * behind one, out of traversal's reach. A single trailing slash is not an empty segment. */
static int odd_path(const char *path)
{
	for (const char *p = path; *p; p++) {
		if (*p != '/')
			continue;
		const char *seg = p + 1;
		size_t n = strcspn(seg, "/");
		if ((n == 0 && seg[0] == '/') || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return 1;
	}
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

/* ---- group commit ---- */

/* Deferred requests kept for reuse: about two batches' worth at 64 connections. */
#define HTTP_SPARE_MAX 128

struct http_deferred {
	struct http_deferred *next;
	struct req r;
	const struct http_deferred_ops *ops;
	void *ctx;
};

void http_defer(struct req *r, const struct http_deferred_ops *ops, void *ctx)
{
	struct api_ctx *api = r->api;
	/* A spare one if a batch left any: the struct is large, and a fresh allocation of
	 * that size makes glibc consolidate its small free chunks first. */
	struct http_deferred *d = api->spare;
	if (d) {
		api->spare = d->next;
		api->nspare--;
	} else {
		d = gwb_malloc(sizeof *d);
	}
	d->next = NULL;
	d->r = *r;
	/* The copy keeps what a reply needs; the query list and the body stay the caller's. */
	TAILQ_INIT(&d->r.query);
	d->r.body = NULL;
	d->r.body_len = 0;
	for (int i = 0; i < r->nsegs; i++)
		d->r.segs[i] = d->r.segbuf + (r->segs[i] - r->segbuf);
	d->ops = ops;
	d->ctx = ctx;
	*api->pend_tail = d;
	api->pend_tail = &d->next;
	if (api->npending++ == 0) {
		/* A zero time-out fires on the loop's next turn, after the other sockets that
		 * turn finds readable: their requests join this batch. */
		static const struct timeval zero = { 0, 0 };
		event_add(api->flush_ev, &zero);
	}
}

/* Runs the deferred decisions in one transaction, commits once, then answers each: no reply
 * leaves before its decision is durable. */
static void batch_answer(struct api_ctx *api, struct http_deferred *list, int rc);

static void batch_run(struct api_ctx *api)
{
	struct http_deferred *list = api->pend_head;
	int n = api->npending;
	api->pend_head = NULL;
	api->pend_tail = &api->pend_head;
	api->npending = 0;
	if (!list)
		return;
	/* Optimistic first: no SAVEPOINT per decision, and the new tasks inserted together once
	 * every decision is made. In the rare batch where a decision that wrote has to be
	 * undone, or a new task's id was taken, the whole batch is rolled back and decided again
	 * with one SAVEPOINT each (decide callbacks overwrite their outcome), so that decision
	 * alone is undone, as it would have been the first time. */
	int rc = store_batch_begin_later(api->store);
	if (rc == 0) {
		for (struct http_deferred *d = list; d; d = d->next)
			d->ops->decide(&d->r, d->ctx);
		/* The new tasks, a few statements for all (a failure is the commit's to say). */
		store_batch_write(api->store);
		if (store_batch_spoiled(api->store)) {
			store_batch_rollback(api->store);
			log_warn("http", "batch_redone", "size=%d", n);
			rc = store_batch_begin(api->store);
			for (struct http_deferred *d = list; d && rc == 0; d = d->next)
				d->ops->decide(&d->r, d->ctx);
		}
		if (rc == 0)
			rc = store_batch_commit(api->store);
	}
	api->batches++;
	api->batch_requests += n;
	prom_hist_observe(&api->batch_size, n);
	if (rc) {
		api->batches_failed++;
		log_warn("http", "batch_failed", "size=%d error=%s db=%s", n, err_name(rc),
			 log_q(store_errmsg(api->store)));
	}
	for (struct http_deferred *d = list; d && rc == 0; d = d->next)
		if (d->ops->prepare)
			d->ops->prepare(d->ctx);
	uint64_t seq = store_commit_seq(api->store);
	if (rc == 0 && seq > store_durable_seq(api->store)) {
		/* Committed, not yet on the disk: the answers wait for the sync (on_synced). */
		struct http_durable_wait *w = gwb_calloc(1, sizeof *w);
		w->seq = seq;
		w->list = list;
		*api->wait_tail = w;
		api->wait_tail = &w->next;
		return;
	}
	batch_answer(api, list, rc);
}

/* Answers the decisions of a batch, with the outcome of its commit. */
static void batch_answer(struct api_ctx *api, struct http_deferred *list, int rc)
{
	while (list) {
		struct http_deferred *d = list;
		list = d->next;
		/* The request is evhttp's and is only ever released by answering it, never
		 * freed here. libevent 2.1 stops reading a connection while its request waits
		 * for the answer, so a client that closed is mostly found by the write (evhttp
		 * then frees the connection itself). When a socket error did reach it first,
		 * evhttp detached the request from its connection and left it to us: the
		 * reply below frees it, sending nothing. */
		if (!evhttp_request_get_connection(d->r.ev))
			api->replies_gone++;
		d->ops->reply(&d->r, d->ctx, rc);
		d->ops->release(d->ctx);
		if (api->nspare < HTTP_SPARE_MAX) {
			d->next = api->spare;
			api->spare = d;
			api->nspare++;
		} else {
			gwb_free(d);
		}
	}
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	batch_run(arg);
}

/* Answers the batches whose commit is durable now, oldest first; a sync that failed answers
 * those it covered with 503. */
static void durable_answer(struct api_ctx *api)
{
	if (!api->wait_head)
		return; /* nothing waits (and an API that never started has no store) */
	uint64_t durable = store_durable_seq(api->store);
	while (api->wait_head && api->wait_head->seq <= durable) {
		struct http_durable_wait *w = api->wait_head;
		api->wait_head = w->next;
		if (!api->wait_head)
			api->wait_tail = &api->wait_head;
		int rc = store_sync_failed_upto(api->store, w->seq) ? GWB_EIO : 0;
		batch_answer(api, w->list, rc);
		gwb_free(w);
	}
}

static void on_synced(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct api_ctx *api = arg;
	store_sync_done(api->store);
	durable_answer(api);
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
	if (odd_path(r.path)) { /* nothing is named so: not found, whatever lies behind */
		http_reply_error(&r, 404, "not_found", "no such resource", NULL);
		return;
	}
	if (split_path(&r) < 0) {
		http_reply_error(&r, 404, "not_found", "no such resource", NULL);
		return;
	}
	const char *q = uri ? evhttp_uri_get_query(uri) : NULL;
	if (q && evhttp_parse_query_str(q, &r.query) < 0) {
		http_reply_error(&r, 400, "invalid_query", "the query string is not valid", NULL);
		goto out;
	}
	if (read_body(&r) < 0)
		goto out;
	route(&r);
out:
	evhttp_clear_headers(&r.query);
	gwb_free(r.body);
}

void api_task_changed(const struct api_ctx *api, const char *task_id)
{
	if (api->task_changed)
		api->task_changed(api->task_changed_arg, task_id);
}

int http_start(struct api_ctx *api, char *err, size_t errlen)
{
	const struct gwb_config *cfg = api->cfg;
	char host[256];
	int port;
	if (config_split_hostport(cfg->listen, host, sizeof host, &port) < 0) {
		snprintf(err, errlen, "listen: invalid address %s", cfg->listen);
		return GWB_EINVAL;
	}
	if (cfg->http_rate_limit_per_s > 0)
		api->rl = ratelimit_new(cfg->http_rate_limit_per_s, cfg->http_rate_limit_burst);
	/* The group commit holds a loop turn's requests (several hundred KiB at 64 connections:
	 * contexts, task views, reply buffers) and frees them together once answered. With
	 * glibc's trim threshold (128 KiB) that memory went back to the kernel every turn and
	 * was faulted in again the next: measured, a quarter of a submission's CPU time. Up to
	 * HTTP_HEAP_KEEP stays in the heap instead. */
	mallopt(M_TRIM_THRESHOLD, HTTP_HEAP_KEEP);
	api->pend_head = NULL;
	api->pend_tail = &api->pend_head;
	prom_hist_init(&api->batch_size, batch_bounds,
		       (int)(sizeof batch_bounds / sizeof batch_bounds[0]));
	prom_hist_init(&api->submit_seconds, submit_bounds,
		       (int)(sizeof submit_bounds / sizeof submit_bounds[0]));
	api->flush_ev = event_new(api->base, -1, 0, on_flush, api);
	api->wait_head = NULL;
	api->wait_tail = &api->wait_head;
	/* Batches commit without waiting for the disk; their answers wait for the sync thread
	 * (server/store/store_sync.c). Without it, each batch's COMMIT syncs as before. */
	if (store_sync_start(api->store) == 0) {
		api->sync_ev = event_new(api->base, store_sync_fd(api->store), EV_READ | EV_PERSIST,
					 on_synced, api);
		event_add(api->sync_ev, NULL);
	} else {
		log_warn("http", "sync_thread_off", "reason=%s",
			 log_q("each batch's commit syncs on the loop"));
	}
	api->evh = evhttp_new(api->base);
	/* evhttp's own 413 (an HTML body) only fires far past the cap; up to it, read_body
	 * answers with the JSON error every client expects. */
	evhttp_set_max_body_size(api->evh, (ev_ssize_t)cfg->http_max_body_bytes * 4 + 4096);
	evhttp_set_max_headers_size(api->evh, (ev_ssize_t)cfg->http_max_header_bytes);
	evhttp_set_timeout(api->evh, (int)cfg->http_timeout_seconds);
	evhttp_set_allowed_methods(api->evh, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
						      EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD |
						      EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS);
	evhttp_set_gencb(api->evh, on_request, api);
	struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(api->evh, host,
									(ev_uint16_t)port);
	if (!bs) {
		snprintf(err, errlen, "listen: cannot bind %s", cfg->listen);
		return GWB_EIO;
	}
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
		snprintf(api->url, sizeof api->url, "http://[%s]:%d", addr, real_port);
	else
		snprintf(api->url, sizeof api->url, "http://%s:%d", addr, real_port);
	return 0;
}

void http_stop(struct api_ctx *api)
{
	/* Decisions still waiting are made and answered before evhttp frees their requests;
	 * stopping the sync thread makes every commit durable first. */
	batch_run(api);
	if (api->sync_ev) {
		event_free(api->sync_ev);
		api->sync_ev = NULL;
		store_sync_done(api->store);
		store_sync_stop(api->store);
	}
	durable_answer(api);
	if (api->flush_ev)
		event_free(api->flush_ev);
	api->flush_ev = NULL;
	if (api->evh)
		evhttp_free(api->evh);
	api->evh = NULL;
	ratelimit_free(api->rl);
	api->rl = NULL;
	while (api->spare) {
		struct http_deferred *d = api->spare;
		api->spare = d->next;
		gwb_free(d);
	}
	api->nspare = 0;
	api_tasks_spares_free(api);
}
