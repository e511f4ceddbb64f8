/* The API's JSON view of a task: the store returns rows (struct task), this file shapes them
 * as docs/API.md shows a task, parsing the allocation annotation and the stored diagnosis. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/devalloc.h"
#include "lib/jsonw.h"
#include "lib/jsonx.h"
#include "server/api/api.h"
#include "server/recon/usage.h"

/* The store keeps "" and NULL apart from nothing: an empty text column is shown as null. */
static json_t *text(const char *v)
{
	return v[0] ? json_string(v) : json_null();
}

static json_t *time_of(int has, int64_t ms)
{
	if (!has)
		return json_null();
	char buf[40];
	return json_string(clock_fmt_rfc3339_ms(ms, buf, sizeof buf));
}

static json_t *allocation_json(const char *raw)
{
	if (!raw[0])
		return json_null();
	struct devalloc a;
	char err[160];
	json_t *o = json_object();
	json_object_set_new(o, "annotation", json_string(raw));
	if (devalloc_parse(raw, strlen(raw), &a, err, sizeof err) == 0) {
		json_t *parsed = devalloc_to_json(&a);
		json_object_set(o, "cards", json_object_get(parsed, "cards"));
		json_decref(parsed);
	} else {
		json_object_set_new(o, "parse_error", json_string(err));
	}
	return o;
}

static json_t *pending_json(const struct task *t)
{
	if (!t->pending_message[0] && !t->pending_diagnosis[0])
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "scheduler_message", text(t->pending_message));
	json_t *d = t->pending_diagnosis[0] ? json_loads(t->pending_diagnosis, 0, NULL) : NULL;
	json_object_set_new(o, "diagnosis", d ? d : json_null());
	return o;
}

/* Why the Pod's container has not started (its state.waiting), or null. */
static json_t *waiting_json(const struct task *t)
{
	if (!t->waiting_reason[0])
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "message", text(t->waiting_message));
	json_object_set_new(o, "reason", text(t->waiting_reason));
	return o;
}

/* The team's container as stored (canonical JSON), or null for the simulated worker. */
static json_t *workload_json(const struct task *t)
{
	json_t *w = t->workload[0] ? json_loads(t->workload, 0, NULL) : NULL;
	return w ? w : json_null();
}

/* The container's termination message: parsed when it is JSON (the worker's verdict), else
 * its text (a workload's own message); null when it left none. */
static json_t *result_json(const struct task *t)
{
	if (!t->termination_message[0])
		return json_null();
	json_t *v = json_loads(t->termination_message, JSON_DECODE_ANY, NULL);
	if (!v)
		v = json_string(t->termination_message);
	return v ? v : json_null();
}

/* The simulated worker's isolation verdict, from its result; null for a workload (its own
 * document is not the worker's probe) or a message that is not the worker's. */
static json_t *isolation_json(const struct task *t, const json_t *result)
{
	const char *who = json_string_value(json_object_get(result, "worker"));
	json_t *iso = json_object_get(result, "isolation");
	if (t->workload[0] || !who || strcmp(who, "gwb-worker") || !json_is_object(iso))
		return json_null();
	return json_incref(iso);
}

/* A sentence for the reasons that need one: what the task waits for, or why it ended so. */
static json_t *reason_detail(const struct task *t)
{
	char buf[512], at[40];
	if (task_reason_is(t->reason, TASK_REASON_CLUSTER_WAIT) ||
	    (task_reason_is(t->reason, TASK_REASON_CLUSTER_REPLACED) && t->has_pod_deadline_at)) {
		clock_fmt_rfc3339(t->has_pod_deadline_at ? t->pod_deadline_at : 0, at, sizeof at);
		if (task_reason_is(t->reason, TASK_REASON_CLUSTER_WAIT))
			snprintf(buf, sizeof buf,
				 "The Kubernetes cluster was replaced (the uid of its kube-system "
				 "namespace changed) and this task's Job vanished with the old one. Its "
				 "Pod may still run on a node of the old cluster until its "
				 "activeDeadlineSeconds stops it, at %s at the latest, so the task keeps "
				 "its quota until then; it then ends failed (cluster_replaced), and is "
				 "not run again.",
				 at);
		else
			snprintf(buf, sizeof buf,
				 "The Kubernetes cluster was replaced (the uid of its kube-system "
				 "namespace changed) and this task's Job vanished with the old one. Its "
				 "Pod could have run on a node of the old cluster until %s, when its "
				 "activeDeadlineSeconds stopped it at the latest; the task kept its "
				 "quota until then. How the Pod ended is not known.",
				 at);
		return json_string(buf);
	}
	return json_null();
}

