/* Integration tests of bin/gwb-worker: the real binary against downward-API fixtures in the
 * reference's formats, its exit codes (0, 2, 42, 143), its JSON-lines log, and the isolation
 * verdicts, including a fake CUDA driver built on the spot so that `enforced` and
 * `not_enforced` are decided by an allocation that was really tried. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/podinfo.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define MiB (1024LL * 1024)

static const char card_fmt[] =
    "{\"minor\":%d,\"resources\":{\"koordinator.sh/gpu-core\":\"%d\","
    "\"koordinator.sh/gpu-memory\":\"%s\",\"koordinator.sh/gpu-memory-ratio\":\"%d\"},"
    "\"id\":\"GPU-%d1111111-2222-3333-4444-555555555555\"}";

/* Writes a downward-API file (as the kubelet formats it) holding an allocation annotation with
 * the given "gpu" list body, and returns its path. */
static const char *write_annotations(const char *name, const char *gpu_list)
{
	char json[2048];
	snprintf(json, sizeof json, "{\"gpu\":[%s]}", gpu_list);
	const char *keys[] = {"koordinator.sh/gpu-isolation-provider",
	                      "scheduling.koordinator.sh/device-allocated",
	                      "kubernetes.io/config.source"};
	const char *vals[] = {"HAMi-core", json, "api"};
	char *text = podinfo_format(keys, vals, 3);
	const char *path = h_path(name);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	fclose(f);
	gwb_free(text);
	return path;
}

static const char *one_card(const char *name, const char *mem, int core)
{
	char card[512];
	snprintf(card, sizeof card, card_fmt, 0, core, mem, 1, 0);
	return write_annotations(name, card);
}

/* Nothing from the caller's environment may steer the probe or the settings. */
static void clean_env(void)
{
	const char *names[] = {"CUDA_DEVICE_MEMORY_LIMIT",
	                       "CUDA_DEVICE_SM_LIMIT",
	                       "LD_PRELOAD",
	                       "NVIDIA_VISIBLE_DEVICES",
	                       "GWB_EXPERIMENT",
	                       "GWB_PROC_MAPS",
	                       "GWB_DURATION_SECONDS",
	                       "GWB_CUDA_LIBRARY",
	                       "GWB_PERIOD_MS",
	                       "GWB_ANNOTATIONS_FILE",
	                       NULL};
	for (int i = 0; names[i]; i++)
		unsetenv(names[i]);
	/* The verdict goes to a file of the case, never to this host's /dev/termination-log. */
	setenv("GWB_TERMINATION_LOG", h_path("termination-log"), 1);
	unlink(h_path("termination-log"));
}

/* The verdict the run left in its termination log: one compact JSON object below the
 * kubelet's 4,096 bytes, with the run's exit code and reason. */
static json_t *verdict_doc(int code, const char *exit_reason)
{
	static json_t *doc;
	json_decref(doc);
	json_error_t je;
	doc = json_load_file(h_path("termination-log"), 0, &je);
	CHECKF(doc != NULL, "termination log: %s", je.text);
	char *text = json_dumps(doc, JSON_COMPACT);
	CHECKF(strlen(text) < 4096, "verdict of %zu bytes", strlen(text));
	gwb_free(text);
	CHECK_STR(json_string_value(json_object_get(doc, "worker")), "gwb-worker");
	CHECK_INT(json_integer_value(json_object_get(doc, "exit_code")), code);
	CHECK_STR(json_string_value(json_object_get(doc, "exit_reason")), exit_reason);
	return doc;
}

struct run {
	struct h_proc p;
	int code;
	json_t *events; /* every JSON line of the log, in order; borrowed from kept_events */
};

/* Every run's events, released once when the case ends. */
static json_t *kept_events;

static void kept_free(void *arg)
{
	(void)arg;
	json_decref(kept_events);
	kept_events = NULL;
}

/* Reads the log; every line on stdout must be one JSON object with ts and event. Lines that
 * do not start with '{' are stderr (a sanitizer, the dynamic loader) and are shown. */
