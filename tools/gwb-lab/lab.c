/* The lab runner's steps: every request goes through lab_http (so the record's operations are
 * complete), every expectation through lab_predict/lab_observe (so prediction and observation
 * are side by side in the record), and every experiment ends in lab_end (so nothing it held
 * is left for the next). */
#include "tools/gwb-lab/lab.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/clock.h"

/* How long the clean-up waits for every reservation of an experiment to come back. */
#define CLEANUP_TIMEOUT_MS 30000
/* A worker log read is cut here: its interesting events are all near the start. */
#define LOG_MAX_BYTES (1u << 20)

static void progress(struct lab *l, const char *what, int64_t started, int64_t *last);
static void progress_end(struct lab *l);

void lab_sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void lab_say(struct lab *l, const char *fmt, ...)
{
	(void)l;
	va_list ap;
	va_start(ap, fmt);
	fputs("  ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	va_end(ap);
	fflush(stdout);
}

void lab_error(struct lab *l, const char *field, const char *fmt, ...)
{
	char why[384];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof why, fmt, ap);
	va_end(ap);
	printf("  ERROR    %s: %s\n", field, why);
	fflush(stdout);
	json_array_append_new(json_object_get(l->rec, "errors"),
	                      json_pack("{s:s, s:s}", "field", field, "error", why));
	if (!l->fail[0])
		snprintf(l->fail, sizeof l->fail, "%s: %s", field, why);
}

/* ---- HTTP ---- */

long lab_http(struct lab *l, const char *action, const char *method, const char *base,
              const char *sock, const char *path, const json_t *body, const char *const *headers,
              struct httpc_resp *r)
{
	char url[1024];
	snprintf(url, sizeof url, "%s%s", base, path);
	int is_api = strcmp(base, l->url) == 0;
	struct httpc_req q = {.method = method,
	                      .url = url,
	                      .unix_socket = sock,
	                      .token = is_api ? l->token : NULL,
	                      .json = body,
	                      .headers = headers,
	                      .timeout_ms = 15000};
	int64_t at = clock_now_ms();
	httpc_do(l->http, &q, r);
	if (action && l->rec) {
		char ts[40];
		json_t *req =
		    json_pack("{s:s, s:s}", "method", method ? method : "GET", "path", path);
		if (body)
			json_object_set(req, "body", (json_t *)body);
		for (const char *const *h = headers; h && *h; h++)
			if (strncmp(*h, "Idempotency-Key:", 16) == 0)
				json_object_set_new(req, "idempotency_key", json_string(*h + 17));
		json_t *op =
		    json_pack("{s:s, s:I, s:s, s:o, s:I}", "at",
		              clock_fmt_rfc3339_ms(at, ts, sizeof ts), "at_ms", (json_int_t)at,
		              "action", action, "request", req, "status", (json_int_t)r->status);
		if (r->status >= 400 && httpc_error_code(r)[0])
			json_object_set_new(op, "error", json_string(httpc_error_code(r)));
		if (r->replayed)
			json_object_set_new(op, "idempotent_replayed", json_true());
		json_array_append_new(json_object_get(l->rec, "operations"), op);
	}
	return r->status;
}

long lab_api(struct lab *l, const char *action, const char *method, const char *path,
             const json_t *body, struct httpc_resp *r)
{
	return lab_http(l, action, method, l->url, NULL, path, body, NULL, r);
}

json_t *lab_kube_get(struct lab *l, const char *path)
{
	struct httpc_resp r;
	json_t *o = NULL;
	if (lab_http(l, NULL, "GET", l->kube, NULL, path, NULL, NULL, &r) == 200 && r.json)
		o = json_incref(r.json);
	httpc_resp_free(&r);
	return o;
}

static long control(struct lab *l, const char *action, const char *method, const char *path,
                    const char *body)
{
	struct httpc_resp r;
	json_error_t je;
	json_t *j = body ? json_loads(body, 0, &je) : NULL;
	long s = lab_http(l, action, method, "http://kubesim", l->faults, path, j, NULL, &r);
	json_decref(j);
	httpc_resp_free(&r);
	return s;
}

long lab_fault(struct lab *l, const char *body)
{
	l->set_faults |= body != NULL;
	return control(l, body ? "fault" : "clear faults", body ? "PUT" : "DELETE",
	               "/_kubesim/faults", body);
}