/* Sets o[key] to v (stolen). The keys here are literals of plain ASCII: jansson's key check
 * is skipped, not the values' (texts from the store are checked as ever). */
static void set(json_t *o, const char *key, json_t *v)
{
	json_object_set_new_nocheck(o, key, v);
}

static json_t *integer(int64_t v)
{
	return json_integer((json_int_t)v);
}

#define USAGE_REASON                                                                      \
	"no usage collector is configured; quota and allocation are budgets, not measurements"

/* usage is the same for every task: no collector is configured, usage is a measurement and
 * nothing measures it. Built once; each view takes a reference (the object is never changed
 * after it is made). */
static json_t *usage_unknown(void)
{
	static json_t *usage;
	if (!usage) {
		usage = json_object();
		set(usage, "reason", json_string(USAGE_REASON));
		set(usage, "status", json_string("unknown"));
	}
	return json_incref(usage);
}

/* The view, each object's keys set in sorted order (the order every reply is dumped in), so
 * that a view whose every part is built here dumps the same text with or without sorting
 * (api_task_view_sorted). with_cancel adds cancel_requested_at (the detail view). */
static json_t *task_view(const struct task *t, int with_cancel)
{
	/* Built field by field rather than through json_pack: a task is shaped for every 201
	 * and every GET, and parsing the pack formats cost as much as the values. */
	json_t *req = json_object();
	set(req, "duration_seconds", integer(t->duration_seconds));
	set(req, "experiment", text(t->experiment));
	set(req, "gpu_core_percent", integer(t->gpu_core_percent));
	set(req, "gpu_count", integer(t->gpu_count));
	set(req, "gpu_memory_mib", integer(t->gpu_memory_mib));
	set(req, "qos", text(t->qos));
	json_t *resv = json_object();
	set(resv, "gpu_core_percent", integer(t->reserved_core_percent));
	set(resv, "gpu_memory_mib", integer(t->reserved_mem_mib));
	set(resv, "release_reason", text(t->release_reason));
	set(resv, "released", json_boolean(t->released));
	set(resv, "released_at", time_of(t->has_released_at, t->released_at));
	json_t *job = json_object();
	set(job, "cluster_uid", text(t->cluster_uid));
	set(job, "name", text(t->job_name));
	set(job, "suspended", json_boolean(t->job_suspended));
	set(job, "uid", text(t->job_uid));
	/* The reason column says why the task is where it is; under "pod" it shows only once a
	 * Pod was seen (its container's reason, or the verdict drawn from its exit code). */
	int has_pod = t->pod_name[0] != '\0';
	/* A Pod being deleted keeps its phase (Running) until it stops: kubectl shows it
	 * Terminating, and so does terminating here. */
	int terminating = t->pod_deleted_at[0] && strcmp(t->pod_phase, "Succeeded") != 0 &&
			  strcmp(t->pod_phase, "Failed") != 0 && strcmp(t->pod_phase, "Deleted") != 0;
	json_t *pod = json_object();
	set(pod, "deadline_at", time_of(t->has_pod_deadline_at, t->pod_deadline_at));
	set(pod, "deletion_timestamp", text(t->pod_deleted_at));
	set(pod, "exit_code", t->has_exit_code ? integer(t->exit_code) : json_null());
	set(pod, "name", text(t->pod_name));
	set(pod, "node", text(t->pod_node));
	set(pod, "phase", text(t->pod_phase));
	set(pod, "reason", has_pod ? text(t->reason) : json_null());
	set(pod, "terminating", json_boolean(terminating));
	set(pod, "uid", text(t->pod_uid));
	set(pod, "waiting", waiting_json(t));
	char created[40];
	clock_fmt_rfc3339_ms(t->created_at, created, sizeof created);
	json_t *result = result_json(t);
	json_t *o = json_object();
	set(o, "allocation", allocation_json(t->allocation));
	if (with_cancel)
		set(o, "cancel_requested_at",
		    time_of(t->has_cancel_requested_at, t->cancel_requested_at));
	set(o, "created_at", json_string(created));
	set(o, "id", text(t->id));
	set(o, "idempotency_key", text(t->idempotency_key));
	set(o, "isolation", isolation_json(t, result));
	set(o, "job", job);
	set(o, "name", text(t->name));
	set(o, "pending", pending_json(t));
	set(o, "pod", pod);
	set(o, "reason", text(t->reason));
	set(o, "reason_detail", reason_detail(t));
	set(o, "request", req);
	set(o, "reservation", resv);
	set(o, "result", result);
	set(o, "state", json_string(task_state_name(t->state)));
	set(o, "team", text(t->team));
	/* A task just submitted was last updated when it was created: formatted once. */
	set(o, "updated_at", t->updated_at == t->created_at ? json_string(created)
							     : time_of(1, t->updated_at));
	json_t *usage = usage_task_json(t);
	set(o, "usage", usage ? usage : usage_unknown());
	set(o, "workload", workload_json(t));
	return o;
}

