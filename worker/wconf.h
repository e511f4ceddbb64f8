/* The worker's settings: one declarative table (environment variable, flag, type, default,
 * bounds or allowed values), read once at start-up from the environment and then the command
 * line (flags win), read-only afterwards. */
#ifndef GWB_WORKER_WCONF_H
#define GWB_WORKER_WCONF_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>

struct wconf {
	char annotations_file[PATH_MAX]; /* GWB_ANNOTATIONS_FILE: the downward-API file */
	char experiment[16];             /* GWB_EXPERIMENT: "normal" or "overlimit" */
	double duration_s;               /* GWB_DURATION_SECONDS: how long the work runs */
	long period_ms;                  /* GWB_PERIOD_MS: one duty-cycle period */
	long progress_s;                 /* GWB_PROGRESS_SECONDS: between progress events */
	char proc_maps[PATH_MAX];        /* GWB_PROC_MAPS: where the probe reads mappings */
	char cuda_library[PATH_MAX];     /* GWB_CUDA_LIBRARY: the driver the probe dlopens */
	char termination_log[PATH_MAX];  /* GWB_TERMINATION_LOG: where the verdict goes at exit */
};

/* Fills c with the defaults, then the environment, then argv[1..argc) (`--flag value` or
 * `--flag=value`). Returns 0; 1 when --help was given (nothing else is checked); or GWB_EINVAL
 * with "NAME: reason" in err (the setting's environment name, or the flag given). */
int wconf_load(struct wconf *c, int argc, char **argv, char *err, size_t errlen);

/* Prints every setting with its flag, default and bounds. */
void wconf_usage(FILE *f);

/* Returns a new object of the effective settings, keyed by environment name (caller owns). */
json_t *wconf_to_json(const struct wconf *c);

#endif
