/* Kubernetes API client on libcurl's multi-socket API. libcurl tells us which sockets and
 * which time-out to watch; libevent tells libcurl when they fire. User callbacks run only at
 * safe points (after curl_multi_socket_action returns), never inside libcurl's callbacks, and
 * cancelled transfers are reaped at the next safe point. */
#include "server/kube.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "server/server.h"

/* One answer of a list can be large (every Pod of a namespace); past this it is refused. */
#define KUBE_MAX_RESPONSE (64u << 20)

struct kreq {
	struct kube *k;
	long id;
	CURL *easy;
	struct curl_slist *headers;
	char *body_out;
	char *buf; /* one-shot: the answer; watch: bytes not yet dispatched */
	size_t len, cap;
	int is_watch;
	size_t max_line;
	int overflow;
	int cancelled;
	kube_done_fn done;
	kube_event_fn event;
	kube_end_fn end;
	void *arg;
	struct kreq *next;
};

struct kube {
	struct event_base *base;
	CURLM *multi;
	struct event *timer;
	struct event *safe_point; /* zero-timeout event: reap cancelled transfers */
	struct kube_auth auth;
	long next_id;
	struct kreq *reqs;
	int reachable;         /* how the last request that ended went */
	long requests, failures;
	char last_error[160];
};

static void dup_auth(struct kube_auth *dst, const struct kube_auth *src)
{
	*dst = *src;
	dst->ca_pem = src->ca_pem ? gwb_strdup(src->ca_pem) : NULL;
	dst->token = src->token ? gwb_strdup(src->token) : NULL;
	dst->cert_pem = src->cert_pem ? gwb_strdup(src->cert_pem) : NULL;
	dst->key_pem = src->key_pem ? gwb_strdup(src->key_pem) : NULL;
}

const char *kube_server(const struct kube *k)
{
	return k->auth.server;
}

void kube_refresh_token(struct kube *k)
{
	if (k->auth.token_file[0] && kube_auth_reload_token(&k->auth))
		log_warn("kube", "token_reload_failed", "file=%s", log_q(k->auth.token_file));
}

static void req_free(struct kreq *r)
{
	if (r->easy) {
		curl_multi_remove_handle(r->k->multi, r->easy);
		curl_easy_cleanup(r->easy);
	}
	curl_slist_free_all(r->headers);
	gwb_free(r->body_out);
	gwb_free(r->buf);
	gwb_free(r);
}

static void req_unlink(struct kreq *r)
{
	for (struct kreq **pp = &r->k->reqs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			return;
		}
	}
}

/* Delivers the complete lines buffered for a watch. */
static void watch_dispatch(struct kreq *r)
{
	size_t start = 0;
	for (size_t i = 0; i < r->len && !r->cancelled; i++) {
		if (r->buf[i] != '\n')
			continue;
		size_t n = i - start;
		if (n > 0) {
			json_error_t je;
			json_t *ev = json_loadb(r->buf + start, n, 0, &je);
			json_t *type = json_object_get(ev, "type");
			json_t *obj = json_object_get(ev, "object");
			if (json_is_string(type) && json_is_object(obj))
				r->event(r->arg, json_string_value(type), obj);
			else
				log_warn("kube", "watch_bad_line", "error=%s", log_q(je.text));
			json_decref(ev);
		}
		start = i + 1;
	}
	if (start > 0) {
		memmove(r->buf, r->buf + start, r->len - start);
		r->len -= start;
	}
}

static void classify(struct kreq *r, CURLcode cc, struct kube_result *res, json_t **body)
{
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	res->status = status;
	res->body = NULL;
	res->reason = NULL;
	*body = NULL;
	if (!r->is_watch && r->len > 0)
		*body = res->body = json_loadb(r->buf, r->len, 0, NULL);
	if (cc == CURLE_OK) {
		if (status >= 200 && status < 300)
			res->outcome = KUBE_OK;
		else if (status >= 400 && status < 500 && status != 408 && status != 429)
			res->outcome = KUBE_REJECTED;
		else
			res->outcome = KUBE_UNKNOWN;
		json_t *reason = json_object_get(res->body, "reason");
		if (res->outcome != KUBE_OK)
			res->reason = json_is_string(reason) ? json_string_value(reason) : "HTTPError";
	} else if (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) {
		res->outcome = KUBE_NOT_SENT;
		res->reason = curl_easy_strerror(cc);
	} else {
		res->outcome = KUBE_UNKNOWN;
		res->reason = r->overflow ? "line or answer too large" : curl_easy_strerror(cc);
	}
}

