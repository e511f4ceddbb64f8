/* Usage collection end to end: gwb-server scraping a monitor over HTTP while kubesim runs the
 * real worker. kubesim's simulated monitor gives `simulated` usage within the budget; no
 * collector gives `unknown`; a stand-in monitor (a small HTTP server of this test serving
 * HAMi's and dcgm-exporter's text with the real Pod names and card UUIDs, then garbage, a
 * huge body and silence) gives measured usage per task, ignores foreign series, goes stale
 * when quiet and leaves the server healthy; dcgm's figures of a shared card stay on the card. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define TOK "alpha-token-123"
#define TEAM_BODY "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"" TOK "\"}"

static json_t *jget(json_t *o, const char *path)
{
	char buf[160];
	snprintf(buf, sizeof buf, "%s", path);
	for (char *tok = buf, *dot; tok && o; tok = dot) {
		dot = strchr(tok, '.');
		if (dot)
			*dot++ = '\0';
		o = json_is_array(o) ? json_array_get(o, (size_t)strtol(tok, NULL, 10))
				     : json_object_get(o, tok);
	}
	return o;
}

static const char *js(json_t *o, const char *path)
{
	json_t *v = jget(o, path);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const char *submit(struct h_stack *st, int mem, int secs)
{
	static char ids[8][32];
	static int slot;
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": %d, \"gpu_core_percent\": 25, "
		 "\"duration_seconds\": %d}", mem, secs);
	struct h_resp r;
	h_req(&r, "POST", st->srv.proc.url, "/v1/tasks", TOK, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 8];
	snprintf(id, 32, "%s", js(r.json, "id"));
	h_resp_free(&r);
	return id;
}

static json_t *task(struct h_stack *st, const char *id)
{
	char path[64];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	struct h_resp r;
	h_req(&r, "GET", st->srv.proc.url, path, TOK, NULL, NULL);
	CHECKF(r.status == 200, "GET %s: %ld", path, r.status);
	json_t *t = json_incref(r.json);
	h_resp_free(&r);
	return t;
}

/* Waits until the task's string at path is want; returns the task (caller decrefs). */
static json_t *wait_str(struct h_stack *st, const char *id, const char *path, const char *want,
			int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		json_t *t = task(st, id);
		const char *s = js(t, path);
		if (s && !strcmp(s, want))
			return t;
		if (clock_mono_ms() > deadline) {
			char *d = json_dumps(t, JSON_COMPACT);
			t_fail(__FILE__, __LINE__, "%s: %s never became %s: %s", id, path, want, d);
		}
		json_decref(t);
		h_sleep_ms(100);
	}
}

/* ---- a stand-in monitor: answers every GET with the file's bytes, or nothing ---- */

struct standin {
	int port;
	pid_t pid;
	char file[4096];   /* what it serves */
	char silent[4096]; /* when this file exists it accepts and never answers */
};

static void standin_serve(int lfd, const struct standin *s)
{
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		char req[4096];
		ssize_t n = read(fd, req, sizeof req);
		(void)n;
		if (access(s->silent, F_OK) == 0) {
			sleep(60); /* holds the connection, says nothing */
			close(fd);
			continue;
		}
		FILE *f = fopen(s->file, "rb");
		char *body = NULL;
		long len = 0;
		if (f) {
			fseek(f, 0, SEEK_END);
			len = ftell(f);
			rewind(f);
			body = gwb_malloc((size_t)len + 1);
			len = (long)fread(body, 1, (size_t)len, f);
			fclose(f);
		}
		char head[256];
		int hl = snprintf(head, sizeof head,
				  "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
				  "Content-Length: %ld\r\nConnection: close\r\n\r\n", len);
		if (write(fd, head, (size_t)hl) < 0 || (len && write(fd, body, (size_t)len) < 0))
			(void)0;
		gwb_free(body);
		close(fd);
	}
}

static void standin_stop(void *arg)
{
	struct standin *s = arg;
	kill(s->pid, SIGKILL);
	waitpid(s->pid, NULL, 0);
}

