/* The fault suite's frame (see h_faults.h). */
#include "tests/harness/h_faults.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define TOK   "faults-alpha-token"
#define JOBS  "/apis/batch/v1/namespaces/gpu-workbench/jobs?labelSelector=gwb.io%2Fmanaged%3Dtrue"

int h_faults_long(void)
{
	const char *v = getenv("GWB_FAULTS_LONG");
	return v && *v && strcmp(v, "0") != 0;
}

long h_faults_n(long short_n, long long_n)
{
	return h_faults_long() ? long_n : short_n;
}

void h_faults_start(struct h_faults *f, const char *name, long requests,
		    const char *const *kubesim_flags, const char *const *env)
{
	memset(f, 0, sizeof *f);
	snprintf(f->name, sizeof f->name, "%s", name);
	f->requests = requests;
	f->submit_p99_ms = -1;
	/* Room for every task at once: the quota is never what holds a task back here. */
	char team[256];
	snprintf(team, sizeof team,
		 "{\"gpu_memory_mib\": %ld, \"gpu_core_percent\": %ld, \"token\": \"" TOK "\"}",
		 requests * 16 + 1024, requests + 100);
	/* gwb-load drives one token as fast as the server answers: the rate limit is off here. */
	const char *env_all[32];
	int m = 0;
	env_all[m++] = "GWB_HTTP_RATE_LIMIT_PER_S=0";
	for (const char *const *e = env; e && *e && m < 31; e++)
		env_all[m++] = *e;
	env_all[m] = NULL;
	h_stack_start(&f->st, 1, kubesim_flags, env_all, "alpha", team);
	/* Later settings win: a restarted server listens where the first one did. */
	const char *hp = strstr(f->st.srv.proc.url, "://");
	snprintf(f->listen, sizeof f->listen, "GWB_LISTEN=%s", hp ? hp + 3 : f->st.srv.proc.url);
	int n = 0;
	while (f->st.srv.env[n] && n < 30)
		n++;
	f->st.srv.env[n++] = f->listen;
	f->st.srv.env[n] = NULL;

	snprintf(f->acked, sizeof f->acked, "%s", h_path("acked.txt"));
	char count[32];
	snprintf(count, sizeof count, "%ld", requests);
	const char *argv[] = { h_bin("gwb-load"), "--url", f->st.srv.proc.url, "--token", TOK,
			       "--closed", "--connections", "4", "--count", count,
			       "--mix", "submit=80,replay=10,cancel=10", "--mem", "16", "--core",
			       "1", "--task-seconds", "1", "--timeout", "5", "--acked", f->acked,
			       "--json", NULL };
	f->started_ms = clock_mono_ms();
	if (h_proc_start(&f->load, argv, NULL, NULL, 0) < 0)
		t_fail(__FILE__, __LINE__, "cannot start gwb-load");
	/* gwb-load exits 1 when the fault made requests fail, which is expected here: its exit
	 * is not checked, only what the server holds afterwards. */
	h_proc_exempt(&f->load);
}

/* The submissions' p99 latency in gwb-load's JSON summary (its last line starting with '{'),
 * or -1 when there is none. */
static double load_submit_p99(const char *log)
{
	FILE *fp = fopen(log, "r");
	if (!fp)
		return -1;
	char *line = NULL, *last = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, fp) > 0)
		if (line[0] == '{') {
			gwb_free(last);
			last = gwb_strdup(line);
		}
	free(line); /* banned-ok: getline's buffer */
	fclose(fp);
	json_t *j = last ? json_loads(last, 0, NULL) : NULL;
	gwb_free(last);
	json_t *p99 = json_object_get(
		json_object_get(json_object_get(json_object_get(j, "operations"), "submit"),
				"latency_ms"),
		"p99");
	double v = json_is_number(p99) ? json_number_value(p99) : -1;
	json_decref(j);
	return v;
}

int h_faults_loading(struct h_faults *f)
{
	return f->load.pid > 0 && h_proc_alive(&f->load);
}

void h_faults_load_wait(struct h_faults *f, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	while (h_faults_loading(f)) {
		if (clock_mono_ms() > deadline) {
			h_proc_dump_log(&f->load, 20);
			t_fail(__FILE__, __LINE__, "%s: gwb-load still sending after %d ms", f->name,
			       timeout_ms);
		}
		h_sleep_ms(50);
	}
	h_proc_stop(&f->load, SIGTERM, 1000); /* reaps it */
	f->load.pid = 0;
	f->submit_p99_ms = load_submit_p99(f->load.log);
}

