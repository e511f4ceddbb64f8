/* gwbctl: the command-line client of gpu-workbench. Every command but `intents` speaks the HTTP
 * API through lib/httpc (blocking: a CLI has no event loop to keep free); `intents` reads the
 * Redis stream directly. Answers are shown as text for people (on a terminal), as the whole JSON
 * body (when stdout is not a terminal, or -o json), or as names only (-o name, -q). Errors go to
 * stderr with exit 1 for a refused or failed request and 2 for a usage error. */
#include <errno.h>
#include <stdarg.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/addr.h"
#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/dnslabel.h"
#include "lib/httpc.h"
#include "tools/gwbctl/intents.h"
#include "tools/gwbctl/show.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
#define MAX_POS 4
/* The API's largest page (server/api/api_tasks.c LIST_LIMIT_MAX). */
#define PAGE_MAX 500
/* list --active and cancel --all stop after this many tasks (then say so). */
#define ACTIVE_MAX 10000

static const char usage_text[] =
	"usage: gwbctl [--url URL] [--token TOKEN] [--redis URL] [--prefix P] [-o text|json|name]\n"
	"              COMMAND ...\n"
	"\n"
	"  submit --team T --mem MIB --core PCT [--count N] [--duration S] [--qos LS|BE]\n"
	"         [--experiment normal|overlimit] [--name NAME] [--key IDEMPOTENCY_KEY] [--dry-run]\n"
	"         [--on-quota-full refuse|wait]\n"
	"  get ID                      one task\n"
	"  list [--team T] [--state S] [--limit N] [--cursor C]\n"
	"  list --active [--team T] [--limit N]\n"
	"                              every task that holds quota (queued, creating, pending,\n"
	"                              running, unknown, cancelling)\n"
	"  cancel ID                   request the cancel of a task (idempotent)\n"
	"  cancel --all --team T --yes cancel every active or waiting task of team T\n"
	"  events ID                   a task's history\n"
	"  logs ID [-f] [--tail N]     the last N lines of the task's Pod log (default 100, at\n"
	"                              most 10000), printed as they are whatever -o says; -f\n"
	"                              (--follow) goes on printing until the container ends\n"
	"  wait ID [--state S] [--reason R] [--released] [--timeout SECONDS]\n"
	"                              poll the task until its state is S (its reason R, its\n"
	"                              reservation released: each that is given); exit 1 with\n"
	"                              the last state on time-out (default 60 s) or when it\n"
	"                              ended otherwise\n"
	"  devices                     every card: health, memory and core used/total, tasks\n"
	"  teams [TEAM]                quotas and reservations\n"
	"  teams set TEAM --mem MIB --core PCT [--token T] [--default-on-quota-full refuse|wait]\n"
	"         [--queueing strict|best_effort]\n"
	"                              (admin) create or change a team's quota, token and line\n"
	"  queue [--team T] [--limit N] [--cursor C]\n"
	"                              the team's tasks waiting for quota, in line order, each\n"
	"                              with its place and predicted admission (without --team:\n"
	"                              every team the token sees)\n"
	"  audit                       (admin) stored quota totals against the tasks, tasks\n"
	"                              against the cluster; exit 1 when anything drifted\n"
	"  audit repair                (admin) set each team's totals to its tasks' sum\n"
	"  intents [--count N] [--dead]\n"
	"                              the last N entries of the intent stream (or its\n"
	"                              dead-letter stream) read from Redis, as JSON\n"
	"\n"
	"Output: -o text (status line and summary; the default on a terminal), -o json (the whole\n"
	"body; the default when stdout is not a terminal), -o name or -q (only the ids).\n"
	"Global flags may come before or after the command; after it, a command's own flag of\n"
	"the same name wins (teams set --token). Defaults come from GWB_URL\n"
	"(http://127.0.0.1:8080), GWB_TOKEN, GWB_REDIS and GWB_QUEUE_PREFIX (gwb).\n";

/* The states that hold quota: list --active shows them, cancel --all cancels all but the last. */
static const char *const active_states[] = { "queued",  "creating", "pending",
					     "running", "unknown",  "cancelling" };
#define NACTIVE (sizeof active_states / sizeof active_states[0])

struct opts {
	const char *url, *token, *redis, *prefix;
	const char *url_src, *redis_src; /* where each came from, for refusals */
	const char *output;              /* NULL: by terminal */
	enum show_mode mode;
	int batch;                       /* cancel --all: stdout holds one document at the end */
	struct httpc *http;
};

/* One flag of a command: "--name VALUE" (or "--name=VALUE") when takes_value, else "--name". */
struct flag {
	const char *name;
	int takes_value;
	const char *value; /* after parsing: the value, or "" for a switch that was given */
};

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("gwbctl: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n(gwbctl --help lists the commands)\n", stderr);
	return EXIT_USAGE;
}

/* Matches argv[*i] against "--name", "--name=V" or "--name V". Returns 1 and sets *val (NULL
 * for a switch), 0 when it is not this flag, -1 when a value is missing or a switch has one. */
