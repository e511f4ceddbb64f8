/* The fault suite, the Kubernetes side: while gwb-load drives a mix of submissions, replays and
 * cancels, the API server (kubesim) refuses connections, answers slowly (2 s an answer), hangs
 * (the server's requests time out), cuts every watch stream every few seconds, answers watch
 * resumes with 410 Expired storms, and is replaced by an empty one on the same port, stopped
 * with SIGTERM (its kubelet stops its containers) or killed with SIGKILL (its containers run on
 * as orphans). After each fault the frame's checks (h_faults.h): every acknowledged task present
 * and ended, nothing reserved, no audit drift, one Job per task, none left unknown.
 * GWB_FAULTS_LONG=1 runs the long forms (make test-faults). */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/httpc.h"
#include "tests/harness/h_faults.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define TOK   "faults-alpha-token"
#define WAIT_REASON "cluster_replaced_waiting_for_pod_deadline"

/* A request to kubesim's control socket, waiting up to 60 s: a kubesim that serves relist
 * after relist of thousands of objects (the long forms) can be slow to answer, which is not
 * what the cases check. Returns the status (0: no answer) and *out the body (caller decrefs;
 * out may be NULL). */
static long ctl_patient(struct h_faults *f, const char *method, const char *path,
			const char *body, json_t **out)
{
	char url[512];
	snprintf(url, sizeof url, "http://localhost%s", path);
	struct httpc_req req = { .method = method, .url = url, .unix_socket = f->st.ks.ctl,
				 .body = body, .body_len = body ? strlen(body) : 0,
				 .timeout_ms = 60000 };
	struct httpc_resp r;
	httpc_request(&req, &r);
	long status = r.status;
	if (out) {
		*out = r.json;
		r.json = NULL; /* ownership moves to the caller */
	}
	httpc_resp_free(&r);
	return status;
}

static void fault_put(struct h_faults *f, const char *body)
{
	long code = ctl_patient(f, "PUT", "/_kubesim/faults", body, NULL);
	CHECKF(code == 200, "%s: PUT /_kubesim/faults %s answered %ld", f->name, body, code);
}

static void fault_clear(struct h_faults *f)
{
	CHECKF(ctl_patient(f, "DELETE", "/_kubesim/faults", NULL, NULL) == 200,
	       "%s: clearing the faults failed", f->name);
}

/* GET of a control path (ctl_patient): the body, or NULL when no answer came. */
static json_t *ctl_get_patient(struct h_faults *f, const char *path)
{
	json_t *out = NULL;
	if (ctl_patient(f, "GET", path, NULL, &out) != 200) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* The object at a dotted path of o, or NULL. */
static json_t *at(json_t *o, const char *path)
{
	char buf[256];
	snprintf(buf, sizeof buf, "%s", path);
	char *save = NULL;
	for (char *k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
		o = json_object_get(o, k);
	return o;
}

/* The lists the Job and Pod informers made so far (from /readyz), or -1. */
static long informer_lists(struct h_faults *f)
{
	struct h_resp r;
	h_req(&r, "GET", f->st.srv.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *infs = at(r.json, "dependencies.kube.informers");
	long n = json_is_object(infs)
			 ? (long)(json_integer_value(at(infs, "jobs.lists")) +
				  json_integer_value(at(infs, "pods.lists")))
			 : -1;
	h_resp_free(&r);
	return n;
}

/* Lets gwb-load send for ms more (less if it finishes), so the fault meets work in flight. */
static void load_underway(struct h_faults *f, int ms)
{
	int64_t until = clock_mono_ms() + ms;
	while (clock_mono_ms() < until && h_faults_loading(f))
		h_sleep_ms(50);
}

TEST_T(faults_kube_api_refuse, 900)
{
	long reps = h_faults_n(2, 6), outage = h_faults_n(3000, 8000);
	struct h_faults f;
	h_faults_start(&f, "kube_api_refuse", h_faults_n(200, 1500), NULL, NULL);
	srand((unsigned)clock_mono_ms());
	for (long i = 0; i < reps; i++) {
		load_underway(&f, 300 + rand() % 1000);
		char body[96];
		snprintf(body, sizeof body, "{\"api\":\"refuse\",\"api_for_ms\":%ld}", outage);
		fault_put(&f, body);
		h_sleep_ms((int)outage + 100); /* it clears itself */
	}
	fault_clear(&f);
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(180, 600));
}

TEST_T(faults_kube_api_slow, 900)
{
	struct h_faults f;
	h_faults_start(&f, "kube_api_slow_2s", h_faults_n(200, 1500), NULL, NULL);
	load_underway(&f, 500);
	fault_put(&f, "{\"slow_ms\":2000}");
	h_sleep_ms((int)h_faults_n(8000, 30000));
	fault_put(&f, "{\"slow_ms\":0}");
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(180, 600));
}

TEST_T(faults_kube_api_hang_times_out, 900)
{
	/* Requests time out after 2 s: creates sent into the hang end unknown, and are observed
	 * (GET) before anything is created again. */
	const char *env[] = { "GWB_KUBE_REQUEST_TIMEOUT_MS=2000", NULL };
	long reps = h_faults_n(1, 4), hang = h_faults_n(6000, 10000);
	struct h_faults f;
	h_faults_start(&f, "kube_api_hang", h_faults_n(200, 1500), NULL, env);
	srand((unsigned)clock_mono_ms());
	for (long i = 0; i < reps; i++) {
		load_underway(&f, 300 + rand() % 1000);
		char body[96];
		snprintf(body, sizeof body, "{\"api\":\"hang\",\"api_for_ms\":%ld}", hang);
		fault_put(&f, body);
		h_sleep_ms((int)hang + 100);
	}
	fault_clear(&f);
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(180, 600));
}

