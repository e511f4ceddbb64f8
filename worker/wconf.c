/* The worker's settings table and its loader. */
#include "worker/wconf.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "worker/wlog.h"

enum wtype { W_STR, W_ENUM, W_INT, W_SECONDS };

struct wsetting {
	const char *env;
	const char *flag;
	enum wtype type;
	const char *def;
	double min, max;           /* W_INT, W_SECONDS */
	const char *const *values; /* W_ENUM, NULL-terminated */
	size_t off, size;
	const char *help;
};

static const char *const experiments[] = {"normal", "overlimit", NULL};

#define FIELD(f) offsetof(struct wconf, f), sizeof(((struct wconf *)0)->f)

/* The duration bound is a week: a task longer than that is a mistake, not a workload. */
static const struct wsetting table[] = {
    {"GWB_ANNOTATIONS_FILE", "--annotations-file", W_STR, "/etc/podinfo/annotations", 0, 0, NULL,
     FIELD(annotations_file), "downward-API annotations file"},
    {"GWB_EXPERIMENT", "--experiment", W_ENUM, "normal", 0, 0, experiments, FIELD(experiment),
     "normal: the working set fits; overlimit: budget + 128 MiB"},
    {"GWB_DURATION_SECONDS", "--duration-seconds", W_SECONDS, "60", 0, 604800, NULL,
     FIELD(duration_s), "how long the work runs"},
    {"GWB_PERIOD_MS", "--period-ms", W_INT, "100", 10, 1000, NULL, FIELD(period_ms),
     "duty-cycle period"},
    {"GWB_PROGRESS_SECONDS", "--progress-seconds", W_INT, "1", 1, 3600, NULL, FIELD(progress_s),
     "seconds between progress events"},
    {"GWB_PROC_MAPS", "--proc-maps", W_STR, "/proc/self/maps", 0, 0, NULL, FIELD(proc_maps),
     "memory map the isolation probe reads"},
    {"GWB_CUDA_LIBRARY", "--cuda-library", W_STR, "libcuda.so.1", 0, 0, NULL, FIELD(cuda_library),
     "CUDA driver the isolation probe tries to dlopen"},
    {"GWB_TERMINATION_LOG", "--termination-log", W_STR, "/dev/termination-log", 0, 0, NULL,
     FIELD(termination_log), "file the verdict is written to at exit (terminationMessagePath)"},
};
#define NSETTINGS (sizeof table / sizeof table[0])

static int bad(char *err, size_t errlen, const char *name, const char *reason)
{
	snprintf(err, errlen, "%s: %s", name, reason);
	return GWB_EINVAL;
}

static int set_number(const struct wsetting *s, const char *name, const char *v, void *dst,
                      char *err, size_t errlen)
{
	char reason[160];
	char *end;
	errno = 0;
	double d = s->type == W_INT ? (double)strtol(v, &end, 10) : strtod(v, &end);
	if (!v[0] || *end || errno || !isfinite(d) || d < s->min || d > s->max) {
		snprintf(reason, sizeof reason, "\"%.40s\" is not %s from %g to %g", v,
		         s->type == W_INT ? "an integer" : "a number", s->min, s->max);
		return bad(err, errlen, name, reason);
	}
	if (s->type == W_INT)
		*(long *)dst = (long)d;
	else
		*(double *)dst = d;
	return 0;
}

static int set_one(struct wconf *c, const struct wsetting *s, const char *name, const char *v,
                   char *err, size_t errlen)
{
	void *dst = (char *)c + s->off;
	switch (s->type) {
	case W_STR:
		if (!v[0] || strlen(v) >= s->size)
			return bad(err, errlen, name,
			           "must be a non-empty path shorter than PATH_MAX");
		snprintf(dst, s->size, "%s", v);
		return 0;
	case W_ENUM:
		for (const char *const *e = s->values; *e; e++) {
			if (strcmp(*e, v) == 0) {
				snprintf(dst, s->size, "%s", v);
				return 0;
			}
		}
		return bad(err, errlen, name, "must be one of: normal overlimit");
	case W_INT:
	case W_SECONDS:
		return set_number(s, name, v, dst, err, errlen);
	}
	return GWB_EINVAL;
}

static const struct wsetting *find_flag(const char *arg, size_t len)
{
	for (size_t i = 0; i < NSETTINGS; i++)
		if (strlen(table[i].flag) == len && strncmp(table[i].flag, arg, len) == 0)
			return &table[i];
	return NULL;
}

static int load_flags(struct wconf *c, int argc, char **argv, char *err, size_t errlen)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *eq = strchr(a, '=');
		size_t len = eq ? (size_t)(eq - a) : strlen(a);
		const struct wsetting *s = find_flag(a, len);
		if (!s)
			return bad(err, errlen, a, "unknown flag (see --help)");
		const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
		if (!v)
			return bad(err, errlen, s->flag, "needs a value");
		int rc = set_one(c, s, s->flag, v, err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

int wconf_load(struct wconf *c, int argc, char **argv, char *err, size_t errlen)
{
	memset(c, 0, sizeof *c);
	err[0] = '\0';
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	for (size_t i = 0; i < NSETTINGS; i++) {
		const char *env = getenv(table[i].env);
		/* Defaults are checked by the same code, so a bad default fails loudly. */
		int rc = set_one(c, &table[i], table[i].env, table[i].def, err, errlen);
		if (rc == 0 && env)
			rc = set_one(c, &table[i], table[i].env, env, err, errlen);
		if (rc)
			return rc;
	}
	return load_flags(c, argc, argv, err, errlen);
}

void wconf_usage(FILE *f)
{
	fprintf(f, "usage: gwb-worker [--flag value]...\n"
	           "Settings come from the environment; a flag overrides its variable.\n\n");
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct wsetting *s = &table[i];
		fprintf(f, "  %-20s %-22s %s (default %s", s->flag, s->env, s->help, s->def);
		if (s->type == W_INT || s->type == W_SECONDS)
			fprintf(f, ", %g..%g", s->min, s->max);
		fprintf(f, ")\n");
	}
	fprintf(f, "\nExit codes: 0 done, 2 no or malformed budget (or bad settings), 42 the\n"
	           "simulated ledger refused an allocation, 143 terminated by SIGTERM.\n");
}

json_t *wconf_to_json(const struct wconf *c)
{
	json_t *o = json_object();
	for (size_t i = 0; i < NSETTINGS; i++) {
		const struct wsetting *s = &table[i];
		const void *src = (const char *)c + s->off;
		json_t *v = s->type == W_INT       ? json_integer(*(const long *)src)
		            : s->type == W_SECONDS ? json_real(*(const double *)src)
		                                   : wlog_str(src);
		json_object_set_new(o, s->env, v);
	}
	return o;
}
