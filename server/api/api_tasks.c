/* /v1/tasks: submission (validation, idempotency fingerprint, the store's atomic decision),
 * listing with filters and cursor pagination, one task, and its event history. */
#include <errno.h>
#include <event2/http.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/dnslabel.h"
#include "lib/jsonw.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "server/api/api.h"
#include "server/api/workload.h"
#include "server/quota.h"
#include "server/recon/diagnose.h"
#include "server/recon/reconciler.h"

/* Validation ranges of a submission (docs/API.md). */
#define MEM_MIB_MAX 1048576
#define CORE_PCT_MAX 100
#define COUNT_MAX 8
#define DURATION_MAX 86400
#define TEAM_MAX_BYTES 63
#define NAME_MAX_BYTES 128
#define KEY_MAX_BYTES 128
#define LIST_LIMIT_MAX 500
#define LIST_LIMIT_DEFAULT 50

/* A submission's fields, in the order of submit_fields. */
enum { F_TEAM, F_NAME, F_MEM, F_CORE, F_COUNT, F_DURATION, F_QOS, F_EXPERIMENT, F_WORKLOAD,
       F_ON_FULL, F_N };
static const char *const submit_fields[F_N + 1] = {
	[F_TEAM] = "team",
	[F_NAME] = "name",
	[F_MEM] = "gpu_memory_mib",
	[F_CORE] = "gpu_core_percent",
	[F_COUNT] = "gpu_count",
	[F_DURATION] = "duration_seconds",
	[F_QOS] = "qos",
	[F_EXPERIMENT] = "experiment",
	[F_WORKLOAD] = "workload",
	[F_ON_FULL] = "on_quota_full",
	[F_N] = NULL,
};
static const char *const qos_values[] = { "LS", "BE", NULL };
static const char *const experiment_values[] = { "normal", "overlimit", NULL };
static const char *const on_full_values[] = { "refuse", "wait", NULL };

void api_task_changed(const struct api_ctx *api, const char *task_id)
{
	if (api->task_changed)
		api->task_changed(api->task_changed_arg, task_id);
}

int api_valid_team(const char *s)
{
	return dnslabel_is(s);
}