static void read_events(struct run *r)
{
	FILE *f = fopen(r->p.log, "r");
	CHECK(f != NULL);
	r->events = json_array();
	if (!kept_events) {
		kept_events = json_array();
		t_defer(kept_free, NULL);
	}
	json_array_append_new(kept_events, r->events);
	char line[16384];
	while (fgets(line, sizeof line, f)) {
		if (line[0] != '{') {
			t_log("stderr: %s", line);
			continue;
		}
		json_error_t je;
		json_t *v = json_loads(line, 0, &je);
		CHECKF(v != NULL, "log line is not JSON (%s): %s", je.text, line);
		CHECKF(json_is_string(json_object_get(v, "ts")) &&
		           json_is_string(json_object_get(v, "event")),
		       "log line lacks ts or event: %s", line);
		json_array_append_new(r->events, v);
	}
	fclose(f);
}

/* Runs the worker to its end (at most timeout_ms) with extra "K=V" settings. */
static void run_worker(struct run *r, const char *const *env, int timeout_ms)
{
	memset(r, 0, sizeof *r);
	const char *argv[] = {h_bin("gwb-worker"), NULL};
	CHECK(h_proc_start(&r->p, argv, env, NULL, 0) == 0);
	/* Signal 0 only waits; the worker is killed if it outlives the time-out. */
	r->code = h_proc_stop(&r->p, 0, timeout_ms);
	read_events(r);
}

static json_t *find_event(const struct run *r, const char *event)
{
	size_t i;
	json_t *v;
	json_array_foreach (r->events, i, v) {
		if (strcmp(json_string_value(json_object_get(v, "event")), event) == 0)
			return v;
	}
	h_proc_dump_log(&r->p, 30);
	t_fail(__FILE__, __LINE__, "no \"%s\" event in the log", event);
}

static int64_t int_of(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	CHECKF(json_is_integer(v), "%s is not an integer", key);
	return json_integer_value(v);
}

static char envbuf[8][4200];

static const char *setting(int i, const char *name, const char *value)
{
	snprintf(envbuf[i], sizeof envbuf[i], "%s=%s", name, value);
	return envbuf[i];
}

TEST(worker_normal_exits_0_with_real_work)
{
	clean_env();
	const char *env[] = {setting(0, "GWB_ANNOTATIONS_FILE", one_card("a", "1Gi", 25)),
	                     "GWB_DURATION_SECONDS=1.5", "GWB_EXPERIMENT=normal", NULL};
	struct run r;
	run_worker(&r, env, 15000);
	CHECK_INT(r.code, 0);
	const char *order[] = {"start",        "isolation", "budget", "ledger_booked",
	                       "work_started", "progress",  "done"};
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++)
		CHECK_STR(json_string_value(json_object_get(json_array_get(r.events, i), "event")),
		          order[i]);
	json_t *b = find_event(&r, "budget");
	CHECK_INT(int_of(b, "gpu_memory_bytes"), 1024 * MiB);
	CHECK_INT(int_of(b, "cpu_duty_percent"), 25);
	json_t *l = find_event(&r, "ledger_booked");
	CHECK_STR(json_string_value(json_object_get(l, "ledger")), "simulated");
	CHECK(int_of(l, "used") <= int_of(l, "budget"));
	json_t *d = find_event(&r, "done");
	CHECK(int_of(d, "matmuls") > 0);
	double share = json_number_value(json_object_get(d, "cpu_share_percent"));
	t_log("25%% core share ran at %.1f%% of one CPU", share);
	CHECKF(share > 10 && share < 40, "cpu share %.1f%%", share);
	/* The verdict says the same as the log. */
	json_t *v = verdict_doc(0, "done");
	json_t *iso = json_object_get(v, "isolation");
	CHECK_STR(json_string_value(json_object_get(iso, "verdict")),
	          json_string_value(json_object_get(find_event(&r, "isolation"), "verdict")));
	CHECK(json_is_false(json_object_get(iso, "enforced")));
	CHECK_INT(int_of(json_object_get(v, "budget"), "gpu_memory_bytes"), 1024 * MiB);
	json_t *vl = json_object_get(v, "ledger");
	CHECK_INT(int_of(vl, "peak_bytes"), int_of(l, "used"));
	CHECK(json_is_null(json_object_get(vl, "refused_bytes")));
	json_t *w = json_object_get(v, "work");
	CHECK_INT(int_of(w, "duty_percent"), 25);
	CHECK_INT(int_of(w, "matmuls"), int_of(d, "matmuls"));
	double achieved = json_number_value(json_object_get(w, "achieved_duty_percent"));
	CHECKF(achieved > share - 0.1 && achieved < share + 0.1, "achieved %.1f%%", achieved);
}

