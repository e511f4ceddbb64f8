/* The kubelet runs a container's own program only when kubesim was started allowing it
 * (--exec-allow): command, args, env with the koordlet GPU env, workingDir, the node-enforced
 * deadline; anything else waits with CreateContainerError and never runs. Its /log with
 * tailLines, limitBytes and follow. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define PODS "/api/v1/namespaces/gpu-workbench/pods"

/* The Pod security context of the "restricted" Pod Security Standard, as gwb writes it. */
#define RESTRICTED                                                                          \
	"\"securityContext\": {\"runAsNonRoot\": true, \"runAsUser\": 65532,"                 \
	" \"allowPrivilegeEscalation\": false, \"capabilities\": {\"drop\": [\"ALL\"]},"      \
	" \"seccompProfile\": {\"type\": \"RuntimeDefault\"}}"

/* Creates a GPU pod (1 GiB, 25 % of a card, HAMi label) whose container gets the fields of
 * ctr (JSON object text) and whose spec gets those of spec (JSON object text or NULL). */
static void make_pod(struct h_kubesim *k, const char *name, const char *ctr, const char *spec)
{
	char *text = h_kubesim_gpu_pod(name, 1024, 25, NULL);
	json_t *pod = json_loads(text, 0, NULL);
	gwb_free(text);
	json_t *x = json_loads(ctr, 0, NULL);
	CHECKF(x, "container fields are not JSON: %s", ctr);
	json_t *podspec = json_object_get(pod, "spec");
	json_object_update(json_array_get(json_object_get(podspec, "containers"), 0), x);
	json_decref(x);
	if (spec) {
		x = json_loads(spec, 0, NULL);
		CHECKF(x, "spec fields are not JSON: %s", spec);
		json_object_update(podspec, x);
		json_decref(x);
	}
	text = json_dumps(pod, JSON_COMPACT);
	json_decref(pod);
	json_decref(h_kube_create(k, PODS, text));
	gwb_free(text);
}

static json_t *ctr_status(const json_t *pod)
{
	return json_array_get(json_object_get(json_object_get(pod, "status"), "containerStatuses"),
			      0);
}

static const char *ctr_str(const json_t *pod, const char *state, const char *field)
{
	json_t *st = json_object_get(json_object_get(ctr_status(pod), "state"), state);
	return json_string_value(json_object_get(st, field));
}

/* The container waits with a reason (arg). */
static int pred_waiting(const json_t *pod, void *arg)
{
	const char *r = pod ? ctr_str(pod, "waiting", "reason") : NULL;
	return r && !strcmp(r, arg);
}

static long get_log(struct h_kubesim *k, const char *pod, const char *query, char **out)
{
	char url[512];
	snprintf(url, sizeof url, "%s" PODS "/%s/log%s", k->url, pod, query ? query : "");
	struct h_resp r;
	h_http(&r, "GET", url, NULL, NULL, NULL);
	*out = gwb_strdup(r.body ? r.body : "");
	long st = r.status;
	h_resp_free(&r);
	return st;
}

static void start_allowing(struct h_kubesim *k, const char *allow)
{
	h_kubesim_init(k);
	snprintf(k->exec_allow, sizeof k->exec_allow, "%s", allow);
	h_kubesim_start(k);
}

/* An allowed program runs with its args, env, the GPU env and its workingDir, under the
 * restricted security context, and ends with its own exit code; the image is recorded. */
