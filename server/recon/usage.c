/* The usage collector (usage.h). */
#include "server/recon/usage.h"

#include <event2/buffer.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/addr.h"
#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/devalloc.h"
#include "lib/log.h"
#include "lib/prom.h"
#include "lib/promparse.h"
#include "server/kube/kube.h"

/* Periods without a fresh sample before a figure is stale. */
#define STALE_PERIODS 3
/* Bytes a stream delivery may hold: above the cap, so the cap decides (body_too_large). */
#define DELIVERY_MAX (USAGE_BODY_MAX + 1)
/* Room of the answer kept between scrapes. */
#define KEEP_ROOM (1 << 20)

enum { F_UNREACHABLE, F_STATUS, F_TOO_LARGE, F_NO_SAMPLES, F_N };
static const char *const fail_names[F_N] = { "unreachable", "status", "body_too_large",
					     "no_samples" };

static struct {
	int on, dcgm;
	const struct gwb_config *cfg;
	struct kube *kube;
	struct event *timer;
	char path[1100];
	long req;            /* the scrape in flight, 0 when none */
	char *body;          /* its answer so far */
	size_t len, cap;
	json_t *pods;        /* "ns/pod" -> {mem_bytes, util, sim, at}: hami */
	json_t *cards;       /* UUID -> {mem_mib, util, sim, at, pods: {"ns/pod": true}} */
	int64_t last_ok_ms;  /* the last scrape that gave samples */
	uint64_t scrapes, failures[F_N], bad_lines;
	size_t samples;      /* of the last good scrape */
	char last_error[160];
} U;

/* ---- one scrape's samples ---- */

/* The entry of key in map, made when missing, stamped with the scrape's time. */
static json_t *entry(json_t *map, const char *key, int64_t at)
{
	json_t *e = json_object_get(map, key);
	if (!e) {
		e = json_pack("{s:I}", "at", (json_int_t)at);
		json_object_set_new(map, key, e);
	}
	return e;
}

static void add_real(json_t *e, const char *k, double v)
{
	json_object_set_new(e, k, json_real(json_number_value(json_object_get(e, k)) + v));
}

static void max_real(json_t *e, const char *k, double v)
{
	json_t *old = json_object_get(e, k);
	if (!old || json_number_value(old) < v)
		json_object_set_new(e, k, json_real(v));
}

/* Records that Pod key (NULL: none) has series on card c. */
static void pod_on_card(json_t *c, const char *key)
{
	json_t *pods = json_object_get(c, "pods");
	if (!pods) {
		pods = json_object();
		json_object_set_new(c, "pods", pods);
	}
	if (key)
		json_object_set_new(pods, key, json_true());
}

struct scrape {
	json_t *pods, *cards;
	int64_t at;
};

/* The Pod of a HAMi series, new names or legacy ones: "ns/pod" in key, or 0. */
static int hami_pod(const struct promp_sample *s, int legacy, char *key, size_t len, const char **uuid)
{
	const char *ns = promp_label(s, legacy ? "podnamespace" : "namespace");
	const char *pod = promp_label(s, legacy ? "podname" : "pod");
	*uuid = promp_label(s, legacy ? "deviceuuid" : "device_uuid");
	if (!ns || !pod || !ns[0] || !pod[0])
		return 0;
	snprintf(key, len, "%s/%s", ns, pod);
	return 1;
}

static void on_hami(struct scrape *sc, const struct promp_sample *s, int sim)
{
	int legacy = 0, mem = 0;
	if (!strcmp(s->name, "hami_vgpu_memory_used_bytes"))
		mem = 1;
	else if (!strcmp(s->name, "vGPU_device_memory_usage_in_bytes"))
		mem = legacy = 1;
	else if (!strcmp(s->name, "Device_utilization_desc_of_container"))
		legacy = 1;
	else if (strcmp(s->name, "hami_container_device_utilization_ratio"))
		return;
	char key[600];
	const char *uuid;
	if (!hami_pod(s, legacy, key, sizeof key, &uuid))
		return;
	json_t *e = entry(sc->pods, key, sc->at);
	if (sim)
		json_object_set_new(e, "sim", json_true());
	if (mem) {
		add_real(e, "mem_bytes", s->value);
		/* Per card too, so that a task counts only the cards of its allocation. */
		if (!json_object_get(e, "by_card"))
			json_object_set_new(e, "by_card", json_object());
		add_real(json_object_get(e, "by_card"), uuid ? uuid : "", s->value);
		if (uuid && uuid[0]) {
			json_t *c = entry(sc->cards, uuid, sc->at);
			add_real(c, "mem_mib", s->value / (1024.0 * 1024.0));
			pod_on_card(c, key);
		}
	} else {
		/* HAMi's ratio is a fraction of the card; the legacy gauge is in percent. */
		max_real(e, "util", legacy ? s->value : s->value * 100.0);
	}
}