void h_faults_cleared(struct h_faults *f)
{
	f->cleared_ms = clock_mono_ms();
}

void h_faults_kill9_server(struct h_faults *f)
{
	h_server_kill9(&f->st.srv);
	h_server_start(&f->st.srv);
}

/* ---- the checks ---- */

struct tally {
	long listed, acked_present, open, unknown, reserved_open;
	json_t *states; /* state -> count */
	json_t *ids;    /* every listed id */
};

static void tally_free(struct tally *t)
{
	json_decref(t->states);
	json_decref(t->ids);
	memset(t, 0, sizeof *t);
}

/* One pass over the team's tasks. Returns 0, or -1 when a page could not be read (a server
 * restarting, say). */
static int list_tasks(const struct h_faults *f, const json_t *acked, struct tally *t)
{
	memset(t, 0, sizeof *t);
	t->states = json_object();
	t->ids = json_object();
	char cursor[64] = "";
	for (;;) {
		char url[512];
		snprintf(url, sizeof url, "%s/v1/tasks?team=alpha&limit=500%s%s",
			 f->st.srv.proc.url, cursor[0] ? "&cursor=" : "", cursor);
		struct h_resp r;
		if (h_http(&r, "GET", url, ADMIN, NULL, NULL) < 0 || r.status != 200) {
			h_resp_free(&r);
			return -1;
		}
		size_t i;
		json_t *task;
		json_array_foreach(json_object_get(r.json, "tasks"), i, task) {
			const char *id = json_string_value(json_object_get(task, "id"));
			const char *state = json_string_value(json_object_get(task, "state"));
			int released = json_is_true(
				json_object_get(json_object_get(task, "reservation"), "released"));
			int final = state && (!strcmp(state, "succeeded") || !strcmp(state, "failed") ||
					      !strcmp(state, "cancelled"));
			if (!id || !state)
				continue;
			t->listed++;
			json_object_set_new(t->ids, id, json_true());
			if (json_object_get(acked, id))
				t->acked_present++;
			if (!final || !released)
				t->open++;
			if (!strcmp(state, "unknown"))
				t->unknown++;
			json_t *c = json_object_get(t->states, state);
			json_object_set_new(t->states, state,
					    json_integer((c ? json_integer_value(c) : 0) + 1));
		}
		const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
		snprintf(cursor, sizeof cursor, "%s", next ? next : "");
		h_resp_free(&r);
		if (!cursor[0])
			return 0;
	}
}

static json_t *read_acked(const char *path)
{
	json_t *set = json_object();
	FILE *fp = fopen(path, "r");
	if (!fp)
		return set; /* nothing was acknowledged */
	char line[128];
	while (fgets(line, sizeof line, fp)) {
		line[strcspn(line, "\r\n")] = '\0';
		if (line[0])
			json_object_set_new(set, line, json_true());
	}
	fclose(fp);
	return set;
}

/* Compact JSON text of j (or NULL); freed with gwb_free, as jansson allocates through
 * gwb_malloc here. */
