/* The simulated GPU monitor (simmon.h). */
#include "tools/kubesim/simmon.h"

#include <event2/buffer.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"
#include "lib/prom.h"
#include "tools/kubesim/kubelet.h"
#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/store.h"

#define SIMMON_PATH "/sim/metrics/hami"
/* Bytes of a log read from its start (where ledger_booked is) and from its end (the last
 * progress event). */
#define HEAD_BYTES 16384
#define TAIL_BYTES 8192

/* The number after "key": in the last (last 1) or first line of text holding event. */
static int find_number(const char *text, const char *event, const char *key, int last,
		       double *out)
{
	const char *hit = NULL;
	for (const char *p = strstr(text, event); p; p = strstr(p + 1, event)) {
		hit = p;
		if (!last)
			break;
	}
	if (!hit)
		return -1;
	const char *eol = strchr(hit, '\n');
	const char *k = strstr(hit, key);
	if (!k || (eol && k > eol))
		return -1;
	*out = strtod(k + strlen(key), NULL);
	return 0;
}

/* Reads len bytes of path at offset from (from the end when from < 0) into buf. */
static void read_part(const char *path, long from, char *buf, size_t len)
{
	buf[0] = '\0';
	FILE *f = fopen(path, "rb");
	if (!f)
		return;
	if (from < 0 && fseek(f, from, SEEK_END) != 0)
		rewind(f);
	size_t n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* The series of one running worker container of pod. */
static void pod_series(struct hreq *h, const json_t *pod, const char *ctr, struct evbuffer *out)
{
	const char *ann = obj_annotation(pod, DEVALLOC_ANNOTATION);
	struct devalloc a;
	if (!ann || devalloc_parse(ann, strlen(ann), &a, NULL, 0) || !a.ncards)
		return;
	char path[PATH_MAX], head[HEAD_BYTES], tail[TAIL_BYTES];
	if (kubelet_log_path(h->ks->kubelet, pod, ctr, path, sizeof path))
		return;
	read_part(path, 0, head, sizeof head);
	double used, share = 0;
	if (find_number(head, "\"event\":\"ledger_booked\"", "\"used\":", 0, &used))
		return; /* not the worker, or its ledger is not booked yet */
	read_part(path, -TAIL_BYTES + 1, tail, sizeof tail);
	find_number(tail, "\"event\":\"progress\"", "\"cpu_share_percent\":", 1, &share);
	/* The ledger is over all cards: each card gets its part by its share of the budget. */
	int64_t total = 0;
	for (int i = 0; i < a.ncards; i++)
		total += a.cards[i].mem_bytes;
	for (int i = 0; i < a.ncards; i++) {
		char idx[16];
		snprintf(idx, sizeof idx, "%d", i);
		struct prom_label l[] = { { "namespace", obj_ns(pod) }, { "pod", obj_name(pod) },
					  { "container", ctr }, { "vdevice_index", idx },
					  { "device_uuid", a.cards[i].id }, { "simulated", "true" } };
		double part = total > 0 ? used * (double)a.cards[i].mem_bytes / (double)total : 0;
		prom_sample_real(out, "hami_vgpu_memory_used_bytes", l, 6, part);
		prom_sample_int(out, "hami_vgpu_memory_limit_bytes", l, 6, a.cards[i].mem_bytes);
		prom_sample_real(out, "hami_container_device_utilization_ratio", l, 6, share / 100.0);
	}
}

int simmon_handle(struct hreq *h)
{
	if (strcmp(h->path, SIMMON_PATH))
		return 0;
	if (h->cmd != EVHTTP_REQ_GET && h->cmd != EVHTTP_REQ_HEAD) {
		http_reply(h, 405, "text/plain", "GET only\n", 9);
		return 1;
	}
	struct evbuffer *out = evbuffer_new();
	prom_family(out, "hami_vgpu_memory_used_bytes", PROM_GAUGE,
		    "simulated: the worker's ledger, bookkeeping only, no GPU memory");
	prom_family(out, "hami_vgpu_memory_limit_bytes", PROM_GAUGE,
		    "the budget of the device-allocated annotation");
	prom_family(out, "hami_container_device_utilization_ratio", PROM_GAUGE,
		    "simulated: the worker's achieved CPU duty cycle, standing for its compute share");
	json_t **pods = NULL;
	size_t n = store_list(h->ks->store, RES_PODS, NULL, &pods);
	for (size_t i = 0; i < n; i++) {
		const char *phase = obj_str(pods[i], "status.phase");
		if (!phase || strcmp(phase, "Running"))
			continue;
		size_t j;
		json_t *c;
		json_array_foreach(obj_path(pods[i], "spec.containers"), j, c)
		{
			const char *name = obj_str(c, "name");
			if (name)
				pod_series(h, pods[i], name, out);
		}
	}
	gwb_free(pods);
	size_t len = evbuffer_get_length(out);
	char *body = gwb_malloc(len + 1);
	evbuffer_remove(out, body, len);
	evbuffer_free(out);
	http_reply(h, 200, "text/plain; version=0.0.4", body, len);
	gwb_free(body);
	return 1;
}