int api_valid_task_id(const char *s)
{
	size_t n = strlen(s);
	if (n < 3 || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* A task name: 1..128 bytes of UTF-8 (already validated) with no control characters. */
static int valid_name(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return 0;
	return 1;
}

/* Idempotency-Key: 1..128 visible ASCII characters. */
static int valid_key(const char *k)
{
	size_t n = strlen(k);
	if (n < 1 || n > KEY_MAX_BYTES)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (k[i] < 0x21 || k[i] > 0x7e)
			return 0;
	return 1;
}

/* The body's fields into v: read straight from the text when it is a flat object of plain
 * values (nearly every submission), otherwise from the parsed object, left in *body for the
 * caller to free (its strings are v's). Returns 0, or -1 after replying 415 or 400. */
static int submission_fields(struct req *r, struct jx_val v[F_N], json_t **body)
{
	*body = NULL;
	if (jx_flat_read(r->body, r->body_len, submit_fields, v) == 0)
		return http_json_type_ok(r) ? 0 : -1;
	json_t *o = http_json_body(r);
	if (!o)
		return -1;
	struct jx_err e;
	if (jx_only_keys(o, submit_fields, &e)) {
		http_reply_invalid_field(r, e.field, e.rule);
		json_decref(o);
		return -1;
	}
	for (int i = 0; i < F_N; i++)
		v[i] = jx_member(o, submit_fields[i]);
	*body = o;
	return 0;
}

/* Validates the fields into req (its strings are v's). Returns 0, or -1 after replying 400. */
static int parse_submission(struct req *r, const struct jx_val v[F_N], struct task_req *req)
{
	struct jx_err e;
	const char *on_full = NULL;
	if (jx_str_val(&v[F_TEAM], "team", 1, NULL, 1, TEAM_MAX_BYTES, &req->team, &e) ||
	    jx_str_val(&v[F_NAME], "name", 0, "task", 1, NAME_MAX_BYTES, &req->name, &e) ||
	    jx_int_val(&v[F_MEM], "gpu_memory_mib", 1, 0, 1, MEM_MIB_MAX, &req->gpu_memory_mib,
		       &e) ||
	    jx_int_val(&v[F_CORE], "gpu_core_percent", 1, 0, 1, CORE_PCT_MAX,
		       &req->gpu_core_percent, &e) ||
	    jx_int_val(&v[F_COUNT], "gpu_count", 0, 1, 1, COUNT_MAX, &req->gpu_count, &e) ||
	    jx_int_val(&v[F_DURATION], "duration_seconds", 0, 60, 1, DURATION_MAX,
		       &req->duration_seconds, &e) ||
	    jx_enum_val(&v[F_QOS], "qos", 0, qos_values, "LS", &req->qos, &e) ||
	    jx_enum_val(&v[F_EXPERIMENT], "experiment", 0, experiment_values, "normal",
			&req->experiment, &e) ||
	    jx_enum_val(&v[F_ON_FULL], "on_quota_full", 0, on_full_values, NULL, &on_full, &e)) {
		http_reply_invalid_field(r, e.field, e.rule);
		return -1;
	}
	/* Absent: the team's default_on_quota_full, decided by the store. */
	req->on_quota_full = !on_full			 ? STORE_ON_FULL_DEFAULT
			     : strcmp(on_full, "wait") == 0 ? STORE_ON_FULL_WAIT
							    : STORE_ON_FULL_REFUSE;
	if (!api_valid_team(req->team)) {
		http_reply_invalid_field(r, "team",
					 "must be a DNS label: lowercase letters, digits and '-'");
		return -1;
	}
	if (!valid_name(req->name)) {
		http_reply_invalid_field(r, "name", "must not contain control characters");
		return -1;
	}
	return 0;
}

/* SHA-256 (hex) of the canonical parameters: defaults applied, keys sorted, compact. Two
 * bodies that mean the same submission get the same fingerprint. on_quota_full is in it when
 * the body gives it (absent, it means the team's default, and keys recorded before it existed
 * keep matching). */
static void fingerprint(const struct task_req *q, const char *workload, char out[65])
{
	/* The SHA-256 of the parameters as jx_dump writes them (compact, keys sorted), written
	 * straight as that text (lib/jsonw.h gives the same bytes), so keys recorded by an
	 * earlier build keep matching. */
	struct jw w;
	jw_init(&w);
	if (q->team && q->name && q->qos && q->experiment) {
		jw_obj_begin(&w);
		jw_member_int(&w, "duration_seconds", q->duration_seconds);
		jw_member_str(&w, "experiment", q->experiment);
		jw_member_int(&w, "gpu_core_percent", q->gpu_core_percent);
		jw_member_int(&w, "gpu_count", q->gpu_count);
		jw_member_int(&w, "gpu_memory_mib", q->gpu_memory_mib);
		jw_member_str(&w, "name", q->name);
		if (q->on_quota_full != STORE_ON_FULL_DEFAULT)
			jw_member_str(&w, "on_quota_full",
				      q->on_quota_full == STORE_ON_FULL_WAIT ? "wait" : "refuse");
		jw_member_str(&w, "qos", q->qos);
		jw_member_str(&w, "team", q->team);
		if (workload) { /* canonical already: the submitted workload, keys sorted */
			jw_key(&w, "workload");
			jw_raw(&w, workload, strlen(workload));
		}
		jw_obj_end(&w);
	}
	unsigned char h[SHA256_DIGEST_LENGTH];
	http_sha256(w.buf ? w.buf : "", jw_ok(&w) ? w.len : 0, h);
	jw_free(&w);
	static const char hex[] = "0123456789abcdef";
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
		out[2 * i] = hex[h[i] >> 4];
		out[2 * i + 1] = hex[h[i] & 15];
	}
	out[2 * SHA256_DIGEST_LENGTH] = '\0';
}

/* The submission's workload, when it has one: checked (400 naming the field), held to the
 * team's policy (404 for no team, 403 image_not_allowed), its canonical text for the
 * fingerprint into *fp_text and the text to store, amounts filled in, into *text (both
 * gwb_malloc'd, NULL without a workload). Returns 0, or -1 after replying. */
static int submission_workload(struct req *r, const json_t *body, const struct jx_val v[F_N],
			       const char *team, char **fp_text, char **text)
{
	*fp_text = *text = NULL;
	if (v[F_WORKLOAD].kind == JX_ABSENT)
		return 0;
	if (v[F_EXPERIMENT].kind != JX_ABSENT) {
		http_reply_invalid_field(r, "experiment",
					 "must be absent with a workload: it sets the simulated "
					 "worker, which a workload replaces");
		return -1;
	}
	struct jx_err e;
	json_t *w = NULL;
	if (workload_parse(body ? json_object_get(body, "workload") : NULL, &w, &e)) {
		http_reply_invalid_field(r, e.field, e.rule);
		return -1;
	}
	struct team_policy pol;
	int rc = store_team_policy(r->api->store, team, &pol);
	if (rc) {
		json_decref(w);
		if (rc == GWB_ENOTFOUND)
			http_reply_error(r, 404, "team_not_found", "no such team",
					 json_pack("{s:s}", "team", team));
		else
			http_reply_store_error(r, rc, "the team's policy cannot be read");
		return -1;
	}
	*fp_text = jx_dump(w);
	rc = workload_apply_policy(w, &pol, &e);
	if (rc == GWB_EFORBIDDEN)
		http_reply_error(r, 403, "image_not_allowed",
				 json_array_size(pol.allowed_images)
					 ? "the team may not run this image: it starts with none "
					   "of the team's allowed prefixes"
					 : "the team may run no image of its own (no "
					   "allowed_images): only the simulated worker",
				 json_pack("{s:s, s:O, s:s}", "image",
					   json_string_value(json_object_get(w, "image")),
					   "allowed_images", pol.allowed_images, "team", team));
	else if (rc)
		http_reply_invalid_field(r, e.field, e.rule);
	else
		*text = jx_dump(w);
	json_decref(pol.allowed_images);
	json_decref(w);
	if (rc) {
		gwb_free(*fp_text);
		*fp_text = NULL;
	}
	return rc ? -1 : 0;
}

/* The task's detail view as the body of status: written as text when it can be, else
 * built and dumped (the same bytes either way). */
static void reply_view(struct req *r, int status, const struct task *t)
{
	struct jw w;
	jw_init(&w);
	if (t->state == TASK_WAITING) {
		jw_free(&w);
		return api_task_reply_waiting(r, status, t);
	}
	if (api_task_view_write(t, 1, &w) == 0) {
		http_reply_json_text(r, status, w.buf, w.len);
		jw_free(&w);
		return;
	}
	jw_free(&w);
	json_t *view = api_task_detail_view(t);
	if (view)
		http_reply_json(r, status, view);
	else /* jansson refused a text (the parser let it in) */
		http_reply_error(r, 500, "internal", "the task cannot be shown", NULL);
}

static void reply_task(struct req *r, int status, const char *id)
{
	struct task *t = gwb_malloc(sizeof *t);
	if (store_task_load(r->api->store, id, t) == 0)
		reply_view(r, status, t);
	else
		http_reply_error(r, 500, "internal", "the task cannot be read back", NULL);
	gwb_free(t);
}

static void reply_submit_error(struct req *r, int rc, const struct task_req *q,
			       const struct submit_result *res)
{
	switch (rc) {
	case GWB_EQUOTA:
		return http_reply_error(
			r, 403, "quota_exceeded", "the team's quota cannot hold this task",
			json_pack("{s:s, s:o, s:o, s:o}", "team", q->team, "requested",
				  jx_gpu_pair(res->req_mem, res->req_core), "reserved",
				  jx_gpu_pair(res->reserved_mem, res->reserved_core), "quota",
				  jx_gpu_pair(res->quota_mem, res->quota_core)));
	case GWB_ECONFLICT:
		return http_reply_error(
			r, 409, "idempotency_key_reused",
			"this Idempotency-Key was used for a submission with other parameters",
			json_pack("{s:s}", "task_id", res->task_id));
	case GWB_ENOTFOUND:
		return http_reply_error(r, 404, "team_not_found", "no such team",
					json_pack("{s:s}", "team", q->team));
	case GWB_EBUSY:
		http_add_header(r, "Retry-After", "1");
		return http_reply_error(r, 503, "busy", "the database is busy; retry", NULL);
	case GWB_EUNAVAIL:
		return http_reply_store_error(r, rc, NULL);
	default:
		log_error("api", "submit_failed", "team=%s error=%s db=%s", log_q(q->team),
			  err_name(rc), log_q(store_errmsg(r->api->store)));
		return http_reply_error(r, 500, "internal", "the submission could not be stored",
					NULL);
	}
}

/* A submission takes one query parameter, dry_run=true|false. Returns 1 for a dry run, 0 for
 * a submission, or -1 after replying 400 (an unknown parameter is refused rather than
 * ignored, so a mistyped dry run never creates a task). */
static int submit_query(struct req *r)
{
	int dry = 0;
	for (struct evkeyval *kv = r->query.tqh_first; kv; kv = kv->next.tqe_next) {
		if (strcmp(kv->key, "dry_run") != 0) {
			http_reply_invalid_field(r, kv->key, "unknown query parameter");
			return -1;
		}
		if (strcmp(kv->value, "true") == 0) {
			dry = 1;
		} else if (strcmp(kv->value, "false") == 0) {
			dry = 0;
		} else {
			http_reply_invalid_field(r, "dry_run", "must be true or false");
			return -1;
		}
	}
	return dry;
}

/* POST /v1/tasks?dry_run=true: what a submission would get now, written nowhere. */
static void dry_run(struct req *r, const struct task_req *q)
{
	struct team_usage u;
	if (store_team_usage(r->api->store, q->team, &u))
		return http_reply_error(r, 404, "team_not_found", "no such team",
					json_pack("{s:s}", "team", q->team));
	struct quota_ask ask = { q->gpu_memory_mib, q->gpu_core_percent, q->gpu_count };
	struct quota_verdict v = quota_decide(&u, &ask);
	json_t *quota = json_pack("{s:b, s:o, s:o, s:o}", "admitted", v.admitted, "requested",
				  jx_gpu_pair(v.req_mem, v.req_core), "reserved",
				  jx_gpu_pair(u.reserved_mem, u.reserved_core), "quota",
				  jx_gpu_pair(u.quota_mem, u.quota_core));
	if (!v.admitted)
		json_object_set_new(quota, "code", json_string("quota_exceeded"));
	const char *strategy = r->api->cfg->predict_strategy;
	json_t *basis = json_pack("{s:b, s:s}", "picture_fresh", 0, "strategy", strategy);
	json_t *placement = json_null();
	json_t *line = api_queue_dry_run(r, q, v.admitted);
	if (!json_is_null(line)) {
		/* It would wait in its team's line: no placement before its admission. */
		json_object_set_new(basis, "note", json_string("the task would wait for its "
							       "team's quota (see queue)"));
	} else if (v.admitted && r->api->recon) {
		struct diag_req dr = { "(dry run)", q->gpu_memory_mib, q->gpu_core_percent,
				       q->gpu_count, u.reserved_mem, u.quota_mem,
				       u.reserved_core, u.quota_core };
		int fresh = 0;
		json_decref(placement);
		placement = reconciler_predict(r->api->recon, &dr, strategy, &fresh);
		json_object_set_new(basis, "picture_fresh", json_boolean(fresh));
		if (!fresh)
			json_object_set_new(basis, "note",
					    json_string("the card picture is stale (the API server is "
							"away): the placement may be out of date"));
	} else if (v.admitted) {
		json_object_set_new(basis, "note",
				    json_string("no Kubernetes API is configured: no placement"));
	}
	http_reply_json(r, 200, json_pack("{s:b, s:o, s:o, s:o, s:o}", "dry_run", 1, "quota", quota,
					  "placement", placement, "basis", basis, "queue", line));
}

/* A submission waiting for the group commit: its request (q's team and name are the copies
 * here) and the decision, once made: for a new task, the row as inserted, shaped for the
 * 201. */
struct submit_ctx {
	struct submit_ctx *next_spare;
	struct api_ctx *api;
	struct task_req q;
	char team[TEAM_MAX_BYTES + 1]; /* parse_submission holds them to these lengths */
	char name[NAME_MAX_BYTES + 1];
	char key[KEY_MAX_BYTES + 1];
	int has_key;
	char fp[65];
	char *workload; /* q.workload: the stored text (gwb_malloc'd), or NULL */
	int64_t now_ms, ttl_ms;
	int rc;
	struct submit_result res;
	struct task *row; /* a new task's row as the decision inserted it */
	struct jw view;   /* its 201 body, written by submit_prepare */
	int view_ready;
};

static void submit_decide(struct req *r, void *arg)
{
	struct submit_ctx *c = arg;
	/* The 201 shows the task as this decision wrote it: nothing else acts on a new task
	 * before its answer (its id is not known yet, and the relay does not see it, its own
	 * create intent, before its commit is durable), so reading it back would give the same
	 * bytes for the price of a read transaction. A batch decided again overwrites the row. */
	if (!c->row)
		c->row = gwb_malloc(sizeof *c->row);
	c->rc = store_task_submit_row(r->api->store, &c->q, c->has_key ? c->key : NULL, c->fp,
				      c->now_ms, c->ttl_ms, &c->res, c->row);
}

/* The 201's body, written while the batch's sync runs. */
static void submit_prepare(void *arg)
{
	struct submit_ctx *c = arg;
	if (c->rc || c->res.replayed || c->view_ready || c->row->state == TASK_WAITING)
		return; /* a waiting task's view has its place in the line, read once committed */
	jw_reset(&c->view);
	c->view_ready = api_task_view_write_new(c->row, &c->view) == 0;
}

static void submit_reply(struct req *r, void *arg, int commit_rc)
{
	struct submit_ctx *c = arg;
	if (commit_rc)
		return http_reply_store_error(r, commit_rc, "the submission could not be stored");
	if (c->rc)
		return reply_submit_error(r, c->rc, &c->q, &c->res);
	/* "/v1/tasks/<id>" without a format to parse (res.task_id holds at most 31 bytes). */
	static const char prefix[] = "/v1/tasks/";
	char loc[sizeof prefix + sizeof c->res.task_id];
	size_t n = strnlen(c->res.task_id, sizeof c->res.task_id - 1);
	memcpy(loc, prefix, sizeof prefix - 1);
	memcpy(loc + sizeof prefix - 1, c->res.task_id, n);
	loc[sizeof prefix - 1 + n] = '\0';
	http_add_header(r, "Location", loc);
	if (c->res.replayed) {
		http_add_header(r, "Idempotent-Replayed", "true");
		return reply_task(r, 200, c->res.task_id);
	}
	log_info("api", "task_accepted", "task=%s team=%s mem_mib=%lld core_pct=%lld",
		 c->res.task_id, log_q(c->q.team), (long long)c->res.req_mem,
		 (long long)c->res.req_core);
	if (c->view_ready)
		http_reply_json_text(r, 201, c->view.buf, c->view.len);
	else
		reply_view(r, 201, c->row);
	api_task_changed(r->api, c->res.task_id);
}

/* Answered submissions' contexts are kept, with their row and their view's buffer, for the
 * next batch's: these are allocations of several KiB, each of which would make glibc
 * consolidate its small free chunks first. About two batches' worth at 64 connections. */
#define SUBMIT_SPARE_MAX 128

static void submit_free(struct submit_ctx *c)
{
	jw_free(&c->view);
	gwb_free(c->row);
	gwb_free(c);
}

static struct submit_ctx *submit_ctx_new(struct api_ctx *api)
{
	struct submit_ctx *c = api->submit.head;
	if (!c) {
		c = gwb_calloc(1, sizeof *c);
		c->api = api;
		return c;
	}
	api->submit.head = c->next_spare;
	api->submit.n--;
	struct task *row = c->row;
	struct jw view = c->view;
	memset(c, 0, sizeof *c);
	c->api = api;
	c->row = row;
	c->view = view;
	return c;
}

static void submit_release(void *arg)
{
	struct submit_ctx *c = arg;
	struct api_ctx *api = c->api;
	gwb_free(c->workload);
	c->workload = NULL;
	if (api->submit.n >= SUBMIT_SPARE_MAX)
		return submit_free(c);
	c->next_spare = api->submit.head;
	api->submit.head = c;
	api->submit.n++;
}

void api_tasks_spares_free(struct api_ctx *api)
{
	while (api->submit.head) {
		struct submit_ctx *c = api->submit.head;
		api->submit.head = c->next_spare;
		submit_free(c);
	}
	api->submit.n = 0;
}

static const struct commit_ops submit_ops = { submit_decide, submit_reply,
						     submit_release, submit_prepare };

void api_tasks_submit(struct req *r)
{
	r->is_submit = 1;
	int dry = submit_query(r);
	if (dry < 0)
		return;
	const char *key = http_header(r, "Idempotency-Key");
	if (key && !valid_key(key))
		return http_reply_invalid_field(r, "Idempotency-Key",
						"must be 1 to 128 visible ASCII characters");
	struct jx_val v[F_N];
	json_t *body;
	if (submission_fields(r, v, &body) < 0)
		return;
	struct task_req q;
	char *wl_fp = NULL, *wl = NULL;
	if (parse_submission(r, v, &q) < 0)
		goto out;
	if (!http_may_act_on(r, q.team))
		goto out;
	if (submission_workload(r, body, v, q.team, &wl_fp, &wl) < 0)
		goto out;
	q.workload = wl;
	if (dry) {
		dry_run(r, &q); /* consumes no Idempotency-Key and writes nothing */
		goto out;
	}
	/* The decision waits for this loop turn's group commit, with its own copy of the texts
	 * (the body is freed when this returns). */
	struct submit_ctx *c = submit_ctx_new(r->api);
	c->q = q;
	memcpy(c->team, q.team, strlen(q.team) + 1);
	memcpy(c->name, q.name, strlen(q.name) + 1);
	c->q.team = c->team;
	c->q.name = c->name;
	c->workload = wl; /* the context's now, freed by submit_release */
	wl = NULL;
	if (key) {
		snprintf(c->key, sizeof c->key, "%s", key); /* valid_key: at most 128 bytes */
		c->has_key = 1;
		fingerprint(&q, wl_fp, c->fp); /* only a key's record keeps it: without one, "" */
	}
	c->now_ms = clock_now_ms();
	c->ttl_ms = r->api->cfg->idempotency_ttl_seconds * 1000;
	commit_defer(r, &submit_ops, c);
out:
	gwb_free(wl_fp);
	gwb_free(wl);
	json_decref(body);
}

/* Parses a non-negative integer query parameter. Returns 0 (absent: *out untouched), or -1
 * after replying 400. */
static int query_int(struct req *r, const char *name, int64_t min, int64_t max, int64_t *out)
{
	const char *v = evhttp_find_header(&r->query, name);
	if (!v)
		return 0;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || end == v || *end || x < min || x > max) {
		char rule[96];
		snprintf(rule, sizeof rule, "must be an integer from %lld to %lld",
			 (long long)min, (long long)max);
		http_reply_invalid_field(r, name, rule);
		return -1;
	}
	*out = x;
	return 0;
}