TEST_T(faults_kube_watches_cut, 900)
{
	struct h_faults f;
	h_faults_start(&f, "kube_watches_cut", h_faults_n(200, 1500), NULL, NULL);
	long lists0 = informer_lists(&f);
	load_underway(&f, 300);
	char body[96];
	snprintf(body, sizeof body, "{\"cut_watches_every_ms\":%ld}", h_faults_n(2000, 3000));
	fault_put(&f, body);
	h_sleep_ms((int)h_faults_n(10000, 40000));
	fault_put(&f, "{\"cut_watches_every_ms\":0}");
	h_faults_cleared(&f);
	/* A cut stream is not a clean end: the picture went stale and was listed again. */
	long lists = informer_lists(&f);
	t_log("informer lists: %ld before the cuts, %ld after", lists0, lists);
	CHECKF(lists > lists0 + 2, "the informers did not list again after the cuts (%ld, %ld)",
	       lists0, lists);
	h_faults_verify(&f, h_faults_n(180, 600));
}

TEST_T(faults_kube_watch_410_storms, 900)
{
	/* Short watches, so resumes (which the storm answers 410) come often. */
	const char *env[] = { "GWB_KUBE_WATCH_TIMEOUT_SECONDS=2", NULL };
	long storms = h_faults_n(3, 6);
	struct h_faults f;
	h_faults_start(&f, "kube_watch_410_storms", h_faults_n(200, 1500), NULL, env);
	long lists0 = informer_lists(&f);
	for (long i = 0; i < storms; i++) {
		load_underway(&f, 700);
		char body[96];
		snprintf(body, sizeof body, "{\"watch_gone\":{\"count\":%ld}}", h_faults_n(30, 60));
		fault_put(&f, body);
		/* The storm lasts until every answer of it was given (the server's four informers
		 * resume every 2 s, and list again after each 410). */
		int64_t until = clock_mono_ms() + 120000;
		long left = 1;
		while (left > 0 && clock_mono_ms() < until) {
			h_sleep_ms(1000);
			json_t *st = ctl_get_patient(&f, "/_kubesim/faults");
			left = st ? (long)json_integer_value(at(st, "watch_gone.count")) : left;
			json_decref(st);
		}
		t_log("storm %ld: %ld answers of 410 left, informer lists %ld", i, left,
		      informer_lists(&f));
	}
	fault_put(&f, "{\"watch_gone\":{\"count\":0}}");
	h_faults_cleared(&f);
	long lists = informer_lists(&f);
	t_log("informer lists: %ld before the storms, %ld after", lists0, lists);
	/* Each 410 makes its informer list again (and only a list makes it fresh). */
	CHECKF(lists > lists0 + storms, "the informers did not relist on 410 (%ld, %ld)", lists0,
	       lists);
	/* One watch per informer (jobs, pods, devices, events) once the storms are over: an
	 * informer that lists again after a 410 must not keep the watch it left. */
	int64_t until = clock_mono_ms() + 30000;
	long watches = 0;
	for (;;) {
		json_t *st = ctl_get_patient(&f, "/_kubesim/state");
		watches = st ? (long)json_integer_value(json_object_get(st, "watches")) : 99;
		json_decref(st);
		if (watches <= 4 || clock_mono_ms() > until)
			break;
		h_sleep_ms(200);
	}
	CHECKF(watches <= 4, "%ld watches open after the storms, for 4 informers", watches);
	h_faults_verify(&f, h_faults_n(180, 600));
}

/* ---- the cluster replaced ---- */

