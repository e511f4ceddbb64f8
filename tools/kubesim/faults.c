/* Fault injection. The control endpoint (README "Faults") is served on the API port under
 * /_kubesim/ and on the optional --control-socket, which stays reachable while the API port
 * refuses connections:
 *
 *   GET    /_kubesim/faults          the current fault set
 *   PUT    /_kubesim/faults          set fields (absent fields keep their value):
 *            {"api": "ok"|"refuse"|"hang", "api_for_ms": N, "slow_ms": N,
 *             "withhold_create": {"resource": "jobs"|"*", "count": N},
 *             "stuck_terminating": ["ns/name"|"*", ...],
 *             "throttle": {"count": N, "retry_after_s": S},
 *             "cut_watches_every_ms": N, "watch_gone": {"count": N}}
 *            throttle: the next N API requests other than watches are answered 429
 *            TooManyRequests with Retry-After: S (as the API server's priority and
 *            fairness does), and nothing is done for them
 *            cut_watches_every_ms: every N ms each open watch stream's connection is shut
 *            down under it, with no terminating chunk (a network cut; 0: off)
 *            watch_gone: the next N watch requests that resume from a resourceVersion get
 *            one ERROR event with a Status of code 410 (reason Expired), then the end of
 *            the stream, as the API server answers a version it no longer holds
 *   DELETE /_kubesim/faults          clear every fault
 *   POST   /_kubesim/actions/orphan-job     {"namespace": ns, "name": job}
 *   POST   /_kubesim/actions/device-health  {"node": n, "minor": m, "healthy": b, "xid": x}
 *   GET    /_kubesim/state           resourceVersion, open watches, running containers, the
 *                                    in-flight limits and the Job controller's pass figures
 *   POST   /_kubesim/actions/resync      one Job controller pass over every Job (figures)
 *   GET|PUT /_kubesim/limits         the in-flight limits: {"max_requests_inflight": N,
 *                                    "max_mutating_requests_inflight": M} (0: no limit) */
#include "tools/kubesim/faults.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "tools/kubesim/devices.h"
#include "tools/kubesim/jobctl.h"
#include "tools/kubesim/kubelet.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"
#include "tools/kubesim/watch.h"

#define MAX_STUCK 64

enum api_mode { API_OK, API_REFUSE, API_HANG };

struct faults {
	struct ks *ks;
	enum api_mode api;
	int64_t api_until_ms; /* 0: until cleared */
	long slow_ms;
	char withhold_res[64];
	long withhold_count;
	int nstuck;
	char stuck[MAX_STUCK][512];
	long throttle_count, throttle_retry_after_s;
	long cut_every_ms;   /* 0: off */
	int64_t next_cut_ms; /* when the next cut is due */
	long watch_gone;     /* watch resumes still to be answered 410 */
};

static const char *mode_name(enum api_mode m)
{
	switch (m) {
	case API_OK: return "ok";
	case API_REFUSE: return "refuse";
	case API_HANG: return "hang";
	}
	return "?";
}

struct faults *faults_new(struct ks *ks)
{
	struct faults *f = gwb_calloc(1, sizeof *f);
	f->ks = ks;
	return f;
}

void faults_free(struct faults *f)
{
	gwb_free(f);
}

static int set_api(struct faults *f, enum api_mode m)
{
	struct http *hp = f->ks->http;
	if (http_set_refuse(hp, m == API_REFUSE) < 0)
		return GWB_EIO;
	http_set_hang(hp, m == API_HANG);
	if (m != f->api)
		log_info("faults", "api_mode", "mode=%s", mode_name(m));
	f->api = m;
	return 0;
}

void faults_tick(struct faults *f)
{
	int64_t now = clock_now_ms();
	if (f->api != API_OK && f->api_until_ms && now >= f->api_until_ms) {
		f->api_until_ms = 0;
		set_api(f, API_OK);
	}
	if (f->cut_every_ms > 0 && now >= f->next_cut_ms) {
		f->next_cut_ms = now + f->cut_every_ms;
		int n = watch_cut_all(f->ks->watch);
		if (n)
			log_info("faults", "watches_cut", "streams=%d", n);
	}
}

int faults_watch_gone(struct faults *f)
{
	if (f->watch_gone <= 0)
		return 0;
	f->watch_gone--;
	return 1;
}

int faults_withhold_answer(struct faults *f, const char *verb, const struct res_def *r)
{
	if (strcmp(verb, "create") || f->withhold_count <= 0)
		return 0;
	if (strcmp(f->withhold_res, "*") && strcmp(f->withhold_res, r->plural))
		return 0;
	f->withhold_count--;
	return 1;
}