TEST_T(kubesim_exec_allowed_program_runs, 30)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/echo,/bin/sh");
	const char *wd = h_path("wd");
	CHECK(mkdir(wd, 0755) == 0);
	char ctr[2048];
	snprintf(ctr, sizeof ctr,
		 "{\"image\": \"registry.example/team/train:1.2\","
		 " \"command\": [\"/bin/sh\", \"-c\", \"echo dev=$NVIDIA_VISIBLE_DEVICES"
		 " mem=$CUDA_DEVICE_MEMORY_LIMIT sm=$CUDA_DEVICE_SM_LIMIT foo=$FOO arg=$1 pwd=$(pwd); exit 3\", \"prog\"],"
		 " \"args\": [\"first\"], \"workingDir\": \"%s\","
		 " \"env\": [{\"name\": \"FOO\", \"value\": \"bar\"}], " RESTRICTED "}",
		 wd);
	make_pod(&k, "shell", ctr, NULL);
	json_t *p = h_kube_wait(&k, PODS "/shell", h_pred_phase, "Failed", 10000, "shell Failed");
	json_t *t = json_object_get(json_object_get(ctr_status(p), "state"), "terminated");
	CHECK_INT(json_integer_value(json_object_get(t, "exitCode")), 3);
	CHECK_STR(json_string_value(json_object_get(t, "reason")), "Error");
	CHECK_STR(json_string_value(json_object_get(ctr_status(p), "image")),
		  "registry.example/team/train:1.2");
	json_decref(p);
	char *log;
	CHECK_INT(get_log(&k, "shell", NULL, &log), 200);
	char want[4400];
	snprintf(want, sizeof want,
		 "dev=0 mem=1073741824 sm=25 foo=bar arg=first pwd=%s\n", wd);
	CHECK_STR(log, want);
	gwb_free(log);

	/* command[1..] and args follow the program. */
	make_pod(&k, "echo", "{\"command\": [\"/bin/echo\", \"hello\"], \"args\": [\"world\"]}",
		 NULL);
	json_decref(h_kube_wait(&k, PODS "/echo", h_pred_phase, "Succeeded", 10000, "echo done"));
	CHECK_INT(get_log(&k, "echo", NULL, &log), 200);
	CHECK_STR(log, "hello world\n");
	gwb_free(log);
}

/* The worker (no command, or a command naming gwb-worker) runs exactly as before, also with
 * the restricted security context and whatever --exec-allow holds. */
TEST_T(kubesim_exec_worker_runs_as_before, 30)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/echo");
	make_pod(&k, "plain", "{\"env\": [{\"name\": \"CODE\", \"value\": \"0\"}], " RESTRICTED "}",
		 NULL);
	make_pod(&k, "named",
		 "{\"command\": [\"gwb-worker\"], \"args\": [\"--flag\"], "
		 "\"env\": [{\"name\": \"CODE\", \"value\": \"4\"}], " RESTRICTED "}",
		 NULL);
	json_t *p = h_kube_wait(&k, PODS "/plain", h_pred_phase, "Succeeded", 10000, "plain");
	json_decref(p);
	p = h_kube_wait(&k, PODS "/named", h_pred_phase, "Failed", 10000, "named Failed");
	CHECK_INT(json_integer_value(json_object_get(
			  json_object_get(json_object_get(ctr_status(p), "state"), "terminated"),
			  "exitCode")),
		  4);
	json_decref(p);
	char *log;
	CHECK_INT(get_log(&k, "named", NULL, &log), 200);
	CHECKF(strstr(log, "args=--flag NVIDIA_VISIBLE_DEVICES=") && strstr(log, "\ndone\n"), "%s",
	       log);
	gwb_free(log);
}

/* What is not allowed never runs: the container waits with CreateContainerError naming the
 * program and the allow list, the pod stays Pending, its log is refused, a delete removes it
 * at once and a deadline fails it. */