/* ---- the same view as text ---- */

/* The member key: the time (ms) as task_view shows it, or null when has is 0. */
static void w_time(struct jw *w, const char *key, int has, int64_t ms)
{
	if (!has)
		return jw_member_null(w, key);
	char buf[40];
	jw_member_str(w, key, clock_fmt_rfc3339_ms(ms, buf, sizeof buf));
}

int api_task_view_write(const struct task *t, int with_cancel, struct jw *w)
{
	if (!api_task_view_sorted(t))
		return -1;
	/* Member by member what task_view builds, in the same (sorted) order. */
	char created[40];
	clock_fmt_rfc3339_ms(t->created_at, created, sizeof created);
	int has_pod = t->pod_name[0] != '\0';
	int terminating = t->pod_deleted_at[0] && strcmp(t->pod_phase, "Succeeded") != 0 &&
			  strcmp(t->pod_phase, "Failed") != 0 && strcmp(t->pod_phase, "Deleted") != 0;
	jw_obj_begin(w);
	jw_member_null(w, "allocation"); /* api_task_view_sorted: no annotation */
	if (with_cancel)
		w_time(w, "cancel_requested_at", t->has_cancel_requested_at,
		       t->cancel_requested_at);
	jw_member_str(w, "created_at", created);
	jw_member_text(w, "id", t->id);
	jw_member_text(w, "idempotency_key", t->idempotency_key);
	jw_member_null(w, "isolation"); /* api_task_view_sorted: no termination message */
	jw_key(w, "job");
	jw_obj_begin(w);
	jw_member_text(w, "cluster_uid", t->cluster_uid);
	jw_member_text(w, "name", t->job_name);
	jw_member_bool(w, "suspended", t->job_suspended);
	jw_member_text(w, "uid", t->job_uid);
	jw_obj_end(w);
	jw_member_text(w, "name", t->name);
	jw_member_null(w, "pending"); /* api_task_view_sorted: no message or diagnosis */
	jw_key(w, "pod");
	jw_obj_begin(w);
	w_time(w, "deadline_at", t->has_pod_deadline_at, t->pod_deadline_at);
	jw_member_text(w, "deletion_timestamp", t->pod_deleted_at);
	if (t->has_exit_code)
		jw_member_int(w, "exit_code", t->exit_code);
	else
		jw_member_null(w, "exit_code");
	jw_member_text(w, "name", t->pod_name);
	jw_member_text(w, "node", t->pod_node);
	jw_member_text(w, "phase", t->pod_phase);
	if (has_pod)
		jw_member_text(w, "reason", t->reason);
	else
		jw_member_null(w, "reason");
	jw_member_bool(w, "terminating", terminating);
	jw_member_text(w, "uid", t->pod_uid);
	if (t->waiting_reason[0]) {
		jw_key(w, "waiting");
		jw_obj_begin(w);
		jw_member_text(w, "message", t->waiting_message);
		jw_member_text(w, "reason", t->waiting_reason);
		jw_obj_end(w);
	} else {
		jw_member_null(w, "waiting");
	}
	jw_obj_end(w);
	jw_member_text(w, "reason", t->reason);
	json_t *detail = reason_detail(t);
	if (json_is_string(detail))
		jw_member_str(w, "reason_detail", json_string_value(detail));
	else
		jw_member_null(w, "reason_detail");
	json_decref(detail);
	jw_key(w, "request");
	jw_obj_begin(w);
	jw_member_int(w, "duration_seconds", t->duration_seconds);
	jw_member_text(w, "experiment", t->experiment);
	jw_member_int(w, "gpu_core_percent", t->gpu_core_percent);
	jw_member_int(w, "gpu_count", t->gpu_count);
	jw_member_int(w, "gpu_memory_mib", t->gpu_memory_mib);
	jw_member_text(w, "qos", t->qos);
	jw_obj_end(w);
	jw_key(w, "reservation");
	jw_obj_begin(w);
	jw_member_int(w, "gpu_core_percent", t->reserved_core_percent);
	jw_member_int(w, "gpu_memory_mib", t->reserved_mem_mib);
	jw_member_text(w, "release_reason", t->release_reason);
	jw_member_bool(w, "released", t->released);
	w_time(w, "released_at", t->has_released_at, t->released_at);
	jw_obj_end(w);
	jw_member_null(w, "result"); /* api_task_view_sorted: no termination message */
	jw_member_str(w, "state", task_state_name(t->state));
	jw_member_text(w, "team", t->team);
	if (t->updated_at == t->created_at)
		jw_member_str(w, "updated_at", created);
	else
		w_time(w, "updated_at", 1, t->updated_at);
	jw_key(w, "usage");
	jw_obj_begin(w);
	jw_member_str(w, "reason", USAGE_REASON);
	jw_member_str(w, "status", "unknown");
	jw_obj_end(w);
	jw_member_null(w, "workload"); /* api_task_view_sorted: none */
	jw_obj_end(w);
	return w->failed ? -1 : 0;
}

