/* End-of-run checks against the server's state. They run outside the send phase, through
 * calls that wait for their answer; Redis is asked synchronously for the same reason. */
#include "tools/gwb-load/verify.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "lib/alloc.h"

#define PAGE_LIMIT 500
#define END_TRIES  5

static long jint2(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(json_object_get(o, a), b);
	return json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

int verify_teams_sample(struct load *l, char *err, size_t errlen)
{
	for (int i = 0; i < l->o->nteams; i++) {
		char path[128];
		snprintf(path, sizeof path, "/v1/teams/%s", l->o->teams[i]);
		struct load_answer a;
		int rc = load_call(l, l->ctl, "GET", path, NULL, &a);
		if (rc < 0 || a.status != 200 || load_team_sample(&l->teams[i], a.json) < 0) {
			const char *code = json_string_value(
			    json_object_get(json_object_get(a.json, "error"), "code"));
			if (rc < 0)
				snprintf(err, errlen, "GET %s: no answer: %s", path, a.err);
			else
				snprintf(err, errlen, "GET %s: %d %s", path, a.status,
				         code ? code : "(not a team)");
			load_answer_clear(&a);
			return -1;
		}
		load_answer_clear(&a);
	}
	return 0;
}

/* Sums the unreleased reservations of every task of the team. Returns 0, or -1. */
static int active_sum(struct load *l, int team, long *mem, long *core, long *tasks)
{
	*mem = *core = *tasks = 0;
	char cursor[32] = "";
	for (;;) {
		char path[256];
		snprintf(path, sizeof path, "/v1/tasks?team=%s&limit=%d%s%s", l->o->teams[team],
		         PAGE_LIMIT, cursor[0] ? "&cursor=" : "", cursor);
		struct load_answer a;
		if (load_call(l, l->ctl, "GET", path, NULL, &a) < 0 || a.status != 200) {
			load_answer_clear(&a);
			return -1;
		}
		size_t k;
		json_t *t;
		json_array_foreach (json_object_get(a.json, "tasks"), k, t) {
			const json_t *r = json_object_get(t, "reservation");
			if (json_is_true(json_object_get(r, "released")))
				continue;
			const json_t *m = json_object_get(r, "gpu_memory_mib");
			const json_t *c = json_object_get(r, "gpu_core_percent");
			*mem += json_is_integer(m) ? (long)json_integer_value(m) : 0;
			*core += json_is_integer(c) ? (long)json_integer_value(c) : 0;
			(*tasks)++;
		}
		const char *next = json_string_value(json_object_get(a.json, "next_cursor"));
		snprintf(cursor, sizeof cursor, "%s", next ? next : "");
		load_answer_clear(&a);
		if (!cursor[0])
			return 0;
	}
}

static int team_reserved(struct load *l, int team, long *mem, long *core)
{
	char path[128];
	snprintf(path, sizeof path, "/v1/teams/%s", l->o->teams[team]);
	struct load_answer a;
	int rc = load_call(l, l->ctl, "GET", path, NULL, &a);
	*mem = jint2(a.json, "reserved", "gpu_memory_mib");
	*core = jint2(a.json, "reserved", "gpu_core_percent");
	if (rc == 0 && a.status == 200)
		load_team_sample(&l->teams[team], a.json);
	load_answer_clear(&a);
	return rc < 0 || a.status != 200 || *mem < 0 || *core < 0 ? -1 : 0;
}

void verify_quota_end(struct load *l)
{
	for (int team = 0; team < l->o->nteams; team++) {
		struct load_team *t = &l->teams[team];
		for (int attempt = 0; attempt < END_TRIES; attempt++) {
			long m0, c0, m1, c1, am, ac, n;
			if (attempt)
				load_sleep_ms(l, 200);
			if (team_reserved(l, team, &m0, &c0) < 0 ||
			    active_sum(l, team, &am, &ac, &n) < 0 ||
			    team_reserved(l, team, &m1, &c1) < 0)
				continue;
			t->end_checked = 1;
			t->end_reserved_mem = m1;
			t->end_reserved_core = c1;
			t->end_active_mem = am;
			t->end_active_core = ac;
			t->end_active_tasks = n;
			t->end_stable = m0 == m1 && c0 == c1;
			t->end_exact = t->end_stable && am == m1 && ac == c1;
			if (t->end_exact)
				break;
		}
	}
}

long verify_metric_sum(const char *text, const char *metric)
{
	size_t n = strlen(metric);
	long sum = -1;
	for (const char *p = text; p && *p;) {
		const char *eol = strchr(p, '\n');
		if (strncmp(p, metric, n) == 0 && (p[n] == ' ' || p[n] == '{')) {
			const char *v = p[n] == '{' ? strchr(p + n, '}') : p + n;
			if (v && (!eol || v < eol)) {
				v += (*v == '}');
				char *end;
				errno = 0;
				double d = strtod(v, &end);
				if (!errno && end != v)
					sum = (sum < 0 ? 0 : sum) + (long)d;
			}
		}
		p = eol ? eol + 1 : NULL;
	}
	return sum;
}

/* XLEN of the dead-letter stream, or -1. */
static long redis_dead(const struct load_opts *o)
{
	struct timeval tv = {2, 0};
	redisContext *c = NULL;
	long n = -1;
	if (strncmp(o->redis, "unix://", 7) == 0) {
		c = redisConnectUnixWithTimeout(o->redis + 7, tv);
	} else if (strncmp(o->redis, "redis://", 8) == 0) {
		char host[256];
		const char *h = o->redis + 8, *colon = strchr(h, ':'), *slash = strchr(h, '/');
		size_t hl = colon ? (size_t)(colon - h) : slash ? (size_t)(slash - h) : strlen(h);
		long port = 6379;
		if (colon) {
			char *end;
			port = strtol(colon + 1, &end, 10);
			if (end == colon + 1 || port < 1 || port > 65535)
				return -1;
		}
		if (hl == 0 || hl >= sizeof host)
			return -1;
		snprintf(host, sizeof host, "%.*s", (int)hl, h);
		c = redisConnectWithTimeout(host, (int)port, tv);
		/* The database number after the slash: SELECT it. */
		if (c && !c->err && slash && slash[1]) {
			redisReply *r = redisCommand(c, "SELECT %s", slash + 1);
			freeReplyObject(r);
		}
	}
	if (!c || c->err)
		goto out;
	redisReply *r = redisCommand(c, "XLEN %s:intents:dead", o->prefix);
	if (r && r->type == REDIS_REPLY_INTEGER)
		n = (long)r->integer;
	freeReplyObject(r);
out:
	if (c)
		redisFree(c);
	return n;
}

void verify_dead_letters(struct load *l, int after)
{
	struct load_answer a;
	long n = -1;
	const char *source = NULL;
	/* /metrics answers Prometheus text, kept in a.body. */
	if (load_call(l, l->ctl, "GET", "/metrics", NULL, &a) == 0 && a.status == 200 && a.body &&
	    (n = verify_metric_sum(a.body, "gwb_intents_dead_lettered_total")) >= 0)
		source = "metrics";
	load_answer_clear(&a);
	if (!source && l->o->redis && (n = redis_dead(l->o)) >= 0)
		source = "redis";
	if (!after) {
		l->dead.source = source;
		l->dead.before = n;
		return;
	}
	/* Compare like with like: the source of the first reading. */
	if (source && l->dead.source && strcmp(source, l->dead.source) == 0)
		l->dead.after = n;
	else
		l->dead.source = NULL;
}