TEST_T(kubesim_exec_denied_program_never_runs, 30)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/echo");
	const char *marks[3] = { h_path("x-abs"), h_path("x-rel"), h_path("x-dots") };
	const char *cmds[3] = { "/bin/sh", "sh", "/bin/../bin/echo" };
	const char *names[3] = { "abs", "rel", "dots" };
	for (int i = 0; i < 3; i++) {
		char ctr[4400];
		snprintf(ctr, sizeof ctr,
			 "{\"image\": \"busybox:1.36\","
			 " \"command\": [\"%s\", \"-c\", \"touch %s\"]}",
			 cmds[i], marks[i]);
		make_pod(&k, names[i], ctr, NULL);
	}
	for (int i = 0; i < 3; i++) {
		char path[256];
		snprintf(path, sizeof path, PODS "/%s", names[i]);
		json_t *p = h_kube_wait(&k, path, pred_waiting, "CreateContainerError", 10000,
					"CreateContainerError");
		CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "phase")),
			  "Pending");
		const char *msg = ctr_str(p, "waiting", "message");
		char quoted[256];
		snprintf(quoted, sizeof quoted, "\"%s\"", cmds[i]);
		CHECKF(msg && strstr(msg, quoted) && strstr(msg, "/bin/echo") &&
			       strstr(msg, k.worker),
		       "%s: %s", names[i], msg ? msg : "(none)");
		CHECK_STR(json_string_value(json_object_get(ctr_status(p), "image")),
			  "busybox:1.36");
		CHECK(json_object_get(json_object_get(ctr_status(p), "state"), "running") == NULL);
		json_decref(p);
	}
	/* A pod created after them runs to its end: the kubelet has long passed over them. */
	make_pod(&k, "later", "{\"command\": [\"/bin/echo\", \"later\"]}", NULL);
	json_decref(h_kube_wait(&k, PODS "/later", h_pred_phase, "Succeeded", 10000, "later"));
	for (int i = 0; i < 3; i++)
		CHECKF(access(marks[i], F_OK) != 0, "%s ran: %s exists", cmds[i], marks[i]);
	json_t *st = NULL;
	CHECK_INT(h_kube(&k, "GET", PODS "/abs/log", NULL, NULL, &st), 400);
	CHECKF(strstr(json_string_value(json_object_get(st, "message")), "CreateContainerError"),
	       "%s", json_string_value(json_object_get(st, "message")));
	json_decref(st);
	/* Nothing runs, so a graceful delete has nothing to wait for. */
	CHECK_INT(h_kube(&k, "DELETE", PODS "/abs?gracePeriodSeconds=30", NULL, NULL, NULL), 200);
	json_decref(h_kube_wait(&k, PODS "/abs", h_pred_gone, NULL, 10000, "abs gone"));
	/* An allowed program that cannot be created as asked: a workingDir that is not an
	 * existing absolute folder, more arguments than a container may have. */
	make_pod(&k, "nowd", "{\"command\": [\"/bin/echo\"], \"workingDir\": \"/no/such/dir\"}",
		 NULL);
	make_pod(&k, "relwd", "{\"command\": [\"/bin/echo\"], \"workingDir\": \"tmp\"}", NULL);
	json_t *many = json_array();
	for (int i = 0; i < 4097; i++)
		json_array_append_new(many, json_string("x"));
	json_t *c = json_pack("{s:[s], s:o}", "command", "/bin/echo", "args", many);
	char *ctext = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	make_pod(&k, "manyargs", ctext, NULL);
	gwb_free(ctext);
	static const struct {
		const char *pod, *says;
	} why[] = { { "nowd", "workingDir \"/no/such/dir\": No such file or directory" },
		    { "relwd", "workingDir \"tmp\": not an absolute path" },
		    { "manyargs", "4097 arguments, more than 4096" } };
	for (size_t i = 0; i < sizeof why / sizeof why[0]; i++) {
		char path[256];
		snprintf(path, sizeof path, PODS "/%s", why[i].pod);
		json_t *p = h_kube_wait(&k, path, pred_waiting, "CreateContainerError", 10000,
					why[i].pod);
		const char *msg = ctr_str(p, "waiting", "message");
		CHECKF(msg && strstr(msg, why[i].says), "%s: %s", why[i].pod, msg ? msg : "(none)");
		json_decref(p);
	}
	/* The node's deadline holds for a container that never started. */
	make_pod(&k, "late", "{\"command\": [\"/bin/sh\", \"-c\", \"true\"]}",
		 "{\"activeDeadlineSeconds\": 1}");
	json_t *p = h_kube_wait(&k, PODS "/late", h_pred_phase, "Failed", 10000, "late Failed");
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "reason")),
		  "DeadlineExceeded");
	CHECK_STR(ctr_str(p, "terminated", "reason"), "ContainerStatusUnknown");
	json_decref(p);
}

/* A bad --exec-allow stops kubesim at start. */
TEST_T(kubesim_exec_allow_flag_checked, 30)
{
	const char *bad[] = { "bin/sh", "/bin/sh,", "/bin/sh,,/bin/echo", "" };
	for (int i = 0; bad[i][0]; i++) {
		const char *argv[] = { h_bin("kubesim"), "--listen", "127.0.0.1:0", "--exec-allow",
				       bad[i], NULL };
		struct h_proc pr;
		CHECK(h_proc_start(&pr, argv, NULL, NULL, 0) == 0);
		int rc = h_proc_stop(&pr, 0, 10000);
		FILE *f = fopen(pr.log, "r");
		CHECK(f != NULL);
		char out[1024];
		size_t n = fread(out, 1, sizeof out - 1, f);
		out[n] = '\0';
		fclose(f);
		CHECKF(rc == 2 && strstr(out, "--exec-allow"), "%s: rc %d: %s", bad[i], rc, out);
	}
}