/* ---- a new task's view, from a template cut out of the writer's own text ----
 *
 * Every task a submission creates has the same view but for its holes: its id, Job name,
 * name, team, key, request, reservation and time. The first one is written by
 * api_task_view_write with a sentinel in each hole, the text is cut at the sentinels, and the
 * cut is checked by filling it with the sentinels again: it must give the same text. A later
 * task whose every other field equals the first one's gets its view by copying the pieces and
 * writing its holes, far less work than the writer. */

/* The holes: the view's texts and numbers that differ from one new task to another (the
 * time, created_at and updated_at, apart), as (enumerator, field of struct task). */
#define FV_HOLE_TEXTS(X, a)                                                                  \
	X(FV_ID, id, a)                                                                      \
	X(FV_KEY, idempotency_key, a)                                                        \
	X(FV_JOB, job_name, a)                                                               \
	X(FV_NAME, name, a)                                                                  \
	X(FV_TEAM, team, a)                                                                  \
	X(FV_QOS, qos, a)                                                                    \
	X(FV_EXPERIMENT, experiment, a)
#define FV_HOLE_INTS(X, a)                                                                   \
	X(FV_DURATION, duration_seconds, a)                                                  \
	X(FV_CORE, gpu_core_percent, a)                                                      \
	X(FV_COUNT, gpu_count, a)                                                            \
	X(FV_MEM, gpu_memory_mib, a)                                                         \
	X(FV_RCORE, reserved_core_percent, a)                                                \
	X(FV_RMEM, reserved_mem_mib, a)

#define FV_ENUM(e, f, a) e,
enum fv_field {
	FV_CREATED, /* created_at, and updated_at (equal for a new task) */
	FV_HOLE_TEXTS(FV_ENUM, ) FV_HOLE_INTS(FV_ENUM, ) FV_NFIELDS
};
#undef FV_ENUM
#define FV_FIRST_TEXT FV_ID
#define FV_FIRST_INT FV_DURATION