static int match(int argc, char **argv, int *i, const char *name, int takes_value,
		 const char **val)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, n) != 0)
		return 0;
	const char *rest = a + 2 + n;
	if (*rest != '\0' && *rest != '=')
		return 0;
	*val = NULL;
	if (!takes_value)
		return *rest ? -1 : 1;
	if (*rest == '=') {
		*val = rest + 1;
		return 1;
	}
	if (*i + 1 >= argc)
		return -1;
	*val = argv[++*i];
	return 1;
}

/* The global flags, wherever they appear. Returns 1 when argv[*i] was one, 0 when not, or the
 * exit code of a usage error (as a negative number). */
static int global_flag(struct opts *o, int argc, char **argv, int *i)
{
	static const char *const names[] = { "url", "token", "redis", "prefix", "output" };
	const char *a = argv[*i], *v;
	if (strcmp(a, "-q") == 0) {
		o->output = "name";
		return 1;
	}
	if (strcmp(a, "-o") == 0) {
		if (*i + 1 >= argc)
			return -usage("-o needs a value (text, json or name)");
		o->output = argv[++*i];
		return 1;
	}
	if (strncmp(a, "-o", 2) == 0 && a[2] != '-') {
		o->output = a[2] == '=' ? a + 3 : a + 2;
		return 1;
	}
	for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
		int m = match(argc, argv, i, names[k], 1, &v);
		if (m < 0)
			return -usage("--%s needs a value", names[k]);
		if (m == 0)
			continue;
		if (k == 0) {
			o->url = v;
			o->url_src = "--url";
		} else if (k == 1) {
			o->token = v;
		} else if (k == 2) {
			o->redis = v;
			o->redis_src = "--redis";
		} else if (k == 3) {
			o->prefix = v;
		} else {
			o->output = v;
		}
		return 1;
	}
	return 0;
}

/* Parses a command's arguments: its flags first, then the global ones, the rest positional
 * (at most maxpos). Then checks the addresses and settles the output mode. Returns 0 or a
 * usage exit code (after the message). */
static int parse(struct opts *o, const char *cmd, int argc, char **argv, struct flag *flags,
		 const char **pos, int maxpos, int *npos)
{
	*npos = 0;
	for (int i = 0; i < argc; i++) {
		int done = 0;
		for (struct flag *f = flags; f && f->name && !done; f++) {
			const char *v;
			int m = match(argc, argv, &i, f->name, f->takes_value, &v);
			if (m < 0)
				return f->takes_value ? usage("%s: --%s needs a value", cmd, f->name)
						      : usage("%s: --%s takes no value", cmd, f->name);
			if (m > 0) {
				f->value = v ? v : "";
				done = 1;
			}
		}
		if (done)
			continue;
		int g = global_flag(o, argc, argv, &i);
		if (g < 0)
			return -g;
		if (g > 0)
			continue;
		if (argv[i][0] == '-' && argv[i][1] != '\0')
			return usage("%s: unknown flag %s", cmd, argv[i]);
		if (*npos >= maxpos)
			return usage("%s: unexpected argument '%s'", cmd, argv[i]);
		pos[(*npos)++] = argv[i];
	}
	struct addr ad;
	char why[200];
	if (addr_parse(o->url, ADDR_F_HTTP, &ad, why, sizeof why) < 0) {
		fprintf(stderr, "gwbctl: %s: %s\n", o->url_src, why);
		return EXIT_USAGE;
	}
	if (o->redis && o->redis[0] &&
	    addr_parse(o->redis, ADDR_F_REDIS | ADDR_F_UNIX, &ad, why, sizeof why) < 0) {
		fprintf(stderr, "gwbctl: %s: %s\n", o->redis_src, why);
		return EXIT_USAGE;
	}
	if (!o->output)
		o->mode = isatty(STDOUT_FILENO) ? SHOW_TEXT : SHOW_JSON;
	else if (show_mode_parse(o->output, &o->mode) < 0)
		return usage("-o must be text, json or name, not '%s'", o->output);
	return 0;
}

static const char *flag_val(const struct flag *flags, const char *name)
{
	for (const struct flag *f = flags; f->name; f++)
		if (strcmp(f->name, name) == 0)
			return f->value;
	return NULL;
}

/* Reads --name's value as an integer in [min, max] into *out (untouched when absent). Returns
 * 0, or the usage exit code naming the flag. */
static int int_flag(const struct flag *flags, const char *cmd, const char *name, long min,
		    long max, long *out)
{
	const char *s = flag_val(flags, name);
	if (!s)
		return 0;
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max) {
		char range[64];
		snprintf(range, sizeof range, "from %ld to %ld", min, max);
		fprintf(stderr, "gwbctl: %s: --%s must be a whole number %s, not '%s'\n", cmd, name,
			range, s);
		return EXIT_USAGE;
	}
	*out = v;
	return 0;
}

/* Path segment check: ids and team names are made of a DNS label's characters (1-64 of them,
 * '-' anywhere), so they need no escaping in a URL; the server checks its exact rule. */