static void note_outcome(struct kube *k, const struct kreq *r, const struct kube_result *res)
{
	/* A watch that the server closed normally says nothing about reachability. */
	if (r->is_watch && res->outcome == KUBE_OK)
		return;
	k->requests++;
	k->reachable = res->outcome == KUBE_OK || res->outcome == KUBE_REJECTED;
	if (!k->reachable) {
		k->failures++;
		snprintf(k->last_error, sizeof k->last_error, "%s (status %ld)",
			 res->reason ? res->reason : "no answer", res->status);
	}
}

int kube_reachable(const struct kube *k)
{
	return k->reachable;
}

void kube_describe(const struct kube *k, json_t *o)
{
	json_object_set_new(o, "reachable", json_boolean(k->reachable));
	json_object_set_new(o, "last_error",
			    k->last_error[0] ? json_string(k->last_error) : json_null());
	json_object_set_new(o, "requests", json_integer(k->requests));
	json_object_set_new(o, "failures", json_integer(k->failures));
}

/* The safe point: finished transfers report, watches deliver, cancelled ones are freed. */
static void process(struct kube *k)
{
	CURLMsg *m;
	int left;
	while ((m = curl_multi_info_read(k->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct kreq *r = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		CURLcode cc = m->data.result;
		req_unlink(r);
		if (!r->cancelled) {
			if (r->is_watch)
				watch_dispatch(r);
			struct kube_result res;
			json_t *body;
			classify(r, cc, &res, &body);
			note_outcome(k, r, &res);
			if (!r->cancelled) {
				if (r->is_watch)
					r->end(r->arg, &res);
				else
					r->done(r->arg, &res);
			}
			json_decref(body);
		}
		req_free(r);
	}
	for (struct kreq *r = k->reqs; r; r = r->next)
		if (r->is_watch && r->len && !r->cancelled)
			watch_dispatch(r);
	for (struct kreq **pp = &k->reqs; *pp;) {
		struct kreq *r = *pp;
		if (r->cancelled) {
			*pp = r->next;
			req_free(r);
		} else {
			pp = &r->next;
		}
	}
}

static void on_socket_event(evutil_socket_t fd, short what, void *arg)
{
	struct kube *k = arg;
	int flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);
	int running;
	curl_multi_socket_action(k->multi, fd, flags, &running);
	process(k);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct kube *k = arg;
	int running;
	curl_multi_socket_action(k->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	process(k);
}

static void on_safe_point(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	process(arg);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
	(void)easy;
	struct kube *k = userp;
	struct event *ev = socketp;
	if (what == CURL_POLL_REMOVE) {
		if (ev) {
			event_free(ev);
			curl_multi_assign(k->multi, s, NULL);
		}
		return 0;
	}
	short kind = EV_PERSIST | (what & CURL_POLL_IN ? EV_READ : 0) |
		     (what & CURL_POLL_OUT ? EV_WRITE : 0);
	if (ev) {
		event_del(ev);
		event_assign(ev, k->base, s, kind, on_socket_event, k);
	} else {
		ev = event_new(k->base, s, kind, on_socket_event, k);
		curl_multi_assign(k->multi, s, ev);
	}
	event_add(ev, NULL);
	return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
	(void)multi;
	struct kube *k = userp;
	if (timeout_ms < 0) {
		evtimer_del(k->timer);
		return 0;
	}
	/* A zero time-out still goes through the loop, never recursing into libcurl. */
	struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
	evtimer_add(k->timer, &tv);
	return 0;
}

static size_t write_cb(char *data, size_t size, size_t n, void *arg)
{
	struct kreq *r = arg;
	size_t add = size * n;
	if (r->cancelled)
		return 0;
	size_t limit = r->is_watch ? r->max_line : KUBE_MAX_RESPONSE;
	if (r->len + add > limit) {
		/* For a watch, buffered bytes are whole lines waiting for the safe point plus
		 * one partial line; the cap bounds both. */
		r->overflow = 1;
		return 0;
	}
	if (r->len + add + 1 > r->cap) {
		size_t cap = r->cap ? r->cap : 8192;
		while (cap < r->len + add + 1)
			cap *= 2;
		char *nb = gwb_try_malloc(cap);
		if (!nb) {
			r->overflow = 1;
			return 0;
		}
		if (r->len)
			memcpy(nb, r->buf, r->len);
		gwb_free(r->buf);
		r->buf = nb;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, data, add);
	r->len += add;
	r->buf[r->len] = '\0';
	if (r->is_watch && memchr(data, '\n', add))
		event_active(r->k->safe_point, EV_TIMEOUT, 0);
	return add;
}

static void set_tls(struct kube *k, CURL *e)
{
	const struct kube_auth *a = &k->auth;
	if (a->ca_pem) {
		struct curl_blob b = { a->ca_pem, strlen(a->ca_pem), CURL_BLOB_COPY };
		curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &b);
	} else if (a->ca_file[0]) {
		curl_easy_setopt(e, CURLOPT_CAINFO, a->ca_file);
	}
	if (a->insecure) {
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (a->cert_pem) {
		struct curl_blob b = { a->cert_pem, strlen(a->cert_pem), CURL_BLOB_COPY };
		curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
	} else if (a->cert_file[0]) {
		curl_easy_setopt(e, CURLOPT_SSLCERT, a->cert_file);
	}
	if (a->key_pem) {
		struct curl_blob b = { a->key_pem, strlen(a->key_pem), CURL_BLOB_COPY };
		curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &b);
		curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
	} else if (a->key_file[0]) {
		curl_easy_setopt(e, CURLOPT_SSLKEY, a->key_file);
	}
}

static struct kreq *req_new(struct kube *k, const char *method, const char *path)
{
	struct kreq *r = gwb_calloc(1, sizeof *r);
	r->k = k;
	r->id = ++k->next_id;
	r->easy = curl_easy_init();
	char url[2048];
	snprintf(url, sizeof url, "%s%s", k->auth.server, path);
	curl_easy_setopt(r->easy, CURLOPT_URL, url);
	curl_easy_setopt(r->easy, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(r->easy, CURLOPT_PRIVATE, (char *)r);
	curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(r->easy, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(r->easy, CURLOPT_USERAGENT, "gwb-server/" GWB_VERSION);
	r->headers = curl_slist_append(r->headers, "Accept: application/json");
	if (k->auth.token) {
		char h[4096];
		snprintf(h, sizeof h, "Authorization: Bearer %s", k->auth.token);
		r->headers = curl_slist_append(r->headers, h);
	}
	set_tls(k, r->easy);
	return r;
}

static long req_start(struct kube *k, struct kreq *r)
{
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
	if (curl_multi_add_handle(k->multi, r->easy) != CURLM_OK) {
		req_free(r);
		return GWB_EIO;
	}
	r->next = k->reqs;
	k->reqs = r;
	return r->id;
}

long kube_request(struct kube *k, const char *method, const char *path, const json_t *body,
		  const char *content_type, int timeout_ms, kube_done_fn done, void *arg)
{
	struct kreq *r = req_new(k, method, path);
	r->done = done;
	r->arg = arg;
	curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < 5000 ? timeout_ms
										      : 5000));
	if (body) {
		char h[160];
		r->body_out = jx_dump(body);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body_out);
		curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(r->body_out));
		snprintf(h, sizeof h, "Content-Type: %s",
			 content_type ? content_type : "application/json");
		r->headers = curl_slist_append(r->headers, h);
		r->headers = curl_slist_append(r->headers, "Expect:");
	}
	return req_start(k, r);
}

