/* The usage collector: one scrape of a GPU monitor's Prometheus endpoint (usage.url) per
 * usage.period_seconds, on the event loop through the Kubernetes client's libcurl multi
 * (server/kube/kube.h, a client of its own for the monitor's address), whatever the number of
 * Pods. The body is capped (USAGE_BODY_MAX) and parsed by lib/promparse.h; the samples of the
 * last good scrape are kept per Pod (format hami: HAMi's vGPU monitor, its legacy names too;
 * kubesim's /sim/metrics/hami, whose series carry simulated="true") or per card (dcgm:
 * dcgm-exporter, the whole card's figures). A task's usage is read from them: measured (or
 * simulated) while fresh, stale after three periods without a fresh sample, unknown with the
 * reason otherwise. A monitor that answers garbage, too much or nothing only counts failures.
 * One collector per process (the API's views read it). */
#ifndef GWB_RECON_USAGE_H
#define GWB_RECON_USAGE_H

#include <event2/event.h>
#include <jansson.h>

#include "config/config.h"
#include "server/task.h"

struct evbuffer;

/* The largest answer a scrape reads; a longer one is a failure (body_too_large). */
#define USAGE_BODY_MAX (8 << 20)
/* Samples one scrape takes at most: HAMi exports a few series per container. */
#define USAGE_SAMPLES_MAX 200000

/* Starts the collector when usage.url is set: 0 (also when it is not), or a negative error
 * with err filled. */
int usage_start(struct event_base *base, const struct gwb_config *cfg, char *err, size_t len);
/* Stops it and frees what it holds. */
void usage_stop(void);

/* A new object for the task's `usage` (docs/API.md): {status, reason} when unknown; with
 * gpu_memory_mib, sm_percent, at and source when measured, simulated or stale; card_shared
 * when its card's figure belongs to the card. */
json_t *usage_task_json(const struct task *t);

/* 1 when a collector runs: usage_task_json then differs from task to task (and the API's
 * constant view of an unknown usage does not apply). */
int usage_task_json_varies(void);

/* The card's figures for GET /v1/devices (new reference): {status (measured or simulated),
 * gpu_memory_mib (dcgm: the card's; hami: summed over its Pods), sm_percent (dcgm only, else
 * null), at, source}, or a JSON null when no fresh sample has the card; NULL without a
 * collector. */
json_t *usage_card_json(const char *uuid);

/* Appends the collector's health: gwb_usage_scrapes_total, gwb_usage_scrape_failures_total,
 * gwb_usage_samples, gwb_usage_bad_lines_total and gwb_usage_sample_age_seconds. */
void usage_metrics_write(struct evbuffer *out);

#endif