static int url_safe(const char *s)
{
	return dnslabel_valid(s, strlen(s), 64, DNSLABEL_EDGE_HYPHEN);
}

/* ---- HTTP ---- */

/* One request. On a 2xx answer returns 0 with r filled (the caller frees it). Otherwise prints
 * the failure (stderr; in JSON mode the error body on stdout too), frees r and returns 1. */
static void api_url(const struct opts *o, const char *path, char *url, size_t len)
{
	size_t base = strlen(o->url);
	while (base && o->url[base - 1] == '/') /* --url http://h:8080/ is http://h:8080 */
		base--;
	snprintf(url, len, "%.*s%s", (int)base, o->url, path);
}

/* Sends req (its url and token filled here); the same returns as api. */
static int api_do(const struct opts *o, struct httpc_req *req, const char *path,
		  struct httpc_resp *r)
{
	char url[2048];
	api_url(o, path, url, sizeof url);
	req->url = url;
	req->token = o->token && o->token[0] ? o->token : NULL;
	const char *method = req->method ? req->method : "GET";
	if (httpc_do(o->http, req, r) != 0) {
		fprintf(stderr, "gwbctl: %s %s: %s\n", method, url, r->error);
		httpc_resp_free(r);
		return EXIT_FAIL;
	}
	if (r->status >= 200 && r->status < 300)
		return 0;
	json_t *e = json_object_get(r->json, "error");
	const char *ec = json_string_value(json_object_get(e, "code"));
	const char *em = json_string_value(json_object_get(e, "message"));
	fprintf(stderr, "gwbctl: %s %s: HTTP %ld %s: %s\n", method, path, r->status,
		ec ? ec : "error", em ? em : r->body);
	if (e && o->mode == SHOW_JSON && !o->batch) {
		show_json(stdout, r->json);
	} else if (json_object_size(e) > 2) {
		/* The details beside code and message (requested, reserved, quota, field...). */
		json_t *d = json_deep_copy(e);
		json_object_del(d, "code");
		json_object_del(d, "message");
		char *s = json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
		fprintf(stderr, "gwbctl: details: %s\n", s ? s : "");
		gwb_free(s);
		json_decref(d);
	}
	httpc_resp_free(r);
	return EXIT_FAIL;
}

static int api(const struct opts *o, const char *method, const char *path, const json_t *body,
	       const char *idem_key, struct httpc_resp *r)
{
	char key[200];
	const char *headers[2] = { NULL, NULL };
	if (idem_key) {
		snprintf(key, sizeof key, "Idempotency-Key: %s", idem_key);
		headers[0] = key;
	}
	struct httpc_req req = { .method = method, .json = body, .headers = headers };
	return api_do(o, &req, path, r);
}

/* GET path, then the answer shown by fn; the status line first in text mode. */
static int get_show(const struct opts *o, const char *path,
		    void (*fn)(FILE *, enum show_mode, const json_t *))
{
	struct httpc_resp r;
	int rc = api(o, "GET", path, NULL, NULL, &r);
	if (rc)
		return rc;
	if (o->mode == SHOW_TEXT)
		show_status(stdout, r.status, 0);
	fn(stdout, o->mode, r.json);
	httpc_resp_free(&r);
	return 0;
}

/* ---- commands ---- */

static int cmd_submit(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "team", 1, NULL },     { "name", 1, NULL },  { "qos", 1, NULL },
			    { "experiment", 1, NULL }, { "key", 1, NULL }, { "mem", 1, NULL },
			    { "core", 1, NULL },      { "count", 1, NULL }, { "duration", 1, NULL },
			    { "dry-run", 0, NULL },   { "on-quota-full", 1, NULL }, { NULL, 0, NULL } };
	static const char *const ints[][2] = { { "mem", "gpu_memory_mib" },
					       { "core", "gpu_core_percent" },
					       { "count", "gpu_count" },
					       { "duration", "duration_seconds" } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "submit", argc, argv, f, pos, 0, &npos);
	if (rc)
		return rc;
	if (!flag_val(f, "team") || !flag_val(f, "mem") || !flag_val(f, "core")) {
		char missing[64] = "";
		static const char *const req[] = { "team", "mem", "core" };
		for (int k = 0; k < 3; k++)
			if (!flag_val(f, req[k]))
				snprintf(missing + strlen(missing), sizeof missing - strlen(missing),
					 " --%s", req[k]);
		return usage("submit needs --team, --mem and --core (missing:%s)", missing);
	}
	json_t *b = json_object();
	for (int k = 0; k < 4; k++) {
		const char *name = f[k].name;
		if (f[k].value)
			json_object_set_new(b, name, json_string(f[k].value));
	}
	for (size_t k = 0; k < 4; k++) {
		long v = -1;
		if ((rc = int_flag(f, "submit", ints[k][0], 0, 1L << 40, &v))) {
			json_decref(b);
			return rc;
		}
		if (v >= 0)
			json_object_set_new(b, ints[k][1], json_integer(v));
	}
	if (flag_val(f, "on-quota-full"))
		json_object_set_new(b, "on_quota_full", json_string(flag_val(f, "on-quota-full")));
	int dry = flag_val(f, "dry-run") != NULL;
	struct httpc_resp r;
	rc = api(o, "POST", dry ? "/v1/tasks?dry_run=true" : "/v1/tasks", b, flag_val(f, "key"), &r);
	json_decref(b);
	if (rc)
		return rc;
	if (o->mode == SHOW_TEXT)
		show_status(stdout, r.status, r.replayed);
	if (dry)
		show_dry_run(stdout, o->mode, r.json);
	else
		show_task(stdout, o->mode, r.json);
	httpc_resp_free(&r);
	return 0;
}

