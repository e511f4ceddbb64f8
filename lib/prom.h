/* Prometheus text exposition (format 0.0.4) into an evbuffer: a family's HELP and TYPE lines,
 * samples with escaped label values, and histograms with fixed bucket bounds. Every /metrics in
 * the tree writes through it, so the format is decided here once. */
#ifndef GWB_PROM_H
#define GWB_PROM_H

#include <stddef.h>
#include <stdint.h>

struct evbuffer;

enum prom_type { PROM_COUNTER, PROM_GAUGE, PROM_HISTOGRAM };

/* One label of a sample; value is escaped when written (\\, \" and \n). */
struct prom_label {
	const char *name;
	const char *value;
};

/* Writes "# HELP name help" when help is not NULL (\\ and \n escaped), then "# TYPE name type". */
void prom_family(struct evbuffer *out, const char *name, enum prom_type type, const char *help);

/* Writes one sample: name, then {labels} when nlabels > 0, then v as a whole number. */
void prom_sample_int(struct evbuffer *out, const char *name, const struct prom_label *labels,
		     int nlabels, int64_t v);
/* The same with v written with six decimals ("0.250000"); +Inf, -Inf and NaN as Prometheus
 * spells them. */
void prom_sample_real(struct evbuffer *out, const char *name, const struct prom_label *labels,
		      int nlabels, double v);

/* A family of one unlabelled sample: its TYPE line (and HELP when help is not NULL), then
 * "name v". */
void prom_counter(struct evbuffer *out, const char *name, const char *help, int64_t v);
void prom_counter_real(struct evbuffer *out, const char *name, const char *help, double v);
void prom_gauge(struct evbuffer *out, const char *name, const char *help, int64_t v);

/* A histogram with fixed bucket bounds (ascending; +Inf implied), counted per bucket. */
#define PROM_HIST_MAX 16 /* buckets, +Inf included */
struct prom_hist {
	const double *bounds;         /* borrowed: lives as long as the histogram */
	int nbounds;                  /* <= PROM_HIST_MAX - 1 */
	int64_t counts[PROM_HIST_MAX]; /* per bucket, not cumulative; [nbounds] is +Inf */
	double sum;
	int64_t count;
};
/* Empties h and gives it bounds[0..nbounds) (at most PROM_HIST_MAX - 1; more are ignored). */
void prom_hist_init(struct prom_hist *h, const double *bounds, int nbounds);
/* Counts v into the first bucket whose bound is >= v (+Inf when none), and into _sum/_count. */
void prom_hist_observe(struct prom_hist *h, double v);
/* Writes h as the family name: TYPE (and HELP), a cumulative name_bucket{le="bound"} line per
 * bound ("%g") and le="+Inf", then name_sum (six decimals) and name_count. */
void prom_hist_write(struct evbuffer *out, const char *name, const char *help,
		     const struct prom_hist *h);

#endif