static void standin_start(struct standin *s)
{
	snprintf(s->file, sizeof s->file, "%s", h_path("monitor.txt"));
	snprintf(s->silent, sizeof s->silent, "%s", h_path("monitor.silent"));
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(lfd >= 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(listen(lfd, 16) == 0);
	socklen_t al = sizeof a;
	CHECK(getsockname(lfd, (struct sockaddr *)&a, &al) == 0);
	s->port = ntohs(a.sin_port);
	fflush(stdout);
	s->pid = fork();
	CHECK(s->pid >= 0);
	if (s->pid == 0)
		standin_serve(lfd, s);
	close(lfd);
	t_defer(standin_stop, s);
}

static void standin_says(struct standin *s, const char *text)
{
	h_write_file("monitor.txt", text);
	(void)s;
}

static void start_with(struct h_stack *st, const char *url, const char *format,
		       const char *const *kubesim_flags)
{
	static char env_url[400], env_fmt[64];
	snprintf(env_url, sizeof env_url, "GWB_USAGE_URL=%s", url);
	snprintf(env_fmt, sizeof env_fmt, "GWB_USAGE_FORMAT=%s", format);
	const char *env[] = { "GWB_KUBE_REQUEST_TIMEOUT_MS=1000", "GWB_USAGE_PERIOD_SECONDS=1",
			      env_url, env_fmt, NULL };
	h_stack_start(st, 0, kubesim_flags, env, "alpha", TEAM_BODY);
}

/* With no collector: unknown, as ever. */
TEST_T(usage_without_collector_is_unknown, 60)
{
	struct h_stack st;
	const char *env[] = { "GWB_KUBE_REQUEST_TIMEOUT_MS=1000", NULL };
	h_stack_start(&st, 0, NULL, env, "alpha", TEAM_BODY);
	const char *id = submit(&st, 1024, 30);
	json_t *t = wait_str(&st, id, "state", "running", 20000);
	CHECK_STR(js(t, "usage.status"), "unknown");
	CHECK(strstr(js(t, "usage.reason"), "no usage collector is configured") != NULL);
	json_decref(t);
	CHECK(h_metric(st.srv.proc.url, "gwb_usage_scrapes_total", NULL) == 0);
}

/* With kubesim's simulated monitor: simulated, the worker's ledger (three quarters of its
 * budget), never "measured". */
TEST_T(usage_simulated_monitor_is_simulated_within_budget, 90)
{
	struct h_stack st;
	start_with(&st, "@kubesim", "hami", NULL);
	const char *id = submit(&st, 1024, 30);
	json_decref(wait_str(&st, id, "state", "running", 20000));
	json_t *t = wait_str(&st, id, "usage.status", "simulated", 20000);
	CHECK_INT(json_integer_value(jget(t, "usage.gpu_memory_mib")), 768);
	CHECK(json_integer_value(jget(t, "usage.gpu_memory_mib")) <=
	      json_integer_value(jget(t, "reservation.gpu_memory_mib")));
	CHECK_STR(js(t, "usage.source"), "hami");
	CHECK(strstr(js(t, "usage.reason"), "not a measurement") != NULL);
	double sm = json_number_value(jget(t, "usage.sm_percent"));
	CHECKF(sm >= 0 && sm <= 100, "sm_percent %.1f", sm);
	json_decref(t);
	CHECK(h_metric(st.srv.proc.url, "gwb_usage_scrapes_total", NULL) >= 1);
	CHECK(h_metric(st.srv.proc.url, "gwb_usage_samples", NULL) >= 3);
	/* gwbctl says it too. */
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "GWB_URL=%s GWB_TOKEN=%s '%s' -o text get %s 2>&1",
		 st.srv.proc.url, TOK, h_bin("gwbctl"), id);
	fflush(stdout);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	char out[8192];
	size_t n = fread(out, 1, sizeof out - 1, p);
	out[n] = '\0';
	CHECKF(pclose(p) == 0, "gwbctl get: %s", out);
	CHECKF(strstr(out, "usage        simulated: 768 MiB") != NULL, "gwbctl get: %s", out);
}

/* HAMi's format from a stand-in: per task (new names and legacy ones), foreign series
 * (another Pod, another namespace, a card not in the task's allocation) ignored; garbage, a huge body and silence never hurt the server, and quiet means stale. */