static int cmd_get_events(struct opts *o, const char *cmd, int argc, char **argv)
{
	const char *pos[MAX_POS];
	int npos, rc = parse(o, cmd, argc, argv, NULL, pos, 1, &npos);
	if (rc)
		return rc;
	if (npos != 1 || !url_safe(pos[0]))
		return usage("%s: expected one task id", cmd);
	char path[160];
	snprintf(path, sizeof path, "/v1/tasks/%s%s", pos[0],
		 strcmp(cmd, "events") == 0 ? "/events" : "");
	return get_show(o, path, strcmp(cmd, "events") == 0 ? show_events : show_task);
}

static void print_bytes(void *arg, const char *data, size_t len)
{
	(void)arg;
	fwrite(data, 1, len, stdout);
	fflush(stdout); /* a followed log is read as it comes */
}

static int cmd_logs(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "tail", 1, NULL }, { "follow", 0, NULL }, { NULL, 0, NULL } };
	char **args = gwb_calloc((size_t)argc + 1, sizeof *args);
	for (int k = 0; k < argc; k++)
		args[k] = strcmp(argv[k], "-f") == 0 ? "--follow" : argv[k];
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "logs", argc, args, f, pos, 1, &npos);
	gwb_free(args);
	if (rc)
		return rc;
	if (npos != 1 || !url_safe(pos[0]))
		return usage("logs: expected one task id");
	long tail = 100;
	if ((rc = int_flag(f, "logs", "tail", 0, 10000, &tail)))
		return rc;
	int follow = flag_val(f, "follow") != NULL;
	char path[200];
	snprintf(path, sizeof path, "/v1/tasks/%s/logs?tail=%ld%s", pos[0], tail,
		 follow ? "&follow=true" : "");
	struct httpc_req req = { .method = "GET", .on_data = print_bytes,
				 .timeout_ms = follow ? -1 : 0 };
	struct httpc_resp r;
	if ((rc = api_do(o, &req, path, &r)))
		return rc;
	httpc_resp_free(&r);
	return 0;
}

/* Appends every task in state (of team, when not NULL) to out, page by page. */
static int list_state(const struct opts *o, const char *team, const char *state, json_t *out)
{
	char cursor[32] = "";
	do {
		char path[256];
		snprintf(path, sizeof path, "/v1/tasks?state=%s&limit=%d%s%s%s%s", state, PAGE_MAX,
			 team ? "&team=" : "", team ? team : "", cursor[0] ? "&cursor=" : "",
			 cursor);
		struct httpc_resp r;
		int rc = api(o, "GET", path, NULL, NULL, &r);
		if (rc)
			return rc;
		json_array_extend(out, json_object_get(r.json, "tasks"));
		const char *next = json_string_value(json_object_get(r.json, "next_cursor"));
		snprintf(cursor, sizeof cursor, "%s", next ? next : "");
		httpc_resp_free(&r);
	} while (cursor[0] && json_array_size(out) < ACTIVE_MAX);
	return 0;
}

/* Newest first, as the API lists them. */
static int newest_first(const void *a, const void *b)
{
	const json_t *x = *(const json_t *const *)a, *y = *(const json_t *const *)b;
	const char *cx = json_string_value(json_object_get(x, "created_at"));
	const char *cy = json_string_value(json_object_get(y, "created_at"));
	int c = strcmp(cy ? cy : "", cx ? cx : "");
	if (c)
		return c;
	const char *ix = json_string_value(json_object_get(x, "id"));
	const char *iy = json_string_value(json_object_get(y, "id"));
	return strcmp(iy ? iy : "", ix ? ix : "");
}

/* Every task of team (or all teams) in the first nstates of active_states, newest first;
 * *out is a new array. Returns 0 or the exit code of a failed request. */
static int active_tasks(const struct opts *o, const char *team, size_t nstates, json_t **out)
{
	json_t *all = json_array();
	for (size_t i = 0; i < nstates; i++) {
		int rc = list_state(o, team, active_states[i], all);
		if (rc) {
			json_decref(all);
			return rc;
		}
	}
	size_t n = json_array_size(all);
	json_t **v = gwb_calloc(n ? n : 1, sizeof *v);
	for (size_t i = 0; i < n; i++)
		v[i] = json_incref(json_array_get(all, i));
	qsort(v, n, sizeof *v, newest_first);
	*out = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(*out, v[i]);
	gwb_free(v);
	json_decref(all);
	return 0;
}