long lab_action(struct lab *l, const char *name, const char *body)
{
	char path[128];
	snprintf(path, sizeof path, "/_kubesim/actions/%s", name);
	l->set_health |= strcmp(name, "device-health") == 0;
	return control(l, name, "POST", path, body);
}

/* ---- tasks ---- */

json_t *lab_body(struct lab *l, int mem, int core, int secs, const char *qos, const char *exp)
{
	return json_pack("{s:s, s:s, s:i, s:i, s:i, s:i, s:s, s:s}", "team", l->team, "name",
	                 l->exp ? l->exp->name : "lab", "gpu_memory_mib", mem, "gpu_core_percent",
	                 core, "gpu_count", 1, "duration_seconds", secs, "qos", qos ? qos : "LS",
	                 "experiment", exp ? exp : "normal");
}

long lab_submit(struct lab *l, const char *action, const json_t *body, const char *key,
                struct httpc_resp *r)
{
	char hdr[200];
	const char *headers[] = {hdr, NULL};
	snprintf(hdr, sizeof hdr, "Idempotency-Key: %s", key ? key : "");
	long s =
	    lab_http(l, action, "POST", l->url, NULL, "/v1/tasks", body, key ? headers : NULL, r);
	const char *tid = lab_str(r->json, "id");
	if (s == 201 && tid)
		json_array_append_new(l->mine, json_string(tid));
	lab_say(l, "submit (%s): %ld %s", action, s, tid ? tid : httpc_error_code(r));
	return s;
}

/* 1 when the task has settled: running or ended, or pending with a real diagnosis. */
static int settled(json_t *t)
{
	const char *st = lab_str(t, "state"), *kind = lab_str(t, "pending.diagnosis.kind");
	if (!st)
		return 0;
	if (strcmp(st, "running") == 0 || strcmp(st, "succeeded") == 0 ||
	    strcmp(st, "failed") == 0 || strcmp(st, "cancelled") == 0)
		return 1;
	return strcmp(st, "pending") == 0 && kind && strcmp(kind, "waiting") != 0;
}

json_t *lab_start(struct lab *l, const char *label, const json_t *body, char *id, size_t idlen)
{
	json_decref(lab_predict_placement(l, label, body));
	struct httpc_resp r;
	long s = lab_submit(l, label, body, NULL, &r);
	snprintf(id, idlen, "%s", s == 201 && lab_str(r.json, "id") ? lab_str(r.json, "id") : "");
	httpc_resp_free(&r);
	if (s != 201) {
		lab_error(l, label, "the submission answered %ld, not 201", s);
		return NULL;
	}
	char what[160], buf[96];
	snprintf(what, sizeof what, "%s (%s) to run or wait with a diagnosis", id, label);
	int64_t started = clock_mono_ms(), last = 0;
	for (;;) {
		json_t *t = lab_task(l, id);
		if (settled(t)) {
			progress_end(l);
			lab_observe_placement(l, label, lab_task_summary(t, buf, sizeof buf));
			if (strcmp(lab_str(t, "state"), "pending") != 0)
				lab_capture_logs(l, id);
			return t;
		}
		if (clock_mono_ms() - started > 30000) {
			progress_end(l);
			const char *st = lab_str(t, "state");
			lab_error(l, label, "%s never ran nor got a diagnosis in 30 s (state %s)",
			          id, st ? st : "?");
			json_decref(t);
			return NULL;
		}
		json_decref(t);
		progress(l, what, started, &last);
		lab_sleep_ms(100);
	}
}

json_t *lab_task(struct lab *l, const char *id)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct httpc_resp r;
	json_t *t = NULL;
	if (lab_api(l, NULL, "GET", path, NULL, &r) == 200 && r.json)
		t = json_incref(r.json);
	httpc_resp_free(&r);
	return t;
}

long lab_cancel(struct lab *l, const char *id, struct httpc_resp *r)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	struct httpc_resp own;
	struct httpc_resp *rr = r ? r : &own;
	long s = lab_api(l, "cancel", "POST", path, NULL, rr);
	lab_say(l, "cancel %s: %ld", id, s);
	if (!r)
		httpc_resp_free(&own);
	return s;
}

