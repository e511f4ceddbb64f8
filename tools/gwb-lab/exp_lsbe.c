/* LS and BE, honestly: what Koordinator's QoS classes change on the Pods (priority class,
 * batch resources), and an LS probe's latency measured at a fixed rate alone and then with BE
 * neighbours on the same node, raw samples kept. The probe is a fixed piece of CPU work run by
 * this process on the node's host (kubesim's kubelet runs every Pod as a local process, and the
 * worker serves nothing one could call); the GPU share here is a CPU duty cycle, and nothing
 * isolates a card between Pods. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tools/gwb-lab/exp.h"

/* One probe request: PROBE_PRODUCTS products of two N x N matrices, the worker's own kernel
 * size (worker/work.h WORK_N), about a millisecond of one CPU. */
#define PROBE_N        64
#define PROBE_PRODUCTS 4
/* A fixed rate and a fixed count: 20 requests a second for 8 seconds per phase. */
#define PROBE_INTERVAL_MS 50
#define PROBE_SAMPLES     160

static double probe_once(double *a, double *b, double *c)
{
	double trace = 0;
	for (int p = 0; p < PROBE_PRODUCTS; p++) {
		for (int i = 0; i < PROBE_N; i++)
			for (int j = 0; j < PROBE_N; j++) {
				double s = 0;
				for (int k = 0; k < PROBE_N; k++)
					s += a[i * PROBE_N + k] * b[k * PROBE_N + j];
				c[i * PROBE_N + j] = s;
			}
		trace += c[p % PROBE_N * (PROBE_N + 1)];
		a[p % (PROBE_N * PROBE_N)] +=
		    1e-9 * trace; /* the next product depends on this one */
	}
	return trace;
}

/* Runs the probe on an open-loop schedule: request i is due at start + i * interval, and its
 * latency runs from when it was due to when it finished, so a stall is not hidden by the
 * requests that would have queued behind it. Returns the samples in microseconds (new array). */
static json_t *probe_run(struct lab *l, const char *phase, int64_t *t_start, int64_t *t_end)
{
	double *a = gwb_calloc(PROBE_N * PROBE_N, sizeof *a);
	double *b = gwb_calloc(PROBE_N * PROBE_N, sizeof *b);
	double *c = gwb_calloc(PROBE_N * PROBE_N, sizeof *c);
	for (int i = 0; i < PROBE_N * PROBE_N; i++) {
		a[i] = (i % 7) * 0.5;
		b[i] = (i % 5) * 0.25;
	}
	json_t *samples = json_array();
	double sink = 0;
	lab_say(l, "probe (%s): %d requests at %d/s", phase, PROBE_SAMPLES,
	        1000 / PROBE_INTERVAL_MS);
	*t_start = clock_now_ms();
	int64_t start_us = clock_mono_ms() * 1000;
	for (int i = 0; i < PROBE_SAMPLES; i++) {
		int64_t due_us = start_us + (int64_t)i * PROBE_INTERVAL_MS * 1000;
		int64_t now_us = clock_mono_ms() * 1000;
		if (due_us > now_us)
			lab_sleep_ms((int)((due_us - now_us) / 1000));
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t begin_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
		if (begin_us < due_us)
			begin_us = due_us;
		sink += probe_once(a, b, c);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		int64_t done_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
		json_array_append_new(samples, json_integer(done_us - due_us));
		if (l->tty && i % 20 == 0) {
			printf("\r  .. probe %s: %d/%d   ", phase, i, PROBE_SAMPLES);
			fflush(stdout);
		}
	}
	if (l->tty) {
		printf("\r\033[K");
		fflush(stdout);
	}
	*t_end = clock_now_ms();
	lab_measure(l, "probe_checksum", json_real(isfinite(sink) ? sink : 0));
	gwb_free(a);
	gwb_free(b);
	gwb_free(c);
	return samples;
}

static int cmp_ll(const void *x, const void *y)
{
	long long a = *(const long long *)x, b = *(const long long *)y;
	return (a > b) - (a < b);
}

/* Nearest-rank percentile of the samples (microseconds). */
static long long percentile(json_t *samples, double p)
{
	size_t n = json_array_size(samples);
	if (n == 0)
		return -1;
	long long *v = gwb_calloc(n, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = json_integer_value(json_array_get(samples, i));
	qsort(v, n, sizeof *v, cmp_ll);
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);
	long long out = v[rank ? rank - 1 : 0];
	gwb_free(v);
	return out;
}

/* The LS worker's own per-second CPU share (progress events) between two wall times. */
static json_t *worker_shares(json_t *progress, int64_t from, int64_t to)
{
	json_t *out = json_array();
	size_t i;
	json_t *e;
	json_array_foreach (progress, i, e) {
		int64_t at;
		if (!lab_str(e, "ts") || clock_parse_rfc3339(lab_str(e, "ts"), &at) != 0)
			continue;
		if (at >= from && at <= to)
			json_array_append(out, json_object_get(e, "cpu_share_percent"));
	}
	return out;
}

