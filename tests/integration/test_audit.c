/* The quota audit on real parts: a real gwb-server over a real SQLite file whose reservations
 * are changed behind its back (while it runs, and between a stop and a start), gwbctl audit's
 * exit code, the housekeeping run's warn lines and gauge, the repair and its team events; and
 * with kubesim, each task problem the cluster picture can show. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"
#define NS_JOBS "/apis/batch/v1/namespaces/gpu-workbench/jobs"
#define NS_PODS "/api/v1/namespaces/gpu-workbench/pods"

static void put_team(const char *url, const char *team, const char *token)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"%s\"}", token);
	h_team_put(url, ADMIN, team, body);
}

/* Submits a task of mem MiB and core % for team with token; returns its id (static ring). */
static const char *submit(const char *url, const char *token, const char *team, int mem,
			  int core, int secs)
{
	static char ids[8][32];
	static int slot;
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"%s\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": %d, "
		 "\"duration_seconds\": %d}",
		 team, mem, core, secs);
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/tasks", token, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 8];
	snprintf(id, 32, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
	return id;
}

/* Runs SQL on the database file from this process: behind the server's back. */
static void tamper(const char *db, const char *sql)
{
	sqlite3 *h;
	CHECK_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	char *err = NULL;
	int rc = sqlite3_exec(h, sql, NULL, NULL, &err);
	CHECKF(rc == SQLITE_OK, "%s: %s", sql, err ? err : "?");
	sqlite3_close(h);
}

/* One integer from a one-row query on the file. */
static long long query_int(const char *db, const char *sql)
{
	sqlite3 *h;
	sqlite3_stmt *st;
	CHECK_INT(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_busy_timeout(h, 10000);
	CHECK_INT(sqlite3_prepare_v2(h, sql, -1, &st, NULL), SQLITE_OK);
	CHECK_INT(sqlite3_step(st), SQLITE_ROW);
	long long v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return v;
}

/* GET /v1/audit as the admin (a new reference). */
static json_t *audit(const char *url)
{
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/audit", ADMIN, NULL, NULL);
	CHECKF(r.status == 200 && r.json, "audit: %ld %s", r.status, r.body);
	json_t *a = json_incref(r.json);
	h_resp_free(&r);
	return a;
}

static long long drift_of(json_t *a)
{
	json_t *d = json_object_get(a, "drift");
	CHECKF(json_is_integer(d), "no drift in the answer");
	return json_integer_value(d);
}

static json_t *team_of(json_t *a, const char *team)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(a, "teams"), i, t)
		if (strcmp(json_string_value(json_object_get(t, "team")), team) == 0)
			return t;
	t_fail(__FILE__, __LINE__, "team %s is not in the audit", team);
}

static long long amount(json_t *team, const char *which, const char *field)
{
	json_t *v = json_object_get(json_object_get(team, which), field);
	CHECKF(json_is_integer(v), "%s.%s is not an integer", which, field);
	return json_integer_value(v);
}

/* The problem the audit names for task id ("" when it names none). */
static const char *problem_of(json_t *a, const char *id)
{
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(a, "tasks"), i, t) {
		const char *tid = json_string_value(json_object_get(t, "task"));
		if (tid && strcmp(tid, id) == 0)
			return json_string_value(json_object_get(t, "problem"));
	}
	return "";
}

/* Runs gwbctl (a word list built by the case) against url with token; returns its stdout
 * (gwb_malloc'd) and sets *code to its exit code. */
static char *gwbctl(const char *url, const char *token, const char *args, int *code)
{
	char cmd[4096];
	snprintf(cmd, sizeof cmd, "GWB_URL=%s GWB_TOKEN=%s '%s' %s 2>>%s", url, token,
		 h_bin("gwbctl"), args, h_path("gwbctl.err"));
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	size_t cap = 1 << 20, len = 0, n;
	char *buf = gwb_malloc(cap);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += n;
	buf[len] = '\0';
	int st = pclose(p);
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	return buf;
}