json_t *lab_get(json_t *o, const char *path)
{
	char buf[200];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok && o; tok = dot) {
		dot = strchr(tok, '.');
		if (dot)
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtoul(tok, NULL, 10))
		                     : json_object_get(o, tok);
	}
	return o;
}

const char *lab_str(json_t *o, const char *path)
{
	json_t *v = lab_get(o, path);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *as_text(json_t *v, char *buf, size_t len)
{
	if (json_is_string(v))
		return json_string_value(v);
	if (json_is_true(v))
		return "true";
	if (json_is_false(v))
		return "false";
	if (json_is_integer(v)) {
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
		return buf;
	}
	return NULL;
}

/* The progress line: rewritten in place on a terminal, one line every 5 s otherwise. */
static void progress(struct lab *l, const char *what, int64_t started, int64_t *last)
{
	int64_t now = clock_mono_ms();
	long secs = (long)((now - started) / 1000);
	if (l->tty) {
		printf("\r  .. waiting for %s (%lds)   ", what, secs);
		fflush(stdout);
	} else if (*last == 0 || now - *last >= 5000) {
		printf("  .. waiting for %s (%lds)\n", what, secs);
		fflush(stdout);
		*last = now;
	}
}

static void progress_end(struct lab *l)
{
	if (l->tty) {
		printf("\r\033[K");
		fflush(stdout);
	}
}

json_t *lab_wait(struct lab *l, const char *id, const char *path, const char *want, int timeout_ms)
{
	char what[256], buf[32];
	snprintf(what, sizeof what, "%s %s = %s", id, path, want);
	int64_t started = clock_mono_ms(), last = 0;
	for (;;) {
		json_t *t = lab_task(l, id);
		const char *v = as_text(lab_get(t, path), buf, sizeof buf);
		if (v && strcmp(v, want) == 0) {
			progress_end(l);
			return t;
		}
		if (clock_mono_ms() - started > timeout_ms) {
			progress_end(l);
			lab_error(l, path, "%s stayed %s (state %s) for %d s, never %s", id,
			          v ? v : "absent", lab_str(t, "state") ? lab_str(t, "state") : "?",
			          timeout_ms / 1000, want);
			json_decref(t);
			return NULL;
		}
		json_decref(t);
		progress(l, what, started, &last);
		lab_sleep_ms(100);
	}
}

long long lab_reserved_mib(struct lab *l)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/teams/%s", l->team);
	struct httpc_resp r;
	long long v = -1;
	if (lab_api(l, NULL, "GET", path, NULL, &r) == 200)
		v = json_integer_value(lab_get(r.json, "reserved.gpu_memory_mib"));
	httpc_resp_free(&r);
	return v;
}

static json_t *team_quota(struct lab *l)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/teams/%s", l->team);
	struct httpc_resp r;
	json_t *q = json_null();
	if (lab_api(l, NULL, "GET", path, NULL, &r) == 200 && r.json)
		q = json_pack("{s:O?, s:O?, s:O?}", "quota", json_object_get(r.json, "quota"),
		              "reserved", json_object_get(r.json, "reserved"), "available",
		              json_object_get(r.json, "available"));
	httpc_resp_free(&r);
	return q;
}

json_t *lab_kube_of(struct lab *l, const char *kind, const char *id)
{
	char path[300];
	snprintf(path, sizeof path, "/%s/namespaces/%s/%s?labelSelector=gwb.io%%2Ftask%%3D%s",
	         strcmp(kind, "jobs") == 0 ? "apis/batch/v1" : "api/v1", l->ns, kind, id);
	json_t *list = lab_kube_get(l, path);
	json_t *items = list ? json_incref(json_object_get(list, "items")) : NULL;
	json_decref(list);
	return items;
}