static json_t *pod_of(struct lab *l, const char *id)
{
	json_t *pods = lab_kube_of(l, "pods", id);
	json_t *p = json_incref(json_array_get(pods, 0));
	json_decref(pods);
	return p;
}

static int has_batch_cpu(json_t *pod)
{
	return lab_get(pod, "spec.containers.0.resources.requests") &&
	       json_object_get(lab_get(pod, "spec.containers.0.resources.requests"),
	                       "kubernetes.io/batch-cpu") != NULL;
}

/* P50 and P99 of the samples (borrowed) beside the worker's shares (stolen). */
static json_t *phase_summary(json_t *samples, json_t *shares)
{
	return json_pack("{s:I, s:I, s:I, s:o}", "samples", (json_int_t)json_array_size(samples),
	                 "p50_us", (json_int_t)percentile(samples, 50), "p99_us",
	                 (json_int_t)percentile(samples, 99), "ls_worker_cpu_share_percent",
	                 shares);
}

/* The rules' predictions: what QoS changes on the Pods, and what the probe will hold. */
static void predict_qos(struct lab *l)
{
	json_t *profile = lab_kube_get(
	    l, "/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles/gpu-workbench-be");
	int with_profile = profile != NULL;
	json_decref(profile);
	json_object_set_new(json_object_get(l->rec, "parameters"), "probe",
	                    json_pack("{s:i, s:i, s:i, s:i, s:s}", "interval_ms", PROBE_INTERVAL_MS,
	                              "samples_per_phase", PROBE_SAMPLES, "products",
	                              PROBE_PRODUCTS, "matrix_n", PROBE_N, "where",
	                              "gwb-lab's process on the node's host, beside the Pods"));
	lab_predict(l, "LS.qos_label", json_string("LS"), "the task's qos becomes the Pod's label");
	lab_predict(l, "LS.batch_cpu", json_false(), "LS keeps plain cpu and memory");
	lab_predict(l, "BE.qos_label", json_string("BE"), "the task's qos");
	lab_predict(l, "BE.priority_class", with_profile ? json_string("koord-batch") : json_null(),
	            with_profile ? "the ClusterColocationProfile gpu-workbench-be matches BE"
	                         : "no ClusterColocationProfile: nothing rewrites BE pods");
	lab_predict(l, "BE.batch_cpu", json_boolean(with_profile),
	            "the colocation webhook rewrites cpu to kubernetes.io/batch-cpu");
	lab_predict(l, "same_node", json_true(), "one node: the neighbours share its CPUs");
	lab_predict(l, "probe.samples_alone", json_integer(PROBE_SAMPLES), "a fixed count");
	lab_predict(l, "probe.samples_with_be", json_integer(PROBE_SAMPLES), "a fixed count");
	lab_predict(l, "card_isolation", json_string("none"),
	            "the GPU share is a CPU duty cycle; nothing isolates a card");
}

/* Starts the BE neighbours: 100 % on the empty card (the scheduler takes an empty card first),
 * then 75 % beside the LS task, the only room left. Returns 1 when both run. */
static int start_neighbours(struct lab *l, const char *ls, char *be1, char *be2, size_t len)
{
	lab_predict(l, "BE.running", json_integer(2),
	            "both fit: 100 % on the empty card, 75 % beside the LS task");
	lab_predict(l, "BE2.beside_LS", json_true(), "only the LS task's card has 75 % core free");
	json_t *body = lab_body(l, 1024, 100, 40, "BE", "normal");
	json_t *t1 = lab_start(l, "BE1", body, be1, len);
	json_decref(body);
	body = lab_body(l, 1024, 75, 40, "BE", "normal");
	json_t *t2 = t1 ? lab_start(l, "BE2", body, be2, len) : NULL;
	json_decref(body);
	const char *s1 = lab_str(t1, "state"), *s2 = lab_str(t2, "state");
	int running = (s1 && strcmp(s1, "running") == 0) + (s2 && strcmp(s2, "running") == 0);
	json_t *ls_task = lab_task(l, ls);
	json_t *m_ls = lab_get(ls_task, "allocation.cards.0.minor");
	json_t *m_be2 = lab_get(t2, "allocation.cards.0.minor");
	lab_observe(l, "BE.running", json_integer(running));
	lab_observe(l, "BE2.beside_LS", json_boolean(m_ls && m_be2 && json_equal(m_ls, m_be2)));
	json_decref(ls_task);
	json_decref(t1);
	json_decref(t2);
	return running == 2;
}

/* What QoS changed on the Pods of the LS task and of one BE neighbour, and what isolation the
 * LS worker could observe. */
