/* Kubernetes API client on libcurl's multi-socket API. libcurl tells us which sockets and
 * which time-out to watch; libevent tells libcurl when they fire. User callbacks run only at
 * safe points (after curl_multi_socket_action returns), never inside libcurl's callbacks, and
 * cancelled transfers are reaped at the next safe point. Flow control sits in front of
 * libcurl: every request waits in the local priority queue (server/kube/kubeflow.h) until a slot
 * and a token let it go; only then is it handed to libcurl, so its time-out runs from the
 * send. A 429 puts it back in the queue for Retry-After. */
#include "server/kube/kube.h"

#include <curl/curl.h>
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "lib/prom.h"
#include "server/kube/kubeflow.h"
#include "server/server.h"

/* One answer of a list can be large (every Pod of a namespace); past this it is refused. */
#define KUBE_MAX_RESPONSE (64u << 20)
/* 429s of one request before it ends as KUBE_NOT_SENT: with Retry-After of a second or two,
 * about a minute of a server that keeps refusing. */
#define KUBE_MAX_429 32
/* Counters of requests by (verb, code), at most; more pairs are counted under the last. */
#define KUBE_MAX_CODES 64

/* The request histograms' bounds, in seconds. */
static const double hist_bounds[] = { 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
				      1,     2.5,  5,     10,   30,  60,  120 };
#define HIST_N ((int)(sizeof hist_bounds / sizeof hist_bounds[0]))

enum kreq_state { KR_QUEUED, KR_SENT };