/* The worker log of the task's Pod, one parsed JSON object a line (new array), or NULL. */
static json_t *worker_log(struct lab *l, const char *id)
{
	json_t *pods = lab_kube_of(l, "pods", id);
	const char *pod = lab_str(pods, "0.metadata.name");
	json_t *lines = NULL;
	if (pod) {
		char path[300];
		snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log", l->ns, pod);
		struct httpc_resp r;
		if (lab_http(l, NULL, "GET", l->kube, NULL, path, NULL, NULL, &r) == 200) {
			lines = json_array();
			for (char *s = r.body, *nl; s && *s; s = nl) {
				nl = strchr(s, '\n');
				if (nl)
					*nl++ = '\0';
				json_error_t je;
				json_t *o = json_loads(s, 0, &je);
				if (json_is_object(o))
					json_array_append(lines, o);
				json_decref(o);
			}
		}
		httpc_resp_free(&r);
	}
	json_decref(pods);
	return lines;
}

int lab_capture_logs(struct lab *l, const char *id)
{
	static const char *const keep[] = {"start",
	                                   "isolation",
	                                   "budget",
	                                   "ledger_booked",
	                                   "simulated_limit_rejected",
	                                   "work_started",
	                                   "done",
	                                   "work_stopped",
	                                   "terminated",
	                                   "budget_invalid",
	                                   NULL};
	json_t *lines = worker_log(l, id);
	if (!lines)
		return -1;
	json_t *excerpt = json_array();
	size_t i;
	json_t *o;
	json_array_foreach (lines, i, o) {
		const char *ev = lab_str(o, "event");
		for (const char *const *k = keep; ev && *k; k++)
			if (strcmp(ev, *k) == 0)
				json_array_append(excerpt, o);
	}
	json_decref(lines);
	json_object_set_new(l->logs, id, excerpt);
	return 0;
}

json_t *lab_worker_progress(struct lab *l, const char *id)
{
	json_t *lines = worker_log(l, id), *out = json_array();
	size_t i;
	json_t *o;
	json_array_foreach (lines, i, o) {
		const char *ev = lab_str(o, "event");
		if (ev && strcmp(ev, "progress") == 0)
			json_array_append(out, o);
	}
	json_decref(lines);
	return out;
}

/* ---- prediction and observation ---- */

json_t *lab_dry_run(struct lab *l, const json_t *body)
{
	if (!l->dry_run)
		return NULL;
	struct httpc_resp r;
	json_t *d = NULL;
	long s =
	    lab_http(l, "dry run", "POST", l->url, NULL, "/v1/tasks?dry_run=true", body, NULL, &r);
	if (s == 200 && json_is_true(json_object_get(r.json, "dry_run")))
		d = json_incref(r.json);
	else
		lab_error(l, "dry_run", "POST /v1/tasks?dry_run=true answered %ld %s", s,
		          httpc_error_code(&r));
	httpc_resp_free(&r);
	return d;
}

static void minors(json_t *cards, const char *key, char *buf, size_t len)
{
	size_t i, n = 0;
	json_t *c;
	n += (size_t)snprintf(buf + n, len - n, "[");
	json_array_foreach (cards, i, c) {
		json_t *m = key ? json_object_get(c, key) : c;
		if (n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "",
			                      (long long)json_integer_value(m));
	}
	if (n < len)
		snprintf(buf + n, len - n, "]");
}

const char *lab_dry_summary(const json_t *dry, char *buf, size_t len)
{
	json_t *d = (json_t *)dry;
	if (!json_is_true(lab_get(d, "quota.admitted"))) {
		const char *code = lab_str(d, "quota.code");
		snprintf(buf, len, "refused:%s", code ? code : "quota_exceeded");
	} else if (lab_str(d, "placement.outcome") &&
	           strcmp(lab_str(d, "placement.outcome"), "bind") == 0) {
		char m[64];
		minors(lab_get(d, "placement.cards"), NULL, m, sizeof m);
		snprintf(buf, len, "bind:%s", m);
	} else {
		const char *k = lab_str(d, "placement.diagnosis.kind");
		snprintf(buf, len, "pending:%s", k ? k : "?");
	}
	return buf;
}

const char *lab_task_summary(json_t *task, char *buf, size_t len)
{
	json_t *cards = lab_get(task, "allocation.cards");
	const char *kind = lab_str(task, "pending.diagnosis.kind");
	if (json_array_size(cards) > 0) {
		char m[64];
		minors(cards, "minor", m, sizeof m);
		snprintf(buf, len, "bind:%s", m);
	} else if (kind) {
		snprintf(buf, len, "pending:%s", kind);
	} else {
		snprintf(buf, len, "state:%s", task ? lab_str(task, "state") : "absent");
	}
	return buf;
}