static void observe_qos(struct lab *l, const char *ls, const char *be)
{
	json_t *pls = pod_of(l, ls), *pbe = pod_of(l, be);
	json_t *qls = json_object_get(lab_get(pls, "metadata.labels"), "koordinator.sh/qosClass");
	json_t *qbe = json_object_get(lab_get(pbe, "metadata.labels"), "koordinator.sh/qosClass");
	json_t *pc = lab_get(pbe, "spec.priorityClassName");
	lab_observe(l, "LS.qos_label", qls ? json_incref(qls) : json_null());
	lab_observe(l, "LS.batch_cpu", json_boolean(has_batch_cpu(pls)));
	lab_observe(l, "BE.qos_label", qbe ? json_incref(qbe) : json_null());
	lab_observe(l, "BE.priority_class", pc ? json_incref(pc) : json_null());
	lab_observe(l, "BE.batch_cpu", json_boolean(has_batch_cpu(pbe)));
	const char *n1 = lab_str(pls, "spec.nodeName"), *n2 = lab_str(pbe, "spec.nodeName");
	lab_observe(l, "same_node", json_boolean(n1 && n2 && strcmp(n1, n2) == 0));
	lab_measure(l, "pods",
	            json_pack("{s:{s:O?, s:O?}, s:{s:O?, s:O?}}", "LS", "labels",
	                      lab_get(pls, "metadata.labels"), "resources",
	                      lab_get(pls, "spec.containers.0.resources"), "BE", "labels",
	                      lab_get(pbe, "metadata.labels"), "resources",
	                      lab_get(pbe, "spec.containers.0.resources")));
	json_decref(pls);
	json_decref(pbe);
	lab_capture_logs(l, ls);
	const char *verdict = NULL;
	size_t i;
	json_t *e;
	json_array_foreach (json_object_get(l->logs, ls), i, e)
		if (lab_str(e, "event") && strcmp(lab_str(e, "event"), "isolation") == 0)
			verdict = lab_str(e, "verdict");
	lab_observe(l, "card_isolation",
	            json_string(verdict && strcmp(verdict, "enforced") == 0 ? "enforced" : "none"));
}

/* P50/P99 side by side, printed and kept with the raw samples (both stolen). */
static void keep_latency(struct lab *l, const char *ls, json_t *alone, json_t *with_be,
                         const int64_t win[4])
{
	json_t *progress = lab_worker_progress(l, ls);
	json_t *sa = phase_summary(alone, worker_shares(progress, win[0], win[1]));
	json_t *sb = phase_summary(with_be, worker_shares(progress, win[2], win[3]));
	json_decref(progress);
	printf("  latency of the LS probe (fixed %d/s, %d samples each; not a GPU figure):\n",
	       1000 / PROBE_INTERVAL_MS, PROBE_SAMPLES);
	printf("             %10s %10s\n", "alone", "with BE");
	printf("    P50 us   %10lld %10lld\n", (long long)json_integer_value(lab_get(sa, "p50_us")),
	       (long long)json_integer_value(lab_get(sb, "p50_us")));
	printf("    P99 us   %10lld %10lld\n", (long long)json_integer_value(lab_get(sa, "p99_us")),
	       (long long)json_integer_value(lab_get(sb, "p99_us")));
	fflush(stdout);
	lab_measure(l, "latency",
	            json_pack("{s:o, s:o, s:{s:o, s:o}, s:s}", "alone", sa, "with_be", sb,
	                      "raw_samples_us", "alone", alone, "with_be", with_be, "note",
	                      "the probe is CPU work at a fixed rate on the node's host; the GPU "
	                      "share here is a CPU duty cycle and nothing isolates a card, so this "
	                      "measures host CPU contention only. No expectation is set on these "
	                      "figures: one run on a shared machine proves no latency claim."));
}

int exp_lsbe(struct lab *l)
{
	if (!lab_need_quota(l, 3072, 200))
		return 0;
	predict_qos(l);
	char ls[40], be1[40], be2[40];
	json_t *body = lab_body(l, 1024, 25, 60, "LS", "normal");
	json_t *t = lab_start(l, "LS", body, ls, sizeof ls);
	json_decref(body);
	if (!t)
		return 0;
	json_decref(t);
	int64_t win[4];
	json_t *alone = probe_run(l, "alone", &win[0], &win[1]);
	if (!start_neighbours(l, ls, be1, be2, sizeof be1)) {
		json_decref(alone);
		return 0;
	}
	lab_sleep_ms(1000); /* let both workers pass their start-up into the duty cycle */
	json_t *with_be = probe_run(l, "with BE", &win[2], &win[3]);
	observe_qos(l, ls, be1);
	lab_observe(l, "probe.samples_alone", json_integer((json_int_t)json_array_size(alone)));
	lab_observe(l, "probe.samples_with_be", json_integer((json_int_t)json_array_size(with_be)));
	keep_latency(l, ls, alone, with_be, win);
	return 0;
}