static int cmd_list(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "team", 1, NULL },  { "state", 1, NULL },  { "limit", 1, NULL },
			    { "cursor", 1, NULL }, { "active", 0, NULL }, { NULL, 0, NULL } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "list", argc, argv, f, pos, 0, &npos);
	if (rc)
		return rc;
	for (int k = 0; k < 4; k++)
		if (f[k].value && !url_safe(f[k].value))
			return usage("list: --%s takes lowercase letters, digits and '-', not '%s'",
				     f[k].name, f[k].value);
	long limit = 0;
	if ((rc = int_flag(f, "list", "limit", 1, PAGE_MAX, &limit)))
		return rc;
	if (!flag_val(f, "active")) {
		char path[512];
		size_t used = (size_t)snprintf(path, sizeof path, "/v1/tasks");
		for (int k = 0; k < 4; k++)
			if (f[k].value)
				used += (size_t)snprintf(path + used, sizeof path - used, "%c%s=%s",
							 strchr(path, '?') ? '&' : '?', f[k].name,
							 f[k].value);
		return get_show(o, path, show_tasks);
	}
	if (flag_val(f, "state") || flag_val(f, "cursor"))
		return usage("list: --active cannot be combined with %s",
			     flag_val(f, "state") ? "--state" : "--cursor");
	json_t *tasks;
	if ((rc = active_tasks(o, flag_val(f, "team"), NACTIVE, &tasks)))
		return rc;
	while (limit && json_array_size(tasks) > (size_t)limit)
		json_array_remove(tasks, json_array_size(tasks) - 1);
	json_t *out = json_pack("{s:o, s:n}", "tasks", tasks, "next_cursor");
	if (o->mode == SHOW_TEXT)
		show_status(stdout, 200, 0);
	show_tasks(stdout, o->mode, out);
	json_decref(out);
	return 0;
}

static int cancel_one(const struct opts *o, const char *id, json_t *collect)
{
	char path[160];
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	struct httpc_resp r;
	int rc = api(o, "POST", path, NULL, NULL, &r);
	if (rc)
		return rc;
	if (collect) {
		json_array_append(collect, r.json);
		if (o->mode == SHOW_TEXT)
			printf("%ld %s %s (%s)\n", r.status, id,
			       json_string_value(json_object_get(r.json, "state")),
			       json_string_value(json_object_get(r.json, "cancel")));
		else if (o->mode == SHOW_NAME)
			printf("%s\n", id);
	} else {
		if (o->mode == SHOW_TEXT)
			show_status(stdout, r.status, 0);
		show_task(stdout, o->mode, r.json);
	}
	httpc_resp_free(&r);
	return 0;
}

static int cmd_cancel(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "all", 0, NULL }, { "team", 1, NULL }, { "yes", 0, NULL },
			    { NULL, 0, NULL } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "cancel", argc, argv, f, pos, 1, &npos);
	if (rc)
		return rc;
	if (!flag_val(f, "all")) {
		if (flag_val(f, "team") || flag_val(f, "yes"))
			return usage("cancel: %s goes with --all",
				     flag_val(f, "team") ? "--team" : "--yes");
		if (npos != 1 || !url_safe(pos[0]))
			return usage("cancel: expected one task id (or --all --team T --yes)");
		return cancel_one(o, pos[0], NULL);
	}
	const char *team = flag_val(f, "team");
	if (npos)
		return usage("cancel: --all takes no task id, got '%s'", pos[0]);
	if (!team || !url_safe(team))
		return usage("cancel: --all needs --team T (a team name)");
	if (!flag_val(f, "yes"))
		return usage("cancel: --all cancels every active task of team %s; add --yes to "
			     "confirm",
			     team);
	json_t *tasks;
	/* cancelling (the last active state) is already what this asks for. The waiting ones
	 * first: cancelling the others would otherwise admit them. */
	json_t *waiting = json_array();
	if ((rc = list_state(o, team, "waiting", waiting))) {
		json_decref(waiting);
		return rc;
	}
	if ((rc = active_tasks(o, team, NACTIVE - 1, &tasks))) {
		json_decref(waiting);
		return rc;
	}
	json_array_extend(waiting, tasks);
	json_decref(tasks);
	tasks = waiting;
	json_t *done = json_array();
	int failed = 0;
	o->batch = 1;
	const json_t *t;
	size_t i;
	json_array_foreach(tasks, i, t)
		failed |= cancel_one(o, json_string_value(json_object_get(t, "id")), done) != 0;
	if (o->mode == SHOW_JSON) {
		json_t *out = json_pack("{s:s, s:O}", "team", team, "tasks", done);
		show_json(stdout, out);
		json_decref(out);
	} else if (o->mode == SHOW_TEXT && json_array_size(tasks) == 0) {
		printf("no active task to cancel in team %s\n", team);
	}
	json_decref(done);
	json_decref(tasks);
	return failed ? EXIT_FAIL : 0;
}