/* A program past its activeDeadlineSeconds is killed by the node and its pod Failed. */
TEST_T(kubesim_exec_deadline_kills, 30)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/sh");
	make_pod(&k, "slow", "{\"command\": [\"/bin/sh\", \"-c\", \"echo pid=$$; exec sleep 60\"]}",
		 "{\"activeDeadlineSeconds\": 1, \"terminationGracePeriodSeconds\": 1}");
	json_t *p = h_kube_wait(&k, PODS "/slow", h_pred_phase, "Failed", 15000, "slow Failed");
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "reason")),
		  "DeadlineExceeded");
	CHECK_INT(json_integer_value(json_object_get(
			  json_object_get(json_object_get(ctr_status(p), "state"), "terminated"),
			  "exitCode")),
		  128 + SIGTERM);
	json_decref(p);
	char *log;
	CHECK_INT(get_log(&k, "slow", NULL, &log), 200);
	int pid = 0;
	CHECKF(sscanf(log, "pid=%d", &pid) == 1 && pid > 0, "%s", log);
	gwb_free(log);
	CHECKF(kill(pid, 0) < 0 && errno == ESRCH, "pid %d still runs", pid);
}

/* /log of a workload: tailLines, limitBytes, both. */
TEST_T(kubesim_exec_log_tail_and_limit, 30)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/sh");
	make_pod(&k, "lines",
		 "{\"command\": [\"/bin/sh\", \"-c\", \"i=1; while [ $i -le 100 ]; do echo line$i;"
		 " i=$((i+1)); done; echo oops >&2\"]}",
		 NULL);
	json_decref(h_kube_wait(&k, PODS "/lines", h_pred_phase, "Succeeded", 10000, "lines"));
	char *log;
	CHECK_INT(get_log(&k, "lines", "?tailLines=3", &log), 200);
	CHECK_STR(log, "line99\nline100\noops\n");
	gwb_free(log);
	CHECK_INT(get_log(&k, "lines", "?limitBytes=12", &log), 200);
	CHECK_STR(log, "line1\nline2\n");
	gwb_free(log);
	CHECK_INT(get_log(&k, "lines", "?tailLines=2&limitBytes=4", &log), 200);
	CHECK_STR(log, "line");
	gwb_free(log);
	CHECK_INT(get_log(&k, "lines", "?tailLines=0", &log), 200);
	CHECK_STR(log, "");
	gwb_free(log);
	CHECK_INT(get_log(&k, "lines", NULL, &log), 200);
	CHECKF(strncmp(log, "line1\nline2\n", 12) == 0 && strstr(log, "line100\noops\n"), "%s",
	       log);
	gwb_free(log);
}

/* follow=true streams what the program writes until it ends, while the API keeps answering;
 * with limitBytes the stream ends after that many bytes though the program still runs. */
TEST_T(kubesim_exec_log_follow, 30)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/sh");
	const char *gate = h_path("gate");
	char ctr[4400];
	snprintf(ctr, sizeof ctr,
		 "{\"command\": [\"/bin/sh\", \"-c\", \"echo '{\\\"n\\\":1}'; while [ ! -e %s ];"
		 " do sleep 0.05; done; echo '{\\\"n\\\":2}'\"]}",
		 gate);
	make_pod(&k, "gated", ctr, NULL);
	json_decref(h_kube_wait(&k, PODS "/gated", h_pred_phase, "Running", 10000, "Running"));
	struct h_watch w, lim;
	CHECK(h_watch_open(&w, &k, PODS "/gated/log?follow=true", "text/plain") == 0);
	CHECK_INT(w.status, 200);
	json_t *ev = h_watch_next(&w, 10000);
	CHECKF(ev && json_integer_value(json_object_get(ev, "n")) == 1, "first line");
	json_decref(ev);
	/* Limited to the first line (8 bytes): ends while the program waits at its gate. */
	CHECK(h_watch_open(&lim, &k, PODS "/gated/log?follow=true&limitBytes=8", "text/plain") ==
	      0);
	ev = h_watch_next(&lim, 10000);
	CHECKF(ev && json_integer_value(json_object_get(ev, "n")) == 1, "limited first line");
	json_decref(ev);
	CHECK(h_watch_next(&lim, 10000) == NULL);
	CHECK(lim.ended);
	h_watch_close(&lim);
	/* The loop is not held by the open stream. */
	json_t *p = h_kube_get(&k, PODS "/gated");
	CHECK_STR(json_string_value(json_object_get(json_object_get(p, "status"), "phase")),
		  "Running");
	json_decref(p);
	h_write_file("gate", "");
	ev = h_watch_next(&w, 10000);
	CHECKF(ev && json_integer_value(json_object_get(ev, "n")) == 2, "second line");
	json_decref(ev);
	/* The program ended: so does the stream. */
	CHECK(h_watch_next(&w, 10000) == NULL);
	CHECK(w.ended);
	h_watch_close(&w);
	json_decref(h_kube_wait(&k, PODS "/gated", h_pred_phase, "Succeeded", 10000, "Succeeded"));
}