static void show(const char *tag, const char *field, json_t *v, const char *tail)
{
	char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	printf("  %-8s %s = %s%s%s\n", tag, field, d ? d : "?", tail[0] ? "   " : "", tail);
	fflush(stdout);
	gwb_free(d); /* jansson allocates through gwb_malloc (gwb_alloc_init) */
}

void lab_predict(struct lab *l, const char *field, json_t *value, const char *why)
{
	char key[160];
	snprintf(key, sizeof key, "%s.%s", l->exp->name, field);
	json_t *forced = json_object_get(l->inject, key);
	if (forced) {
		json_decref(value);
		value = json_incref(forced);
		why = "injected with --expect";
		json_object_set_new(json_object_get(l->rec, "parameters"), "injected_expectation",
		                    json_pack("{s:s, s:O}", "field", field, "value", forced));
	}
	json_object_set_new(json_object_get(l->rec, "prediction"), field, value);
	json_object_set_new(json_object_get(l->rec, "prediction_basis"), field, json_string(why));
	char tail[300];
	snprintf(tail, sizeof tail, "(%s)", why);
	show("predict", field, value, tail);
}

json_t *lab_predict_placement(struct lab *l, const char *label, const json_t *body)
{
	char field[96], buf[96];
	snprintf(field, sizeof field, "%s.placement", label);
	json_t *d = lab_dry_run(l, body);
	if (d) {
		lab_predict(l, field, json_string(lab_dry_summary(d, buf, sizeof buf)), "dry run");
		json_object_set(json_object_get(l->rec, "dry_runs"), label, d);
	} else {
		json_t *un = json_pack("{s:s, s:s}", "unavailable", "dry run", "reason",
		                       l->dry_run_note[0] ? l->dry_run_note : "the dry run failed");
		json_object_set_new(json_object_get(l->rec, "prediction_unavailable"), field, un);
		printf("  predict  %s = unavailable (%s)\n", field, l->dry_run_note);
	}
	return d;
}

int lab_observe(struct lab *l, const char *field, json_t *value)
{
	json_t *p = json_object_get(json_object_get(l->rec, "prediction"), field);
	int ok = p && json_equal(p, value);
	json_object_set_new(json_object_get(l->rec, "observed"), field, value);
	json_object_set_new(json_object_get(l->rec, "agreement"), field, json_boolean(ok));
	if (ok) {
		show("observe", field, value, "agrees");
	} else {
		char *pd = p ? json_dumps(p, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
		char *od = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
		char tail[300];
		snprintf(tail, sizeof tail, "DISAGREES (predicted %s)", pd ? pd : "nothing");
		show("observe", field, value, tail);
		if (!l->fail[0])
			snprintf(l->fail, sizeof l->fail, "%s: predicted %.160s, observed %.160s",
			         field, pd ? pd : "nothing", od ? od : "?");
		gwb_free(pd);
		gwb_free(od);
	}
	return ok;
}

void lab_observe_placement(struct lab *l, const char *label, const char *summary)
{
	char field[96];
	snprintf(field, sizeof field, "%s.placement", label);
	json_t *v = json_string(summary);
	if (json_object_get(json_object_get(l->rec, "prediction"), field)) {
		lab_observe(l, field, v);
		return;
	}
	json_object_set_new(json_object_get(l->rec, "observed"), field, v);
	show("observe", field, v, "(not checked: no prediction)");
}

int lab_need_quota(struct lab *l, long long mem, long long core)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/teams/%s", l->team);
	struct httpc_resp r;
	long s = lab_api(l, NULL, "GET", path, NULL, &r);
	long long am = json_integer_value(lab_get(r.json, "quota.gpu_memory_mib")) -
	               json_integer_value(lab_get(r.json, "reserved.gpu_memory_mib"));
	long long ac = json_integer_value(lab_get(r.json, "quota.gpu_core_percent")) -
	               json_integer_value(lab_get(r.json, "reserved.gpu_core_percent"));
	httpc_resp_free(&r);
	if (s == 200 && am >= mem && ac >= core)
		return 1;
	char why[256];
	snprintf(why, sizeof why,
	         "needs %lld MiB and %lld%% core of team %s's quota at once; %lld MiB and %lld%% "
	         "are available (raise it with gwbctl teams set)",
	         mem, core, l->team, am, ac);
	json_object_set_new(l->rec, "skipped", json_string(why));
	printf("  skipped: %s\n", why);
	return 0;
}