int faults_pod_stuck(const struct faults *f, const json_t *pod)
{
	char key[520];
	snprintf(key, sizeof key, "%s/%s", obj_ns(pod), obj_name(pod));
	for (int i = 0; i < f->nstuck; i++)
		if (!strcmp(f->stuck[i], "*") || !strcmp(f->stuck[i], key))
			return 1;
	return 0;
}

int faults_throttle(struct faults *f, struct hreq *h)
{
	const char *watch = http_query(h, "watch");
	if (f->throttle_count <= 0 || (watch && (!strcmp(watch, "1") || !strcmp(watch, "true"))))
		return 0;
	f->throttle_count--;
	char ra[24];
	snprintf(ra, sizeof ra, "%ld", f->throttle_retry_after_s);
	http_header_add(h, "Retry-After", ra);
	struct kerr e = { 0 };
	kerr_set(&e, 429, "TooManyRequests", "too many requests, please try again later");
	log_info("faults", "throttled", "method=%s path=%s left=%ld", h->method, log_q(h->path),
		 f->throttle_count);
	http_reply_kerr(h, &e);
	kerr_clear(&e);
	return 1;
}

static json_t *state_doc(const struct faults *f)
{
	json_t *stuck = json_array();
	for (int i = 0; i < f->nstuck; i++)
		json_array_append_new(stuck, json_string(f->stuck[i]));
	int64_t left = f->api_until_ms ? f->api_until_ms - clock_now_ms() : 0;
	return json_pack("{s:s, s:I, s:I, s:{s:s, s:I}, s:o, s:i, s:{s:I, s:I}, s:I, s:{s:I}}",
			 "api", mode_name(f->api), "api_for_ms", (json_int_t)(left > 0 ? left : 0),
			 "slow_ms", (json_int_t)f->slow_ms, "withhold_create", "resource",
			 f->withhold_res, "count", (json_int_t)f->withhold_count,
			 "stuck_terminating", stuck, "parked_requests",
			 http_parked_count(f->ks->http), "throttle", "count",
			 (json_int_t)f->throttle_count, "retry_after_s",
			 (json_int_t)f->throttle_retry_after_s, "cut_watches_every_ms",
			 (json_int_t)f->cut_every_ms, "watch_gone", "count",
			 (json_int_t)f->watch_gone);
}

static void reply_error(struct hreq *h, int code, const char *msg)
{
	struct kerr e = { 0 };
	kerr_set(&e, code, code == 404 ? "NotFound" : "BadRequest", "%s", msg);
	http_reply_kerr(h, &e);
	kerr_clear(&e);
}

static void clear_all(struct faults *f)
{
	f->api_until_ms = 0;
	set_api(f, API_OK);
	f->slow_ms = 0;
	http_set_slow(f->ks->http, 0);
	f->withhold_res[0] = '\0';
	f->withhold_count = 0;
	f->nstuck = 0;
	f->throttle_count = 0;
	f->cut_every_ms = 0;
	f->watch_gone = 0;
	kubelet_wake(f->ks->kubelet);
	log_info("faults", "cleared", "what=%s", "all");
}

