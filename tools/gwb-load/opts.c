/* Flag parsing for gwb-load: "--name value" or "--name=value", every number bounded, every
 * error naming its flag. */
#include "tools/gwb-load/opts.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/dnslabel.h"

static const char usage_text[] =
    "usage: gwb-load --url URL --token T [--connections N] [--rate R | --closed]\n"
    "                [--duration S | --count N] [--teams a,b] [--mix submit=90,replay=5,cancel=5]\n"
    "                [--mem MIB --core PCT --task-seconds S] [--drain] [--drain-timeout S]\n"
    "                [--poll-ms MS] [--timeout S] [--redis URL] [--prefix P] [--seed N] [--acked FILE]\n"
    "                [--json]\n"
    "\n"
    "  --url URL           gwb-server (default $GWB_URL, else http://127.0.0.1:8080)\n"
    "  --token T           bearer token: the admin's, or a team's for its own team ($GWB_TOKEN)\n"
    "  --metrics-token T   bearer token for /metrics when --token is a team's: the server's\n"
    "                      http.metrics_token ($GWB_METRICS_TOKEN; default --token)\n"
    "  --connections N     keep-alive HTTP connections (default 8)\n"
    "  --rate R            open loop: R requests/s started on schedule, latency counted from\n"
    "                      the scheduled start\n"
    "  --closed            closed loop: each connection sends when its answer came (default)\n"
    "  --duration S        send for S seconds (default 10 when --count is not given)\n"
    "  --count N           send N requests\n"
    "  --teams a,b         teams the submissions go to, in turn (default alpha)\n"
    "  --mix OP=W,...      weights of submit, replay (an earlier submission again, same key\n"
    "                      and body) and cancel (an earlier task) (default 90,5,5)\n"
    "  --mem MIB --core PCT --task-seconds S\n"
    "                      each task's request (default 16 MiB, 1%, 1 s)\n"
    "  --drain             then follow every accepted task until it ended (final state and\n"
    "                      reservation released) and report the end-to-end figures\n"
    "  --drain-timeout S   give up the drain after S seconds (default 300)\n"
    "  --poll-ms MS        pause between passes over the task list (default 500)\n"
    "  --timeout S         time-out of one HTTP request (default 30)\n"
    "  --redis URL         read dead letters from Redis (redis://host:port/N or unix:///path)\n"
    "                      when /metrics has no gwb_intents_dead_lettered_total\n"
    "  --prefix P          Redis key prefix (default $GWB_QUEUE_PREFIX, else gwb)\n"
    "  --seed N            seed of the operation mix (default: from the clock)\n"
    "  --acked FILE        append the id of every task the server acknowledged (201) to FILE,\n"
    "                      one per line, as each answer comes (for checks after faults)\n"
    "  --json              the summary as one JSON object on stdout\n"
    "\n"
    "Progress goes to stderr once a second. Exit 0 when every check passed, 1 when one failed\n"
    "or the server could not be used, 2 on a usage error.\n";

static const char *const op_names[OP_COUNT] = {"submit", "replay", "cancel"};

const char *opts_usage(void)
{
	return usage_text;
}

const char *opts_op_name(int op)
{
	return op >= 0 && op < OP_COUNT ? op_names[op] : "?";
}

static int fail(char *err, size_t errlen, const char *flag, const char *why)
{
	snprintf(err, errlen, "--%s: %s", flag, why);
	return -1;
}

static int parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_double(const char *s, double min, double max, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_teams(struct load_opts *o, const char *v, char *err, size_t errlen)
{
	o->nteams = 0;
	for (const char *p = v;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);
		/* The characters and length of a team name; the server has the last word. */
		if (!dnslabel_valid(p, n, DNSLABEL_MAX, DNSLABEL_EDGE_HYPHEN))
			return fail(err, errlen, "teams",
			            "each team is 1-63 of a-z, 0-9 and '-', separated by commas");
		if (o->nteams == OPTS_TEAMS_MAX)
			return fail(err, errlen, "teams", "at most 64 teams");
		snprintf(o->teams[o->nteams++], sizeof o->teams[0], "%.*s", (int)n, p);
		if (!comma)
			break;
		p = comma + 1;
	}
	return 0;
}