TEST(worker_reads_every_budget_form)
{
	clean_env();
	struct {
		const char *mem;
		int64_t bytes;
	} forms[] = {{"1Gi", 1024 * MiB},
	             {"1024Mi", 1024 * MiB},
	             {"1073741824", 1024 * MiB},
	             {"11520Mi", 11520 * MiB}};
	for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
		const char *env[] = {
		    setting(0, "GWB_ANNOTATIONS_FILE", one_card("f", forms[i].mem, 50)),
		    "GWB_DURATION_SECONDS=0", NULL};
		struct run r;
		run_worker(&r, env, 10000);
		CHECKF(r.code == 0, "%s: exit %d", forms[i].mem, r.code);
		CHECK_INT(int_of(find_event(&r, "budget"), "gpu_memory_bytes"), forms[i].bytes);
	}
	/* Two cards, half of each (§3.3 b). */
	char cards[1024], c0[512], c1[512];
	snprintf(c0, sizeof c0, card_fmt, 0, 50, "40Gi", 50, 0);
	snprintf(c1, sizeof c1, card_fmt, 1, 50, "40Gi", 50, 1);
	snprintf(cards, sizeof cards, "%s,%s", c0, c1);
	const char *env[] = {setting(0, "GWB_ANNOTATIONS_FILE", write_annotations("two", cards)),
	                     "GWB_DURATION_SECONDS=0", NULL};
	struct run r;
	run_worker(&r, env, 10000);
	CHECK_INT(r.code, 0);
	json_t *b = find_event(&r, "budget");
	CHECK_INT(int_of(b, "gpu_memory_bytes"), 80 * 1024 * MiB);
	CHECK_INT(int_of(b, "gpu_core_percent"), 100);
	CHECK_INT(json_array_size(json_object_get(b, "cards")), 2);
	json_t *ann = json_object_get(find_event(&r, "isolation"), "annotation");
	CHECK_STR(json_string_value(json_object_get(ann, "minors")), "0,1");
}

static void check_exit_2(const char *path, const char *problem)
{
	const char *env[] = {setting(0, "GWB_ANNOTATIONS_FILE", path), "GWB_DURATION_SECONDS=0",
	                     NULL};
	struct run r;
	run_worker(&r, env, 10000);
	CHECKF(r.code == 2, "%s: exit %d", problem, r.code);
	json_t *e = find_event(&r, "budget_invalid");
	CHECK_STR(json_string_value(json_object_get(e, "problem")), problem);
	CHECK(json_string_length(json_object_get(e, "reason")) > 0);
	t_log("%s: %s", problem, json_string_value(json_object_get(e, "reason")));
	/* The probe still reported what it saw. */
	find_event(&r, "isolation");
}