/* Applies the fields of a fault document. Returns 0, or -1 with msg. */
static int apply(struct faults *f, const json_t *doc, char *msg, size_t len)
{
	if (!json_is_object(doc)) {
		snprintf(msg, len, "the body must be a JSON object");
		return -1;
	}
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)doc, k, v)
	{
		if (strcmp(k, "api") && strcmp(k, "api_for_ms") && strcmp(k, "slow_ms") &&
		    strcmp(k, "withhold_create") && strcmp(k, "stuck_terminating") &&
		    strcmp(k, "throttle") && strcmp(k, "cut_watches_every_ms") &&
		    strcmp(k, "watch_gone")) {
			snprintf(msg, len, "unknown field %s", k);
			return -1;
		}
	}
	json_t *api = json_object_get(doc, "api");
	json_t *for_ms = json_object_get(doc, "api_for_ms");
	if (api) {
		const char *m = json_string_value(api);
		enum api_mode mode;
		if (m && !strcmp(m, "ok"))
			mode = API_OK;
		else if (m && !strcmp(m, "refuse"))
			mode = API_REFUSE;
		else if (m && !strcmp(m, "hang"))
			mode = API_HANG;
		else {
			snprintf(msg, len, "api must be \"ok\", \"refuse\" or \"hang\"");
			return -1;
		}
		f->api_until_ms = json_integer_value(for_ms) > 0
					  ? clock_now_ms() + json_integer_value(for_ms)
					  : 0;
		if (set_api(f, mode) < 0) {
			snprintf(msg, len, "cannot re-bind the API port");
			return -1;
		}
	}
	json_t *slow = json_object_get(doc, "slow_ms");
	if (slow) {
		if (!json_is_integer(slow) || json_integer_value(slow) < 0 ||
		    json_integer_value(slow) > 600000) {
			snprintf(msg, len, "slow_ms must be an integer in [0, 600000]");
			return -1;
		}
		f->slow_ms = (long)json_integer_value(slow);
		http_set_slow(f->ks->http, f->slow_ms);
	}
	json_t *wc = json_object_get(doc, "withhold_create");
	if (wc) {
		const char *res = obj_str(wc, "resource");
		json_t *count = json_object_get(wc, "count");
		if (!res || strlen(res) >= sizeof f->withhold_res || !json_is_integer(count)) {
			snprintf(msg, len, "withhold_create needs resource and count");
			return -1;
		}
		snprintf(f->withhold_res, sizeof f->withhold_res, "%s", res);
		f->withhold_count = (long)json_integer_value(count);
	}
	json_t *th = json_object_get(doc, "throttle");
	if (th) {
		json_t *count = json_object_get(th, "count");
		json_t *ra = json_object_get(th, "retry_after_s");
		if (!json_is_integer(count) || json_integer_value(count) < 0 ||
		    (ra && (!json_is_integer(ra) || json_integer_value(ra) < 0 ||
			    json_integer_value(ra) > 3600))) {
			snprintf(msg, len, "throttle needs count >= 0 and retry_after_s in [0, 3600]");
			return -1;
		}
		f->throttle_count = (long)json_integer_value(count);
		f->throttle_retry_after_s = ra ? (long)json_integer_value(ra) : 1;
	}
	json_t *cut = json_object_get(doc, "cut_watches_every_ms");
	if (cut) {
		/* Below 50 ms a stream could not even be re-opened between two cuts. */
		if (!json_is_integer(cut) || (json_integer_value(cut) != 0 &&
					      (json_integer_value(cut) < 50 ||
					       json_integer_value(cut) > 3600000))) {
			snprintf(msg, len, "cut_watches_every_ms must be 0 or in [50, 3600000]");
			return -1;
		}
		f->cut_every_ms = (long)json_integer_value(cut);
		f->next_cut_ms = clock_now_ms() + f->cut_every_ms;
	}
	json_t *wg = json_object_get(doc, "watch_gone");
	if (wg) {
		json_t *count = json_object_get(wg, "count");
		if (!json_is_integer(count) || json_integer_value(count) < 0) {
			snprintf(msg, len, "watch_gone needs count >= 0");
			return -1;
		}
		f->watch_gone = (long)json_integer_value(count);
	}
	json_t *st = json_object_get(doc, "stuck_terminating");
	if (st) {
		if (!json_is_array(st) || json_array_size(st) > MAX_STUCK) {
			snprintf(msg, len, "stuck_terminating must be a list of ns/name (or \"*\")");
			return -1;
		}
		f->nstuck = 0;
		size_t i;
		json_t *s;
		json_array_foreach(st, i, s)
		{
			if (json_is_string(s))
				snprintf(f->stuck[f->nstuck++], sizeof f->stuck[0], "%s",
					 json_string_value(s));
		}
		kubelet_wake(f->ks->kubelet);
	}
	return 0;
}

static void orphan_job(struct hreq *h, struct ks *ks, const json_t *doc)
{
	const char *ns = obj_str(doc, "namespace"), *name = obj_str(doc, "name");
	if (!ns || !name) {
		reply_error(h, 400, "namespace and name are required");
		return;
	}
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	o.propagation = "Orphan";
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	if (registry_delete(ks->registry, res_get(RES_JOBS), ns, name, &o, &out, &gone, &e) <
	    0) {
		http_reply_kerr(h, &e);
		kerr_clear(&e);
		return;
	}
	json_decref(out);
	log_info("faults", "job_orphaned", "job=%s/%s", log_q(ns), log_q(name));
	/* Run the garbage collector now so the answer comes after the Job is gone. */
	jobctl_sync(ks->jobctl);
	http_reply_json(h, 200, json_pack("{s:s, s:s, s:s}", "result", "deleted", "namespace", ns,
					  "name", name));
}

static void device_health(struct hreq *h, struct ks *ks, const json_t *doc)
{
	const char *node = obj_str(doc, "node");
	json_t *minor = json_object_get(doc, "minor");
	json_t *healthy = json_object_get(doc, "healthy");
	if (!json_is_integer(minor) || !json_is_boolean(healthy)) {
		reply_error(h, 400, "minor (integer) and healthy (boolean) are required");
		return;
	}
	int xid = (int)obj_int(doc, "xid", 79);
	int rc = devices_set_health(ks, node ? node : ks->cfg.node, (int)json_integer_value(minor),
				    json_is_true(healthy), xid);
	if (rc < 0) {
		reply_error(h, 404, "no such device or card");
		return;
	}
	log_info("faults", "device_health", "node=%s minor=%d healthy=%d",
		 log_q(node ? node : ks->cfg.node), (int)json_integer_value(minor),
		 json_is_true(healthy));
	http_reply_json(h, 200, json_pack("{s:s}", "result", "updated"));
}

