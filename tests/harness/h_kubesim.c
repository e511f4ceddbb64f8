/* kubesim test helpers: real processes and sockets only. */
#include "tests/harness/h_kubesim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/httpc.h"
#include "lib/clock.h"
#include "tests/harness/t.h"

/* The default worker: prints its GPU env and annotations, sleeps $SLEEP seconds (fractions
 * allowed), exits $CODE. SIGTERM makes it exit 143 (noting it in the file $MARKER when set)
 * unless TERM_MODE=ignore. */
static const char default_worker[] =
	"echo \"worker pid=$$ args=$* NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES-unset} "
	"CUDA_DEVICE_MEMORY_LIMIT=${CUDA_DEVICE_MEMORY_LIMIT-unset} "
	"CUDA_DEVICE_SM_LIMIT=${CUDA_DEVICE_SM_LIMIT-unset} LD_PRELOAD=${LD_PRELOAD-unset}\"\n"
	"if [ -n \"${GWB_ANNOTATIONS_FILE-}\" ]; then echo \"annotations-file=$GWB_ANNOTATIONS_FILE\";"
	" cat \"$GWB_ANNOTATIONS_FILE\"; echo; fi\n"
	"if [ \"${TERM_MODE-}\" = ignore ]; then trap '' TERM;"
	" else trap 'echo got-sigterm; [ -n \"${MARKER-}\" ] && echo got-sigterm >> \"$MARKER\";"
	" [ -n \"$child\" ] && kill $child 2>/dev/null; exit 143' TERM;"
	" fi\n"
	"child=\n"
	"sleep \"${SLEEP-0}\" & child=$!\n"
	"wait $child\n"
	"child=\n"
	"echo done\n"
	"exit \"${CODE-0}\"\n";

const char *h_kubesim_script(const char *name, const char *body)
{
	const char *path = h_path(name);
	FILE *f = fopen(path, "w");
	if (!f)
		t_fail(__FILE__, __LINE__, "cannot write %s: %s", path, strerror(errno));
	fprintf(f, "#!/bin/sh\n%s", body);
	fclose(f);
	chmod(path, 0755);
	return path;
}

void h_kubesim_init(struct h_kubesim *k)
{
	memset(k, 0, sizeof *k);
	snprintf(k->kubeconfig, sizeof k->kubeconfig, "%s", h_path("kubeconfig"));
	snprintf(k->home, sizeof k->home, "%s", h_path("home"));
	snprintf(k->ctl, sizeof k->ctl, "%s", h_path("ks.sock"));
	snprintf(k->state, sizeof k->state, "%s", h_path("state"));
	snprintf(k->worker, sizeof k->worker, "%s", h_kubesim_script("worker.sh", default_worker));
	mkdir(k->home, 0755);
}

void h_kubesim_start(struct h_kubesim *k)
{
	const char *argv[48] = { h_bin("kubesim"), "--listen", "127.0.0.1:0", "--state-dir",
				 k->state, "--control-socket", k->ctl, "--worker", k->worker,
				 "--log-level", "debug" };
	int n = 11;
	if (k->exec_allow[0]) {
		argv[n++] = "--exec-allow";
		argv[n++] = k->exec_allow;
	}
	for (int i = 0; k->args[i] && n < 47; i++)
		argv[n++] = k->args[i];
	argv[n] = NULL;
	if (h_proc_start(&k->proc, argv, NULL, "kubesim listening on", 15000) < 0) {
		h_proc_dump_log(&k->proc, 30);
		t_fail(__FILE__, __LINE__, "kubesim did not start");
	}
	snprintf(k->url, sizeof k->url, "%s", k->proc.url);
	FILE *f = fopen(k->kubeconfig, "w");
	if (!f)
		t_fail(__FILE__, __LINE__, "cannot write the kubeconfig");
	fprintf(f,
		"apiVersion: v1\nkind: Config\ncurrent-context: sim\n"
		"contexts:\n- name: sim\n  context: {cluster: sim, user: sim, namespace: "
		"gpu-workbench}\n"
		"clusters:\n- name: sim\n  cluster: {server: \"%s\"}\n"
		"users:\n- name: sim\n  user: {}\n",
		k->url);
	fclose(f);
	h_proc_watch(&k->proc, "kubesim");
}

