/* The Prometheus text writer: families, samples and histograms (see prom.h). */
#include "lib/prom.h"

#include <event2/buffer.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

static const char *const type_names[] = {
	[PROM_COUNTER] = "counter",
	[PROM_GAUGE] = "gauge",
	[PROM_HISTOGRAM] = "histogram",
};

/* Appends s (NULL: nothing) with '\\' and newline escaped, and '"' too when quote is set (a
 * label value). */
static void add_escaped(struct evbuffer *out, const char *s, int quote)
{
	if (!s)
		return;
	const char *run = s;
	for (; *s; s++) {
		const char *esc = NULL;
		if (*s == '\\')
			esc = "\\\\";
		else if (*s == '\n')
			esc = "\\n";
		else if (quote && *s == '"')
			esc = "\\\"";
		if (!esc)
			continue;
		evbuffer_add(out, run, (size_t)(s - run));
		evbuffer_add(out, esc, 2);
		run = s + 1;
	}
	evbuffer_add(out, run, (size_t)(s - run));
}

void prom_family(struct evbuffer *out, const char *name, enum prom_type type, const char *help)
{
	if (help) {
		evbuffer_add_printf(out, "# HELP %s ", name);
		add_escaped(out, help, 0);
		evbuffer_add(out, "\n", 1);
	}
	evbuffer_add_printf(out, "# TYPE %s %s\n", name, type_names[type]);
}

/* Writes "name{labels} " (no braces without labels). */
static void sample_head(struct evbuffer *out, const char *name, const struct prom_label *labels,
			int nlabels)
{
	evbuffer_add(out, name, strlen(name));
	for (int i = 0; i < nlabels; i++) {
		evbuffer_add_printf(out, "%s%s=\"", i ? "," : "{", labels[i].name);
		add_escaped(out, labels[i].value, 1);
		evbuffer_add(out, "\"", 1);
	}
	evbuffer_add(out, nlabels > 0 ? "} " : " ", nlabels > 0 ? 2 : 1);
}

/* Writes v with six decimals and a newline; the non-finite values as Prometheus spells them. */
static void add_real(struct evbuffer *out, double v)
{
	if (isnan(v))
		evbuffer_add_printf(out, "NaN\n");
	else if (isinf(v))
		evbuffer_add_printf(out, "%sInf\n", v > 0 ? "+" : "-");
	else
		evbuffer_add_printf(out, "%.6f\n", v);
}

void prom_sample_int(struct evbuffer *out, const char *name, const struct prom_label *labels,
		     int nlabels, int64_t v)
{
	sample_head(out, name, labels, nlabels);
	evbuffer_add_printf(out, "%" PRId64 "\n", v);
}

void prom_sample_real(struct evbuffer *out, const char *name, const struct prom_label *labels,
		      int nlabels, double v)
{
	sample_head(out, name, labels, nlabels);
	add_real(out, v);
}

void prom_counter(struct evbuffer *out, const char *name, const char *help, int64_t v)
{
	prom_family(out, name, PROM_COUNTER, help);
	prom_sample_int(out, name, NULL, 0, v);
}

void prom_counter_real(struct evbuffer *out, const char *name, const char *help, double v)
{
	prom_family(out, name, PROM_COUNTER, help);
	prom_sample_real(out, name, NULL, 0, v);
}

void prom_gauge(struct evbuffer *out, const char *name, const char *help, int64_t v)
{
	prom_family(out, name, PROM_GAUGE, help);
	prom_sample_int(out, name, NULL, 0, v);
}

void prom_hist_init(struct prom_hist *h, const double *bounds, int nbounds)
{
	memset(h, 0, sizeof *h);
	h->bounds = bounds;
	h->nbounds = nbounds < 0 ? 0 : nbounds < PROM_HIST_MAX ? nbounds : PROM_HIST_MAX - 1;
}

void prom_hist_observe(struct prom_hist *h, double v)
{
	int i = 0;
	while (i < h->nbounds && v > h->bounds[i])
		i++;
	h->counts[i]++;
	h->sum += v;
	h->count++;
}

void prom_hist_write(struct evbuffer *out, const char *name, const char *help,
		     const struct prom_hist *h)
{
	prom_family(out, name, PROM_HISTOGRAM, help);
	int64_t cum = 0;
	for (int i = 0; i < h->nbounds; i++) {
		cum += h->counts[i];
		evbuffer_add_printf(out, "%s_bucket{le=\"%g\"} %" PRId64 "\n", name, h->bounds[i],
				    cum);
	}
	cum += h->counts[h->nbounds];
	evbuffer_add_printf(out, "%s_bucket{le=\"+Inf\"} %" PRId64 "\n", name, cum);
	evbuffer_add_printf(out, "%s_sum ", name);
	add_real(out, h->sum);
	evbuffer_add_printf(out, "%s_count %" PRId64 "\n", name, h->count);
}