/* The states a task never leaves (server/task.h TASK_FINAL). */
static int final_state(const char *s)
{
	return s && (strcmp(s, "succeeded") == 0 || strcmp(s, "failed") == 0 ||
		     strcmp(s, "cancelled") == 0);
}

static int known_state(const char *s)
{
	if (final_state(s))
		return 1;
	for (size_t k = 0; k < NACTIVE; k++)
		if (strcmp(s, active_states[k]) == 0)
			return 1;
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* wait ID --state S / --reason R / --released: polls GET /v1/tasks/ID, 200 ms apart at first and
 * then up to 1 s apart, until every condition given holds: the task is in state S, its reason is
 * R, its reservation is released.
 * A refused connection or a 5xx is a moment (gwb-server restarting): it polls on. 0 when the
 * condition holds (the task shown), 1 on time-out or when the task ended in another final state
 * (the last state named on stderr, the task shown), 1 at once on a 4xx (no such task). */
static int cmd_wait(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "state", 1, NULL },   { "released", 0, NULL }, { "timeout", 1, NULL },
			    { "reason", 1, NULL }, { NULL, 0, NULL } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "wait", argc, argv, f, pos, 1, &npos);
	if (rc)
		return rc;
	if (npos != 1 || !url_safe(pos[0]))
		return usage("wait: expected one task id");
	const char *want = flag_val(f, "state");
	const char *want_reason = flag_val(f, "reason");
	int released = flag_val(f, "released") != NULL;
	if (!want && !released && !want_reason)
		return usage("wait: needs --state S, --reason R or --released");
	if (want && !known_state(want))
		return usage("wait: --state must be a task state (queued, creating, pending, running, "
			     "unknown, cancelling, succeeded, failed, cancelled), not '%s'",
			     want);
	long timeout = 60;
	if ((rc = int_flag(f, "wait", "timeout", 0, 86400, &timeout)))
		return rc;
	char path[160];
	snprintf(path, sizeof path, "/v1/tasks/%s", pos[0]);
	int64_t deadline = clock_mono_ms() + timeout * 1000;
	long pause = 200;
	json_t *last = NULL;
	char lasterr[300] = "";
	for (;;) {
		struct httpc_resp r;
		char url[2048];
		size_t base = strlen(o->url);
		while (base && o->url[base - 1] == '/')
			base--;
		snprintf(url, sizeof url, "%.*s%s", (int)base, o->url, path);
		struct httpc_req req = { .method = "GET", .url = url,
					 .token = o->token && o->token[0] ? o->token : NULL,
					 .timeout_ms = 5000 };
		int trc = httpc_do(o->http, &req, &r);
		if (trc == 0 && r.status >= 400 && r.status < 500) {
			httpc_resp_free(&r);
			return api(o, "GET", path, NULL, NULL, &r); /* prints the refusal */
		}
		if (trc == 0 && r.status == 200 && json_is_object(r.json)) {
			json_decref(last);
			last = json_incref(r.json);
			lasterr[0] = '\0';
		} else {
			if (trc)
				snprintf(lasterr, sizeof lasterr, "%s", r.error);
			else
				snprintf(lasterr, sizeof lasterr, "HTTP %ld", r.status);
		}
		httpc_resp_free(&r);
		const char *st = last ? json_string_value(json_object_get(last, "state")) : NULL;
		int is_released = last && json_is_true(json_object_get(
						  json_object_get(last, "reservation"), "released"));
		const char *rs = last ? json_string_value(json_object_get(last, "reason")) : NULL;
		int ok = last && (!want || (st && strcmp(st, want) == 0)) &&
			 (!want_reason || (rs && strcmp(rs, want_reason) == 0)) &&
			 (!released || is_released);
		/* A final task changes no more: waiting for another state is over. Its reservation
		 * may still be released later (the release follows the final state). */
		int hopeless = last && final_state(st) && want && strcmp(st, want) != 0;
		int64_t now = clock_mono_ms();
		if (ok || hopeless || now >= deadline) {
			if (!ok) {
				const char *reason =
					last ? json_string_value(json_object_get(last, "reason"))
					     : NULL;
				if (hopeless)
					fprintf(stderr, "gwbctl: wait: task %s ended %s%s%s, not %s\n",
						pos[0], st, reason && reason[0] ? ", reason " : "",
						reason && reason[0] ? reason : "", want);
				else
					fprintf(stderr,
						"gwbctl: wait: timed out after %ld s: task %s is %s%s%s "
						"(reservation %s)%s%s\n",
						timeout, pos[0], st ? st : "not seen",
						reason && reason[0] ? ", reason " : "",
						reason && reason[0] ? reason : "",
						is_released ? "released" : "held",
						lasterr[0] ? "; last poll: " : "", lasterr);
			}
			if (last) {
				if (o->mode == SHOW_TEXT)
					show_status(stdout, 200, 0);
				show_task(stdout, o->mode, last);
			}
			json_decref(last);
			return ok ? 0 : EXIT_FAIL;
		}
		long left = (long)(deadline - now);
		sleep_ms(pause < left ? pause : left);
		if (pause < 1000)
			pause = pause * 2 > 1000 ? 1000 : pause * 2;
	}
}