void lab_measure(struct lab *l, const char *key, json_t *value)
{
	json_object_set_new(json_object_get(l->rec, "measurements"), key, value);
}

/* ---- the experiment's frame ---- */

void lab_begin(struct lab *l, const struct exp_def *exp, int order, json_t *params)
{
	json_decref(l->rec);
	json_decref(l->mine);
	json_decref(l->logs);
	l->exp = exp;
	l->order = order;
	l->fail[0] = '\0';
	l->mine = json_array();
	l->logs = json_object();
	char ts[40];
	l->rec = json_pack(
	    "{s:s, s:i, s:s, s:s, s:s, s:o, s:{}, s:{}, s:{}, s:{}, s:{}, s:{}, s:[], s:[], "
	    "s:{s:o, s:n}, s:{}, s:[]}",
	    "name", exp->name, "order", order, "mode", l->mode, "version", l->version, "started_at",
	    clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts), "parameters",
	    params ? params : json_object(), "prediction", "prediction_basis",
	    "prediction_unavailable", "dry_runs", "observed", "agreement", "operations", "tasks",
	    "quota", "before", team_quota(l), "after", "measurements", "errors");
	json_t *p = json_object_get(l->rec, "parameters");
	json_object_set_new(p, "team", json_string(l->team));
	json_object_set_new(p, "dry_run", json_string(l->dry_run ? "available" : l->dry_run_note));
	printf("\n== %02d %s\n", order, exp->name);
	fflush(stdout);
}

/* Clears the faults and the card health it changed, cancels what still holds quota, waits for
 * every release. */
static void cleanup(struct lab *l)
{
	if (l->set_faults)
		lab_fault(l, NULL);
	for (int m = 0; l->set_health && m < 2; m++) {
		char body[128];
		snprintf(body, sizeof body,
		         "{\"node\": \"colima-gwb\", \"minor\": %d, \"healthy\": true}", m);
		control(l, NULL, "POST", "/_kubesim/actions/device-health", body);
	}
	l->set_faults = l->set_health = 0;
	size_t i;
	json_t *v;
	json_array_foreach (l->mine, i, v) {
		const char *id = json_string_value(v);
		json_t *t = lab_task(l, id);
		const char *st = lab_str(t, "state");
		if (json_is_false(lab_get(t, "reservation.released")) && st &&
		    strcmp(st, "cancelling") != 0)
			lab_cancel(l, id, NULL);
		json_decref(t);
	}
	json_array_foreach (l->mine, i, v) {
		json_t *t = lab_wait(l, json_string_value(v), "reservation.released", "true",
		                     CLEANUP_TIMEOUT_MS);
		json_decref(t);
	}
}

static json_t *task_evidence(struct lab *l, const char *id)
{
	json_t *t = lab_task(l, id);
	if (!json_object_get(l->logs, id))
		lab_capture_logs(l, id);
	json_t *logs = json_object_get(l->logs, id);
	json_t *e = json_pack(
	    "{s:s, s:{s:O?, s:O?}, s:{s:O?, s:O?}, s:O?, s:O?, s:O?, s:O?, s:{s:O?, s:O?}}", "id",
	    id, "job", "name", lab_get(t, "job.name"), "uid", lab_get(t, "job.uid"), "pod", "name",
	    lab_get(t, "pod.name"), "uid", lab_get(t, "pod.uid"), "annotation",
	    lab_get(t, "allocation.annotation"), "cards", lab_get(t, "allocation.cards"), "logs",
	    logs, "final_state", lab_get(t, "state"), "reservation", "released",
	    lab_get(t, "reservation.released"), "release_reason",
	    lab_get(t, "reservation.release_reason"));
	/* json_pack's O? gives null for a missing value: an absent Job or Pod stays visible. */
	json_object_set_new(e, "request",
	                    json_pack("{s:O?, s:O?, s:O?, s:O?}", "gpu_memory_mib",
	                              lab_get(t, "request.gpu_memory_mib"), "gpu_core_percent",
	                              lab_get(t, "request.gpu_core_percent"), "qos",
	                              lab_get(t, "request.qos"), "experiment",
	                              lab_get(t, "request.experiment")));
	/* What the container said of its end (the worker's verdict from its termination
	 * message), as the server stored it: null when it left none. */
	json_object_set(e, "result", lab_get(t, "result") ? lab_get(t, "result") : json_null());
	json_object_set(e, "isolation",
	                lab_get(t, "isolation") ? lab_get(t, "isolation") : json_null());
	json_decref(t);
	return e;
}

