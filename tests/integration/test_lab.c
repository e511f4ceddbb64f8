/* gwb-lab on real parts: it starts its own private stack (redis-server, kubesim with the real
 * gwb-worker, gwb-server) under the case folder, runs a few experiments, and its evidence
 * records carry the fields docs/API.md "Evidence" lists; a wrong expectation injected with --expect
 * makes it fail, naming the experiment and the field; against a running stack without fault
 * controls, the experiments that need them (or more quota than the team has) are skipped and
 * say so. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/alloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

/* Runs gwb-lab with args (a word list built by the case) and its evidence in the case folder;
 * stdout and stderr go to files there. Returns its exit code. */
static int lab(const char *args)
{
	char cmd[8192];
	snprintf(cmd, sizeof cmd, "'%s' --runtime '%s' --evidence '%s' %s >'%s' 2>'%s'",
	         h_bin("gwb-lab"), h_tmpdir(), h_path("evidence"), args, h_path("lab.out"),
	         h_path("lab.err"));
	fflush(stdout);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	CHECKF(f != NULL, "cannot open %s", path);
	size_t cap = 1 << 22, len = 0, n;
	char *buf = gwb_malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, f)) > 0)
		len += n;
	buf[len] = '\0';
	fclose(f);
	return buf;
}

static void dump_output(void)
{
	char *out = slurp(h_path("lab.out")), *err = slurp(h_path("lab.err"));
	size_t n = strlen(out);
	t_log("gwb-lab stdout (end): %s", n > 3000 ? out + n - 3000 : out);
	t_log("gwb-lab stderr: %s", err);
	gwb_free(out);
	gwb_free(err);
}

static json_t *record(const char *file)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", h_path("evidence"), file);
	json_error_t je;
	json_t *r = json_load_file(path, 0, &je);
	CHECKF(r != NULL, "%s: %s", path, je.text);
	return r;
}