static int cmd_devices(struct opts *o, int argc, char **argv)
{
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "devices", argc, argv, NULL, pos, 0, &npos);
	return rc ? rc : get_show(o, "/v1/devices", show_devices);
}

static int cmd_teams_set(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "mem", 1, NULL },	     { "core", 1, NULL },
			    { "token", 1, NULL },    { "default-on-quota-full", 1, NULL },
			    { "queueing", 1, NULL }, { NULL, 0, NULL } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "teams set", argc, argv, f, pos, 1, &npos);
	if (rc)
		return rc;
	if (npos != 1 || !url_safe(pos[0]))
		return usage("teams set: expected one team name");
	if (!flag_val(f, "mem") || !flag_val(f, "core"))
		return usage("teams set needs --mem and --core (missing: %s)",
			     !flag_val(f, "mem") ? "--mem" : "--core");
	long mem = 0, core = 0;
	if ((rc = int_flag(f, "teams set", "mem", 0, 1L << 40, &mem)) ||
	    (rc = int_flag(f, "teams set", "core", 0, 1L << 30, &core)))
		return rc;
	json_t *b = json_pack("{s:I, s:I}", "gpu_memory_mib", (json_int_t)mem, "gpu_core_percent",
			      (json_int_t)core);
	if (flag_val(f, "token"))
		json_object_set_new(b, "token", json_string(flag_val(f, "token")));
	if (flag_val(f, "default-on-quota-full"))
		json_object_set_new(b, "default_on_quota_full",
				    json_string(flag_val(f, "default-on-quota-full")));
	if (flag_val(f, "queueing"))
		json_object_set_new(b, "queueing", json_string(flag_val(f, "queueing")));
	char path[128];
	snprintf(path, sizeof path, "/v1/teams/%s", pos[0]);
	struct httpc_resp r;
	rc = api(o, "PUT", path, b, NULL, &r);
	json_decref(b);
	if (rc)
		return rc;
	if (o->mode == SHOW_TEXT)
		show_status(stdout, r.status, 0);
	show_teams(stdout, o->mode, r.json);
	httpc_resp_free(&r);
	return 0;
}

static int cmd_teams(struct opts *o, int argc, char **argv)
{
	if (argc && strcmp(argv[0], "set") == 0)
		return cmd_teams_set(o, argc - 1, argv + 1);
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "teams", argc, argv, NULL, pos, 1, &npos);
	if (rc)
		return rc;
	if (npos == 1 && !url_safe(pos[0]))
		return usage("teams: '%s' is not a team name", pos[0]);
	char path[128];
	snprintf(path, sizeof path, "/v1/teams%s%s", npos ? "/" : "", npos ? pos[0] : "");
	return get_show(o, path, show_teams);
}

/* One team's line (a page of it) into *out; the path's query from limit and cursor. */
static int queue_of(const struct opts *o, const char *team, const char *limit,
		    const char *cursor, json_t **out)
{
	char path[256];
	snprintf(path, sizeof path, "/v1/teams/%s/queue%s%s%s%s", team, limit ? "?limit=" : "",
		 limit ? limit : "", cursor ? (limit ? "&cursor=" : "?cursor=") : "",
		 cursor ? cursor : "");
	struct httpc_resp r;
	int rc = api(o, "GET", path, NULL, NULL, &r);
	if (rc)
		return rc;
	*out = json_incref(r.json);
	httpc_resp_free(&r);
	return 0;
}

/* queue: the team's line; without --team, every team the token sees (GET /v1/teams). */
static int cmd_queue(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "team", 1, NULL }, { "limit", 1, NULL }, { "cursor", 1, NULL },
			    { NULL, 0, NULL } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "queue", argc, argv, f, pos, 0, &npos);
	if (rc)
		return rc;
	for (int k = 0; k < 3; k++)
		if (f[k].value && !url_safe(f[k].value))
			return usage("queue: --%s takes lowercase letters, digits and '-', not '%s'",
				     f[k].name, f[k].value);
	long limit = 0;
	if ((rc = int_flag(f, "queue", "limit", 1, PAGE_MAX, &limit)))
		return rc;
	json_t *teams = json_array();
	if (flag_val(f, "team")) {
		json_array_append_new(teams, json_string(flag_val(f, "team")));
	} else {
		struct httpc_resp r;
		if ((rc = api(o, "GET", "/v1/teams", NULL, NULL, &r))) {
			json_decref(teams);
			return rc;
		}
		const json_t *t;
		size_t i;
		json_array_foreach(json_object_get(r.json, "teams"), i, t)
			json_array_append_new(teams, json_string(json_string_value(
							     json_object_get(t, "team"))));
		httpc_resp_free(&r);
	}
	json_t *lines = json_array();
	const json_t *t;
	size_t i;
	json_array_foreach(teams, i, t) {
		json_t *line;
		if ((rc = queue_of(o, json_string_value(t), flag_val(f, "limit"),
				   flag_val(f, "cursor"), &line)))
			break;
		json_array_append_new(lines, line);
	}
	if (!rc) {
		if (o->mode == SHOW_TEXT)
			show_status(stdout, 200, 0);
		if (flag_val(f, "team") && json_array_size(lines) == 1)
			show_queue(stdout, o->mode, json_array_get(lines, 0));
		else {
			json_t *all = json_pack("{s:O}", "queues", lines);
			show_queues(stdout, o->mode, all);
			json_decref(all);
		}
	}
	json_decref(lines);
	json_decref(teams);
	return rc;
}

