/* A bounded parser of the Prometheus text exposition format (0.0.4), for the samples a
 * monitor serves: names, labels (escapes \\ \" \n, spaces around them, a trailing comma),
 * values as Go's ParseFloat reads them (exponents, NaN, +Inf, -Inf) and optional timestamps
 * (ms). HELP, TYPE and other comment lines are skipped. A line that breaks the grammar, or
 * whose name, label count or label value passes the bounds below, is counted and skipped: a
 * monitor's garbage costs one pass over the text and nothing else. It never allocates. */
#ifndef GWB_PROMPARSE_H
#define GWB_PROMPARSE_H

#include <stddef.h>
#include <stdint.h>

#define PROMP_NAME_MAX 128   /* a metric or label name, with its NUL */
#define PROMP_VALUE_MAX 256  /* a label value after unescaping, with its NUL */
#define PROMP_LABELS_MAX 24  /* labels of one sample */

struct promp_label {
	char name[PROMP_NAME_MAX];
	char value[PROMP_VALUE_MAX];
};

struct promp_sample {
	char name[PROMP_NAME_MAX];
	int nlabels;
	struct promp_label labels[PROMP_LABELS_MAX];
	double value;
	int has_ts;
	int64_t ts_ms;
};

/* What one parse saw. */
struct promp_stats {
	size_t lines;     /* lines read, blank and comment lines included */
	size_t samples;   /* samples handed to the callback */
	size_t bad_lines; /* lines skipped as malformed or out of bounds */
	int truncated;    /* max_samples was reached before the end */
};

/* Called for each sample; a non-zero return stops the parse. s is valid only during the call. */
typedef int promp_fn(const struct promp_sample *s, void *arg);

/* Parses buf[0..len) (no NUL needed; NUL bytes make their line bad), calling fn for at most
 * max_samples samples. *st (may be NULL) gets the counts. Returns 0, or the callback's
 * non-zero value when it stopped the parse. */
int promp_parse(const char *buf, size_t len, size_t max_samples, promp_fn *fn, void *arg,
		struct promp_stats *st);

/* The value of the sample's first label called name, or NULL. */
const char *promp_label(const struct promp_sample *s, const char *name);

/* Parses one sample line (without its newline) into *s: 0, or -1 when it is not one. */
int promp_parse_line(const char *line, size_t len, struct promp_sample *s);

#endif