TEST(worker_malformed_budget_exits_2)
{
	clean_env();
	check_exit_2(h_path("missing"), "file_missing");
	check_exit_2(h_write_file("noann", "kubernetes.io/config.source=\"api\""),
	             "annotation_missing");
	check_exit_2(
	    h_write_file("unquoted", "scheduling.koordinator.sh/device-allocated={\"gpu\":[]}"),
	    "file_malformed");
	check_exit_2(h_write_file("badjson", "scheduling.koordinator.sh/device-allocated="
	                                   "\"{\\\"gpu\\\":[{\\\"minor\\\":0,\""),
	             "annotation_malformed");
	check_exit_2(one_card("badqty", "1GB", 25), "annotation_malformed");
	check_exit_2(write_annotations("nocards", ""), "no_gpu");
	check_exit_2(write_annotations("nomem", "{\"minor\":0,\"resources\":{"
	                                        "\"koordinator.sh/gpu-core\":\"25\"}}"),
	             "no_memory");
	/* A bad setting is as fatal as a bad budget. */
	const char *env[] = {"GWB_EXPERIMENT=fast", NULL};
	struct run r;
	run_worker(&r, env, 10000);
	CHECK_INT(r.code, 2);
	find_event(&r, "config_invalid");
	json_t *v = verdict_doc(2, "config_invalid");
	CHECK(json_is_null(json_object_get(v, "isolation")));
	CHECK(json_is_null(json_object_get(v, "budget")));
}

TEST(worker_overlimit_exits_42)
{
	clean_env();
	const char *env[] = {setting(0, "GWB_ANNOTATIONS_FILE", one_card("a", "1024Mi", 25)),
	                     "GWB_EXPERIMENT=overlimit", "GWB_DURATION_SECONDS=30", NULL};
	struct run r;
	run_worker(&r, env, 10000);
	CHECK_INT(r.code, 42);
	json_t *e = find_event(&r, "simulated_limit_rejected");
	CHECK_INT(int_of(e, "budget"), 1024 * MiB);
	CHECK_INT(int_of(e, "used"), 1024 * MiB);
	CHECK_INT(int_of(e, "requested"), 64 * MiB);
	CHECK_INT(int_of(e, "working_set"), 1152 * MiB);
	CHECK_STR(json_string_value(json_object_get(e, "ledger")), "simulated");
	CHECK(strstr(json_string_value(json_object_get(e, "note")), "no GPU memory") != NULL);
	/* It stopped there: no work was started. */
	size_t i;
	json_t *v;
	json_array_foreach (r.events, i, v)
		CHECK(strcmp(json_string_value(json_object_get(v, "event")), "work_started") != 0);
	/* The verdict carries the refusal and the ledger's peak, within the budget. */
	json_t *doc = verdict_doc(42, "simulated_limit_rejected");
	json_t *l = json_object_get(doc, "ledger");
	CHECK_INT(int_of(l, "peak_bytes"), 1024 * MiB);
	CHECK_INT(int_of(l, "budget_bytes"), 1024 * MiB);
	CHECK_INT(int_of(l, "refused_bytes"), 64 * MiB);
	CHECK(json_is_null(json_object_get(doc, "work")));
	CHECK(json_is_object(json_object_get(doc, "isolation")));
}

TEST(worker_sigterm_exits_143_within_a_period)
{
	clean_env();
	const char *env[] = {setting(0, "GWB_ANNOTATIONS_FILE", one_card("a", "1Gi", 50)),
	                     "GWB_DURATION_SECONDS=60", "GWB_PERIOD_MS=100", NULL};
	const char *argv[] = {h_bin("gwb-worker"), NULL};
	struct run r;
	memset(&r, 0, sizeof r);
	CHECK(h_proc_start(&r.p, argv, env, "\"event\":\"work_started\"", 10000) == 0);
	h_sleep_ms(350); /* well inside the duty cycle */
	int64_t t0 = clock_mono_ms();
	r.code = h_proc_stop(&r.p, SIGTERM, 5000);
	int64_t took = clock_mono_ms() - t0;
	t_log("exited %d, %lld ms after SIGTERM", r.code, (long long)took);
	CHECK_INT(r.code, 143);
	/* One 100 ms period, plus the harness's 5 ms polling and scheduling slack. */
	CHECKF(took <= 150, "took %lld ms to stop", (long long)took);
	read_events(&r);
	json_t *t = find_event(&r, "terminated");
	CHECK_STR(json_string_value(json_object_get(t, "signal")), "SIGTERM");
	find_event(&r, "work_stopped");
	json_t *doc = verdict_doc(143, "terminated");
	CHECK(json_is_object(json_object_get(doc, "work")));
}