TEST_T(usage_hami_standin_measured_ignored_stale, 120)
{
	struct standin mon;
	standin_start(&mon);
	standin_says(&mon, "");
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", mon.port);
	struct h_stack st;
	start_with(&st, url, "hami", NULL);
	const char *a = submit(&st, 1024, 60), *b = submit(&st, 2048, 60);
	json_t *ta = wait_str(&st, a, "state", "running", 20000);
	json_t *tb = wait_str(&st, b, "state", "running", 20000);
	char text[8192];
	snprintf(text, sizeof text,
		 "# HELP hami_vgpu_memory_used_bytes used\n"
		 "# TYPE hami_vgpu_memory_used_bytes gauge\n"
		 "hami_vgpu_memory_used_bytes{namespace=\"gpu-workbench\",pod=\"%s\","
		 "container=\"worker\",vdevice_index=\"0\",device_uuid=\"%s\"} 5.36870912e+08\n"
		 "hami_container_device_utilization_ratio{namespace=\"gpu-workbench\",pod=\"%s\","
		 "container=\"worker\",vdevice_index=\"0\",device_uuid=\"%s\"} 0.4 %lld\n"
		 "vGPU_device_memory_usage_in_bytes{podnamespace=\"gpu-workbench\", podname=\"%s\","
		 " ctrname=\"worker\", deviceuuid=\"%s\"} 314572800\n"
		 "Device_utilization_desc_of_container{podnamespace=\"gpu-workbench\","
		 "podname=\"%s\",ctrname=\"worker\",deviceuuid=\"%s\"} 55\n"
		 "hami_vgpu_memory_used_bytes{namespace=\"gpu-workbench\",pod=\"someone-else\","
		 "container=\"x\",vdevice_index=\"0\",device_uuid=\"%s\"} 1e10\n"
		 "hami_vgpu_memory_used_bytes{namespace=\"other\",pod=\"%s\",container=\"worker\","
		 "vdevice_index=\"0\",device_uuid=\"%s\"} 9e9\n"
		 "hami_vgpu_memory_used_bytes{namespace=\"gpu-workbench\",pod=\"%s\","
		 "container=\"worker\",vdevice_index=\"1\",device_uuid=\"GPU-not-its-card\"} 7e9\n",
		 js(ta, "pod.name"), js(ta, "allocation.cards.0.id"), js(ta, "pod.name"),
		 js(ta, "allocation.cards.0.id"), (long long)clock_now_ms(), js(tb, "pod.name"),
		 js(tb, "allocation.cards.0.id"), js(tb, "pod.name"), js(tb, "allocation.cards.0.id"),
		 js(ta, "allocation.cards.0.id"), js(ta, "pod.name"), js(ta, "allocation.cards.0.id"),
		 js(ta, "pod.name"));
	json_decref(ta);
	json_decref(tb);
	standin_says(&mon, text);
	ta = wait_str(&st, a, "usage.status", "measured", 20000);
	CHECK_INT(json_integer_value(jget(ta, "usage.gpu_memory_mib")), 512);
	CHECK(json_number_value(jget(ta, "usage.sm_percent")) == 40.0);
	CHECK_STR(js(ta, "usage.source"), "hami");
	json_decref(ta);
	tb = wait_str(&st, b, "usage.status", "measured", 20000);
	CHECK_INT(json_integer_value(jget(tb, "usage.gpu_memory_mib")), 300);
	CHECK(json_number_value(jget(tb, "usage.sm_percent")) == 55.0);
	json_decref(tb);
	/* The team: used beside reserved, and b uses less than a quarter of its 2048 MiB. */
	struct h_resp tr;
	h_req(&tr, "GET", st.srv.proc.url, "/v1/teams/alpha", TOK, NULL, NULL);
	CHECK_INT(tr.status, 200);
	CHECK_STR(js(tr.json, "usage.status"), "measured");
	CHECK_INT(json_integer_value(jget(tr.json, "usage.gpu_memory_mib")), 512 + 300);
	CHECK_INT(json_integer_value(jget(tr.json, "reserved.gpu_memory_mib")), 1024 + 2048);
	CHECK_INT((long long)json_array_size(jget(tr.json, "usage.underused")), 1);
	CHECK_STR(js(tr.json, "usage.underused.0.task"), b);
	h_resp_free(&tr);
	CHECK(h_metric(st.srv.proc.url, "gwb_team_used_gpu_memory_mib", "team=\"alpha\"") ==
	      512 + 300);

	/* Garbage, then a body past the cap: counted, nothing else. */
	double bad0 = h_metric(st.srv.proc.url, "gwb_usage_scrape_failures_total", NULL);
	standin_says(&mon, "<html>\x01\x02 not {{ prometheus\nm{a=\"\n\xff\xfe\n");
	for (int64_t end = clock_mono_ms() + 20000;
	     h_metric(st.srv.proc.url, "gwb_usage_bad_lines_total", NULL) < 3;) {
		CHECKF(clock_mono_ms() < end, "garbage was never counted");
		h_sleep_ms(100);
	}
	CHECK(h_metric(st.srv.proc.url, "gwb_usage_scrape_failures_total", "no_samples") >= 1);
	char *big = gwb_malloc((9 << 20) + 1);
	for (size_t i = 0; i < (9u << 20); i += 8)
		memcpy(big + i, "m 1\nx 2\n", 8);
	big[9 << 20] = '\0';
	standin_says(&mon, big);
	gwb_free(big);
	for (int64_t end = clock_mono_ms() + 20000;
	     h_metric(st.srv.proc.url, "gwb_usage_scrape_failures_total", "body_too_large") < 1;) {
		CHECKF(clock_mono_ms() < end, "the huge body was never refused");
		h_sleep_ms(100);
	}
	CHECK(h_metric(st.srv.proc.url, "gwb_usage_scrape_failures_total", NULL) > bad0);
	/* Silence: the figures age into stale, and the server answers as ever. */
	h_write_file("monitor.silent", "");
	ta = wait_str(&st, a, "usage.status", "stale", 30000);
	CHECK_INT(json_integer_value(jget(ta, "usage.gpu_memory_mib")), 512);
	CHECK(strstr(js(ta, "usage.reason"), "no fresh sample") != NULL);
	json_decref(ta);
	struct h_resp r;
	h_req(&r, "GET", st.srv.proc.url, "/healthz", NULL, NULL, NULL);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
}