/* The container's terminated message (pod named name, Failed or Succeeded as phase), or NULL. */
static char *term_message(struct h_kubesim *k, const char *name, const char *phase)
{
	char path[256];
	snprintf(path, sizeof path, PODS "/%s", name);
	json_t *p = h_kube_wait(k, path, h_pred_phase, (void *)phase, 10000, name);
	const char *m = ctr_str(p, "terminated", "message");
	char *out = m ? gwb_strdup(m) : NULL;
	json_decref(p);
	return out;
}

/* A container's termination message, as a kubelet takes it: the file the container wrote at
 * its terminationMessagePath (told in GWB_TERMINATION_LOG), its last 4,096 bytes; under
 * FallbackToLogsOnError, when that file is empty and the container failed, the log's last 80
 * lines within 2,048 bytes; nothing otherwise. */
TEST_T(kubesim_exec_termination_message, 60)
{
	struct h_kubesim k;
	start_allowing(&k, "/bin/sh");
	make_pod(&k, "file", "{\"command\": [\"/bin/sh\", \"-c\", \"printf 'all done' >"
			     " \\\"$GWB_TERMINATION_LOG\\\"; echo a log line\"]}", NULL);
	/* 5,000 bytes in the file: the last 4,096 are kept. */
	make_pod(&k, "bigfile", "{\"command\": [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt 500 ];"
				" do printf '%09d\\\\n' $i; i=$((i+1)); done > \\\"$GWB_TERMINATION_LOG\\\";"
				" exit 1\"]}", NULL);
	const char *fallback = "\"terminationMessagePolicy\": \"FallbackToLogsOnError\"";
	char ctr[1024];
	/* 100 short lines: the last 80. */
	snprintf(ctr, sizeof ctr, "{%s, \"command\": [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt"
		 " 100 ]; do echo line$i; i=$((i+1)); done; exit 1\"]}", fallback);
	make_pod(&k, "lines", ctr, NULL);
	/* 80 lines of 40 bytes pass 2,048 bytes: the last 2,048. */
	snprintf(ctr, sizeof ctr, "{%s, \"command\": [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt"
		 " 100 ]; do printf '%%039d\\\\n' $i; i=$((i+1)); done; exit 1\"]}", fallback);
	make_pod(&k, "bytes", ctr, NULL);
	/* A success under the fallback, and a failure under File with nothing written. */
	snprintf(ctr, sizeof ctr, "{%s, \"command\": [\"/bin/sh\", \"-c\", \"echo fine\"]}",
		 fallback);
	make_pod(&k, "fine", ctr, NULL);
	make_pod(&k, "silent", "{\"command\": [\"/bin/sh\", \"-c\", \"echo oops; exit 2\"]}", NULL);

	char *m = term_message(&k, "file", "Succeeded");
	CHECK_STR(m, "all done");
	gwb_free(m);
	m = term_message(&k, "bigfile", "Failed");
	CHECK(m != NULL);
	CHECK_INT((long long)strlen(m), 4096);
	CHECK(!strncmp(m + 4096 - 10, "000000499\n", 10));
	CHECK(!strncmp(m, "00090\n000000091\n", 16)); /* from byte 904: inside line 90 */
	gwb_free(m);
	m = term_message(&k, "lines", "Failed");
	CHECK(m != NULL);
	CHECK(!strncmp(m, "line20\n", 7));
	CHECK(strstr(m, "line19\n") == NULL);
	CHECK_INT((long long)strlen(m), 80 * 7); /* line20 .. line99 */
	gwb_free(m);
	m = term_message(&k, "bytes", "Failed");
	CHECK(m != NULL);
	CHECK_INT((long long)strlen(m), 2048);
	CHECK(!strcmp(m + 2048 - 40, "000000000000000000000000000000000000099\n"));
	gwb_free(m);
	m = term_message(&k, "fine", "Succeeded");
	CHECK(m == NULL);
	m = term_message(&k, "silent", "Failed");
	CHECK(m == NULL);
}