void h_kubesim_stop(struct h_kubesim *k)
{
	h_proc_stop_ok(&k->proc, "kubesim");
}

/* ---- API ---- */

long h_kube(const struct h_kubesim *k, const char *method, const char *path, const char *body,
	    const char *ctype, json_t **out)
{
	char url[2048], ct[160];
	snprintf(url, sizeof url, "%s%s", k->url, path);
	snprintf(ct, sizeof ct, "Content-Type: %s", ctype ? ctype : "application/json");
	const char *headers[] = { ct, "Accept: application/json", NULL };
	struct h_resp r;
	h_http(&r, method, url, NULL, body, headers);
	long status = r.status;
	if (out) {
		*out = r.json;
		r.json = NULL;
	}
	h_resp_free(&r);
	return status;
}

json_t *h_kube_get(const struct h_kubesim *k, const char *path)
{
	json_t *doc = NULL;
	long st = h_kube(k, "GET", path, NULL, NULL, &doc);
	if (st == 404) {
		json_decref(doc);
		return NULL;
	}
	if (st != 200) {
		json_decref(doc);
		t_fail(__FILE__, __LINE__, "GET %s: status %ld", path, st);
	}
	return doc;
}

json_t *h_kube_create(const struct h_kubesim *k, const char *path, const char *body)
{
	json_t *doc = NULL;
	long st = h_kube(k, "POST", path, body, NULL, &doc);
	if (st != 201) {
		char *s = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
		t_log("POST %s -> %ld %s", path, st, s ? s : "");
		gwb_free(s);
		json_decref(doc);
		t_fail(__FILE__, __LINE__, "POST %s: status %ld, expected 201", path, st);
	}
	return doc;
}

json_t *h_kube_wait(const struct h_kubesim *k, const char *path, h_kube_pred pred, void *arg,
		    int timeout_ms, const char *what)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	json_t *last = NULL;
	for (;;) {
		json_decref(last);
		last = h_kube_get(k, path);
		if (pred(last, arg))
			return last;
		if (clock_mono_ms() > deadline)
			break;
		h_sleep_ms(20);
	}
	char *s = last ? json_dumps(last, JSON_COMPACT) : NULL;
	t_log("last state of %s: %.3000s", path, s ? s : "(absent)");
	gwb_free(s);
	json_decref(last);
	h_proc_dump_log(&k->proc, 20);
	t_fail(__FILE__, __LINE__, "timed out after %d ms waiting for %s", timeout_ms, what);
}

int h_pred_gone(const json_t *obj, void *arg)
{
	(void)arg;
	return obj == NULL;
}

int h_pred_phase(const json_t *obj, void *arg)
{
	const char *ph = json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));
	return ph && !strcmp(ph, (const char *)arg);
}

int h_pred_bound(const json_t *obj, void *arg)
{
	(void)arg;
	const char *n = json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName"));
	return n && n[0];
}

int h_pred_condition(const json_t *obj, void *arg)
{
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(json_object_get(obj, "status"), "conditions"), i, c)
	{
		const char *t = json_string_value(json_object_get(c, "type"));
		const char *s = json_string_value(json_object_get(c, "status"));
		if (t && s && !strcmp(t, (const char *)arg) && !strcmp(s, "True"))
			return 1;
	}
	return 0;
}

long h_kubesim_ctl(const struct h_kubesim *k, const char *method, const char *path,
		   const char *body, json_t **out)
{
	char url[512];
	snprintf(url, sizeof url, "http://localhost%s", path);
	struct httpc_req req = { .method = method, .url = url, .unix_socket = k->ctl,
				 .body = body, .body_len = body ? strlen(body) : 0,
				 .timeout_ms = 10000 };
	struct httpc_resp r;
	httpc_request(&req, &r);
	long status = r.status;
	if (out) {
		*out = r.json;
		r.json = NULL; /* ownership moves to the caller */
	}
	httpc_resp_free(&r);
	if (status == 0)
		t_fail(__FILE__, __LINE__, "control %s %s: no answer", method, path);
	return status;
}