static void on_dcgm(struct scrape *sc, const struct promp_sample *s, int sim)
{
	int mem = !strcmp(s->name, "DCGM_FI_DEV_FB_USED");
	if (!mem && strcmp(s->name, "DCGM_FI_DEV_GPU_UTIL"))
		return;
	const char *uuid = promp_label(s, "UUID");
	if (!uuid || !uuid[0])
		return;
	json_t *c = entry(sc->cards, uuid, sc->at);
	if (sim)
		json_object_set_new(c, "sim", json_true());
	/* Per card: a shared card's series repeat the card's figure for each of its Pods. */
	json_object_set_new(c, mem ? "mem_mib" : "util", json_real(s->value));
	const char *ns = promp_label(s, "namespace"), *pod = promp_label(s, "pod");
	pod_on_card(c, NULL);
	if (ns && pod && ns[0] && pod[0]) {
		char key[600];
		snprintf(key, sizeof key, "%s/%s", ns, pod);
		pod_on_card(c, key);
	}
}

static int on_sample(const struct promp_sample *s, void *arg)
{
	if (!isfinite(s->value) || s->value < 0)
		return 0;
	const char *sim = promp_label(s, "simulated");
	int simulated = sim && !strcmp(sim, "true");
	if (U.dcgm)
		on_dcgm(arg, s, simulated);
	else
		on_hami(arg, s, simulated);
	return 0;
}

/* Entries of old the new scrape lacks stay until they are stale (they then say so). */
static void carry_over(json_t *old, json_t *fresh, int64_t now)
{
	const char *k;
	json_t *e;
	int64_t keep = STALE_PERIODS * 2 * U.cfg->usage_period_seconds * 1000;
	json_object_foreach(old, k, e) {
		if (!json_object_get(fresh, k) &&
		    now - json_integer_value(json_object_get(e, "at")) <= keep)
			json_object_set(fresh, k, e);
	}
}

static void fail(int why, const char *detail)
{
	U.failures[why]++;
	snprintf(U.last_error, sizeof U.last_error, "%s%s%s", fail_names[why], detail ? ": " : "",
		 detail ? detail : "");
	log_warn("usage", "scrape_failed", "why=%s detail=%s", fail_names[why],
		 log_q(detail ? detail : ""));
}

static void parse_body(void)
{
	struct scrape sc = { json_object(), json_object(), clock_now_ms() };
	struct promp_stats st;
	promp_parse(U.body ? U.body : "", U.len, USAGE_SAMPLES_MAX, on_sample, &sc, &st);
	U.bad_lines += st.bad_lines;
	if (!st.samples) {
		json_decref(sc.pods);
		json_decref(sc.cards);
		fail(F_NO_SAMPLES, st.bad_lines ? "only malformed lines" : "empty");
		return;
	}
	carry_over(U.pods, sc.pods, sc.at);
	carry_over(U.cards, sc.cards, sc.at);
	json_decref(U.pods);
	json_decref(U.cards);
	U.pods = sc.pods;
	U.cards = sc.cards;
	U.samples = st.samples;
	U.last_ok_ms = sc.at;
	U.last_error[0] = '\0';
}

static void scrape_done(void)
{
	U.req = 0;
	U.len = 0;
	if (U.cap > KEEP_ROOM) { /* a big answer's room is not kept between scrapes */
		gwb_free(U.body);
		U.body = NULL;
		U.cap = 0;
	}
}

static void on_data(void *arg, const char *data, size_t len)
{
	(void)arg;
	if (len == 0)
		return; /* nothing to keep (and no buffer yet to keep it in) */
	if (U.len + len > USAGE_BODY_MAX) {
		kube_cancel(U.kube, U.req);
		fail(F_TOO_LARGE, NULL);
		scrape_done();
		return;
	}
	if (U.len + len > U.cap) {
		size_t cap = U.cap ? U.cap : 65536;
		while (cap < U.len + len)
			cap *= 2;
		U.body = gwb_realloc(U.body, cap);
		U.cap = cap;
	}
	memcpy(U.body + U.len, data, len);
	U.len += len;
}

static void on_end(void *arg, const struct kube_result *res)
{
	(void)arg;
	if (res->outcome == KUBE_OK) {
		parse_body();
	} else if (res->status) {
		char d[32];
		snprintf(d, sizeof d, "HTTP %ld", res->status);
		fail(F_STATUS, d);
	} else {
		fail(F_UNREACHABLE, res->reason);
	}
	scrape_done();
}

/* One request a period: a scrape still in flight (a slow monitor) takes the next one's turn. */
static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	if (U.req)
		return;
	U.scrapes++;
	int timeout_ms = (int)(U.cfg->usage_period_seconds * 1000);
	long id = kube_stream(U.kube, U.path, 0, timeout_ms, DELIVERY_MAX, on_data, on_end, NULL);
	if (id < 0)
		fail(F_UNREACHABLE, "the request could not be queued");
	else
		U.req = id;
}