static char *dumps(const json_t *j)
{
	return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* Jobs per task in the cluster: *jobs all of ours, *dups the tasks with more than one, *strays
 * the Jobs whose task the server does not have. */
static void count_jobs(const struct h_faults *f, const json_t *ids, long *jobs, long *dups,
		       long *strays)
{
	json_t *list = NULL;
	long st = h_kube(&f->st.ks, "GET", JOBS, NULL, NULL, &list);
	CHECKF(st == 200, "%s: listing the Jobs answered %ld", f->name, st);
	json_t *seen = json_object();
	*jobs = *dups = *strays = 0;
	size_t i;
	json_t *j;
	json_array_foreach(json_object_get(list, "items"), i, j) {
		const char *task = json_string_value(json_object_get(
			json_object_get(json_object_get(j, "metadata"), "labels"), "gwb.io/task"));
		(*jobs)++;
		if (!task)
			continue;
		if (json_object_get(seen, task))
			(*dups)++;
		else if (!json_object_get(ids, task))
			(*strays)++;
		json_object_set_new(seen, task, json_true());
	}
	json_decref(seen);
	json_decref(list);
}

void h_faults_verify(struct h_faults *f, int timeout_s)
{
	if (h_faults_loading(f))
		h_faults_load_wait(f, 120000);
	if (f->submit_p99_ms < 0)
		f->submit_p99_ms = load_submit_p99(f->load.log);
	if (!f->cleared_ms)
		h_faults_cleared(f);
	json_t *acked = read_acked(f->acked);
	long nacked = (long)json_object_size(acked);

	/* Every task ends: a final state and its reservation released. */
	int64_t deadline = clock_mono_ms() + (int64_t)timeout_s * 1000;
	struct tally t = { 0 };
	int read_ok = 0;
	for (;;) {
		tally_free(&t);
		read_ok = list_tasks(f, acked, &t) == 0;
		if (read_ok && t.acked_present == nacked && t.open == 0)
			break;
		if (clock_mono_ms() > deadline)
			break;
		h_sleep_ms(250);
	}
	int64_t ended_ms = clock_mono_ms();
	double recover_s = (double)(ended_ms - f->cleared_ms) / 1000.0;
	double total_s = (double)(ended_ms - f->started_ms) / 1000.0;
	char *states = dumps(t.states);
	char p99[32] = "not known";
	if (f->submit_p99_ms >= 0)
		snprintf(p99, sizeof p99, "%.1f ms", f->submit_p99_ms);
	if (!read_ok || t.acked_present != nacked || t.open) {
		h_proc_dump_log(&f->st.srv.proc, 40);
		t_fail(__FILE__, __LINE__,
		       "%s: after %d s: %ld of %ld acknowledged tasks present, %ld of %ld tasks not "
		       "ended (states %s)%s",
		       f->name, timeout_s, t.acked_present, nacked, t.open, t.listed,
		       states ? states : "?", read_ok ? "" : "; the task list could not be read");
	}

	/* Nothing reserved once every task ended. */
	struct h_resp r;
	h_req(&r, "GET", f->st.srv.proc.url, "/v1/teams/alpha", ADMIN, NULL, NULL);
	json_t *res = json_object_get(r.json, "reserved");
	long mem = (long)json_integer_value(json_object_get(res, "gpu_memory_mib"));
	long core = (long)json_integer_value(json_object_get(res, "gpu_core_percent"));
	h_resp_free(&r);
	CHECKF(mem == 0 && core == 0, "%s: team alpha still reserves %ld MiB and %ld %% of core",
	       f->name, mem, core);

	/* The audit agrees with the store and the cluster. */
	h_req(&r, "GET", f->st.srv.proc.url, "/v1/audit", ADMIN, NULL, NULL);
	CHECKF(r.status == 200, "%s: GET /v1/audit answered %ld", f->name, r.status);
	long drift = (long)json_integer_value(json_object_get(r.json, "drift"));
	if (drift)
		t_log("%s: audit: %.2000s", f->name, r.body);
	h_resp_free(&r);

	long jobs, dups, strays;
	count_jobs(f, t.ids, &jobs, &dups, &strays);

	printf("fault %s: %ld requests, acknowledged %ld, present %ld (%ld tasks in all, states "
	       "%s), drift %ld, %ld Jobs (%ld tasks with two, %ld with no task), every task ended "
	       "%.1f s after the fault was cleared, %.1f s after the load started, submissions' "
	       "p99 %s\n",
	       f->name, f->requests, nacked, t.acked_present, t.listed, states ? states : "?",
	       drift, jobs, dups, strays, recover_s, total_s, p99);
	const char *report = getenv("GWB_FAULTS_REPORT");
	FILE *fp = report && *report ? fopen(report, "a") : NULL;
	if (fp) {
		json_t *line = json_pack("{s:s, s:I, s:I, s:I, s:I, s:O, s:I, s:I, s:I, s:I, s:f, s:f}",
					 "fault", f->name, "requests", (json_int_t)f->requests,
					 "acknowledged", (json_int_t)nacked, "present",
					 (json_int_t)t.acked_present, "tasks", (json_int_t)t.listed,
					 "states", t.states, "drift", (json_int_t)drift, "jobs",
					 (json_int_t)jobs, "tasks_with_two_jobs", (json_int_t)dups,
					 "jobs_without_task", (json_int_t)strays, "recover_s",
					 recover_s, "total_s", total_s);
		if (line && f->submit_p99_ms >= 0)
			json_object_set_new(line, "submit_p99_ms", json_real(f->submit_p99_ms));
		char *s = dumps(line);
		if (s)
			fprintf(fp, "%s\n", s);
		gwb_free(s);
		json_decref(line);
		fclose(fp);
	}
	gwb_free(states);
	CHECKF(drift == 0, "%s: the audit reports a drift of %ld", f->name, drift);
	CHECKF(dups == 0, "%s: %ld tasks have two Jobs", f->name, dups);
	CHECKF(strays == 0, "%s: %ld Jobs have no task", f->name, strays);
	CHECKF(t.unknown == 0, "%s: %ld tasks left unknown", f->name, t.unknown);
	tally_free(&t);
	json_decref(acked);
}