long kube_watch(struct kube *k, const char *path, size_t max_line, int idle_s,
		kube_event_fn event, kube_end_fn end, void *arg)
{
	struct kreq *r = req_new(k, "GET", path);
	r->is_watch = 1;
	r->max_line = max_line;
	r->event = event;
	r->end = end;
	r->arg = arg;
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_TIME, (long)(idle_s > 0 ? idle_s : 1));
	return req_start(k, r);
}

void kube_cancel(struct kube *k, long id)
{
	for (struct kreq *r = k->reqs; r; r = r->next) {
		if (r->id == id) {
			r->cancelled = 1;
			event_active(k->safe_point, EV_TIMEOUT, 0);
			return;
		}
	}
}

int kube_new(struct kube **out, struct event_base *base, const struct kube_auth *auth, char *err,
	     size_t errlen)
{
	static int curl_ready;
	if (!curl_ready++ && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(err, errlen, "libcurl initialisation failed");
		return GWB_EIO;
	}
	struct kube *k = gwb_calloc(1, sizeof *k);
	k->base = base;
	k->reachable = 1;
	dup_auth(&k->auth, auth);
	k->multi = curl_multi_init();
	k->timer = evtimer_new(base, on_timer, k);
	k->safe_point = event_new(base, -1, 0, on_safe_point, k);
	curl_multi_setopt(k->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(k->multi, CURLMOPT_SOCKETDATA, k);
	curl_multi_setopt(k->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(k->multi, CURLMOPT_TIMERDATA, k);
	*out = k;
	return 0;
}

void kube_free(struct kube *k)
{
	if (!k)
		return;
	while (k->reqs) {
		struct kreq *r = k->reqs;
		k->reqs = r->next;
		req_free(r);
	}
	curl_multi_cleanup(k->multi);
	event_free(k->timer);
	event_free(k->safe_point);
	kube_auth_free(&k->auth);
	gwb_free(k);
}

char *kube_query_escape(const char *s, char *out, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;
	for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < len; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '-' || *p == '_' || *p == '.' || *p == '~') {
			out[o++] = (char)*p;
		} else {
			out[o++] = '%';
			out[o++] = hex[*p >> 4];
			out[o++] = hex[*p & 15];
		}
	}
	out[o] = '\0';
	return out;
}