struct kreq {
	struct kubeflow_item qi; /* first: the queue hands back &r->qi */
	struct kube *k;
	long id;
	CURL *easy;
	struct curl_slist *headers;
	char *body_out;
	char *buf; /* one-shot: the answer; watch: bytes not yet dispatched */
	size_t len, cap;
	int is_watch;
	int is_stream;    /* raw bytes delivered as they come (kube_stream) */
	int long_running; /* a stream of its own slots, outside the queue */
	int opened;       /* a stream whose 2xx answer began (its owner was told) */
	size_t max_line;
	int overflow;
	int cancelled;
	kube_done_fn done;
	kube_event_fn event;
	kube_end_fn end;
	kube_data_fn data;
	void *arg;
	struct kreq *next;
	enum kreq_state state;
	enum kubeflow_verb verb;
	int n429;                /* 429s answered so far */
	int64_t queued_ms, sent_ms; /* monotonic */
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
	/* flow control */
	struct kubeflow_queue queue;
	struct kubeflow_bucket bucket;
	struct event *wake; /* a token or a Retry-After is due */
	uint64_t seq;
	int max_inflight;
	int inflight;       /* requests handed to libcurl (watches apart) */
	int watches;        /* watches handed to libcurl */
	int streams;        /* long-running streams, sent or waiting for the next safe point */
	int queued_requests; /* queued, watches apart */
	kube_room_fn room_fn;
	void *room_arg;
	/* metrics */
	struct {
		enum kubeflow_verb verb;
		long code;
		int64_t n;
	} codes[KUBE_MAX_CODES];
	int ncodes;
	int64_t retried_429;
	struct prom_hist duration, wait; /* seconds */
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
	if (r->qi.queued) {
		kubeflow_remove(&r->k->queue, &r->qi);
		if (!r->is_watch)
			r->k->queued_requests--;
	}
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

/* Delivers the complete lines buffered for a watch; an error answer's body (a Status) stays
 * for classify(). */
static void watch_dispatch(struct kreq *r)
{
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status / 100 != 2)
		return;
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

/* Hands a stream's buffered bytes to its owner; an error answer's body (a Status) stays for
 * classify(). */
static void stream_dispatch(struct kreq *r)
{
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	if (status / 100 != 2 || (r->opened && !r->len))
		return;
	r->opened = 1; /* the first call, maybe without bytes, says the answer began */
	size_t n = r->len;
	r->len = 0; /* before the call: the owner may cancel from it */
	r->data(r->arg, n ? r->buf : "", n);
}

static void deliver(struct kreq *r)
{
	if (r->is_watch)
		watch_dispatch(r);
	else if (r->is_stream)
		stream_dispatch(r);
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
		else if (status == 429)
			res->outcome = KUBE_NOT_SENT; /* throttled every time: never acted on */
		else if (status >= 400 && status < 500 && status != 408)
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
	json_object_set_new(o, "in_flight", json_integer(k->inflight));
	json_object_set_new(o, "watches", json_integer(k->watches));
	json_object_set_new(o, "queued", json_integer(k->queue.depth));
	json_object_set_new(o, "max_in_flight", json_integer(k->max_inflight));
	json_object_set_new(o, "throttled_retries", json_integer(k->retried_429));
}

/* ---- flow control ---- */

static void count_code(struct kube *k, enum kubeflow_verb v, long code)
{
	int i = 0;
	while (i < k->ncodes && (k->codes[i].verb != v || k->codes[i].code != code))
		i++;
	if (i == k->ncodes) {
		if (k->ncodes == KUBE_MAX_CODES)
			i = KUBE_MAX_CODES - 1; /* more pairs than expected: lumped with the last */
		else
			k->ncodes++;
		k->codes[i].verb = v;
		k->codes[i].code = code;
	}
	k->codes[i].n++;
}

static void enqueue(struct kube *k, struct kreq *r)
{
	r->state = KR_QUEUED;
	kubeflow_push(&k->queue, &r->qi);
	if (!r->is_watch)
		k->queued_requests++;
	event_active(k->safe_point, EV_TIMEOUT, 0);
}

static void finish(struct kube *k, struct kreq *r, CURLcode cc);

/* Hands a queued request to libcurl: from here on its time-out runs. */
static void send_req(struct kube *k, struct kreq *r, int64_t now)
{
	kubeflow_remove(&k->queue, &r->qi);
	r->state = KR_SENT;
	r->sent_ms = now;
	prom_hist_observe(&k->wait, (double)(now - r->queued_ms) / 1000.0);
	if (r->is_watch) {
		k->watches++;
	} else if (r->long_running) {
		/* counted since kube_stream */
	} else {
		k->queued_requests--;
		k->inflight++;
	}
	curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
	if (curl_multi_add_handle(k->multi, r->easy) != CURLM_OK)
		finish(k, r, CURLE_FAILED_INIT); /* nothing went out: KUBE_NOT_SENT */
}

static void arm_wake(struct kube *k, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	evtimer_add(k->wake, &tv);
}

/* Sends what the slots and the bucket allow, most urgent first; arms the wake-up timer for
 * the next token or Retry-After. Runs at safe points only. */
static void dispatch(struct kube *k)
{
	int64_t now = clock_mono_ms();
	for (struct kreq *r = k->reqs, *next; r; r = next) {
		next = r->next; /* a send that cannot start ends (and frees) r */
		if (r->long_running && r->state == KR_QUEUED && !r->cancelled)
			send_req(k, r, now);
	}
	for (;;) {
		struct kubeflow_item *it = kubeflow_next(&k->queue, now, k->watches < KUBE_WATCH_SLOTS,
							 k->inflight < k->max_inflight);
		if (!it)
			break;
		if (!kubeflow_bucket_take(&k->bucket, now)) {
			arm_wake(k, kubeflow_bucket_wait_ms(&k->bucket, now));
			return;
		}
		send_req(k, (struct kreq *)it, now);
	}
	int64_t due = kubeflow_next_due(&k->queue, now);
	if (due)
		arm_wake(k, due - now);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	dispatch(arg);
}

/* A 429 answer: back in the queue at its place, not before Retry-After. 1 when requeued, 0
 * when it has been throttled too often (it then ends as KUBE_NOT_SENT). */
static int requeue_throttled(struct kube *k, struct kreq *r)
{
	if (r->cancelled || r->n429 >= KUBE_MAX_429)
		return 0;
	curl_off_t ra = -1;
	if (curl_easy_getinfo(r->easy, CURLINFO_RETRY_AFTER, &ra) != CURLE_OK || ra <= 0)
		ra = -1; /* libcurl reports 0 for an absent header: our own back-off then */
	r->n429++;
	k->retried_429++;
	int64_t delay = kubeflow_retry_delay_ms((long)ra, r->n429);
	log_info("kube", "throttled", "verb=%s tries=%d retry_after_s=%" PRId64 " wait_ms=%" PRId64,
		 kubeflow_verb_name(r->verb), r->n429, (int64_t)ra, delay);
	curl_multi_remove_handle(k->multi, r->easy);
	r->len = 0;
	r->overflow = 0;
	r->qi.not_before_ms = clock_mono_ms() + delay;
	r->queued_ms = clock_mono_ms();
	enqueue(k, r);
	return 1;
}

/* A transfer ended (or could not start): slots, metrics, then 429 handling or the one
 * callback. Runs at a safe point; r is freed here unless it went back in the queue. */
static void finish(struct kube *k, struct kreq *r, CURLcode cc)
{
	int64_t now = clock_mono_ms();
	long status = 0;
	curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
	if (r->is_watch) {
		k->watches--;
	} else if (r->long_running) {
		k->streams--;
	} else {
		k->inflight--;
		prom_hist_observe(&k->duration, (double)(now - r->sent_ms) / 1000.0);
	}
	count_code(k, r->verb, cc == CURLE_OK ? status : 0);
	if (cc == CURLE_OK && status == 429 && !r->long_running && requeue_throttled(k, r))
		return;
	/* A watch's last lines are delivered while it is still linked, so that a handler that
	 * cancels it (an ERROR event, say a 410, as the stream's last line) is found by
	 * kube_cancel and gets no end report after its cancel. */
	if (!r->cancelled)
		deliver(r);
	req_unlink(r);
	if (!r->cancelled) {
		struct kube_result res;
		json_t *body;
		classify(r, cc, &res, &body);
		if (cc == CURLE_FAILED_INIT) {
			res.outcome = KUBE_NOT_SENT;
			res.reason = "the transfer could not start";
		}
		note_outcome(k, r, &res);
		if (!r->cancelled) {
			if (r->is_watch || r->is_stream)
				r->end(r->arg, &res);
			else
				r->done(r->arg, &res);
		}
		json_decref(body);
	}
	req_free(r);
}

int kube_window(const struct kube *k)
{
	/* One round in flight and one waiting: the pipe stays full, the queue stays short. */
	return 2 * k->max_inflight;
}

int kube_room(const struct kube *k)
{
	int room = kube_window(k) - k->inflight - k->queued_requests;
	return room > 0 ? room : 0;
}

void kube_on_room(struct kube *k, kube_room_fn fn, void *arg)
{
	k->room_fn = fn;
	k->room_arg = arg;
}

void kube_set_flow(struct kube *k, int max_inflight, double qps, int burst)
{
	k->max_inflight = max_inflight > 0 ? max_inflight : 1;
	kubeflow_bucket_init(&k->bucket, qps, burst, clock_mono_ms());
	/* A bounded pool: each request in flight and each watch holds at most one connection
	 * (HTTP/1.1); with HTTP/2 they share a few. Idle ones are kept alive for reuse. */
	long conns = (long)k->max_inflight + KUBE_WATCH_SLOTS + KUBE_STREAM_SLOTS;
	curl_multi_setopt(k->multi, CURLMOPT_MAX_HOST_CONNECTIONS, conns);
	curl_multi_setopt(k->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, conns);
	curl_multi_setopt(k->multi, CURLMOPT_MAXCONNECTS, conns);
	curl_multi_setopt(k->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_MULTIPLEX);
}

void kube_metrics_write(const struct kube *k, struct evbuffer *b)
{
	prom_family(b, "gwb_kube_requests_total", PROM_COUNTER, NULL);
	for (int i = 0; i < k->ncodes; i++) {
		char code[16];
		if (k->codes[i].code)
			snprintf(code, sizeof code, "%ld", k->codes[i].code);
		else
			snprintf(code, sizeof code, "error");
		struct prom_label l[2] = { { "verb", kubeflow_verb_name(k->codes[i].verb) },
					   { "code", code } };
		prom_sample_int(b, "gwb_kube_requests_total", l, 2, k->codes[i].n);
	}
	prom_gauge(b, "gwb_kube_requests_inflight", NULL, k->inflight);
	prom_gauge(b, "gwb_kube_requests_max_inflight", NULL, k->max_inflight);
	prom_gauge(b, "gwb_kube_watches_open", NULL, k->watches);
	prom_gauge(b, "gwb_kube_streams_open", NULL, k->streams);
	prom_gauge(b, "gwb_kube_request_queue_depth", NULL, k->queue.depth);
	prom_counter(b, "gwb_kube_throttled_retries_total", NULL, k->retried_429);
	prom_hist_write(b, "gwb_kube_request_duration_seconds", NULL, &k->duration);
	prom_hist_write(b, "gwb_kube_request_queue_wait_seconds", NULL, &k->wait);
}

/* The safe point: finished transfers report, watches deliver, cancelled ones are freed, and
 * the queue sends what it may. */
static void process(struct kube *k)
{
	CURLMsg *m;
	int left, freed = 0;
	while ((m = curl_multi_info_read(k->multi, &left))) {
		if (m->msg != CURLMSG_DONE)
			continue;
		struct kreq *r = NULL;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
		freed += !r->is_watch;
		finish(k, r, m->data.result);
	}
	for (struct kreq *r = k->reqs; r; r = r->next)
		if (((r->is_watch && r->len) || r->is_stream) && r->state == KR_SENT &&
		    !r->cancelled)
			deliver(r);
	for (struct kreq **pp = &k->reqs; *pp;) {
		struct kreq *r = *pp;
		if (r->cancelled) {
			*pp = r->next;
			if (r->long_running) {
				k->streams--; /* sent or not: its slot was taken at kube_stream */
			} else if (r->state == KR_SENT) {
				/* Its slot frees now; it never reports, so it is not counted. */
				if (r->is_watch) {
					k->watches--;
				} else {
					k->inflight--;
					freed++;
				}
			}
			req_free(r);
		} else {
			pp = &r->next;
		}
	}
	dispatch(k);
	if (freed && k->room_fn && kube_room(k) > 0)
		k->room_fn(k->room_arg);
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
	size_t limit = r->is_watch || r->is_stream ? r->max_line : KUBE_MAX_RESPONSE;
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
	if ((r->is_watch && memchr(data, '\n', add)) || r->is_stream)
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

static struct kreq *req_new(struct kube *k, const char *method, const char *path, int is_watch,
			    const char *accept)
{
	struct kreq *r = gwb_calloc(1, sizeof *r);
	r->k = k;
	r->id = ++k->next_id;
	r->is_watch = is_watch;
	r->verb = kubeflow_verb_of(method, path, is_watch);
	r->qi.cls = kubeflow_class_of(r->verb);
	r->qi.is_watch = is_watch;
	r->qi.seq = ++k->seq;
	r->queued_ms = clock_mono_ms();
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
	/* HTTP/2 when TLS offers it, streams multiplexed on one connection (PIPEWAIT: wait for
	 * it rather than open another); plain http stays HTTP/1.1 over kept-alive connections. */
	curl_easy_setopt(r->easy, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
	if (strncmp(k->auth.server, "https:", 6) == 0)
		curl_easy_setopt(r->easy, CURLOPT_PIPEWAIT, 1L);
	char ah[96];
	snprintf(ah, sizeof ah, "Accept: %s", accept);
	r->headers = curl_slist_append(r->headers, ah);
	if (k->auth.token) {
		char h[4096];
		snprintf(h, sizeof h, "Authorization: Bearer %s", k->auth.token);
		r->headers = curl_slist_append(r->headers, h);
	}
	set_tls(k, r->easy);
	return r;
}

/* Queues the request; it is sent from the loop, never from inside the caller's call. */
static long req_start(struct kube *k, struct kreq *r)
{
	r->next = k->reqs;
	k->reqs = r;
	enqueue(k, r);
	return r->id;
}

long kube_request(struct kube *k, const char *method, const char *path, const json_t *body,
		  const char *content_type, int timeout_ms, kube_done_fn done, void *arg)
{
	struct kreq *r = req_new(k, method, path, 0, "application/json");
	r->done = done;
	r->arg = arg;
	/* libcurl counts this from curl_multi_add_handle, which happens at the send: time spent
	 * in the local queue is never part of it. */
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
	struct kreq *r = req_new(k, "GET", path, 1, "application/json");
	r->max_line = max_line;
	r->event = event;
	r->end = end;
	r->arg = arg;
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(r->easy, CURLOPT_LOW_SPEED_TIME, (long)(idle_s > 0 ? idle_s : 1));
	return req_start(k, r);
}

long kube_stream(struct kube *k, const char *path, int long_running, int timeout_ms,
		 size_t max_buffer, kube_data_fn data, kube_end_fn end, void *arg)
{
	if (long_running && k->streams >= KUBE_STREAM_SLOTS)
		return GWB_EBUSY;
	struct kreq *r = req_new(k, "GET", path, 0, "text/plain, */*");
	r->is_stream = 1;
	r->long_running = long_running;
	r->max_line = max_buffer;
	r->data = data;
	r->end = end;
	r->arg = arg;
	curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	if (!long_running) {
		/* The queue's last class: a log read never holds the reconciler's work back. */
		r->qi.cls = KUBEFLOW_CREATE;
		curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
		return req_start(k, r);
	}
	/* Outside the queue: sent at the next safe point, on a slot of its own. */
	k->streams++;
	r->state = KR_QUEUED;
	r->next = k->reqs;
	k->reqs = r;
	event_active(k->safe_point, EV_TIMEOUT, 0);
	return r->id;
}

void kube_stream_pause(struct kube *k, long id, int pause)
{
	for (struct kreq *r = k->reqs; r; r = r->next) {
		if (r->id != id || !r->is_stream || r->cancelled)
			continue;
		if (r->state == KR_SENT)
			curl_easy_pause(r->easy, pause ? CURLPAUSE_RECV : CURLPAUSE_CONT);
		return;
	}
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
	prom_hist_init(&k->duration, hist_bounds, HIST_N);
	prom_hist_init(&k->wait, hist_bounds, HIST_N);
	dup_auth(&k->auth, auth);
	k->multi = curl_multi_init();
	k->timer = evtimer_new(base, on_timer, k);
	k->safe_point = event_new(base, -1, 0, on_safe_point, k);
	k->wake = evtimer_new(base, on_wake, k);
	curl_multi_setopt(k->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
	curl_multi_setopt(k->multi, CURLMOPT_SOCKETDATA, k);
	curl_multi_setopt(k->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
	curl_multi_setopt(k->multi, CURLMOPT_TIMERDATA, k);
	kube_set_flow(k, KUBE_DEFAULT_MAX_INFLIGHT, KUBE_DEFAULT_QPS, KUBE_DEFAULT_BURST);
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
	event_free(k->wake);
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