/* Stops kubesim with sig and starts an empty one on the same port (and the same control
 * socket), which gwb-server keeps using. */
static void kubesim_replace(struct h_faults *f, int sig)
{
	static char listen[64];
	struct h_kubesim *k = &f->st.ks;
	const char *colon = strrchr(k->url, ':');
	CHECKF(colon != NULL, "kubesim url %s", k->url);
	snprintf(listen, sizeof listen, "127.0.0.1:%s", colon + 1);
	h_proc_exempt(&k->proc);
	h_proc_stop(&k->proc, sig, 10000);
	int n = 0, has_listen = 0;
	for (; k->args[n] && n < 28; n++)
		has_listen |= !strcmp(k->args[n], "--listen"); /* a later flag wins */
	if (!has_listen) {
		k->args[n++] = "--listen";
		k->args[n++] = listen;
		k->args[n] = NULL;
	}
	char old[256];
	snprintf(old, sizeof old, "%s", k->url);
	h_kubesim_start(k);
	CHECKF(strcmp(old, k->url) == 0, "kubesim came back on %s, not %s", k->url, old);
}

/* The pid of the running gwb-worker of task id (its environment names the task), or 0. */
static pid_t worker_of(const char *id)
{
	char want[96];
	int wl = snprintf(want, sizeof want, "GWB_TASK_ID=%s", id);
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	pid_t found = 0;
	struct dirent *e;
	while (!found && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char path[64], buf[16384];
		snprintf(path, sizeof path, "/proc/%ld/environ", pid);
		FILE *fp = fopen(path, "r");
		if (!fp)
			continue;
		size_t n = fread(buf, 1, sizeof buf - 1, fp);
		fclose(fp);
		for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
			buf[n] = '\0';
			if (strncmp(buf + i, want, (size_t)wl) == 0 && buf[i + (size_t)wl] == '\0')
				found = (pid_t)pid;
		}
	}
	closedir(d);
	return found;
}

static json_t *task_get(struct h_faults *f, const char *id)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", f->st.srv.proc.url, path, ADMIN, NULL, NULL);
	json_t *t = r.status == 200 ? json_incref(r.json) : NULL;
	h_resp_free(&r);
	return t;
}

#define NLONG 3

/* Tasks of our own, longer than gwb-load's, running when the cluster goes: they show what a
 * task whose Job vanished with the cluster does. */
static void long_tasks(struct h_faults *f, long seconds, char ids[NLONG][40])
{
	for (int i = 0; i < NLONG; i++) {
		char body[160];
		snprintf(body, sizeof body,
			 "{\"team\": \"alpha\", \"gpu_memory_mib\": 16, \"gpu_core_percent\": 1, "
			 "\"duration_seconds\": %ld, \"name\": \"long-%d\"}",
			 seconds, i);
		struct h_resp r;
		h_req(&r, "POST", f->st.srv.proc.url, "/v1/tasks", TOK, body, NULL);
		CHECKF(r.status == 201, "%s: submitting a long task answered %ld: %s", f->name,
		       r.status, r.body);
		snprintf(ids[i], 40, "%s", json_string_value(json_object_get(r.json, "id")));
		h_resp_free(&r);
	}
	/* In the long form they queue behind a thousand tasks of the load. */
	for (int i = 0; i < NLONG; i++) {
		int64_t until = clock_mono_ms() + h_faults_n(90, 600) * 1000;
		for (;;) {
			json_t *t = task_get(f, ids[i]);
			const char *st = json_string_value(json_object_get(t, "state"));
			int running = st && !strcmp(st, "running");
			json_decref(t);
			if (running)
				break;
			CHECKF(clock_mono_ms() < until, "%s: long task %s never ran", f->name, ids[i]);
			h_sleep_ms(100);
		}
	}
}

/* The string at path of t, or "null". */
static const char *sv(json_t *t, const char *path)
{
	const char *s = json_string_value(at(t, path));
	return s ? s : "null";
}

/* Logs what a task shows: state, reason, the sentence, its Pod's deadline, the release. */
static void show(const struct h_faults *f, const char *when, json_t *t)
{
	t_log("%s: task %s %s: state %s, reason %s, pod.deadline_at %s, released %s (%s): %s",
	      f->name, sv(t, "id"), when, sv(t, "state"), sv(t, "reason"), sv(t, "pod.deadline_at"),
	      json_is_true(at(t, "reservation.released")) ? "yes" : "no",
	      sv(t, "reservation.release_reason"), sv(t, "reason_detail"));
}

/* After the cluster was replaced: each long task waits, unreleased, while its Pod's process
 * may run (orphans: as long as it does), shows why, then ends failed with reason
 * cluster_replaced once its deadline passed. */