int usage_start(struct event_base *base, const struct gwb_config *cfg, char *err, size_t len)
{
	if (!cfg->usage_url[0])
		return 0;
	struct addr a;
	if (addr_parse(cfg->usage_url, ADDR_F_HTTP, &a, err, len))
		return -1;
	struct kube_auth auth;
	memset(&auth, 0, sizeof auth);
	const char *host_end = strstr(cfg->usage_url, "://") + 3;
	size_t hl = strcspn(host_end, "/");
	snprintf(auth.server, sizeof auth.server, "%.*s", (int)(host_end - cfg->usage_url + hl),
		 cfg->usage_url);
	snprintf(U.path, sizeof U.path, "%s", host_end[hl] ? host_end + hl : "/metrics");
	snprintf(auth.source, sizeof auth.source, "usage.url");
	if (kube_new(&U.kube, base, &auth, err, len))
		return -1;
	U.cfg = cfg;
	U.dcgm = !strcmp(cfg->usage_format, "dcgm");
	U.pods = json_object();
	U.cards = json_object();
	U.timer = event_new(base, -1, EV_PERSIST, on_timer, NULL);
	struct timeval tv = { cfg->usage_period_seconds, 0 };
	event_add(U.timer, &tv);
	U.on = 1;
	on_timer(-1, 0, NULL);
	log_info("usage", "collector_started", "url=%s format=%s period_s=%lld",
		 log_q(cfg->usage_url), cfg->usage_format, (long long)cfg->usage_period_seconds);
	return 0;
}

void usage_stop(void)
{
	if (!U.on)
		return;
	event_free(U.timer);
	kube_free(U.kube);
	json_decref(U.pods);
	json_decref(U.cards);
	gwb_free(U.body);
	memset(&U, 0, sizeof U);
}

/* ---- views ---- */

static json_t *unknown(const char *reason)
{
	return json_pack("{s:s, s:s}", "status", "unknown", "reason", reason);
}

static int64_t stale_after_ms(void)
{
	return STALE_PERIODS * U.cfg->usage_period_seconds * 1000;
}

/* The figures of a task: measured, simulated or stale as the sample's age says. */
static json_t *figures(double mem_mib, int has_util, double util, int sim, int64_t at)
{
	char ts[40], why[400];
	int64_t age = clock_now_ms() - at;
	int stale = age > stale_after_ms();
	const char *status = stale ? "stale" : sim ? "simulated" : "measured";
	if (stale)
		snprintf(why, sizeof why,
			 "no fresh sample for %lld s (three periods of %lld s)%s%s",
			 (long long)(age / 1000), (long long)U.cfg->usage_period_seconds,
			 U.last_error[0] ? "; the last scrape failed: " : "", U.last_error);
	else if (sim)
		snprintf(why, sizeof why,
			 "kubesim's simulated monitor: figures built from the worker's simulated "
			 "ledger, not a measurement of any GPU");
	else
		snprintf(why, sizeof why, "measured by the monitor (%s) at %s",
			 U.cfg->usage_format, U.cfg->usage_url);
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s}", "status", status, "reason", why,
			      "gpu_memory_mib", (json_int_t)llround(mem_mib), "at",
			      clock_fmt_rfc3339_ms(at, ts, sizeof ts), "source", U.cfg->usage_format);
	json_object_set_new(o, "sm_percent",
			    has_util ? json_real(round(util * 10) / 10) : json_null());
	if (sim && stale)
		json_object_set_new(o, "simulated", json_true());
	return o;
}

/* The Pod's memory on the cards of its allocation (all of its series when the annotation
 * names no card UUID); -1 when none of its series is on one of them. */
static double hami_bytes(const struct task *t, json_t *e)
{
	struct devalloc a;
	if (!t->allocation[0] || devalloc_parse(t->allocation, strlen(t->allocation), &a, NULL, 0) ||
	    !a.ncards || !a.cards[0].id[0])
		return json_number_value(json_object_get(e, "mem_bytes"));
	double sum = -1;
	for (int i = 0; i < a.ncards; i++) {
		json_t *v = json_object_get(json_object_get(e, "by_card"), a.cards[i].id);
		if (v)
			sum = (sum < 0 ? 0 : sum) + json_number_value(v);
	}
	return sum;
}

static json_t *hami_task(const struct task *t, const char *key)
{
	json_t *e = json_object_get(U.pods, key);
	double bytes = e && json_object_get(e, "mem_bytes") ? hami_bytes(t, e) : -1;
	if (bytes < 0)
		return unknown("the monitor has no sample for this Pod on the cards of its allocation");
	json_t *u = json_object_get(e, "util");
	return figures(bytes / (1024.0 * 1024.0),
		       u != NULL, json_number_value(u), json_is_true(json_object_get(e, "sim")),
		       json_integer_value(json_object_get(e, "at")));
}