static json_t *at(json_t *o, const char *path)
{
	char buf[160];
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

/* Every field docs/API.md "Evidence" names is in the record, with a value where one must exist. */
static void check_record(json_t *r, const char *name, int order)
{
	CHECK_STR(json_string_value(at(r, "name")), name);
	CHECK_INT(json_integer_value(at(r, "order")), order);
	CHECK_STR(json_string_value(at(r, "mode")), "sim");
	CHECK(json_string_length(at(r, "version")) > 0);
	CHECK(json_is_object(at(r, "parameters")));
	CHECK(json_object_size(at(r, "prediction")) > 0);
	CHECK(json_object_size(at(r, "observed")) > 0);
	CHECK(json_is_boolean(at(r, "passed")));
	/* Every prediction was observed, and the agreement says so field by field. */
	const char *k;
	json_t *v;
	json_object_foreach (at(r, "prediction"), k, v) {
		CHECKF(json_object_get(at(r, "observed"), k) != NULL, "%s: %s not observed", name,
		       k);
		CHECKF(json_is_boolean(json_object_get(at(r, "agreement"), k)), "%s: %s", name, k);
	}
	json_t *ops = at(r, "operations");
	CHECK(json_array_size(ops) > 0);
	size_t i;
	json_array_foreach (ops, i, v) {
		CHECK(json_string_length(json_object_get(v, "at")) >= 24); /* ms precision */
		CHECK(json_is_integer(json_object_get(v, "at_ms")));
		CHECK(json_is_string(json_object_get(v, "action")));
		CHECK(json_is_object(json_object_get(v, "request")));
		CHECK(json_is_integer(json_object_get(v, "status")));
	}
	CHECK(json_array_size(at(r, "tasks")) > 0);
	json_array_foreach (at(r, "tasks"), i, v) {
		CHECK(json_string_length(at(v, "id")) > 0);
		CHECK(json_string_length(at(v, "job.name")) > 0);
		CHECK(json_string_length(at(v, "job.uid")) > 0);
		CHECK(json_object_get(at(v, "pod"), "name") &&
		      json_object_get(at(v, "pod"), "uid"));
		CHECK(json_object_get(v, "annotation") && json_object_get(v, "logs"));
		CHECK(json_is_string(at(v, "final_state")));
		/* The experiment gave back what it held. */
		CHECK(json_is_true(at(v, "reservation.released")));
		CHECK(json_is_string(at(v, "reservation.release_reason")));
	}
	CHECK(json_is_object(at(r, "quota.before")));
	CHECK(json_is_object(at(r, "quota.after")));
	CHECK_INT(json_integer_value(at(r, "quota.after.reserved.gpu_memory_mib")),
	          json_integer_value(at(r, "quota.before.reserved.gpu_memory_mib")));
}

/* The first log event named ev of the record's first task, borrowed, or NULL. */
static json_t *log_event(json_t *r, const char *ev)
{
	size_t i;
	json_t *e;
	json_array_foreach (at(r, "tasks.0.logs"), i, e)
		if (json_string_value(json_object_get(e, "event")) &&
		    strcmp(json_string_value(json_object_get(e, "event")), ev) == 0)
			return e;
	return NULL;
}

TEST_T(lab_private_stack_writes_complete_records, 150)
{
	int rc = lab("--only idempotent-submission --only over-limit --only cancel-and-reclaim");
	if (rc != 0)
		dump_output();
	CHECK_INT(rc, 0);
	json_t *idx = record("index.json");
	CHECK_STR(json_string_value(at(idx, "run.mode")), "sim");
	CHECK_STR(json_string_value(at(idx, "run.dry_run")), "available");
	CHECK(json_string_length(at(idx, "run.started_at")) > 0);
	CHECK(json_string_length(at(idx, "run.finished_at")) > 0);
	CHECK(json_string_length(at(idx, "run.url")) > 0);
	CHECK_INT(json_array_size(at(idx, "experiments")), 3);
	CHECK_STR(json_string_value(at(idx, "experiments.0.file")),
	          "01-idempotent-submission.json");
	CHECK_STR(json_string_value(at(idx, "experiments.1.file")), "03-over-limit.json");
	CHECK(json_is_true(at(idx, "experiments.2.passed")));
	json_decref(idx);

	json_t *r = record("01-idempotent-submission.json");
	check_record(r, "idempotent-submission", 1);
	/* A new key after a time-out: two tasks, two reservations. */
	CHECK_INT(json_array_size(at(r, "tasks")), 2);
	CHECK_INT(json_integer_value(json_object_get(at(r, "observed"),
	                                             "new_key_after_timeout.reserved_added_mib")),
	          2048);
	CHECK_INT(json_integer_value(json_object_get(at(r, "observed"), "conflict.status")), 409);
	/* The placement was predicted by the server's dry run before the submission, and the
	 * scheduler did what it said. */
	CHECK_STR(json_string_value(json_object_get(at(r, "prediction_basis"), "first.placement")),
	          "dry run");
	CHECK(json_is_true(json_object_get(at(r, "agreement"), "first.placement")));
	CHECK(json_is_true(at(r, "dry_runs.first.dry_run")));
	json_decref(r);

	r = record("03-over-limit.json");
	check_record(r, "over-limit", 3);
	CHECK(json_is_true(at(r, "passed")));
	CHECK_STR(json_string_value(at(r, "tasks.0.reservation.release_reason")), "job_failed");
	CHECK_STR(json_string_value(at(r, "tasks.0.final_state")), "failed");
	json_t *iso = log_event(r, "isolation");
	CHECK(iso != NULL);
	CHECK(strcmp(json_string_value(json_object_get(iso, "verdict")), "enforced") != 0);
	json_t *rej = log_event(r, "simulated_limit_rejected");
	CHECK(rej != NULL);
	CHECK_INT(json_integer_value(json_object_get(rej, "exit_code")), 42);
	/* The server's copy of the worker's verdict, from its termination message, agrees with
	 * the log's. */
	CHECK_STR(json_string_value(at(r, "tasks.0.result.exit_reason")), "simulated_limit_rejected");
	CHECK_STR(json_string_value(at(r, "tasks.0.isolation.verdict")),
	          json_string_value(json_object_get(iso, "verdict")));
	CHECK_INT(json_integer_value(at(r, "tasks.0.result.ledger.peak_bytes")),
	          json_integer_value(json_object_get(rej, "used")));
	json_decref(r);

	r = record("05-cancel-and-reclaim.json");
	check_record(r, "cancel-and-reclaim", 5);
	CHECK_STR(
	    json_string_value(json_object_get(at(r, "observed"), "marker.state_while_api_refuses")),
	    "unknown");
	CHECK_INT(json_integer_value(json_object_get(at(r, "observed"), "marker.pods")), 0);
	json_decref(r);

	/* The reports have one section per experiment and the guide's check answers. */
	char *md = slurp(h_path("evidence/report.md"));
	CHECK(strstr(md, "## 01 idempotent-submission") && strstr(md, "## 03 over-limit"));
	CHECK(strstr(md, "May it retry with a new idempotency key?") != NULL);
	gwb_free(md);
	md = slurp(h_path("evidence/report.zh.md"));
	CHECK(strstr(md, "能否换一个新的幂等键直接重试") != NULL);
	gwb_free(md);
}

TEST_T(lab_wrong_expectation_fails_naming_experiment_and_field, 120)
{
	int rc = lab("--only over-limit --expect over-limit.pod.exit_code=0");
	CHECK_INT(rc, 1);
	char *err = slurp(h_path("lab.err"));
	CHECKF(strstr(err, "FAILED: over-limit: field pod.exit_code") != NULL, "stderr: %s", err);
	CHECKF(strstr(err, "observed 42") != NULL, "stderr: %s", err);
	gwb_free(err);
	json_t *r = record("03-over-limit.json");
	CHECK(json_is_false(at(r, "passed")));
	CHECK_INT(json_integer_value(json_object_get(at(r, "prediction"), "pod.exit_code")), 0);
	CHECK_INT(json_integer_value(json_object_get(at(r, "observed"), "pod.exit_code")), 42);
	CHECK(json_is_false(json_object_get(at(r, "agreement"), "pod.exit_code")));
	json_decref(r);
	json_t *idx = record("index.json");
	CHECK(json_is_false(at(idx, "experiments.0.passed")));
	json_decref(idx);
}

TEST_T(lab_against_a_running_stack_skips_what_it_cannot_do, 120)
{
	struct h_kubesim ks;
	h_kubesim_init(&ks);
	snprintf(ks.worker, sizeof ks.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(ks.worker);
	h_kubesim_start(&ks);
	/* What make demo applies from deploy/kubesim/colocation-profile.yaml. */
	CHECK_INT(
	    h_kube(&ks, "POST", "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles",
	           "{\"apiVersion\": \"config.koordinator.sh/v1alpha1\", \"kind\": "
	           "\"ClusterColocationProfile\", \"metadata\": {\"name\": \"gpu-workbench-be\"}, "
	           "\"spec\": {\"namespaceSelector\": {\"matchLabels\": "
	           "{\"kubernetes.io/metadata.name\": \"gpu-workbench\"}}, \"selector\": "
	           "{\"matchLabels\": {\"koordinator.sh/qosClass\": \"BE\"}}, \"qosClass\": "
	           "\"BE\", \"priorityClassName\": \"koord-batch\", \"koordinatorPriority\": "
	           "1000, \"schedulerName\": \"koord-scheduler\"}}",
	           NULL, NULL),
	    201);
	struct h_server srv;
	h_server_init(&srv);
	char env_kube[300];
	snprintf(env_kube, sizeof env_kube, "GWB_KUBE_SERVER=%s", ks.url);
	srv.env[0] = env_kube;
	srv.env[1] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	srv.env[2] = "GWB_RECONCILE_RESYNC_MS=500";
	srv.env[3] = NULL;
	h_server_start(&srv);
	struct h_resp r;
	h_req(&r, "PUT", srv.proc.url, "/v1/teams/alpha", srv.admin,
	      "{\"gpu_memory_mib\": 10240, \"gpu_core_percent\": 400, \"token\": \"alpha-tok\"}",
	      NULL);
	CHECK_INT(r.status, 201);
	h_resp_free(&r);
	/* A team token is not told the cluster's URL (/v1/info): --kube gives it. */
	char args[1024];
	snprintf(
	    args, sizeof args,
	    "--url %s --token alpha-tok --team alpha --kube %s --only same-card-sharing "
	    "--only restart-recovery --only fragmentation-resolved --only device-health-change",
	    srv.proc.url, ks.url);
	int rc = lab(args);
	if (rc != 0)
		dump_output();
	CHECK_INT(rc, 0);
	json_t *rec = record("02-same-card-sharing.json");
	check_record(rec, "same-card-sharing", 2);
	CHECK(json_is_true(json_object_get(at(rec, "observed"), "shared_card")));
	json_decref(rec);
	rec = record("06-restart-recovery.json");
	CHECK(json_is_null(at(rec, "passed")));
	CHECK(strstr(json_string_value(at(rec, "skipped")), "private stack") != NULL);
	json_decref(rec);
	/* Team alpha's 10240 MiB cannot hold the three fragmentation tasks at once. */
	rec = record("07-fragmentation-resolved.json");
	CHECK(json_is_null(at(rec, "passed")));
	CHECKF(strstr(json_string_value(at(rec, "skipped")), "14336 MiB") != NULL, "%s",
	       json_string_value(at(rec, "skipped")));
	CHECK_INT(json_array_size(at(rec, "tasks")), 0);
	json_decref(rec);
	rec = record("08-device-health-change.json");
	CHECK(strstr(json_string_value(at(rec, "skipped")), "--faults") != NULL);
	json_decref(rec);
	/* Only the lab's own tasks were touched, and they hold nothing now. */
	h_req(&r, "GET", srv.proc.url, "/v1/teams/alpha", "alpha-tok", NULL, NULL);
	CHECK_INT(json_integer_value(at(r.json, "reserved.gpu_memory_mib")), 0);
	h_resp_free(&r);
}
