/* NodeMetric reporter: node usage from /proc/stat and /proc/meminfo, pod usage from the
 * worker processes (their pids are in the pods' containerIDs, "kubesim://<pid>"), written to
 * the node's NodeMetric status every cfg.metric_ms. CPU figures are rates over the last
 * interval, so the first report shows 0 cpu. */
#include "tools/kubesim/nodemetric.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/quantity.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/store.h"

#define MAX_TRACKED 512

struct pidsample {
	int pid;
	uint64_t ticks;
};

struct nodemetric {
	struct ks *ks;
	struct event *timer;
	uint64_t busy, total; /* last /proc/stat sample, jiffies */
	int64_t last_ms;
	struct pidsample prev[MAX_TRACKED];
	int nprev;
};

static int read_cpu(uint64_t *busy, uint64_t *total)
{
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return -1;
	unsigned long long v[10] = { 0 };
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
		       &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
	fclose(f);
	if (n < 4)
		return -1;
	uint64_t t = 0;
	for (int i = 0; i < 8; i++) /* guest time is already in user/nice */
		t += v[i];
	*total = t;
	*busy = t - v[3] - v[4]; /* minus idle and iowait */
	return 0;
}

static int64_t read_mem_used(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return 0;
	char line[256];
	long long total = 0, avail = 0;
	while (fgets(line, sizeof line, f)) {
		long long v;
		if (sscanf(line, "MemTotal: %lld kB", &v) == 1)
			total = v;
		else if (sscanf(line, "MemAvailable: %lld kB", &v) == 1)
			avail = v;
	}
	fclose(f);
	return (int64_t)(total - avail) * 1024;
}

/* utime+stime (ticks) and RSS (bytes) of a process. Returns 0 or -1. */
static int read_proc(int pid, uint64_t *ticks, int64_t *rss)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (!p)
		return -1;
	unsigned long long ut = 0, st = 0;
	long long rsspages = 0;
	/* Fields after the command: state(3) ... utime(14) stime(15) ... rss(24). */
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
			  "%*d %*d %*u %*u %lld",
		   &ut, &st, &rsspages) != 3)
		return -1;
	*ticks = ut + st;
	*rss = rsspages * sysconf(_SC_PAGESIZE);
	return 0;
}

static void fmt_cpu(int64_t milli, char *buf, size_t len)
{
	if (milli % 1000 == 0)
		snprintf(buf, len, "%" PRId64, milli / 1000);
	else
		snprintf(buf, len, "%" PRId64 "m", milli);
}

static void report(struct nodemetric *nm)
{
	struct ks *ks = nm->ks;
	int64_t now = clock_now_ms();
	double secs = nm->last_ms ? (double)(now - nm->last_ms) / 1000.0 : 0;
	uint64_t busy = 0, total = 0;
	int64_t cpu_milli = 0;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	if (read_cpu(&busy, &total) == 0 && nm->total && total > nm->total)
		cpu_milli = (int64_t)((double)(busy - nm->busy) / (double)(total - nm->total) *
				      (double)ncpu * 1000.0);
	nm->busy = busy;
	nm->total = total;
	char cpu[32], mem[QUANTITY_BUF], ts[32];
	fmt_cpu(cpu_milli, cpu, sizeof cpu);
	quantity_format_binary(read_mem_used(), mem, sizeof mem);
	long hz = sysconf(_SC_CLK_TCK);
	json_t *pods_metric = json_array();
	struct pidsample cur[MAX_TRACKED];
	int ncur = 0;
	json_t **pods = NULL;
	size_t np = store_list(ks->store, RES_PODS, NULL, &pods);
	for (size_t i = 0; i < np; i++) {
		const char *phase = obj_str(pods[i], "status.phase");
		if (!phase || strcmp(phase, "Running"))
			continue;
		int64_t pcpu = 0, prss = 0;
		size_t j;
		json_t *cs;
		json_array_foreach(obj_path(pods[i], "status.containerStatuses"), j, cs)
		{
			const char *cid = obj_str(cs, "containerID");
			int pid = 0;
			uint64_t ticks;
			int64_t rss;
			if (!cid || sscanf(cid, "kubesim://%d", &pid) != 1 || pid <= 0 ||
			    read_proc(pid, &ticks, &rss) < 0)
				continue;
			prss += rss;
			for (int k = 0; k < nm->nprev; k++)
				if (nm->prev[k].pid == pid && secs > 0 && ticks >= nm->prev[k].ticks)
					pcpu += (int64_t)((double)(ticks - nm->prev[k].ticks) /
							  (double)hz / secs * 1000.0);
			if (ncur < MAX_TRACKED)
				cur[ncur++] = (struct pidsample){ pid, ticks };
		}
		char pc[32], pm[QUANTITY_BUF];
		fmt_cpu(pcpu, pc, sizeof pc);
		quantity_format_binary(prss, pm, sizeof pm);
		const char *qos = obj_label(pods[i], "koordinator.sh/qosClass");
		json_array_append_new(pods_metric,
				      json_pack("{s:s, s:s, s:{s:{s:s, s:s}}, s:s}", "namespace",
						obj_ns(pods[i]), "name", obj_name(pods[i]), "podUsage",
						"resources", "cpu", pc, "memory", pm, "qos",
						qos ? qos : ""));
	}
	gwb_free(pods);
	memcpy(nm->prev, cur, sizeof cur[0] * (size_t)ncur);
	nm->nprev = ncur;
	nm->last_ms = now;
	json_t *obj = store_get(ks->store, RES_NODEMETRICS, NULL, ks->cfg.node);
	if (!obj) {
		json_decref(pods_metric);
		return;
	}
	json_t *nw = json_deep_copy(obj);
	json_object_set_new(
		nw, "status",
		json_pack("{s:s, s:{s:{s:{s:s, s:s}}}, s:o}", "updateTime",
			  clock_fmt_rfc3339(now, ts, sizeof ts), "nodeMetric", "nodeUsage",
			  "resources", "cpu", cpu, "memory", mem, "podsMetric", pods_metric));
	registry_commit(ks->registry, RES_NODEMETRICS, nw);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	report(arg);
}

struct nodemetric *nodemetric_new(struct ks *ks)
{
	struct nodemetric *nm = gwb_calloc(1, sizeof *nm);
	nm->ks = ks;
	nm->timer = event_new(ks->base, -1, EV_PERSIST, timer_cb, nm);
	struct timeval tv = { ks->cfg.metric_ms / 1000, (ks->cfg.metric_ms % 1000) * 1000 };
	evtimer_add(nm->timer, &tv);
	report(nm);
	return nm;
}

void nodemetric_free(struct nodemetric *nm)
{
	if (!nm)
		return;
	event_free(nm->timer);
	gwb_free(nm);
}