/* One task of a list, into the tasks array being written: as text, or (a view with parts
 * from outside text) built and dumped as every reply is, then added as it is. */
static void list_one(void *arg, const struct task *t)
{
	struct jw *w = arg;
	struct jw_mark m = jw_mark(w);
	if (api_task_view_write(t, 0, w) == 0)
		return;
	jw_rewind(w, m); /* the partial text goes */
	json_t *view = api_task_view(t);
	char *text = view ? json_dumps(view, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(view);
	if (text)
		jw_raw(w, text, strlen(text));
	else
		w->failed = 1; /* jansson refused a text too */
	gwb_free(text); /* jansson allocates through gwb_malloc (lib/alloc.c) */
}

void api_tasks_list(struct req *r)
{
	static const char *const known[] = { "team", "state", "limit", "cursor", NULL };
	for (struct evkeyval *kv = r->query.tqh_first; kv; kv = kv->next.tqe_next) {
		int ok = 0;
		for (const char *const *k = known; *k; k++)
			ok |= strcmp(*k, kv->key) == 0;
		if (!ok)
			return http_reply_invalid_field(r, kv->key, "unknown query parameter");
	}
	const char *team = evhttp_find_header(&r->query, "team");
	const char *state = evhttp_find_header(&r->query, "state");
	int64_t limit = LIST_LIMIT_DEFAULT, cursor = 0;
	if (team && !api_valid_team(team))
		return http_reply_invalid_field(r, "team", "must be a team name");
	if (state && task_state_parse(state) == TASK_NONE)
		return http_reply_invalid_field(r, "state", "must be a task state");
	if (query_int(r, "limit", 1, LIST_LIMIT_MAX, &limit) < 0 ||
	    query_int(r, "cursor", 1, INT64_MAX, &cursor) < 0)
		return;
	if (!r->is_admin) {
		if (team && !http_may_act_on(r, team))
			return;
		team = r->team; /* a team token lists its own team's tasks only */
	}
	/* {"next_cursor": ..., "tasks": [...]}: the keys in the order every reply has them; the
	 * cursor is known once the list is read, so the array is written first. */
	struct jw tasks;
	jw_init(&tasks);
	jw_arr_begin(&tasks);
	int64_t next;
	int rc = store_task_list(r->api->store, team, state, cursor, (int)limit, list_one,
				 &tasks, &next);
	jw_arr_end(&tasks);
	if (rc || !jw_ok(&tasks)) {
		jw_free(&tasks);
		return http_reply_error(r, 500, "internal", "the tasks cannot be listed", NULL);
	}
	struct jw w;
	jw_init(&w);
	jw_obj_begin(&w);
	char nc[32];
	snprintf(nc, sizeof nc, "%lld", (long long)next);
	if (next)
		jw_member_str(&w, "next_cursor", nc);
	else
		jw_member_null(&w, "next_cursor");
	jw_key(&w, "tasks");
	jw_raw(&w, tasks.buf, tasks.len);
	jw_obj_end(&w);
	jw_free(&tasks);
	http_reply_json_text(r, 200, w.buf, w.len);
	jw_free(&w);
}

int api_task_team_visible(const struct req *r, const char *team)
{
	return r->is_admin || strcmp(r->team, team) == 0;
}

/* Checks the id and that the caller may see the task. Returns 1, or 0 after replying. */
static int task_visible(struct req *r, const char *id)
{
	char team[64];
	if (!api_valid_task_id(id)) {
		http_reply_error(r, 404, "not_found", "no such task", json_pack("{s:s}", "id", id));
		return 0;
	}
	int rc = store_task_team(r->api->store, id, team, sizeof team);
	if (rc == GWB_ENOTFOUND || (rc == 0 && !api_task_team_visible(r, team))) {
		/* Another team's task answers as an unknown one: neither its existence nor its
		 * owner shows. */
		http_reply_error(r, 404, "not_found", "no such task", json_pack("{s:s}", "id", id));
		return 0;
	}
	if (rc) {
		http_reply_error(r, 500, "internal", "the task cannot be read", NULL);
		return 0;
	}
	return 1;
}

void api_task_get(struct req *r, const char *id)
{
	if (!task_visible(r, id))
		return;
	reply_task(r, 200, id);
}

static void event_one(void *arg, const struct task_event *ev)
{
	json_array_append_new(arg, api_task_event_view(ev));
}

void api_task_events(struct req *r, const char *id)
{
	if (!task_visible(r, id))
		return;
	json_t *events = json_array();
	if (store_task_events(r->api->store, id, event_one, events)) {
		json_decref(events);
		return http_reply_error(r, 500, "internal", "the events cannot be read", NULL);
	}
	http_reply_json(r, 200, json_pack("{s:s, s:o}", "task", id, "events", events));
}
