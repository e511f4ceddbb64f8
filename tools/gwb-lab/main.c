/* gwb-lab: the lab's experiments in the lab guide's order, each predicted (from the dry run and
 * the rules), acted out and observed, with one evidence record per experiment, an index and a
 * report in English and Chinese under .runtime/evidence/. It starts its own stack under
 * .runtime/lab/ (stopped at the end, even on failure) unless --url names a running one.
 * Exit codes: 0 every experiment run passed; 1 one failed (named with its field); 2 usage or
 * start-up error. */
#include <errno.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/httpc.h"
#include "lib/jsonx.h"
#include "tools/gwb-lab/exp.h"
#include "tools/gwb-lab/lab.h"
#include "tools/gwb-lab/report.h"
#include "tools/gwb-lab/stack.h"

#define EXIT_FAILED 1
#define EXIT_USAGE  2
#define TEAM_TOKEN  "lab-team-token"

static const char usage_text[] =
    "usage: gwb-lab [--only NAME]... [--list] [--evidence DIR] [--runtime DIR]\n"
    "               [--url URL --token T [--admin-token T] [--team T] [--kube URL]\n"
    "                [--faults SOCKET]] [--expect NAME.FIELD=JSON]...\n"
    "\n"
    "Runs the lab's experiments in order and writes DIR/NN-name.json, DIR/index.json,\n"
    "DIR/report.md and DIR/report.zh.md (DIR: --evidence, default .runtime/evidence).\n"
    "Without --url it starts its own redis-server, kubesim and gwb-server under\n"
    "RUNTIME/lab (--runtime, default .runtime) and stops them at the end. With --url it\n"
    "works against a running stack (token from --token or GWB_TOKEN, team from --team,\n"
    "default alpha; kube from --kube or /v1/info, whose cluster URL only the admin token\n"
    "gets; faults from --faults or KUBESIM_CTL);\n"
    "experiments that need a missing piece say they are skipped.\n"
    "  --only NAME     run only this experiment (repeatable)\n"
    "  --list          print the experiments in order and exit\n"
    "  --expect NAME.FIELD=JSON\n"
    "                  replace one prediction (to see a failure named)\n";

struct opts {
	const char *only[16];
	int nonly;
	int list;
	const char *evidence, *runtime, *url, *token, *admin, *team, *kube, *faults;
};

static int usage(const char *msg, const char *arg)
{
	fprintf(stderr, "gwb-lab: %s%s%s\n%s", msg, arg ? ": " : "", arg ? arg : "", usage_text);
	return EXIT_USAGE;
}

static int parse(struct opts *o, json_t *inject, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char **slot = NULL;
		if (strcmp(a, "--list") == 0) {
			o->list = 1;
			continue;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(usage_text, stdout);
			exit(0);
		}
		static const char *const names[] = {
		    "--only", "--evidence", "--runtime", "--url",    "--token", "--admin-token",
		    "--team", "--kube",     "--faults",  "--expect", NULL};
		int k = 0;
		while (names[k] && strcmp(a, names[k]) != 0)
			k++;
		if (!names[k])
			return usage("unknown flag", a);
		if (i + 1 >= argc)
			return usage("this flag needs a value", a);
		const char *v = argv[++i];
		switch (k) {
		case 0:
			if (o->nonly >= 16)
				return usage("too many", a);
			o->only[o->nonly++] = v;
			continue;
		case 1:
			slot = &o->evidence;
			break;
		case 2:
			slot = &o->runtime;
			break;
		case 3:
			slot = &o->url;
			break;
		case 4:
			slot = &o->token;
			break;
		case 5:
			slot = &o->admin;
			break;
		case 6:
			slot = &o->team;
			break;
		case 7:
			slot = &o->kube;
			break;
		case 8:
			slot = &o->faults;
			break;
		default: {
			const char *eq = strchr(v, '=');
			if (!eq || !strchr(v, '.') || strchr(v, '.') > eq)
				return usage("--expect wants NAME.FIELD=JSON", v);
			char key[160];
			snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
			json_error_t je;
			json_t *val = json_loads(eq + 1, JSON_DECODE_ANY, &je);
			json_object_set_new(inject, key, val ? val : json_string(eq + 1));
			continue;
		}
		}
		*slot = v;
	}
	for (int i = 0; i < o->nonly; i++) {
		int found = 0;
		for (const struct exp_def *e = exp_table; e->name; e++)
			found |= strcmp(e->name, o->only[i]) == 0;
		if (!found)
			return usage("no such experiment (see --list)", o->only[i]);
	}
	return 0;
}