static int parse_mix(struct load_opts *o, const char *v, char *err, size_t errlen)
{
	int seen[OP_COUNT] = {0};
	char buf[256];
	if (strlen(v) >= sizeof buf)
		return fail(err, errlen, "mix", "too long");
	snprintf(buf, sizeof buf, "%s", v);
	for (int i = 0; i < OP_COUNT; i++)
		o->mix[i] = 0;
	long total = 0;
	for (char *p = buf; p && *p;) {
		char *comma = strchr(p, ',');
		if (comma)
			*comma = '\0';
		char *eq = strchr(p, '=');
		int op = -1;
		if (eq) {
			*eq = '\0';
			for (int i = 0; i < OP_COUNT; i++)
				if (strcmp(p, op_names[i]) == 0)
					op = i;
		}
		long w;
		if (op < 0 || parse_long(eq + 1, 0, 1000000, &w) < 0)
			return fail(err, errlen, "mix",
			            "expected OP=WEIGHT,... with OP submit, replay or cancel and "
			            "WEIGHT 0-1000000");
		if (seen[op]++)
			return fail(err, errlen, "mix", "an operation is named twice");
		o->mix[op] = (int)w;
		total += w;
		p = comma ? comma + 1 : NULL;
	}
	if (o->mix[OP_SUBMIT] == 0)
		return fail(err, errlen, "mix",
		            "submit needs a weight above 0: replays and cancels act on submitted "
		            "tasks");
	if (total > 1000000)
		return fail(err, errlen, "mix", "the weights add up to more than 1000000");
	return 0;
}

static void defaults(struct load_opts *o)
{
	memset(o, 0, sizeof *o);
	const char *e = getenv("GWB_URL");
	o->url = e && *e ? e : "http://127.0.0.1:8080";
	e = getenv("GWB_TOKEN");
	o->token = e && *e ? e : NULL;
	e = getenv("GWB_METRICS_TOKEN");
	o->metrics_token = e && *e ? e : NULL;
	e = getenv("GWB_REDIS");
	o->redis = e && *e ? e : NULL;
	e = getenv("GWB_QUEUE_PREFIX");
	o->prefix = e && *e ? e : "gwb";
	o->connections = 8;
	o->closed = 1;
	snprintf(o->teams[0], sizeof o->teams[0], "alpha");
	o->nteams = 1;
	o->mix[OP_SUBMIT] = 90;
	o->mix[OP_REPLAY] = 5;
	o->mix[OP_CANCEL] = 5;
	o->mem_mib = 16;
	o->core_pct = 1;
	o->task_seconds = 1;
	o->drain_timeout_s = 300;
	o->poll_ms = 500;
	o->timeout_s = 30;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	o->seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
}

/* Takes "--name value" or "--name=value" at argv[*i]. Returns the value or NULL when argv[*i]
 * is not --name; *missing is set when --name has no value. */