/* GET shows, PUT changes the API's in-flight limits (a field left out keeps its value). */
static void limits_handle(struct hreq *h, struct ks *ks, const json_t *doc)
{
	if (h->cmd == EVHTTP_REQ_PUT) {
		json_t *cur = http_limits_doc(ks->http);
		long v[2];
		const char *names[2] = { "max_requests_inflight", "max_mutating_requests_inflight" };
		for (int i = 0; i < 2; i++) {
			json_t *x = json_object_get(doc, names[i]);
			if (x && (!json_is_integer(x) || json_integer_value(x) < 0 ||
				  json_integer_value(x) > 1000000)) {
				json_decref(cur);
				reply_error(h, 400, "limits must be integers in [0, 1000000]");
				return;
			}
			v[i] = (long)json_integer_value(x ? x : json_object_get(cur, names[i]));
		}
		json_decref(cur);
		http_set_limits(ks->http, v[0], v[1]);
		log_info("faults", "limits", "max_requests_inflight=%ld "
			 "max_mutating_requests_inflight=%ld", v[0], v[1]);
	} else if (h->cmd != EVHTTP_REQ_GET) {
		reply_error(h, 405, "method not allowed");
		return;
	}
	http_reply_json(h, 200, http_limits_doc(ks->http));
}

void faults_handle(struct hreq *h, void *arg)
{
	struct ks *ks = arg;
	struct faults *f = ks->faults;
	json_t *doc = NULL;
	if (h->body_len) {
		json_error_t je;
		doc = json_loadb(h->body, h->body_len, 0, &je);
		if (!doc) {
			reply_error(h, 400, je.text);
			return;
		}
	}
	char msg[256];
	if (!strcmp(h->path, "/_kubesim/faults")) {
		if (h->cmd == EVHTTP_REQ_GET) {
			http_reply_json(h, 200, state_doc(f));
		} else if (h->cmd == EVHTTP_REQ_DELETE) {
			clear_all(f);
			http_reply_json(h, 200, state_doc(f));
		} else if (h->cmd == EVHTTP_REQ_PUT || h->cmd == EVHTTP_REQ_POST ||
			   h->cmd == EVHTTP_REQ_PATCH) {
			if (apply(f, doc, msg, sizeof msg) < 0)
				reply_error(h, 400, msg);
			else
				http_reply_json(h, 200, state_doc(f));
		} else {
			reply_error(h, 405, "method not allowed");
		}
	} else if (!strcmp(h->path, "/_kubesim/actions/orphan-job") && h->cmd == EVHTTP_REQ_POST) {
		orphan_job(h, ks, doc);
	} else if (!strcmp(h->path, "/_kubesim/actions/device-health") &&
		   h->cmd == EVHTTP_REQ_POST) {
		device_health(h, ks, doc);
	} else if (!strcmp(h->path, "/_kubesim/state") && h->cmd == EVHTTP_REQ_GET) {
		char rv[32];
		snprintf(rv, sizeof rv, "%" PRIu64, store_rv(ks->store));
		http_reply_json(h, 200,
				json_pack("{s:s, s:i, s:i, s:s, s:i, s:s, s:s, s:o, s:o}",
					  "resourceVersion", rv, "watches", watch_count(ks->watch),
					  "containers", kubelet_running(ks->kubelet), "node",
					  ks->cfg.node, "nodes", ks->cfg.nodes, "score_strategy",
					  ks->cfg.score_strategy, "state_dir", ks->cfg.state_dir,
					  "limits", http_limits_doc(ks->http), "jobctl",
					  jobctl_stats(ks->jobctl)));
	} else if (!strcmp(h->path, "/_kubesim/limits")) {
		limits_handle(h, ks, doc);
	} else if (!strcmp(h->path, "/_kubesim/actions/resync") && h->cmd == EVHTTP_REQ_POST) {
		/* One Job controller pass over every Job, now; the answer has its figures. */
		jobctl_resync(ks->jobctl);
		jobctl_sync(ks->jobctl);
		http_reply_json(h, 200, jobctl_stats(ks->jobctl));
	} else {
		reply_error(h, 404, "no such control endpoint");
	}
	json_decref(doc);
}