/* ---- kubectl ---- */

static pid_t kubectl_spawn(const struct h_kubesim *k, int outfd, const char *const *args)
{
	h_need_exec("timeout");
	h_need_exec("kubectl");
	fflush(stdout);
	pid_t pid = fork();
	if (pid != 0)
		return pid;
	char kc[PATH_MAX + 16], home[PATH_MAX + 8];
	snprintf(kc, sizeof kc, "KUBECONFIG=%s", k->kubeconfig);
	snprintf(home, sizeof home, "HOME=%s", k->home);
	putenv(kc);
	putenv(home);
	dup2(outfd, 1);
	dup2(outfd, 2);
	const char *argv[64] = { "timeout", "-s", "KILL", "20", "kubectl" };
	int n = 5;
	for (const char *const *a = args; *a && n < 63; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	execvp("timeout", (char *const *)argv);
	_exit(127);
}

int h_kubectl(const struct h_kubesim *k, char **out, const char *const *args)
{
	int pfd[2];
	if (pipe(pfd) < 0)
		t_fail(__FILE__, __LINE__, "pipe: %s", strerror(errno));
	pid_t pid = kubectl_spawn(k, pfd[1], args);
	close(pfd[1]);
	char *buf = h_read_all(pfd[0]);
	close(pfd[0]);
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (out)
		*out = buf;
	else
		gwb_free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

pid_t h_kubectl_bg(const struct h_kubesim *k, const char *file, const char *const *args)
{
	int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		t_fail(__FILE__, __LINE__, "open %s: %s", file, strerror(errno));
	pid_t pid = kubectl_spawn(k, fd, args);
	close(fd);
	return pid;
}

/* ---- watch reader ---- */

static int fill(struct h_watch *w, int timeout_ms)
{
	struct pollfd pf = { w->fd, POLLIN, 0 };
	int r = poll(&pf, 1, timeout_ms);
	if (r <= 0)
		return 0;
	if (w->rawlen + 4096 > w->rawcap) {
		w->rawcap = w->rawcap ? w->rawcap * 2 : 16384;
		w->raw = gwb_realloc(w->raw, w->rawcap);
	}
	ssize_t n = read(w->fd, w->raw + w->rawlen, w->rawcap - w->rawlen);
	if (n <= 0) {
		w->ended = 1;
		return -1;
	}
	w->rawlen += (size_t)n;
	return 1;
}

static void consume(struct h_watch *w, size_t n)
{
	memmove(w->raw, w->raw + n, w->rawlen - n);
	w->rawlen -= n;
}

static void body_add(struct h_watch *w, const char *p, size_t n)
{
	if (w->bodylen + n + 1 > w->bodycap) {
		w->bodycap = (w->bodylen + n + 1) * 2;
		w->body = gwb_realloc(w->body, w->bodycap);
	}
	memcpy(w->body + w->bodylen, p, n);
	w->bodylen += n;
	w->body[w->bodylen] = '\0';
}

/* Moves complete chunks from raw to body. */
static void decode(struct h_watch *w)
{
	if (!w->chunked) {
		body_add(w, w->raw, w->rawlen);
		w->rawlen = 0;
		return;
	}
	for (;;) {
		char *eol = memmem(w->raw, w->rawlen, "\r\n", 2);
		if (!eol)
			return;
		size_t size = strtoul(w->raw, NULL, 16);
		size_t hdr = (size_t)(eol - w->raw) + 2;
		if (size == 0) {
			w->ended = 1;
			consume(w, w->rawlen);
			return;
		}
		if (w->rawlen < hdr + size + 2)
			return;
		body_add(w, w->raw + hdr, size);
		consume(w, hdr + size + 2);
	}
}

int h_watch_open(struct h_watch *w, const struct h_kubesim *k, const char *path,
		 const char *accept)
{
	return h_watch_open_url(w, k->url, path, NULL, accept);
}

int h_watch_open_url(struct h_watch *w, const char *url, const char *path, const char *token,
		     const char *accept)
{
	memset(w, 0, sizeof *w);
	w->fd = -1;
	char host[64], auth[600] = "";
	int port;
	if (sscanf(url, "http://%63[^:]:%d", host, &port) != 2)
		t_fail(__FILE__, __LINE__, "bad url %s", url);
	if (token)
		snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
	w->fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, host, &sa.sin_addr);
	if (connect(w->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		return -1;
	char req[4096];
	int n = snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: %s\r\n%s"
			 "User-Agent: gwb-test\r\n\r\n",
			 path, host, port, accept ? accept : "application/json", auth);
	if (write(w->fd, req, (size_t)n) != n)
		return -1;
	int64_t deadline = clock_mono_ms() + 5000;
	for (;;) {
		char *end = w->raw ? memmem(w->raw, w->rawlen, "\r\n\r\n", 4) : NULL;
		if (end) {
			size_t hl = (size_t)(end - w->raw) + 4;
			snprintf(w->headers, sizeof w->headers, "%.*s", (int)hl, w->raw);
			sscanf(w->headers, "HTTP/1.%*d %ld", &w->status);
			w->chunked = strcasestr(w->headers, "transfer-encoding: chunked") != NULL;
			consume(w, hl);
			decode(w);
			return 0;
		}
		int left = (int)(deadline - clock_mono_ms());
		if (left <= 0 || fill(w, left) < 0)
			return -1;
	}
}

char *h_watch_line(struct h_watch *w, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		char *nl = w->body ? memchr(w->body, '\n', w->bodylen) : NULL;
		if (nl) {
			size_t n = (size_t)(nl - w->body);
			char *line = gwb_strndup(w->body, n);
			memmove(w->body, nl + 1, w->bodylen - n - 1);
			w->bodylen -= n + 1;
			return line;
		}
		if (w->ended)
			return NULL;
		int left = (int)(deadline - clock_mono_ms());
		if (left <= 0)
			return NULL;
		if (fill(w, left) > 0)
			decode(w);
	}
}

json_t *h_watch_next(struct h_watch *w, int timeout_ms)
{
	char *line = h_watch_line(w, timeout_ms);
	if (!line)
		return NULL;
	json_t *ev = json_loads(line, 0, NULL);
	gwb_free(line);
	if (!ev)
		t_fail(__FILE__, __LINE__, "watch line is not JSON");
	return ev;
}

void h_watch_close(struct h_watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	gwb_free(w->raw);
	gwb_free(w->body);
	memset(w, 0, sizeof *w);
	w->fd = -1;
}

const char *h_repo_root(void)
{
	static char root[PATH_MAX];
	struct stat st;
	if (stat("deploy/kubesim", &st) == 0 && getcwd(root, sizeof root))
		return root;
	const char *bin = getenv("GWB_BIN");
	if (bin) {
		/* $GWB_BIN is <root>/bin or <root>/build/<x>/bin. */
		const char *ups[] = { "/..", "/../../.." };
		for (int i = 0; i < 2; i++) {
			char cand[PATH_MAX + 32];
			snprintf(cand, sizeof cand, "%s%s/deploy/kubesim", bin, ups[i]);
			if (stat(cand, &st) == 0) {
				snprintf(cand, sizeof cand, "%s%s", bin, ups[i]);
				if (realpath(cand, root))
					return root;
			}
		}
	}
	return ".";
}

json_t *h_kubesim_pod_spec(int mem_mib, int core, const char *const *env)
{
	char mem[32], c[16];
	snprintf(mem, sizeof mem, "%dMi", mem_mib);
	snprintf(c, sizeof c, "%d", core);
	json_t *res = json_pack("{s:s, s:s}", "koordinator.sh/gpu.shared", "1",
				"koordinator.sh/gpu-memory", mem);
	if (core > 0)
		json_object_set_new(res, "koordinator.sh/gpu-core", json_string(c));
	json_t *envs = json_array();
	for (const char *const *e = env; e && *e; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		char name[128];
		snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
		json_array_append_new(envs, json_pack("{s:s, s:s}", "name", name, "value", eq + 1));
	}
	return json_pack(
		"{s:s, s:s, s:i, s:[{s:s, s:{s:[{s:s, s:{s:s}}]}}], "
		"s:[{s:s, s:s, s:o, s:[{s:s, s:s}], s:{s:o, s:o}}]}",
		"schedulerName", "koord-scheduler", "restartPolicy", "Never",
		"terminationGracePeriodSeconds", 5, "volumes", "name", "podinfo", "downwardAPI",
		"items", "path", "annotations", "fieldRef", "fieldPath", "metadata.annotations",
		"containers", "name", "worker", "image", "gwb-worker:test", "env", envs,
		"volumeMounts", "name", "podinfo", "mountPath", "/etc/podinfo", "resources",
		"requests", res, "limits", json_deep_copy(res));
}

char *h_kubesim_gpu_pod(const char *name, int mem_mib, int core, const char *const *env)
{
	json_t *pod = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:o}", "apiVersion", "v1",
				"kind", "Pod", "metadata", "name", name, "namespace",
				"gpu-workbench", "labels", "koordinator.sh/gpu-isolation-provider",
				"HAMi-core", "spec", h_kubesim_pod_spec(mem_mib, core, env));
	char *s = json_dumps(pod, JSON_COMPACT);
	json_decref(pod);
	return s;
}