/* The fields docs/API.md "Evidence" lists; a missing one fails the experiment naming it. */
static void check_complete(struct lab *l)
{
	static const char *const top[] = {"name",       "order",      "mode",     "version",
	                                  "parameters", "prediction", "observed", "passed",
	                                  "operations", "tasks",      "quota",    NULL};
	static const char *const per_task[] = {"id",
	                                       "job.name",
	                                       "job.uid",
	                                       "pod.name",
	                                       "pod.uid",
	                                       "annotation",
	                                       "logs",
	                                       "final_state",
	                                       "reservation.released",
	                                       "reservation.release_reason",
	                                       "result",
	                                       "isolation",
	                                       NULL};
	for (const char *const *k = top; *k; k++)
		if (!json_object_get(l->rec, *k))
			lab_error(l, *k, "missing from the record");
	if (json_object_size(json_object_get(l->rec, "prediction")) == 0)
		lab_error(l, "prediction", "empty");
	if (json_object_size(json_object_get(l->rec, "observed")) == 0)
		lab_error(l, "observed", "empty");
	if (json_array_size(json_object_get(l->rec, "operations")) == 0)
		lab_error(l, "operations", "empty");
	if (json_is_null(lab_get(l->rec, "quota.before")) ||
	    json_is_null(lab_get(l->rec, "quota.after")))
		lab_error(l, "quota", "before or after is missing");
	size_t i;
	json_t *t;
	json_array_foreach (json_object_get(l->rec, "tasks"), i, t) {
		for (const char *const *k = per_task; *k; k++) {
			/* Present means the key is there; null is an honest "there was none". */
			char path[96], parent[96];
			snprintf(path, sizeof path, "%s", *k);
			char *dot = strrchr(path, '.');
			json_t *holder = t;
			const char *leaf = path;
			if (dot) {
				*dot = '\0';
				snprintf(parent, sizeof parent, "%s", path);
				holder = lab_get(t, parent);
				leaf = dot + 1;
			}
			if (!json_is_object(holder) || !json_object_get(holder, leaf)) {
				char field[128];
				snprintf(field, sizeof field, "tasks[%zu].%s", i, *k);
				lab_error(l, field, "missing from the record");
			}
		}
	}
}

json_t *lab_end(struct lab *l)
{
	cleanup(l);
	size_t i;
	json_t *v;
	json_array_foreach (l->mine, i, v)
		json_array_append_new(json_object_get(l->rec, "tasks"),
		                      task_evidence(l, json_string_value(v)));
	json_object_set_new(json_object_get(l->rec, "quota"), "after", team_quota(l));
	char ts[40];
	json_object_set_new(l->rec, "finished_at",
	                    json_string(clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts)));
	if (json_object_get(l->rec, "skipped")) {
		json_object_set_new(l->rec, "passed", json_null());
		printf("-- %02d %s: skipped (%s)\n", l->order, l->exp->name,
		       lab_str(l->rec, "skipped"));
		fflush(stdout);
		return l->rec;
	}
	json_object_set_new(l->rec, "passed", json_false());
	check_complete(l);
	int agree = 1;
	const char *k;
	json_object_foreach (json_object_get(l->rec, "agreement"), k, v)
		agree &= json_is_true(v);
	int passed = agree && !l->fail[0];
	json_object_set_new(l->rec, "passed", json_boolean(passed));
	if (!passed)
		json_object_set_new(l->rec, "failure", json_string(l->fail));
	printf("-- %02d %s: %s\n", l->order, l->exp->name, passed ? "passed" : "FAILED");
	fflush(stdout);
	return l->rec;
}