static int selected(const struct opts *o, const char *name)
{
	if (o->nonly == 0)
		return 1;
	for (int i = 0; i < o->nonly; i++)
		if (strcmp(o->only[i], name) == 0)
			return 1;
	return 0;
}

static int write_json(const char *path, json_t *v)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof tmp, "%s.tmp", path);
	if (json_dump_file(v, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) != 0 ||
	    rename(tmp, path) != 0) {
		fprintf(stderr, "gwb-lab: cannot write %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

/* The team of the private stack, and the colocation profile `make demo` applies. */
static int private_setup(struct lab *l, struct stack *s)
{
	struct httpc_resp r;
	char url[512];
	snprintf(url, sizeof url, "%s/v1/teams/%s", l->url, l->team);
	json_t *team = json_pack("{s:i, s:i, s:s}", "gpu_memory_mib", 16384, "gpu_core_percent",
	                         400, "token", TEAM_TOKEN);
	struct httpc_req q = {.method = "PUT", .url = url, .token = s->admin, .json = team};
	httpc_do(l->http, &q, &r);
	long st = r.status;
	httpc_resp_free(&r);
	json_decref(team);
	if (st != 201 && st != 200) {
		fprintf(stderr, "gwb-lab: PUT %s: %ld\n", url, st);
		return -1;
	}
	json_t *ccp = json_pack(
	    "{s:s, s:s, s:{s:s}, s:{s:{s:{s:s}}, s:{s:{s:s}}, s:s, s:s, s:i, s:s}}", "apiVersion",
	    "config.koordinator.sh/v1alpha1", "kind", "ClusterColocationProfile", "metadata",
	    "name", "gpu-workbench-be", "spec", "namespaceSelector", "matchLabels",
	    "kubernetes.io/metadata.name", "gpu-workbench", "selector", "matchLabels",
	    "koordinator.sh/qosClass", "BE", "qosClass", "BE", "priorityClassName", "koord-batch",
	    "koordinatorPriority", 1000, "schedulerName", "koord-scheduler");
	snprintf(url, sizeof url,
	         "%s/apis/config.koordinator.sh/v1alpha1/clustercolocationprofiles", l->kube);
	struct httpc_req k = {.method = "POST", .url = url, .json = ccp};
	httpc_do(l->http, &k, &r);
	st = r.status;
	httpc_resp_free(&r);
	json_decref(ccp);
	if (st != 201 && st != 409) {
		fprintf(stderr, "gwb-lab: creating the ClusterColocationProfile: %ld\n", st);
		return -1;
	}
	return 0;
}

/* Reads /v1/info (mode, version, namespace, cluster URL). 0, or -1 when it does not answer. */
static int read_info(struct lab *l)
{
	struct httpc_resp r;
	long s = lab_api(l, NULL, "GET", "/v1/info", NULL, &r);
	if (s == 200) {
		const char *v;
		snprintf(l->mode, sizeof l->mode, "%s", (v = lab_str(r.json, "mode")) ? v : "?");
		snprintf(l->version, sizeof l->version, "%s",
		         (v = lab_str(r.json, "version")) ? v : "?");
		snprintf(l->ns, sizeof l->ns, "%s",
		         (v = lab_str(r.json, "namespace")) ? v : "gpu-workbench");
		if (!l->kube[0] && (v = lab_str(r.json, "cluster_url")))
			snprintf(l->kube, sizeof l->kube, "%s", v);
	}
	httpc_resp_free(&r);
	/* The cluster's URL is shown to the admin only: asked again with its token. */
	if (s == 200 && !l->kube[0] && l->admin[0] && strcmp(l->admin, l->token) != 0) {
		char team_token[sizeof l->token];
		snprintf(team_token, sizeof team_token, "%s", l->token);
		snprintf(l->token, sizeof l->token, "%s", l->admin);
		if (lab_api(l, NULL, "GET", "/v1/info", NULL, &r) == 200) {
			const char *v = lab_str(r.json, "cluster_url");
			if (v)
				snprintf(l->kube, sizeof l->kube, "%s", v);
		}
		httpc_resp_free(&r);
		snprintf(l->token, sizeof l->token, "%s", team_token);
	}
	return s == 200 ? 0 : -1;
}

/* Does the server have the dry run? Only a server that says so, or answers a probe that
 * writes nothing either way, is asked: an older server would create a real task for
 * POST /v1/tasks?dry_run=true. The probe asks for more than the team's quota leaves, so an
 * older server refuses it (403) and a newer one answers 200 with dry_run true. */
static void probe_dry_run(struct lab *l)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/teams/%s", l->team);
	struct httpc_resp r;
	long s = lab_api(l, NULL, "GET", path, NULL, &r);
	long long avail = json_integer_value(lab_get(r.json, "available.gpu_memory_mib"));
	if (!lab_get(r.json, "available.gpu_memory_mib"))
		avail = json_integer_value(lab_get(r.json, "quota.gpu_memory_mib")) -
		        json_integer_value(lab_get(r.json, "reserved.gpu_memory_mib"));
	httpc_resp_free(&r);
	l->dry_run = 0;
	if (s != 200) {
		snprintf(l->dry_run_note, sizeof l->dry_run_note, "team %s unreadable (%ld)",
		         l->team, s);
		return;
	}
	/* 8 cards of up to 1 TiB each (the API's bounds) is beyond any quota the lab meets. */
	long long per = avail / 8 + 1024;
	if (per > 1048576) {
		snprintf(l->dry_run_note, sizeof l->dry_run_note,
		         "not probed: the team's quota is too large to probe safely");
		return;
	}
	json_t *body =
	    json_pack("{s:s, s:s, s:I, s:i, s:i}", "team", l->team, "name", "gwb-lab-dry-run-probe",
	              "gpu_memory_mib", (json_int_t)per, "gpu_core_percent", 1, "gpu_count", 8);
	s = lab_api(l, NULL, "POST", "/v1/tasks?dry_run=true", body, &r);
	json_decref(body);
	if (s == 200 && json_is_true(json_object_get(r.json, "dry_run"))) {
		l->dry_run = 1;
		l->dry_run_note[0] = '\0';
	} else if (s == 403) {
		snprintf(l->dry_run_note, sizeof l->dry_run_note,
		         "this gwb-server has no dry run (the probe got 403 %s)",
		         httpc_error_code(&r));
	} else {
		snprintf(l->dry_run_note, sizeof l->dry_run_note,
		         "the dry-run probe answered %ld %s", s, httpc_error_code(&r));
	}
	httpc_resp_free(&r);
}

static void skip_record(struct lab *l, const struct exp_def *e, int order, const char *why)
{
	lab_begin(l, e, order, NULL);
	json_object_set_new(l->rec, "skipped", json_string(why));
	json_object_set_new(l->rec, "passed", json_null());
	printf("-- %02d %s: skipped (%s)\n", order, e->name, why);
}

/* Starts the private stack under rt/lab and points l at it. 0, or -1 (message on stderr). */
static int start_private(struct lab *l, struct stack *st, const char *rt)
{
	char self[PATH_MAX], dir[PATH_MAX + 8], err[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		fprintf(stderr, "gwb-lab: cannot find its own binary\n");
		return -1;
	}
	self[n] = '\0';
	*strrchr(self, '/') = '\0'; /* the binaries are next to gwb-lab */
	snprintf(dir, sizeof dir, "%s/lab", rt);
	printf("gwb-lab: starting a private stack under %s\n", dir);
	fflush(stdout);
	if (stack_start(st, self, dir, err, sizeof err) != 0) {
		fprintf(stderr, "gwb-lab: %s\n", err);
		return -1;
	}
	l->stack = st;
	snprintf(l->url, sizeof l->url, "%s", st->server.url);
	snprintf(l->kube, sizeof l->kube, "%s", st->kubesim.url);
	snprintf(l->faults, sizeof l->faults, "%s", st->ctl_sock);
	snprintf(l->token, sizeof l->token, "%s", TEAM_TOKEN);
	snprintf(l->admin, sizeof l->admin, "%s", st->admin);
	return private_setup(l, st);
}

/* Points l at a running stack from the options and the environment. 0, or EXIT_USAGE. */
static int use_running(struct lab *l, const struct opts *o)
{
	const char *tok = o->token ? o->token : getenv("GWB_TOKEN");
	const char *faults = o->faults ? o->faults : getenv("KUBESIM_CTL");
	if (!tok)
		return usage("--url needs --token or GWB_TOKEN", NULL);
	snprintf(l->url, sizeof l->url, "%s", o->url);
	size_t ul = strlen(l->url);
	if (ul && l->url[ul - 1] == '/')
		l->url[ul - 1] = '\0';
	snprintf(l->token, sizeof l->token, "%s", tok);
	snprintf(l->kube, sizeof l->kube, "%s", o->kube ? o->kube : "");
	snprintf(l->faults, sizeof l->faults, "%s", faults ? faults : "");
	if (o->admin)
		snprintf(l->admin, sizeof l->admin, "%s", o->admin);
	return 0;
}

/* A full run replaces the previous run's records. */
static void clear_records(const char *ev)
{
	char pat[PATH_MAX + 32];
	snprintf(pat, sizeof pat, "%s/[0-9][0-9]-*.json", ev);
	glob_t g;
	if (glob(pat, 0, NULL, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc; i++)
			unlink(g.gl_pathv[i]);
	globfree(&g);
}

/* Runs (or skips) one experiment and writes its record; appends it to index and records.
 * Returns 1 when it failed or its record could not be written. */
static int run_one(struct lab *l, const struct exp_def *e, int order, const char *ev, json_t *index,
                   json_t *records)
{
	if ((e->needs & NEED_FAULTS) && !l->faults[0]) {
		skip_record(l, e, order, "needs kubesim's control socket (--faults)");
	} else if ((e->needs & NEED_RESTART) && !l->stack) {
		skip_record(l, e, order,
		            "needs the private stack to kill -9 and restart gwb-server");
	} else {
		lab_begin(l, e, order, NULL);
		e->run(l);
		lab_end(l);
	}
	char file[PATH_MAX + 96], name[96];
	snprintf(name, sizeof name, "%02d-%s.json", order, e->name);
	snprintf(file, sizeof file, "%s/%s", ev, name);
	int bad = write_json(file, l->rec) != 0;
	json_t *passed = json_object_get(l->rec, "passed");
	json_array_append_new(json_object_get(index, "experiments"),
	                      json_pack("{s:i, s:s, s:s, s:O}", "order", order, "name", e->name,
	                                "file", name, "passed", passed));
	json_array_append(records, l->rec);
	return bad || json_is_false(passed);
}

/* Prints the outcome: every failed experiment with its field on stderr. */
static void summary(json_t *records, int failed)
{
	size_t i;
	json_t *rec;
	int first = 1;
	json_array_foreach (records, i, rec) {
		if (!json_is_false(json_object_get(rec, "passed")))
			continue;
		const char *why = lab_str(rec, "failure");
		fprintf(stderr, "gwb-lab: %s: %s: field %s\n", first ? "FAILED" : "also failed",
		        lab_str(rec, "name"), why ? why : "?");
		first = 0;
	}
	if (!failed)
		printf("gwb-lab: every experiment run passed\n");
	else if (first)
		fprintf(stderr, "gwb-lab: FAILED: the evidence could not be written\n");
}

int main(int argc, char **argv)
{
	gwb_alloc_init();
	struct opts o = {0};
	struct lab l = {0};
	struct stack st;
	int rc = EXIT_USAGE, started_stack = 0, failed = 0;
	json_t *index = NULL, *records = json_array();
	l.inject = json_object();
	if (parse(&o, l.inject, argc, argv) != 0)
		goto out;
	if (o.list) {
		for (int i = 0; exp_table[i].name; i++)
			printf("%02d %s%s%s\n", i + 1, exp_table[i].name,
			       exp_table[i].needs & NEED_FAULTS ? "  (needs kubesim faults)" : "",
			       exp_table[i].needs & NEED_RESTART ? "  (needs the private stack)"
			                                         : "");
		rc = 0;
		goto out;
	}
	l.http = httpc_new();
	l.tty = isatty(STDOUT_FILENO);
	const char *runtime = o.runtime ? o.runtime : ".runtime";
	mkdir(runtime, 0700);
	char rt[PATH_MAX], ev[PATH_MAX];
	if (!realpath(runtime, rt)) {
		fprintf(stderr, "gwb-lab: %s: %s\n", runtime, strerror(errno));
		goto out;
	}
	snprintf(ev, sizeof ev, "%s", o.evidence ? o.evidence : "");
	if (!ev[0])
		snprintf(ev, sizeof ev, "%s/evidence", rt);
	mkdir(ev, 0700);
	snprintf(l.team, sizeof l.team, "%s", o.team ? o.team : (o.url ? "alpha" : "lab"));
	if (!o.url) {
		started_stack = 1;
		if (start_private(&l, &st, rt) != 0)
			goto out;
	} else if ((rc = use_running(&l, &o)) != 0) {
		goto out;
	}
	rc = EXIT_USAGE;
	if (read_info(&l) != 0) {
		fprintf(stderr, "gwb-lab: %s/v1/info does not answer\n", l.url);
		goto out;
	}
	if (!l.kube[0]) {
		fprintf(stderr, "gwb-lab: no Kubernetes API: give --kube URL\n");
		goto out;
	}
	probe_dry_run(&l);
	printf("gwb-lab: %s (mode %s, version %s), kube %s, faults %s, team %s\n", l.url, l.mode,
	       l.version, l.kube, l.faults[0] ? l.faults : "none", l.team);
	printf("gwb-lab: dry run %s\n", l.dry_run ? "available" : l.dry_run_note);
	if (o.nonly == 0)
		clear_records(ev);
	char ts[40];
	index = json_pack("{s:{s:s, s:n, s:s, s:s, s:s, s:s, s:s}, s:[]}", "run", "started_at",
	                  clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts), "finished_at",
	                  "mode", l.mode, "version", l.version, "url", l.url, "stack",
	                  l.stack ? "private" : "running", "dry_run",
	                  l.dry_run ? "available" : l.dry_run_note, "experiments");
	for (int i = 0; exp_table[i].name; i++)
		if (selected(&o, exp_table[i].name))
			failed |= run_one(&l, &exp_table[i], i + 1, ev, index, records);
	json_object_set_new(json_object_get(index, "run"), "finished_at",
	                    json_string(clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts)));
	char file[PATH_MAX + 32];
	snprintf(file, sizeof file, "%s/index.json", ev);
	failed |= write_json(file, index) != 0;
	failed |= report_write(ev, index, records) != 0;
	printf("\ngwb-lab: evidence in %s (index.json, NN-name.json, report.md, report.zh.md)\n",
	       ev);
	fflush(stdout);
	summary(records, failed);
	rc = failed ? EXIT_FAILED : 0;
out:
	if (started_stack)
		stack_stop(&st);
	json_decref(index);
	json_decref(records);
	json_decref(l.rec);
	json_decref(l.mine);
	json_decref(l.logs);
	json_decref(l.inject);
	httpc_free(l.http);
	return rc;
}