/* Where each hole's field is in struct task, and its size. */
#define FV_AT(e, f, a) [e] = { offsetof(struct task, f), sizeof(((struct task *)0)->f) },
static const struct {
	size_t off, size;
} fv_at[FV_NFIELDS] = { FV_HOLE_TEXTS(FV_AT, ) FV_HOLE_INTS(FV_AT, ) };
#undef FV_AT

#define FV_HOLES 24
/* The sentinels: texts "\x01" <letter> "\x01" (written as \u0001...), numbers 987650000 + the
 * field, a time in 2100. */
#define FV_NUM_BASE 987650000
#define FV_TIME_MS 4102444800123LL

static struct {
	int state; /* 0: not cut yet; 1: cut; -1: could not be (the writer serves every task) */
	uint64_t uses; /* views written from it */
	struct task base;
	char *text;
	size_t len;
	int nholes;
	struct fv_hole {
		size_t from, to; /* the sentinel's bytes in text */
		enum fv_field f;
	} hole[FV_HOLES];
} fv;

static int fv_is_text(enum fv_field f)
{
	return f >= FV_FIRST_TEXT && f < FV_FIRST_INT;
}

static const char *fv_text(const struct task *t, enum fv_field f)
{
	return (const char *)t + fv_at[f].off;
}

static int64_t fv_int(const struct task *t, enum fv_field f)
{
	int64_t v;
	memcpy(&v, (const char *)t + fv_at[f].off, sizeof v);
	return v;
}

/* Every field but the holes' (and seq and the times) equal in a and b: a generic comparison
 * over the columns, so that a field the view shows one day is compared without a change
 * here. A column's name is compared with the holes' as literals, which the compiler folds. */