char *h_kubesim_gpu_job(const char *name, int mem_mib, int core, const char *const *env,
			int backoff, const char *extra_spec)
{
	json_t *spec = json_pack("{s:i, s:{s:{s:{s:s}}, s:o}}", "backoffLimit", backoff,
				 "template", "metadata", "labels",
				 "koordinator.sh/gpu-isolation-provider", "HAMi-core", "spec",
				 h_kubesim_pod_spec(mem_mib, core, env));
	if (extra_spec) {
		json_t *x = json_loads(extra_spec, 0, NULL);
		if (!x)
			t_fail(__FILE__, __LINE__, "extra spec is not JSON: %s", extra_spec);
		json_object_update(spec, x);
		json_decref(x);
	}
	json_t *job = json_pack("{s:s, s:s, s:{s:s, s:s}, s:o}", "apiVersion", "batch/v1", "kind",
				"Job", "metadata", "name", name, "namespace", "gpu-workbench",
				"spec", spec);
	char *s = json_dumps(job, JSON_COMPACT);
	json_decref(job);
	return s;
}

/* ---- the whole stack ---- */

void h_stack_start(struct h_stack *st, int with_redis, const char *const *kubesim_flags,
		   const char *const *env, const char *team, const char *team_body)
{
	h_kubesim_init(&st->ks);
	snprintf(st->ks.worker, sizeof st->ks.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(st->ks.worker);
	for (int i = 0; kubesim_flags && kubesim_flags[i] && i < 31; i++)
		st->ks.args[i] = kubesim_flags[i];
	h_kubesim_start(&st->ks);
	h_server_init(&st->srv);
	snprintf(st->env_kube, sizeof st->env_kube, "GWB_KUBE_SERVER=%s", st->ks.url);
	int n = 0;
	st->srv.env[n++] = st->env_kube;
	st->srv.env[n++] = "GWB_HOUSEKEEPING_INTERVAL_MS=100";
	st->srv.env[n++] = "GWB_RECONCILE_RESYNC_MS=500";
	if (with_redis) {
		h_redis_start(&st->redis);
		snprintf(st->env_redis, sizeof st->env_redis, "GWB_REDIS=%s", st->redis.url);
		st->srv.env[n++] = st->env_redis;
	}
	for (const char *const *e = env; e && *e && n < 31; e++) {
		st->srv.env[n++] = *e;
		if (!strcmp(*e, "GWB_USAGE_URL=@kubesim")) {
			snprintf(st->env_usage, sizeof st->env_usage,
				 "GWB_USAGE_URL=%s/sim/metrics/hami", st->ks.url);
			st->srv.env[n - 1] = st->env_usage;
		}
	}
	st->srv.env[n] = NULL;
	h_server_start(&st->srv);
	CHECK_INT(h_team_put(st->srv.proc.url, st->srv.admin, team, team_body), 201);
}