/* dcgm's figures are the card's: two tasks on one card get none of them as their own. */
TEST_T(usage_dcgm_shared_card_stays_on_the_card, 90)
{
	struct standin mon;
	standin_start(&mon);
	standin_says(&mon, "");
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", mon.port);
	struct h_stack st;
	const char *flags[] = { "--cards", "1", NULL };
	start_with(&st, url, "dcgm", flags);
	const char *a = submit(&st, 1024, 60), *b = submit(&st, 1024, 60);
	json_t *ta = wait_str(&st, a, "state", "running", 20000);
	json_t *tb = wait_str(&st, b, "state", "running", 20000);
	char uuid[128];
	snprintf(uuid, sizeof uuid, "%s", js(ta, "allocation.cards.0.id"));
	CHECK_STR(js(tb, "allocation.cards.0.id"), uuid);
	char text[4096];
	snprintf(text, sizeof text,
		 "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"%s\",pod=\"%s\",namespace=\"gpu-workbench\","
		 "container=\"worker\"} 2000\n"
		 "DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"%s\",pod=\"%s\",namespace=\"gpu-workbench\","
		 "container=\"worker\"} 2000\n"
		 "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"%s\"} 70\n",
		 uuid, js(ta, "pod.name"), uuid, js(tb, "pod.name"), uuid);
	json_decref(ta);
	json_decref(tb);
	standin_says(&mon, text);
	for (int i = 0; i < 2; i++) {
		json_t *t = NULL;
		for (int64_t end = clock_mono_ms() + 20000;;) {
			t = task(&st, i ? b : a);
			if (json_is_true(jget(t, "usage.card_shared")))
				break;
			CHECKF(clock_mono_ms() < end, "card_shared never shown");
			json_decref(t);
			h_sleep_ms(100);
		}
		CHECK_STR(js(t, "usage.status"), "unknown");
		CHECK(jget(t, "usage.gpu_memory_mib") == NULL);
		CHECK(strstr(js(t, "usage.reason"), "is shared") != NULL);
		json_decref(t);
	}
	/* The card's figure is on the card, beside what was allocated there. */
	struct h_resp r;
	h_req(&r, "GET", st.srv.proc.url, "/v1/devices", TOK, NULL, NULL);
	CHECK_INT(r.status, 200);
	json_t *card = jget(r.json, "cards.0");
	CHECK_STR(js(card, "id"), uuid);
	CHECK_STR(js(card, "measured.status"), "measured");
	CHECK_INT(json_integer_value(jget(card, "measured.gpu_memory_mib")), 2000);
	CHECK(json_number_value(jget(card, "measured.sm_percent")) == 70.0);
	CHECK_INT(json_integer_value(jget(card, "allocated.gpu_memory_mib")), 2048);
	h_resp_free(&r);
}