/* ---- isolation verdicts ---- */

static json_t *isolation_of(struct run *r, const char *const *extra)
{
	const char *env[16] = {setting(0, "GWB_ANNOTATIONS_FILE", one_card("a", "1Gi", 25)),
	                       "GWB_DURATION_SECONDS=0"};
	int n = 2;
	for (int i = 0; extra && extra[i] && n < 15; i++)
		env[n++] = extra[i];
	env[n] = NULL;
	run_worker(r, env, 10000);
	CHECK_INT(r->code, 0);
	json_t *iso = find_event(r, "isolation");
	t_log("verdict %s: %s", json_string_value(json_object_get(iso, "verdict")),
	      json_string_value(json_object_get(iso, "reason")));
	return iso;
}

static const char *verdict_of(json_t *iso)
{
	return json_string_value(json_object_get(iso, "verdict"));
}

TEST(worker_probe_without_env)
{
	clean_env();
	struct run r;
	const char *extra[] = {setting(1, "GWB_CUDA_LIBRARY", h_path("no-libcuda.so.1")), NULL};
	json_t *iso = isolation_of(&r, extra);
	const char *v = verdict_of(iso);
	CHECKF(strcmp(v, "not_enforced") == 0 || strcmp(v, "unknown") == 0, "verdict %s", v);
	CHECK(json_is_false(json_object_get(iso, "libvgpu_mapped")));
}

TEST(worker_probe_env_without_library_is_never_enforced)
{
	clean_env();
	struct run r;
	const char *extra[] = {"CUDA_DEVICE_MEMORY_LIMIT=1073741824", "CUDA_DEVICE_SM_LIMIT=25",
	                       "NVIDIA_VISIBLE_DEVICES=0",
	                       setting(1, "GWB_CUDA_LIBRARY", h_path("no-libcuda.so.1")), NULL};
	json_t *iso = isolation_of(&r, extra);
	CHECK_STR(verdict_of(iso), "not_enforced");
	json_t *lim = json_object_get(iso, "cuda_device_memory_limit");
	CHECK_INT(int_of(lim, "bytes"), 1024 * MiB);
	CHECK(json_is_true(json_object_get(lim, "matches_annotation")));
	CHECK(json_is_true(json_object_get(iso, "nvidia_visible_devices_match_annotation")));
	/* The suffix forms of HAMi-core read the same. */
	const char *extra2[] = {"CUDA_DEVICE_MEMORY_LIMIT=1024m",
	                        setting(1, "GWB_CUDA_LIBRARY", h_path("no-libcuda.so.1")), NULL};
	iso = isolation_of(&r, extra2);
	CHECK_INT(int_of(json_object_get(iso, "cuda_device_memory_limit"), "bytes"), 1024 * MiB);
	CHECK_STR(verdict_of(iso), "not_enforced");
}

static const char fake_maps[] = "55d4c000-55d4d000 r--p 00000000 08:01 12 /usr/bin/gwb-worker\n"
                                "7f00-7f10 r-xp 00000000 08:01 34 /usr/local/vgpu/libvgpu.so\n";

TEST(worker_probe_library_mapped_without_driver_is_unknown)
{
	clean_env();
	struct run r;
	const char *extra[] = {"CUDA_DEVICE_MEMORY_LIMIT=1g",
	                       setting(1, "GWB_PROC_MAPS", h_write_file("maps", fake_maps)),
	                       setting(2, "GWB_CUDA_LIBRARY", h_path("no-libcuda.so.1")), NULL};
	json_t *iso = isolation_of(&r, extra);
	CHECK_STR(verdict_of(iso), "unknown");
	CHECK(json_is_true(json_object_get(iso, "libvgpu_mapped")));
	CHECK(strstr(json_string_value(json_object_get(iso, "reason")), "no CUDA driver") != NULL);
}