/* dcgm's figures are a card's: a task's own only when it is alone on each of its cards (the
 * card's series name only its Pod, or it holds the whole card). */
static json_t *dcgm_task(const struct task *t, const char *key)
{
	struct devalloc a;
	if (!t->allocation[0] || devalloc_parse(t->allocation, strlen(t->allocation), &a, NULL, 0) ||
	    !a.ncards || !a.cards[0].id[0])
		return unknown("the allocation names no card UUID to match dcgm's series with");
	double mem = 0, util = 0;
	int has_util = 1, sim = 0;
	int64_t at = INT64_MAX;
	for (int i = 0; i < a.ncards; i++) {
		json_t *c = json_object_get(U.cards, a.cards[i].id);
		char why[300];
		if (!c || !json_object_get(c, "mem_mib")) {
			snprintf(why, sizeof why, "the monitor has no sample for card %s", a.cards[i].id);
			return unknown(why);
		}
		json_t *pods = json_object_get(c, "pods");
		int whole = !a.cards[i].has_ratio || a.cards[i].ratio >= 100;
		int alone = json_object_size(pods) == 1 ? json_object_get(pods, key) != NULL : whole &&
			    !json_object_size(pods);
		if (!alone) {
			snprintf(why, sizeof why,
				 "card %s is shared: dcgm's figures are the whole card's, shown on the "
				 "card (GET /v1/devices), not on this task", a.cards[i].id);
			json_t *o = unknown(why);
			json_object_set_new(o, "card_shared", json_true());
			json_object_set_new(o, "source", json_string("dcgm"));
			return o;
		}
		mem += json_number_value(json_object_get(c, "mem_mib"));
		json_t *u = json_object_get(c, "util");
		has_util &= u != NULL;
		util = fmax(util, json_number_value(u));
		sim |= json_is_true(json_object_get(c, "sim"));
		int64_t cat = json_integer_value(json_object_get(c, "at"));
		at = cat < at ? cat : at;
	}
	return figures(mem, has_util, util, sim, at);
}

json_t *usage_task_json(const struct task *t)
{
	if (!U.on)
		return NULL;
	if (t->state != TASK_RUNNING || !t->pod_name[0])
		return unknown("usage is collected only while the task runs");
	char key[600];
	snprintf(key, sizeof key, "%s/%s", U.cfg->kube_namespace, t->pod_name);
	return U.dcgm ? dcgm_task(t, key) : hami_task(t, key);
}

int usage_task_json_varies(void)
{
	return U.on;
}

json_t *usage_card_json(const char *uuid)
{
	if (!U.on)
		return NULL;
	json_t *c = uuid ? json_object_get(U.cards, uuid) : NULL;
	int64_t at = json_integer_value(json_object_get(c, "at"));
	if (!c || !json_object_get(c, "mem_mib") || clock_now_ms() - at > stale_after_ms())
		return json_null();
	char ts[40];
	json_t *u = json_object_get(c, "util");
	return json_pack("{s:s, s:I, s:o, s:s, s:s}", "status",
			 json_is_true(json_object_get(c, "sim")) ? "simulated" : "measured",
			 "gpu_memory_mib", (json_int_t)llround(json_number_value(json_object_get(c, "mem_mib"))),
			 "sm_percent", u ? json_real(round(json_number_value(u) * 10) / 10) : json_null(),
			 "at", clock_fmt_rfc3339_ms(at, ts, sizeof ts), "source", U.cfg->usage_format);
}

void usage_metrics_write(struct evbuffer *out)
{
	if (!U.on)
		return;
	prom_counter(out, "gwb_usage_scrapes_total", NULL, (int64_t)U.scrapes);
	prom_family(out, "gwb_usage_scrape_failures_total", PROM_COUNTER,
		    "scrapes of usage.url that gave no samples, by why");
	for (int i = 0; i < F_N; i++) {
		struct prom_label l = { "reason", fail_names[i] };
		prom_sample_int(out, "gwb_usage_scrape_failures_total", &l, 1, (int64_t)U.failures[i]);
	}
	prom_gauge(out, "gwb_usage_samples", NULL, (int64_t)U.samples);
	prom_counter(out, "gwb_usage_bad_lines_total", NULL, (int64_t)U.bad_lines);
	prom_family(out, "gwb_usage_sample_age_seconds", PROM_GAUGE,
		    "seconds since the last scrape that gave samples (-1: none yet)");
	prom_sample_real(out, "gwb_usage_sample_age_seconds", NULL, 0,
			 U.last_ok_ms ? (double)(clock_now_ms() - U.last_ok_ms) / 1000.0 : -1.0);
}