static const char *value(int argc, char **argv, int *i, const char *name, int *missing)
{
	size_t n = strlen(name);
	const char *a = argv[*i];
	if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
		return NULL;
	if (a[2 + n] == '=')
		return a + 3 + n;
	if (a[2 + n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

static int is_flag(const char *a, const char *name)
{
	return strncmp(a, "--", 2) == 0 && strcmp(a + 2, name) == 0;
}

/* Checks what only the whole command line can tell. */
static int check_combination(struct load_opts *o, int rate_set, int closed_set, char *err,
                             size_t errlen)
{
	if (!o->token)
		return fail(err, errlen, "token", "required (or set GWB_TOKEN)");
	if (rate_set && closed_set)
		return fail(err, errlen, "rate",
		            "open loop (--rate) and --closed exclude each other");
	o->closed = !rate_set;
	if (o->count && o->duration_s > 0)
		return fail(err, errlen, "count", "--count and --duration exclude each other");
	if (!o->count && o->duration_s <= 0)
		o->duration_s = 10;
	if (!o->closed && o->duration_s > 0 && o->rate * o->duration_s > (double)OPTS_REQUESTS_MAX)
		return fail(err, errlen, "rate", "rate x duration is above 1,000,000 requests");
	if (strncmp(o->url, "http://", 7) != 0)
		return fail(err, errlen, "url", "must start with http://");
	return 0;
}

int opts_parse(struct load_opts *o, int argc, char **argv, char *err, size_t errlen)
{
	defaults(o);
	int rate_set = 0, closed_set = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v;
		int missing = 0;
		long l;
		if (is_flag(a, "help") || strcmp(a, "-h") == 0)
			return 1;
		if (is_flag(a, "closed")) {
			closed_set = 1;
		} else if (is_flag(a, "drain")) {
			o->drain = 1;
		} else if (is_flag(a, "json")) {
			o->json = 1;
		} else if ((v = value(argc, argv, &i, "url", &missing))) {
			o->url = v;
		} else if ((v = value(argc, argv, &i, "token", &missing))) {
			o->token = *v ? v : NULL;
		} else if ((v = value(argc, argv, &i, "metrics-token", &missing))) {
			o->metrics_token = *v ? v : NULL;
		} else if ((v = value(argc, argv, &i, "redis", &missing))) {
			o->redis = *v ? v : NULL;
		} else if ((v = value(argc, argv, &i, "prefix", &missing))) {
			o->prefix = v;
		} else if ((v = value(argc, argv, &i, "acked", &missing))) {
			if (!*v)
				return fail(err, errlen, "acked", "needs a file name");
			o->acked = v;
		} else if ((v = value(argc, argv, &i, "connections", &missing))) {
			if (parse_long(v, 1, 1024, &l) < 0)
				return fail(err, errlen, "connections", "must be 1-1024");
			o->connections = (int)l;
		} else if ((v = value(argc, argv, &i, "rate", &missing))) {
			if (parse_double(v, 0.001, 1000000, &o->rate) < 0)
				return fail(err, errlen, "rate", "must be a number, 0.001-1000000");
			rate_set = 1;
		} else if ((v = value(argc, argv, &i, "duration", &missing))) {
			if (parse_double(v, 0.001, 86400, &o->duration_s) < 0)
				return fail(err, errlen, "duration",
				            "must be seconds, 0.001-86400");
		} else if ((v = value(argc, argv, &i, "count", &missing))) {
			if (parse_long(v, 1, OPTS_REQUESTS_MAX, &o->count) < 0)
				return fail(err, errlen, "count", "must be 1-1000000");
		} else if ((v = value(argc, argv, &i, "teams", &missing))) {
			if (parse_teams(o, v, err, errlen) < 0)
				return -1;
		} else if ((v = value(argc, argv, &i, "mix", &missing))) {
			if (parse_mix(o, v, err, errlen) < 0)
				return -1;
		} else if ((v = value(argc, argv, &i, "mem", &missing))) {
			if (parse_long(v, 1, 1 << 30, &o->mem_mib) < 0)
				return fail(err, errlen, "mem", "must be MiB, 1-1073741824");
		} else if ((v = value(argc, argv, &i, "core", &missing))) {
			if (parse_long(v, 1, 100, &o->core_pct) < 0)
				return fail(err, errlen, "core", "must be a percent, 1-100");
		} else if ((v = value(argc, argv, &i, "task-seconds", &missing))) {
			if (parse_long(v, 1, 86400, &o->task_seconds) < 0)
				return fail(err, errlen, "task-seconds",
				            "must be seconds, 1-86400");
		} else if ((v = value(argc, argv, &i, "drain-timeout", &missing))) {
			if (parse_double(v, 0.1, 86400, &o->drain_timeout_s) < 0)
				return fail(err, errlen, "drain-timeout",
				            "must be seconds, 0.1-86400");
		} else if ((v = value(argc, argv, &i, "poll-ms", &missing))) {
			if (parse_long(v, 10, 60000, &l) < 0)
				return fail(err, errlen, "poll-ms", "must be 10-60000");
			o->poll_ms = (int)l;
		} else if ((v = value(argc, argv, &i, "timeout", &missing))) {
			if (parse_long(v, 1, 3600, &l) < 0)
				return fail(err, errlen, "timeout", "must be seconds, 1-3600");
			o->timeout_s = (int)l;
		} else if ((v = value(argc, argv, &i, "seed", &missing))) {
			char *end;
			errno = 0;
			unsigned long long s = strtoull(v, &end, 10);
			if (errno || end == v || *end)
				return fail(err, errlen, "seed", "must be an unsigned integer");
			o->seed = s;
		} else if (missing) {
			return fail(err, errlen, a + 2, "needs a value");
		} else {
			snprintf(err, errlen, "%s: unknown flag", a);
			return -1;
		}
	}
	return check_combination(o, rate_set, closed_set, err, errlen);
}
