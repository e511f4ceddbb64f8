/* The reconciler's decisions from JSON fixtures (tests/fixtures/decide/, one .json file per
 * case): a task (its columns by name), the picture as the task sees it (Job, Pods, whether the
 * recorded Job was observed gone, freshness), the queue and the time, and what must follow:
 * whether a queued task is taken, the observed state and fields, whether a diagnosis is
 * asked for, the next operation, and the release answer for the listed Pods. Runs from the
 * repository root, as `make test` does. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "server/recon/recon_decide.h"
#include "tests/harness/t.h"

#define FIXTURES "tests/fixtures/decide"
#define MAX_CASES 128

/* Fills t from the fixture's "task" object through the task's column list: every column can
 * be given by its name; absent ones stay zero / empty. */
#define FILL_TEXT(o, t, f)                                                  \
	if (json_is_string(json_object_get(o, #f)))                         \
		snprintf((t)->f, sizeof (t)->f, "%s", json_string_value(json_object_get(o, #f)));
#define FILL_INT(o, t, f) (t)->f = json_integer_value(json_object_get(o, #f));
#define FILL_BOOL(o, t, f) (t)->f = json_is_true(json_object_get(o, #f));
#define FILL_OPT(o, t, f)                                       \
	(t)->has_##f = json_is_integer(json_object_get(o, #f)); \
	(t)->f = json_integer_value(json_object_get(o, #f));
#define FILL_STATE(o, t, f) (t)->f = task_state_parse(json_string_value(json_object_get(o, #f)));
#define FILL(kind, f, tbl, col, size, role) FILL_##kind(o, t, f)

static void task_from_json(const json_t *o, struct task *t)
{
	memset(t, 0, sizeof *t);
	TASK_COLUMNS(FILL)
	t->loaded_state = t->state;
	CHECKF(t->state != TASK_NONE, "fixture task has no valid state");
}

static json_t *load(const char *name)
{
	char path[512];
	snprintf(path, sizeof path, FIXTURES "/%s", name);
	json_error_t e;
	json_t *c = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
	CHECKF(c != NULL, "%s:%d: %s", path, e.line, e.text);
	return c;
}

static void expect_text(const char *file, const json_t *exp, const char *key, const char *got)
{
	json_t *want = json_object_get(exp, key);
	if (want)
		CHECKF(strcmp(json_string_value(want), got) == 0, "%s: %s is \"%s\", expected \"%s\"",
		       file, key, got, json_string_value(want));
}

static void expect_bool(const char *file, const json_t *exp, const char *key, int got)
{
	json_t *want = json_object_get(exp, key);
	if (want)
		CHECKF(json_is_true(want) == !!got, "%s: %s is %d", file, key, got);
}

/* The keys an "expect" object may hold: each is checked by run_case. */
static const char *const expect_keys[] = {
	"take_queued", "diagnose",    "changed",	 "state",     "reason",
	"pod_name",    "pod_node",    "pod_phase",	 "allocation", "pending_message",
	"cluster_uid", "exit_code",   "pod_deadline_at", "action",    "release",
	NULL,
};
static const char *const release_keys[] = { "proof", "final", "final_reason", NULL };

/* 1 when every key of o is in keys. */
static int keys_known(const json_t *o, const char *const *keys, const char **bad)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)o, key, v) {
		int known = 0;
		for (const char *const *k = keys; *k && !known; k++)
			known = strcmp(*k, key) == 0;
		if (!known) {
			*bad = key;
			return 0;
		}
	}
	return 1;
}

/* Why a fixture's "expect" cannot be run, or NULL: it must be a non-empty object of keys that
 * run_case checks (an empty or misspelt expectation would pass whatever the deciders did). */
static const char *expect_refusal(const json_t *exp, char *why, size_t len)
{
	const char *bad = NULL;
	if (!json_is_object(exp))
		snprintf(why, len, "no expect object");
	else if (json_object_size(exp) == 0)
		snprintf(why, len, "expect is empty: a fixture must expect something");
	else if (!keys_known(exp, expect_keys, &bad))
		snprintf(why, len, "expect has \"%s\", which nothing checks", bad);
	else if (json_is_object(json_object_get(exp, "release")) &&
		 !keys_known(json_object_get(exp, "release"), release_keys, &bad))
		snprintf(why, len, "expect.release has \"%s\", which nothing checks", bad);
	else
		return NULL; /* release {} stays valid: released, on any proof */
	return why;
}

/* Runs one fixture; returns how many expectations it checked. */
static int run_case(const char *file)
{
	json_t *c = load(file);
	json_t *exp = json_object_get(c, "expect");
	char why[160];
	const char *refusal = expect_refusal(exp, why, sizeof why);
	CHECKF(refusal == NULL, "%s: %s", file, refusal);
	struct task *t = gwb_malloc(sizeof *t);
	task_from_json(json_object_get(c, "task"), t);
	int fresh = json_is_true(json_object_get(c, "fresh"));
	struct recon_view v;
	json_t *job = json_object_get(c, "job");
	recon_view_init(&v, json_is_object(job) ? job : NULL,
			json_is_true(json_object_get(c, "job_gone")));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(c, "pods"), i, p)
		recon_view_add_pod(&v, p);
	v.cluster_uid = json_string_value(json_object_get(c, "cluster_uid"));
	v.now_ms = json_integer_value(json_object_get(c, "now_ms"));
	v.pod_deadline_s = json_integer_value(json_object_get(c, "pod_deadline_s"));

	expect_bool(file, exp, "take_queued",
		    decide_take_queued(t, json_is_true(json_object_get(c, "queue")),
				       json_integer_value(json_object_get(c, "grace_ms")),
				       json_integer_value(json_object_get(c, "intents_lost_at")),
				       json_integer_value(json_object_get(c, "now_ms"))));
	struct task_move m;
	int diag = decide_observe(t, &v, fresh, &m);
	expect_bool(file, exp, "diagnose", diag);
	expect_bool(file, exp, "changed", t->changed);
	expect_text(file, exp, "state", task_state_name(m.to));
	expect_text(file, exp, "reason", t->reason);
	expect_text(file, exp, "pod_name", t->pod_name);
	expect_text(file, exp, "pod_node", t->pod_node);
	expect_text(file, exp, "pod_phase", t->pod_phase);
	expect_text(file, exp, "allocation", t->allocation);
	expect_text(file, exp, "pending_message", t->pending_message);
	expect_text(file, exp, "cluster_uid", t->cluster_uid);
	json_t *deadline = json_object_get(exp, "pod_deadline_at");
	if (deadline)
		CHECKF(t->has_pod_deadline_at && t->pod_deadline_at == json_integer_value(deadline),
		       "%s: pod_deadline_at %lld", file, (long long)t->pod_deadline_at);
	json_t *code = json_object_get(exp, "exit_code");
	if (code)
		CHECKF(t->has_exit_code && t->exit_code == json_integer_value(code),
		       "%s: exit code %lld", file, (long long)t->exit_code);
	expect_text(file, exp, "action", recon_action_name(decide_action(t, &v, fresh)));

	json_t *want = json_object_get(exp, "release");
	if (want) {
		json_t *listed = json_object_get(c, "listed");
		CHECKF(json_is_array(listed), "%s: release expected without listed Pods", file);
		struct task_move rel;
		enum task_proof proof = decide_release(t, &v, listed, fresh, &rel);
		enum task_state final = proof != TASK_PROOF_NONE ? rel.to : TASK_NONE;
		if (json_is_null(want)) {
			CHECKF(proof == TASK_PROOF_NONE, "%s: released on %s", file,
			       task_proof_name(proof));
		} else {
			CHECKF(proof != TASK_PROOF_NONE, "%s: not released", file);
			expect_text(file, want, "proof", task_proof_name(proof));
			expect_text(file, want, "final", task_state_name(final));
			expect_text(file, want, "final_reason",
				    decide_final_reason(t, proof, final) != TASK_REASON_KEEP
					    ? task_reason_name(decide_final_reason(t, proof, final))
					    : "(kept)");
		}
	}
	int checked = (int)json_object_size(exp);
	recon_view_clear(&v);
	gwb_free(t);
	json_decref(c);
	return checked;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

TEST(decide_each_fixture_meets_its_expectations)
{
	DIR *d = opendir(FIXTURES);
	CHECKF(d != NULL, "cannot open %s (run from the repository root)", FIXTURES);
	char *names[MAX_CASES];
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len > 5 && strcmp(e->d_name + len - 5, ".json") == 0) {
			CHECKF(n < MAX_CASES, "more than %d decide fixtures: raise MAX_CASES",
			       MAX_CASES);
			names[n++] = gwb_strdup(e->d_name);
		}
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof names[0], by_name);
	int checks = 0, no_release = 0;
	for (int i = 0; i < n; i++) {
		checks += run_case(names[i]);
		no_release += strstr(names[i], "no_release") != NULL;
		gwb_free(names[i]);
	}
	t_log("%d fixtures, %d expectations", n, checks);
	CHECKF(n >= 20, "only %d decide fixtures", n);
	CHECKF(no_release >= 3, "only %d no-release fixtures", no_release);
}

/* The loader refuses a fixture that would check nothing, or less than it says. */
TEST(decide_fixture_expecting_nothing_or_unknown_keys_is_refused)
{
	static const struct {
		const char *expect;
		const char *refusal; /* NULL: accepted */
	} v[] = {
		{ "null", "no expect object" },
		{ "[]", "no expect object" },
		{ "{}", "expect is empty" },
		{ "{\"stat\": \"running\"}", "\"stat\", which nothing checks" },
		{ "{\"state\": \"running\", \"release\": {\"prof\": \"job_gone\"}}",
		  "expect.release has \"prof\"" },
		{ "{\"state\": \"running\"}", NULL },
		{ "{\"release\": {}}", NULL },
		{ "{\"release\": null}", NULL },
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		json_t *exp = json_loads(v[i].expect, JSON_DECODE_ANY, NULL);
		CHECKF(exp != NULL, "%s does not parse", v[i].expect);
		char why[160];
		const char *got = expect_refusal(exp, why, sizeof why);
		if (v[i].refusal)
			CHECKF(got && strstr(got, v[i].refusal), "%s: refusal \"%s\", expected \"%s\"",
			       v[i].expect, got ? got : "(none)", v[i].refusal);
		else
			CHECKF(got == NULL, "%s: refused: %s", v[i].expect, got);
		json_decref(exp);
	}
}

/* The three no-release cases again, mutated one fact at a time: each becomes a release when
 * (and only when) the fact that held the reservation goes, so the fixtures cannot pass by
 * never releasing anything. */
TEST(decide_no_release_cases_hinge_on_their_fact)
{
	static const char *const files[] = { "17_no_release_pod_stuck_terminating.json",
					     "18_no_release_picture_stale.json",
					     "19_no_release_job_gone_pod_running.json" };
	for (int k = 0; k < 3; k++) {
		json_t *c = load(files[k]);
		struct task *t = gwb_malloc(sizeof *t);
		task_from_json(json_object_get(c, "task"), t);
		json_t *job = json_object_get(c, "job");
		json_t *listed = json_object_get(c, "listed");
		int fresh = json_is_true(json_object_get(c, "fresh"));
		/* Remove the fact: the stuck Pod ends Failed, the picture is fresh, the orphan
		 * Pod ends Succeeded. */
		size_t i;
		json_t *p;
		json_array_foreach(listed, i, p)
			json_object_set_new(json_object_get(p, "status"), "phase",
					    json_string(k == 0 ? "Failed" : "Succeeded"));
		if (k == 1)
			fresh = 1;
		struct recon_view v;
		recon_view_init(&v, json_is_object(job) ? job : NULL,
				json_is_true(json_object_get(c, "job_gone")));
		json_array_foreach(listed, i, p)
			recon_view_add_pod(&v, p);
		struct task_move m;
		decide_observe(t, &v, fresh, &m);
		struct task_move rel;
		enum task_proof proof = decide_release(t, &v, listed, fresh, &rel);
		CHECKF(proof != TASK_PROOF_NONE, "%s: still not released without its fact", files[k]);
		CHECK_STR(recon_action_name(decide_action(t, &v, fresh)), "list_pods");
		recon_view_clear(&v);
		gwb_free(t);
		json_decref(c);
	}
}

/* A task whose Job vanished with a replaced cluster is released when, and only when, its Pod
 * deadline has passed; with the same cluster the same facts are a plain deletion. */
TEST(decide_cluster_replaced_hinges_on_the_deadline)
{
	json_t *c = load("35_no_release_cluster_replaced_before_pod_deadline.json");
	struct task *t = gwb_malloc(sizeof *t);
	json_t *listed = json_object_get(c, "listed");
	for (int k = 0; k < 3; k++) {
		task_from_json(json_object_get(c, "task"), t);
		struct recon_view v;
		recon_view_init(&v, NULL, 1);
		v.cluster_uid = k == 2 ? t->cluster_uid : "cluster-new";
		v.now_ms = k == 0 ? t->pod_deadline_at - 1 : t->pod_deadline_at;
		v.pod_deadline_s = 310;
		struct task_move m;
		decide_observe(t, &v, 1, &m);
		struct task_move rel;
		enum task_proof proof = decide_release(t, &v, listed, 1, &rel);
		enum task_state final = proof != TASK_PROOF_NONE ? rel.to : TASK_NONE;
		if (k == 0) {
			CHECKF(proof == TASK_PROOF_NONE, "released 1 ms before the deadline");
			CHECK_STR(t->reason, task_reason_name(TASK_REASON_CLUSTER_WAIT));
			CHECK_STR(task_state_name(m.to), "unknown");
		} else if (k == 1) {
			CHECK_STR(task_proof_name(proof), "pod_deadline_passed");
			CHECK_STR(task_state_name(final), "failed");
		} else {
			CHECK_STR(task_proof_name(proof), "job_gone");
			CHECK_STR(t->reason, "job_deleted");
		}
		recon_view_clear(&v);
	}
	gwb_free(t);
	json_decref(c);
}
