/* gwb-load's command line: the flags of the load generator (design "Load generator"), their
 * defaults, bounds and the usage text. Parsing never exits; the caller decides. */
#ifndef GWB_LOAD_OPTS_H
#define GWB_LOAD_OPTS_H

#include <stddef.h>
#include <stdint.h>

enum load_op { OP_SUBMIT, OP_REPLAY, OP_CANCEL, OP_COUNT };

#define OPTS_TEAMS_MAX 64
/* Requests of one run at most: every accepted task is kept (about 100 bytes) to be followed. */
#define OPTS_REQUESTS_MAX 1000000L

struct load_opts {
	const char *url, *token;
	const char *metrics_token; /* for /metrics (http.metrics_token); NULL: token */
	const char *redis, *prefix; /* dead letters from Redis when /metrics has no counter */
	const char *acked;          /* file the acknowledged task ids are appended to, or NULL */
	int connections;
	int closed;        /* closed loop; otherwise open loop at rate */
	double rate;       /* requests per second (open loop) */
	long count;        /* requests to send; 0 when bounded by duration */
	double duration_s; /* seconds of sending; 0 when bounded by count */
	char teams[OPTS_TEAMS_MAX][64];
	int nteams;
	int mix[OP_COUNT]; /* weights */
	long mem_mib, core_pct, task_seconds;
	int drain;
	double drain_timeout_s;
	int poll_ms;   /* pause between two passes over the task list in the drain */
	int timeout_s; /* time-out of one HTTP request */
	int json;
	uint64_t seed;
};

/* The usage text (static). */
const char *opts_usage(void);
/* Names of the operations ("submit", "replay", "cancel"). */
const char *opts_op_name(int op);

/* Fills o from argv (argv[0] is skipped) and the environment (GWB_URL, GWB_TOKEN, GWB_REDIS,
 * GWB_QUEUE_PREFIX). Returns 0; 1 when --help was asked; -1 on a usage error, with err saying
 * which flag and why. Strings in o point into argv or the environment. */
int opts_parse(struct load_opts *o, int argc, char **argv, char *err, size_t errlen);

#endif