/* audit: exit 1 on drift (after showing it); audit repair: POST, then what changed. */
static int cmd_audit(struct opts *o, int argc, char **argv)
{
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "audit", argc, argv, NULL, pos, 1, &npos);
	if (rc)
		return rc;
	int repair = npos == 1 && strcmp(pos[0], "repair") == 0;
	if (npos == 1 && !repair)
		return usage("audit: unknown subcommand '%s' (only 'repair')", pos[0]);
	struct httpc_resp r;
	rc = api(o, repair ? "POST" : "GET", repair ? "/v1/audit/repair" : "/v1/audit", NULL,
		 NULL, &r);
	if (rc)
		return rc;
	if (o->mode == SHOW_TEXT)
		show_status(stdout, r.status, 0);
	if (repair) {
		show_audit_repair(stdout, o->mode, r.json);
	} else {
		show_audit(stdout, o->mode, r.json);
		json_t *d = json_object_get(r.json, "drift");
		if (!json_is_integer(d) || json_integer_value(d) != 0)
			rc = EXIT_FAIL;
	}
	httpc_resp_free(&r);
	return rc;
}

static int cmd_intents(struct opts *o, int argc, char **argv)
{
	struct flag f[] = { { "count", 1, NULL }, { "dead", 0, NULL }, { NULL, 0, NULL } };
	const char *pos[MAX_POS];
	int npos, rc = parse(o, "intents", argc, argv, f, pos, 0, &npos);
	if (rc)
		return rc;
	long count = 20;
	if ((rc = int_flag(f, "intents", "count", 1, 10000, &count)))
		return rc;
	return intents_show(o->redis, o->prefix, count, flag_val(f, "dead") != NULL);
}

int main(int argc, char **argv)
{
	gwb_alloc_init();
	struct opts o = { getenv("GWB_URL"), getenv("GWB_TOKEN"), getenv("GWB_REDIS"),
			  getenv("GWB_QUEUE_PREFIX"), "GWB_URL", "GWB_REDIS", NULL, SHOW_JSON,
			  0, NULL };
	if (!o.url || !o.url[0])
		o.url = "http://127.0.0.1:8080";
	if (!o.prefix || !o.prefix[0])
		o.prefix = "gwb";
	int i = 1;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_text, stdout);
			return 0;
		}
		int g = global_flag(&o, argc, argv, &i);
		if (g < 0)
			return -g;
		if (g == 0)
			return usage("unknown flag %s", argv[i]);
	}
	if (i >= argc)
		return usage("no command");
	const char *cmd = argv[i++];
	int n = argc - i;
	char **rest = argv + i;
	for (int k = 0; k < n; k++)
		if (strcmp(rest[k], "--help") == 0) {
			fputs(usage_text, stdout);
			return 0;
		}
	o.http = httpc_new();
	int rc;
	if (strcmp(cmd, "submit") == 0)
		rc = cmd_submit(&o, n, rest);
	else if (strcmp(cmd, "get") == 0 || strcmp(cmd, "events") == 0)
		rc = cmd_get_events(&o, cmd, n, rest);
	else if (strcmp(cmd, "list") == 0)
		rc = cmd_list(&o, n, rest);
	else if (strcmp(cmd, "logs") == 0)
		rc = cmd_logs(&o, n, rest);
	else if (strcmp(cmd, "cancel") == 0)
		rc = cmd_cancel(&o, n, rest);
	else if (strcmp(cmd, "wait") == 0)
		rc = cmd_wait(&o, n, rest);
	else if (strcmp(cmd, "devices") == 0)
		rc = cmd_devices(&o, n, rest);
	else if (strcmp(cmd, "teams") == 0)
		rc = cmd_teams(&o, n, rest);
	else if (strcmp(cmd, "audit") == 0)
		rc = cmd_audit(&o, n, rest);
	else if (strcmp(cmd, "queue") == 0)
		rc = cmd_queue(&o, n, rest);
	else if (strcmp(cmd, "intents") == 0)
		rc = cmd_intents(&o, n, rest);
	else
		rc = usage("unknown command '%s'", cmd);
	httpc_free(o.http);
	return rc;
}