/* 1 when the file holds needle. */
static int file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char line[4096];
	int found = 0;
	while (!found && fgets(line, sizeof line, f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

/* Polls /metrics until gwb_audit_drift shows want (or fails the case). */
static void wait_gauge(const char *url, long long want, int timeout_ms)
{
	char line[64];
	snprintf(line, sizeof line, "gwb_audit_drift %lld\n", want);
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		struct h_resp r;
		h_req(&r, "GET", url, "/metrics", H_METRICS_TOKEN, NULL, NULL);
		int found = r.body && strstr(r.body, line) != NULL;
		h_resp_free(&r);
		if (found)
			return;
		CHECKF(clock_mono_ms() < deadline, "gwb_audit_drift never showed %lld", want);
		h_sleep_ms(100);
	}
}

TEST_T(audit_reports_a_reservation_changed_behind_the_server_and_repair_fixes_it, 90)
{
	struct h_server s;
	h_server_init(&s);
	s.env[0] = "GWB_AUDIT_INTERVAL_S=1";
	s.env[1] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	s.env[2] = NULL;
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, "alpha", ALPHA);
	put_team(url, "beta", BETA);
	submit(url, ALPHA, "alpha", 1024, 25, 60);
	submit(url, ALPHA, "alpha", 2048, 30, 60);
	submit(url, BETA, "beta", 512, 10, 60);

	json_t *a = audit(url);
	CHECK_INT(drift_of(a), 0);
	CHECK(json_is_true(json_object_get(team_of(a, "alpha"), "ok")));
	CHECK_INT(amount(team_of(a, "alpha"), "computed", "gpu_memory_mib"), 3072);
	CHECK_INT(amount(team_of(a, "alpha"), "stored", "gpu_core_percent"), 55);
	/* No cluster: the answer says what it could not check. */
	CHECK(json_is_false(json_object_get(json_object_get(a, "cluster"), "checked")));
	json_decref(a);
	int code;
	char *out = gwbctl(url, ADMIN, "audit -o json", &code);
	CHECKF(code == 0, "gwbctl audit with no drift: exit %d: %s", code, out);
	gwb_free(out);
	/* Admin only: a team token is refused, and so is the repair. */
	struct h_resp r;
	h_req(&r, "GET", url, "/v1/audit", ALPHA, NULL, NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	h_req(&r, "POST", url, "/v1/audit/repair", BETA, NULL, NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);

	/* Behind the server's back, while it runs. */
	tamper(s.db, "UPDATE teams SET reserved_mem_mib = reserved_mem_mib + 5000, "
		     "reserved_core_pct = 7 WHERE name = 'alpha'");
	a = audit(url);
	CHECK_INT(drift_of(a), 1);
	json_t *al = team_of(a, "alpha");
	CHECK(json_is_false(json_object_get(al, "ok")));
	CHECK_INT(amount(al, "stored", "gpu_memory_mib"), 8072);
	CHECK_INT(amount(al, "stored", "gpu_core_percent"), 7);
	CHECK_INT(amount(al, "computed", "gpu_memory_mib"), 3072);
	CHECK_INT(amount(al, "computed", "gpu_core_percent"), 55);
	CHECK(json_is_true(json_object_get(team_of(a, "beta"), "ok")));
	json_decref(a);
	out = gwbctl(url, ADMIN, "audit -o text", &code);
	CHECKF(code == 1, "gwbctl audit on drift: exit %d", code);
	CHECKF(strstr(out, "drift 1") &&
		       strstr(out, "team alpha: stored 8072 MiB / 7%, its tasks hold 3072 MiB / 55%"),
	       "gwbctl audit text: %s", out);
	gwb_free(out);
	out = gwbctl(url, ADMIN, "audit -o name", &code);
	CHECK_INT(code, 1);
	CHECK_STR(out, "alpha\n");
	gwb_free(out);

	/* The housekeeping run found it on its own: a warn line with the team and the amounts,
	 * and the gauge. */
	const char *want = "level=warn mod=audit event=team_drift team=alpha stored_mem_mib=8072 "
			   "computed_mem_mib=3072 stored_core_pct=7 computed_core_pct=55";
	int64_t deadline = clock_mono_ms() + 20000;
	while (!file_has(s.proc.log, want)) {
		CHECKF(clock_mono_ms() < deadline, "no warn line: %s", want);
		h_sleep_ms(100);
	}
	wait_gauge(url, 1, 20000);
	/* It reports only: the stored totals are still the tampered ones. */
	CHECK_INT(query_int(s.db, "SELECT reserved_mem_mib FROM teams WHERE name = 'alpha'"),
		  8072);

	out = gwbctl(url, ADMIN, "audit repair -o json", &code);
	CHECKF(code == 0, "gwbctl audit repair: exit %d: %s", code, out);
	json_t *rep = json_loads(out, 0, NULL);
	gwb_free(out);
	CHECK(rep != NULL);
	CHECK_INT(json_integer_value(json_object_get(rep, "teams_changed")), 1);
	json_t *c = json_array_get(json_object_get(rep, "changes"), 0);
	CHECK_STR(json_string_value(json_object_get(c, "team")), "alpha");
	CHECK_INT(amount(c, "before", "gpu_memory_mib"), 8072);
	CHECK_INT(amount(c, "after", "gpu_memory_mib"), 3072);
	CHECK_INT(amount(c, "after", "gpu_core_percent"), 55);
	json_decref(rep);
	/* Recorded as a team event with the amounts; the stored totals are the tasks' sums. */
	CHECK_INT(query_int(s.db, "SELECT COUNT(*) FROM team_events WHERE team = 'alpha' AND "
				  "type = 'audit_repair' AND json_extract(detail, "
				  "'$.stored.gpu_memory_mib') = 8072 AND json_extract(detail, "
				  "'$.computed.gpu_memory_mib') = 3072"),
		  1);
	CHECK_INT(query_int(s.db, "SELECT reserved_core_pct FROM teams WHERE name = 'alpha'"), 55);
	a = audit(url);
	CHECK_INT(drift_of(a), 0);
	CHECK_INT(json_array_size(json_object_get(a, "repairs")), 1);
	json_decref(a);
	out = gwbctl(url, ADMIN, "audit -o json", &code);
	CHECK_INT(code, 0);
	gwb_free(out);
	wait_gauge(url, 0, 20000);
	/* A second repair has nothing to do. */
	h_req(&r, "POST", url, "/v1/audit/repair", ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(json_integer_value(json_object_get(r.json, "teams_changed")), 0);
	h_resp_free(&r);
	h_server_stop(&s);
}

TEST_T(audit_reports_changes_made_between_a_stop_and_a_start, 60)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	put_team(s.proc.url, "alpha", ALPHA);
	const char *t1 = submit(s.proc.url, ALPHA, "alpha", 1024, 20, 60);
	char id1[32], id2[32];
	snprintf(id1, sizeof id1, "%s", t1);
	snprintf(id2, sizeof id2, "%s", submit(s.proc.url, ALPHA, "alpha", 4096, 40, 60));
	h_server_stop(&s);
	/* One reservation released without its total, one task made final still holding. */
	char sql[512];
	snprintf(sql, sizeof sql,
		 "UPDATE tasks SET released = 1, released_at = 1 WHERE id = '%s';"
		 "UPDATE tasks SET state = 'succeeded' WHERE id = '%s';",
		 id1, id2);
	tamper(s.db, sql);
	h_server_start(&s);
	json_t *a = audit(s.proc.url);
	CHECK_INT(drift_of(a), 2);
	json_t *al = team_of(a, "alpha");
	CHECK_INT(amount(al, "stored", "gpu_memory_mib"), 5120);
	CHECK_INT(amount(al, "computed", "gpu_memory_mib"), 4096);
	CHECK_INT(amount(al, "stored", "gpu_core_percent"), 60);
	CHECK_INT(amount(al, "computed", "gpu_core_percent"), 40);
	CHECK_STR(problem_of(a, id2), "final_holding_quota");
	CHECK_STR(problem_of(a, id1), "");
	json_decref(a);
	/* The repair fixes the totals only: the final task still holds its quota. */
	struct h_resp r;
	h_req(&r, "POST", s.proc.url, "/v1/audit/repair", ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(json_integer_value(json_object_get(r.json, "teams_changed")), 1);
	h_resp_free(&r);
	a = audit(s.proc.url);
	CHECK_INT(drift_of(a), 1);
	CHECK(json_is_true(json_object_get(team_of(a, "alpha"), "ok")));
	CHECK_STR(problem_of(a, id2), "final_holding_quota");
	json_decref(a);
	h_server_stop(&s);
}

/* A Job (suspended: no Pod) or Pod document of ours for a task that does not exist. */
static char *orphan(int pod, const char *name, const char *task)
{
	const char *env[] = { "SLEEP=300", NULL };
	char *doc = pod ? h_kubesim_gpu_pod(name, 512, 10, env)
			: h_kubesim_gpu_job(name, 512, 10, env, 0, "{\"suspend\":true}");
	json_t *o = json_loads(doc, 0, NULL);
	gwb_free(doc);
	json_t *md = json_object_get(o, "metadata");
	json_t *labels = json_object_get(md, "labels");
	if (!labels) {
		labels = json_object();
		json_object_set_new(md, "labels", labels);
	}
	json_object_set_new(labels, "gwb.io/managed", json_string("true"));
	json_object_set_new(labels, "gwb.io/task", json_string(task));
	char *s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return s;
}

TEST_T(audit_checks_tasks_against_a_fresh_cluster_picture, 120)
{
	struct h_kubesim ks;
	h_kubesim_init(&ks);
	snprintf(ks.worker, sizeof ks.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(ks.worker);
	h_kubesim_start(&ks);
	struct h_server s;
	h_server_init(&s);
	char kenv[300];
	snprintf(kenv, sizeof kenv, "GWB_KUBE_SERVER=%s", ks.url);
	s.env[0] = kenv;
	s.env[1] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	s.env[2] = "GWB_RECONCILE_RESYNC_MS=500";
	s.env[3] = "GWB_AUDIT_GRACE_S=60";
	s.env[4] = "GWB_KUBE_WATCH_IDLE_SECONDS=5";
	s.env[5] = NULL;
	h_server_start(&s);
	const char *url = s.proc.url;
	put_team(url, "alpha", ALPHA);
	/* A running task. */
	char running[32];
	snprintf(running, sizeof running, "%s", submit(url, ALPHA, "alpha", 1024, 20, 300));
	int64_t deadline = clock_mono_ms() + 30000;
	for (;;) {
		char path[64];
		snprintf(path, sizeof path, "/v1/tasks/%s", running);
		struct h_resp r;
		h_req(&r, "GET", url, path, ALPHA, NULL, NULL);
		const char *st = json_string_value(json_object_get(r.json, "state"));
		int ok = st && strcmp(st, "running") == 0;
		h_resp_free(&r);
		if (ok)
			break;
		CHECKF(clock_mono_ms() < deadline, "task %s never ran", running);
		h_sleep_ms(100);
	}
	json_t *a = audit(url);
	CHECK(json_is_true(json_object_get(json_object_get(a, "cluster"), "checked")));
	CHECK_INT(drift_of(a), 0);
	json_decref(a);

	/* Behind the server's back: the running task's reservation released (the team total
	 * with it, so only the task is wrong), and two tasks that hold quota with no Job, one
	 * older than the grace and one younger. */
	char sql[2048];
	int64_t now = clock_now_ms();
	snprintf(sql, sizeof sql,
		 "UPDATE tasks SET released = 1, released_at = %lld WHERE id = '%s';"
		 "UPDATE teams SET reserved_mem_mib = reserved_mem_mib - 1024 + 2048, "
		 "reserved_core_pct = reserved_core_pct - 20 + 20 WHERE name = 'alpha';"
		 "INSERT INTO tasks (id, team, name, state, gpu_memory_mib, gpu_core_percent, "
		 "gpu_count, duration_seconds, qos, experiment, job_name, created_at, updated_at, "
		 "reserved_gpu_memory_mib, reserved_gpu_core_percent) "
		 "VALUES ('t-oldnojob0000', 'alpha', 'old', 'running', 1024, 10, 1, 60, 'LS', "
		 "'normal', 'gwb-t-oldnojob0000', %lld, %lld, 1024, 10), ('t-newnojob0000', "
		 "'alpha', 'new', 'running', 1024, 10, 1, 60, 'LS', 'normal', "
		 "'gwb-t-newnojob0000', %lld, %lld, 1024, 10);",
		 (long long)now, running, (long long)(now - 3600000), (long long)(now - 3600000),
		 (long long)now, (long long)now);
	tamper(s.db, sql);
	/* Objects of ours with no task. */
	char *job = orphan(0, "gwb-t-nosuchtask00", "t-nosuchtask00");
	json_decref(h_kube_create(&ks, NS_JOBS, job));
	gwb_free(job);
	char *pod = orphan(1, "gwb-t-nosuchtask00-x1", "t-nosuchtask00");
	json_decref(h_kube_create(&ks, NS_PODS, pod));
	gwb_free(pod);

	/* The picture learns of the objects through its watches: wait for them. */
	deadline = clock_mono_ms() + 30000;
	for (;;) {
		a = audit(url);
		if (drift_of(a) == 4 && problem_of(a, "t-nosuchtask00")[0])
			break;
		CHECKF(clock_mono_ms() < deadline, "the audit never saw the 4 problems: %s",
		       json_dumps(a, JSON_COMPACT));
		json_decref(a);
		h_sleep_ms(200);
	}
	CHECK(json_is_true(json_object_get(team_of(a, "alpha"), "ok")));
	CHECK_STR(problem_of(a, running), "released_pod_running");
	CHECK_STR(problem_of(a, "t-oldnojob0000"), "holds_quota_without_job");
	CHECK_STR(problem_of(a, "t-newnojob0000"), "");
	int jobs = 0, pods = 0;
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(a, "tasks"), i, t) {
		const char *p = json_string_value(json_object_get(t, "problem"));
		jobs += strcmp(p, "job_without_task") == 0;
		pods += strcmp(p, "pod_without_task") == 0;
	}
	CHECK_INT(jobs, 1);
	CHECK_INT(pods, 1);
	json_decref(a);
	int code;
	char *out = gwbctl(url, ADMIN, "audit -o name", &code);
	CHECK_INT(code, 1);
	CHECKF(strstr(out, running) && strstr(out, "t-oldnojob0000"), "names: %s", out);
	gwb_free(out);
	/* A repair changes no team total here: the tasks' problems are for an operator. */
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/audit/repair", ADMIN, NULL, NULL);
	CHECK_INT(r.status, 200);
	CHECK_INT(json_integer_value(json_object_get(r.json, "teams_changed")), 0);
	h_resp_free(&r);

	/* With the API server refusing, the picture goes stale: the answer says the tasks were
	 * not checked against it, and only the store's findings count. */
	CHECK_INT(h_kubesim_ctl(&ks, "PUT", "/_kubesim/faults", "{\"api\":\"refuse\"}", NULL), 200);
	deadline = clock_mono_ms() + 60000;
	for (;;) {
		a = audit(url);
		if (json_is_false(json_object_get(json_object_get(a, "cluster"), "checked")))
			break;
		CHECKF(clock_mono_ms() < deadline, "the picture never went stale");
		json_decref(a);
		h_sleep_ms(200);
	}
	CHECK_INT(drift_of(a), 0);
	CHECK(strstr(json_string_value(json_object_get(json_object_get(a, "cluster"), "note")),
		     "not fresh") != NULL);
	json_decref(a);
	CHECK_INT(h_kubesim_ctl(&ks, "DELETE", "/_kubesim/faults", NULL, NULL), 200);
	h_server_stop(&s);
}