static int fv_same_but_holes(const struct task *a, const struct task *b)
{
#define FV_IS(e, h, f) || !strcmp(#h, #f)
#define FV_SKIP(f)                                                                           \
	(!strcmp(#f, "seq") || !strcmp(#f, "created_at") ||                                     \
	 !strcmp(#f, "updated_at") FV_HOLE_TEXTS(FV_IS, f) FV_HOLE_INTS(FV_IS, f))
/* Most texts are empty in both (a new task's): told by their first bytes, without a call. */
#define FV_CMP_TEXT(f)                                                                       \
	(FV_SKIP(f) || (a->f[0] == b->f[0] && (!a->f[0] || strcmp(a->f, b->f) == 0)))
#define FV_CMP_INT(f) (FV_SKIP(f) || a->f == b->f)
#define FV_CMP_BOOL(f) (a->f == b->f)
#define FV_CMP_OPT(f) (a->has_##f == b->has_##f && a->f == b->f)
#define FV_CMP_STATE(f) (a->f == b->f)
#define FV_CMP(kind, f, tbl, col, size, role) &&FV_CMP_##kind(f)
	return 1 TASK_COLUMNS(FV_CMP);
#undef FV_CMP
#undef FV_CMP_STATE
#undef FV_CMP_OPT
#undef FV_CMP_BOOL
#undef FV_CMP_INT
#undef FV_CMP_TEXT
#undef FV_SKIP
#undef FV_IS
}

/* Writes hole f of t (a value, at depth 0: no separator). */
static void fv_fill(struct jw *w, const struct task *t, enum fv_field f, const char *created)
{
	if (f == FV_CREATED)
		jw_str(w, created);
	else if (fv_is_text(f))
		jw_text(w, fv_text(t, f));
	else
		jw_int(w, fv_int(t, f));
}

/* Writes t from the pieces through jsonw, a call per piece and per hole: the way for texts
 * that need an escape (or are not UTF-8: the writer then fails). */
static void fv_write_calls(const struct task *t, struct jw *w, const char *created)
{
	size_t at = 0;
	for (int i = 0; i < fv.nholes; i++) {
		jw_raw(w, fv.text + at, fv.hole[i].from - at);
		fv_fill(w, t, fv.hole[i].f, created);
		at = fv.hole[i].to;
	}
	jw_raw(w, fv.text + at, fv.len - at);
}

/* Writes v's digits (as jw_int does) at p: where they end. */
static char *fv_digits(char *p, int64_t v)
{
	char num[24], *d = num + sizeof num;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	do {
		*--d = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--d = '-';
	size_t n = (size_t)(num + sizeof num - d);
	memcpy(p, d, n);
	return p + n;
}

/* Writes t from the pieces (w empty). When every text hole is plain (printable ASCII but
 * '"' and '\\', as jw_str copies it), the whole view goes into room taken once: the same
 * bytes as fv_write_calls, without a call per piece. */
static void fv_write(const struct task *t, struct jw *w)
{
	char created[40];
	clock_fmt_rfc3339_ms(t->created_at, created, sizeof created);
	size_t len[FV_NFIELDS];
	len[FV_CREATED] = strlen(created);
	size_t need = fv.len;
	for (int i = 0; i < fv.nholes; i++) {
		enum fv_field f = fv.hole[i].f;
		if (fv_is_text(f)) {
			const unsigned char *s = (const unsigned char *)fv_text(t, f), *e = s;
			while (jx_plain_byte[*e])
				e++;
			if (*e) {
				fv_write_calls(t, w, created);
				return;
			}
			len[f] = (size_t)(e - s);
		}
		need += f == FV_CREATED || fv_is_text(f) ? len[f] + 2 : 20;
	}
	char *p = jw_room_(w, need), *start = p;
	size_t at = 0;
	for (int i = 0; i < fv.nholes; i++) {
		memcpy(p, fv.text + at, fv.hole[i].from - at);
		p += fv.hole[i].from - at;
		at = fv.hole[i].to;
		enum fv_field f = fv.hole[i].f;
		if (!fv_is_text(f) && f != FV_CREATED) {
			p = fv_digits(p, fv_int(t, f));
		} else if (len[f] == 0 && f != FV_CREATED) {
			memcpy(p, "null", 4); /* jw_text's "" */
			p += 4;
		} else {
			*p++ = '"';
			memcpy(p, f == FV_CREATED ? created : fv_text(t, f), len[f]);
			p += len[f];
			*p++ = '"';
		}
	}
	memcpy(p, fv.text + at, fv.len - at);
	p += fv.len - at;
	w->len += (size_t)(p - start);
}

/* Finds every place where the sentinel text tok stands in the sentinel view: 0, or -1. A
 * number's token (skip_colon: ":" and its digits) counts only where the number ends there,
 * not as the start of a longer one. */
static int fv_find(const char *text, const char *tok, enum fv_field f, int skip_colon)
{
	size_t n = strlen(tok);
	int found = 0;
	for (const char *p = strstr(text, tok); p; p = strstr(p + n, tok)) {
		if (skip_colon && p[n] >= '0' && p[n] <= '9')
			continue;
		if (fv.nholes == FV_HOLES)
			return -1;
		size_t from = (size_t)(p - text) + (skip_colon ? 1 : 0);
		fv.hole[fv.nholes].from = from;
		fv.hole[fv.nholes].to = (size_t)(p - text) + n;
		fv.hole[fv.nholes].f = f;
		fv.nholes++;
		found++;
	}
	return found ? 0 : -1;
}

static int fv_hole_cmp(const void *a, const void *b)
{
	size_t x = ((const struct fv_hole *)a)->from, y = ((const struct fv_hole *)b)->from;
	return x < y ? -1 : x > y;
}

/* Cuts the template from t: 0, or -1 when it cannot be (the writer then serves). */
static int fv_cut(const struct task *t)
{
	fv.base = *t;
	struct task *s = gwb_malloc(sizeof *s);
	*s = *t;
	for (enum fv_field f = FV_FIRST_TEXT; f < FV_FIRST_INT; f++)
		snprintf((char *)s + fv_at[f].off, fv_at[f].size, "\x01%c\x01", 'A' + (int)f);
	for (enum fv_field f = FV_FIRST_INT; f < FV_NFIELDS; f++) {
		int64_t v = FV_NUM_BASE + (int64_t)f;
		memcpy((char *)s + fv_at[f].off, &v, sizeof v);
	}
	s->created_at = s->updated_at = FV_TIME_MS;
	struct jw w, back;
	jw_init(&w);
	jw_init(&back);
	int rc = api_task_view_write(s, 1, &w);
	if (rc == 0) {
		char *text = gwb_malloc(w.len + 1);
		memcpy(text, w.buf, w.len);
		text[w.len] = '\0';
		fv.nholes = 0;
		char tok[40], at[40];
		clock_fmt_rfc3339_ms(FV_TIME_MS, at, sizeof at);
		snprintf(tok, sizeof tok, "\"%s\"", at);
		rc = fv_find(text, tok, FV_CREATED, 0);
		for (enum fv_field f = FV_FIRST_TEXT; rc == 0 && f < FV_FIRST_INT; f++) {
			snprintf(tok, sizeof tok, "\"\\u0001%c\\u0001\"", 'A' + (int)f);
			rc = fv_find(text, tok, f, 0);
		}
		for (enum fv_field f = FV_FIRST_INT; rc == 0 && f < FV_NFIELDS; f++) {
			snprintf(tok, sizeof tok, ":%lld", (long long)(FV_NUM_BASE + (int64_t)f));
			rc = fv_find(text, tok, f, 1);
		}
		if (rc == 0) {
			qsort(fv.hole, (size_t)fv.nholes, sizeof fv.hole[0], fv_hole_cmp);
			for (int i = 1; i < fv.nholes; i++)
				if (fv.hole[i].from < fv.hole[i - 1].to)
					rc = -1;
		}
		fv.text = text;
		fv.len = w.len;
		/* The checks: the pieces filled with the sentinels give the writer's text, and
		 * so do they filled with t's own holes (plain texts, nearly always: the way
		 * without a call per piece). */
		if (rc == 0) {
			fv_write(s, &back);
			rc = jw_ok(&back) && back.len == w.len && !memcmp(back.buf, w.buf, w.len) ? 0
												    : -1;
		}
		if (rc == 0) {
			jw_reset(&w);
			jw_reset(&back);
			rc = api_task_view_write(t, 1, &w);
			fv_write(t, &back);
			if (rc == 0 && !(jw_ok(&back) && back.len == w.len &&
					 !memcmp(back.buf, w.buf, w.len)))
				rc = -1;
		}
		if (rc) {
			gwb_free(text);
			fv.text = NULL;
		}
	}
	jw_free(&w);
	jw_free(&back);
	gwb_free(s);
	return rc;
}

int api_task_view_write_new(const struct task *t, struct jw *w)
{
	if (fv.state == 0 && t->updated_at == t->created_at && api_task_view_sorted(t))
		fv.state = fv_cut(t) == 0 ? 1 : -1;
	if (fv.state != 1 || t->updated_at != t->created_at || !fv_same_but_holes(t, &fv.base))
		return api_task_view_write(t, 1, w);
	fv_write(t, w);
	fv.uses++;
	return jw_ok(w) ? 0 : -1;
}

uint64_t api_task_view_template_uses(void)
{
	return fv.uses;
}

json_t *api_task_view(const struct task *t)
{
	return task_view(t, 0);
}

int api_task_view_sorted(const struct task *t)
{
	/* The parts built from outside text (the annotation's cards, the stored diagnosis, the
	 * workload, the termination message) are shaped by jansson: the writer leaves them out. */
	return !t->allocation[0] && !t->pending_message[0] && !t->pending_diagnosis[0] &&
	       !t->workload[0] && !t->termination_message[0] && !usage_task_json_varies();
}

static json_t *str_or_null(const char *v)
{
	return v ? json_string(v) : json_null();
}

json_t *api_task_event_view(const struct task_event *ev)
{
	json_t *detail = ev->detail ? json_loads(ev->detail, 0, NULL) : NULL;
	return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "seq", (json_int_t)ev->seq, "ts",
			 time_of(1, ev->ts_ms), "type", str_or_null(ev->type), "from",
			 str_or_null(ev->from), "to", str_or_null(ev->to), "detail",
			 detail ? detail : json_null());
}

json_t *api_task_detail_view(const struct task *t)
{
	return task_view(t, 1);
}

json_t *api_task_detail(struct store *s, const char *id)
{
	struct task *t = gwb_malloc(sizeof *t);
	json_t *out = store_task_load(s, id, t) == 0 ? api_task_detail_view(t) : NULL;
	gwb_free(t);
	return out;
}