/* A stand-in CUDA driver: allocations above FAKE_CUDA_REFUSE_ABOVE bytes fail with
 * CUDA_ERROR_OUT_OF_MEMORY (2), as libvgpu.so makes them; everything else succeeds. */
static const char fake_driver_src[] =
    "#include <stdlib.h>\n"
    "#include <stddef.h>\n"
    "static unsigned long long cap(void) {\n"
    "  const char *s = getenv(\"FAKE_CUDA_REFUSE_ABOVE\");\n"
    "  return s ? strtoull(s, NULL, 10) : ~0ULL; }\n"
    "int cuInit(unsigned f) { (void)f; return 0; }\n"
    "int cuDeviceGetCount(int *n) { *n = 1; return 0; }\n"
    "int cuDeviceGet(int *d, int o) { *d = o; return 0; }\n"
    "int cuDevicePrimaryCtxRetain(void **c, int d) { (void)d; *c = (void *)1; return 0; }\n"
    "int cuDevicePrimaryCtxRelease_v2(int d) { (void)d; return 0; }\n"
    "int cuCtxSetCurrent(void *c) { (void)c; return 0; }\n"
    "int cuMemGetInfo_v2(size_t *f, size_t *t) { *f = *t = (size_t)cap(); return 0; }\n"
    "int cuMemAlloc_v2(unsigned long long *p, size_t n) {\n"
    "  if (n > cap()) return 2; *p = 4096; return 0; }\n"
    "int cuMemFree_v2(unsigned long long p) { (void)p; return 0; }\n";

static const char *build_fake_driver(void)
{
	const char *src = h_write_file("fakecuda.c", fake_driver_src);
	static char so[4200];
	snprintf(so, sizeof so, "%s", h_path("libfakecuda.so"));
	pid_t pid = fork();
	if (pid == 0) {
		execlp("cc", "cc", "-shared", "-fPIC", "-o", so, src, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "cc could not build the fake driver");
	return so;
}

TEST(worker_probe_with_a_driver_decides_by_trying)
{
	clean_env();
	const char *so = build_fake_driver();
	const char *maps = h_write_file("maps", fake_maps);
	struct run r;
	/* The library mapped and the over-limit allocation refused: enforced. */
	const char *refusing[] = {
	    "CUDA_DEVICE_MEMORY_LIMIT=1073741824", "FAKE_CUDA_REFUSE_ABOVE=1073741824",
	    setting(1, "GWB_PROC_MAPS", maps), setting(2, "GWB_CUDA_LIBRARY", so), NULL};
	json_t *iso = isolation_of(&r, refusing);
	CHECK_STR(verdict_of(iso), "enforced");
	json_t *t = json_object_get(iso, "over_limit_test");
	CHECK_STR(json_string_value(json_object_get(t, "result")), "refused");
	CHECK_INT(int_of(t, "requested_bytes"), 1024 * MiB + 64 * MiB);
	CHECK_STR(json_string_value(json_object_get(t, "limit_source")),
	          "CUDA_DEVICE_MEMORY_LIMIT");
	/* The library mapped but the allocation goes through: not enforced. */
	const char *accepting[] = {"CUDA_DEVICE_MEMORY_LIMIT=1073741824",
	                           setting(1, "GWB_PROC_MAPS", maps),
	                           setting(2, "GWB_CUDA_LIBRARY", so), NULL};
	iso = isolation_of(&r, accepting);
	CHECK_STR(verdict_of(iso), "not_enforced");
	/* Refused, but libvgpu.so is not mapped: the card itself may have said no. */
	const char *unmapped[] = {"FAKE_CUDA_REFUSE_ABOVE=1073741824",
	                          setting(2, "GWB_CUDA_LIBRARY", so), NULL};
	iso = isolation_of(&r, unmapped);
	CHECK_STR(verdict_of(iso), "unknown");
	CHECK_STR(json_string_value(
	              json_object_get(json_object_get(iso, "over_limit_test"), "limit_source")),
	          "annotation");
}