static void follow_long_tasks(struct h_faults *f, char ids[NLONG][40], const pid_t *orphans,
			      int kill_server)
{
	int saw_wait[NLONG] = { 0 }, done[NLONG] = { 0 }, ndone = 0;
	int64_t until = clock_mono_ms() + 120000;
	while (ndone < NLONG) {
		CHECKF(clock_mono_ms() < until, "%s: the long tasks did not end", f->name);
		for (int i = 0; i < NLONG; i++) {
			if (done[i])
				continue;
			int alive = orphans && orphans[i] > 0 && kill(orphans[i], 0) == 0 &&
				    worker_of(ids[i]) == orphans[i];
			json_t *t = task_get(f, ids[i]);
			const char *st = json_string_value(json_object_get(t, "state"));
			const char *why = json_string_value(json_object_get(t, "reason"));
			int released = json_is_true(at(t, "reservation.released"));
			if (why && !strcmp(why, WAIT_REASON)) {
				if (!saw_wait[i])
					show(f, "while it waits", t);
				saw_wait[i] = 1;
				/* The wait survives a restart of the server: it is in SQLite, and
				 * the restarted server finds the Job gone again (a 404). */
				if (kill_server) {
					kill_server = 0;
					h_faults_kill9_server(f);
				}
				CHECK_STR(st, "unknown");
				CHECK(json_is_string(json_object_get(t, "reason_detail")));
				CHECK(json_is_string(at(t, "pod.deadline_at")));
			}
			CHECKF(!(released && alive),
			       "%s: task %s released while its orphaned Pod (pid %d) still runs",
			       f->name, ids[i], (int)orphans[i]);
			if (released) {
				show(f, "at its end", t);
				CHECK_STR(st, "failed");
				CHECK_STR(why, "cluster_replaced");
				CHECKF(saw_wait[i], "%s: task %s never showed %s", f->name, ids[i],
				       WAIT_REASON);
				done[i] = 1;
				ndone++;
			}
			json_decref(t);
		}
		h_sleep_ms(150);
	}
}

/* The cluster replaced reps times under load, each time while NLONG long tasks run; the server
 * must count each replacement, and every task must end as the frame checks. */
static void replaced_case(const char *name, int sig, int kill_server)
{
	/* Pods get 1-s tasks' duration plus 8 s, so the waits are short here. */
	const char *env[] = { "GWB_KUBE_POD_DEADLINE_MARGIN_SECONDS=8", NULL };
	struct h_faults f;
	h_faults_start(&f, name, h_faults_n(400, 1000), NULL, env);
	long reps = h_faults_n(1, 3);
	for (long rep = 0; rep < reps; rep++) {
		char ids[NLONG][40];
		long_tasks(&f, h_faults_n(6, 10), ids);
		pid_t orphans[NLONG] = { 0 };
		for (int i = 0; i < NLONG; i++)
			orphans[i] = worker_of(ids[i]);
		kubesim_replace(&f, sig);
		int left = 0;
		for (int i = 0; i < NLONG; i++) {
			if (orphans[i] && kill(orphans[i], 0) == 0 && worker_of(ids[i]) == orphans[i])
				left++;
			else
				orphans[i] = 0;
		}
		t_log("%s: %d of %d long tasks' workers still run after the stop", name, left, NLONG);
		if (sig == SIGKILL)
			CHECKF(left > 0, "%s: no orphaned worker to watch", name);
		else
			CHECKF(left == 0, "%s: the kubelet left %d workers running", name, left);
		if (rep == reps - 1)
			h_faults_cleared(&f);
		follow_long_tasks(&f, ids, orphans, kill_server && rep == 0);
	}
	struct h_resp r;
	h_req(&r, "GET", f.st.srv.proc.url, "/readyz", H_METRICS_TOKEN, NULL, NULL);
	json_t *cluster = at(r.json, "dependencies.kube.cluster");
	/* Counted since the server started: a restarted one saw none (its tasks remember). */
	CHECKF(kill_server || json_integer_value(json_object_get(cluster, "replacements")) == reps,
	       "%s: the server saw %lld replacements of %ld", name,
	       (long long)json_integer_value(json_object_get(cluster, "replacements")), reps);
	h_resp_free(&r);
	h_faults_verify(&f, h_faults_n(180, 600));
}

TEST_T(faults_kube_replaced_after_sigterm, 1800)
{
	replaced_case("kube_replaced_sigterm", SIGTERM, 0);
}

TEST_T(faults_kube_replaced_after_sigkill_pods_orphaned, 1800)
{
	/* And gwb-server killed (-9) while the tasks wait. */
	replaced_case("kube_replaced_sigkill", SIGKILL, 1);
}
