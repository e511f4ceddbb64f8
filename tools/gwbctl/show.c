/* gwbctl's renderings of API answers: text summaries, whole JSON, names. */
#include "tools/gwbctl/show.h"

#include <string.h>

#include "lib/alloc.h"

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s && s[0] ? s : "-";
}

static long long num(const json_t *o, const char *k)
{
	return (long long)json_integer_value(json_object_get(o, k));
}

int show_mode_parse(const char *s, enum show_mode *m)
{
	if (strcmp(s, "text") == 0)
		*m = SHOW_TEXT;
	else if (strcmp(s, "json") == 0)
		*m = SHOW_JSON;
	else if (strcmp(s, "name") == 0)
		*m = SHOW_NAME;
	else
		return -1;
	return 0;
}

void show_json(FILE *out, const json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	if (s) {
		fprintf(out, "%s\n", s);
		gwb_free(s); /* jansson allocates through the wrapper (gwb_alloc_init) */
	}
}

static const char *status_text(long status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 500: return "Internal Server Error";
	case 503: return "Service Unavailable";
	default: return "";
	}
}

void show_status(FILE *out, long status, int replayed)
{
	fprintf(out, "%ld %s%s\n", status, status_text(status),
		replayed ? " (idempotent replay: the same task as before)" : "");
}

/* "0,1 on colima-gwb" from the allocation's cards and the Pod's node, or "-". */
static void card_text(const json_t *task, char *buf, size_t len)
{
	const json_t *cards = json_object_get(json_object_get(task, "allocation"), "cards");
	size_t used = 0, i;
	const json_t *c;
	buf[0] = '\0';
	json_array_foreach(cards, i, c)
	{
		if (used < len)
			used += (size_t)snprintf(buf + used, len - used, "%s%lld", i ? "," : "",
						 num(c, "minor"));
	}
	if (!used) {
		snprintf(buf, len, "-");
		return;
	}
	const char *node = json_string_value(json_object_get(json_object_get(task, "pod"), "node"));
	if (node && used < len)
		snprintf(buf + used, len - used, " on %s", node);
}

static void resv_text(const json_t *task, char *buf, size_t len)
{
	const json_t *r = json_object_get(task, "reservation");
	if (!r) {
		snprintf(buf, len, "-");
		return;
	}
	int released = json_is_true(json_object_get(r, "released"));
	const char *why = json_string_value(json_object_get(r, "release_reason"));
	snprintf(buf, len, "%lld MiB, %lld%% core, %s%s%s", num(r, "gpu_memory_mib"),
		 num(r, "gpu_core_percent"), released ? "released" : "held",
		 released && why ? ": " : "", released && why ? why : "");
}

/* What runs: "gwb-worker (simulated)", or the workload's image and its command line. */
static void workload_text(FILE *out, const json_t *w)
{
	if (!json_is_object(w)) {
		fprintf(out, "runs         the simulated worker\n");
		return;
	}
	fprintf(out, "image        %s\n", str(w, "image"));
	fprintf(out, "command     ");
	const json_t *parts[] = { json_object_get(w, "command"), json_object_get(w, "args") };
	int any = 0;
	for (int k = 0; k < 2; k++) {
		size_t i;
		const json_t *a;
		json_array_foreach(parts[k], i, a) {
			const char *v = json_string_value(a);
			fprintf(out, strpbrk(v, " \t'\"$") ? " '%s'" : " %s", v);
			any = 1;
		}
	}
	fprintf(out, "%s\n", any ? "" : " (the image's entrypoint)");
	fprintf(out, "cpu, memory  %s, %s\n", str(w, "cpu"), str(w, "memory"));
}

/* The container's termination message: the worker's verdict in a line, a workload's text as
 * it is, other JSON compact. Nothing before the container ended. */
static void result_text(FILE *out, const json_t *r)
{
	if (json_is_string(r)) {
		fprintf(out, "result       %s%s", json_string_value(r),
			strchr(json_string_value(r), '\n') ? "" : "\n");
		return;
	}
	const char *who = json_string_value(json_object_get(r, "worker"));
	if (!who || strcmp(who, "gwb-worker")) {
		if (r && !json_is_null(r)) {
			char *text = json_dumps(r, JSON_COMPACT | JSON_ENCODE_ANY);
			fprintf(out, "result       %s\n", text ? text : "?");
			gwb_free(text);
		}
		return;
	}
	fprintf(out, "result       %s (exit %lld)", str(r, "exit_reason"), num(r, "exit_code"));
	const json_t *l = json_object_get(r, "ledger");
	if (json_is_object(l))
		fprintf(out, ", simulated ledger peak %lld of %lld MiB", num(l, "peak_bytes") >> 20,
			num(l, "budget_bytes") >> 20);
	const json_t *w = json_object_get(r, "work");
	if (json_is_object(w))
		fprintf(out, ", duty %.1f%% of %lld%%",
			json_number_value(json_object_get(w, "achieved_duty_percent")),
			num(w, "duty_percent"));
	fprintf(out, "\n");
}

void show_task(FILE *out, enum show_mode m, const json_t *task)
{
	if (m == SHOW_JSON) {
		show_json(out, task);
		return;
	}
	if (m == SHOW_NAME) {
		fprintf(out, "%s\n", str(task, "id"));
		return;
	}
	char card[128], resv[160];
	card_text(task, card, sizeof card);
	resv_text(task, resv, sizeof resv);
	fprintf(out, "id           %s\n", str(task, "id"));
	fprintf(out, "team         %s\n", str(task, "team"));
	fprintf(out, "state        %s\n", str(task, "state"));
	fprintf(out, "reason       %s\n", str(task, "reason"));
	fprintf(out, "reservation  %s\n", resv);
	fprintf(out, "card         %s\n", card);
	workload_text(out, json_object_get(task, "workload"));
	const json_t *waiting = json_object_get(json_object_get(task, "pod"), "waiting");
	if (json_is_object(waiting))
		fprintf(out, "waiting      %s: %s\n", str(waiting, "reason"),
			str(waiting, "message"));
	const json_t *iso = json_object_get(task, "isolation");
	if (json_is_object(iso))
		fprintf(out, "isolation    %s (the worker's verdict): %s\n", str(iso, "verdict"),
			str(iso, "reason"));
	result_text(out, json_object_get(task, "result"));
	const json_t *u = json_object_get(task, "usage");
	if (json_is_integer(json_object_get(u, "gpu_memory_mib"))) {
		char sm[32] = "-";
		const json_t *smv = json_object_get(u, "sm_percent");
		if (json_is_number(smv))
			snprintf(sm, sizeof sm, "%.1f", json_number_value(smv));
		fprintf(out, "usage        %s: %lld MiB, SM %s%% at %s (%s)\n", str(u, "status"),
			num(u, "gpu_memory_mib"), sm, str(u, "at"), str(u, "source"));
	}
	else if (json_is_object(u))
		fprintf(out, "usage        %s: %s\n", str(u, "status"), str(u, "reason"));
	const json_t *pending = json_object_get(task, "pending");
	if (json_is_object(pending)) {
		const json_t *d = json_object_get(pending, "diagnosis");
		const char *msg = json_string_value(json_object_get(d, "message"));
		if (!msg)
			msg = json_string_value(json_object_get(pending, "scheduler_message"));
		fprintf(out, "pending      %s%s%s\n", str(d, "kind"), msg ? ": " : "",
			msg ? msg : "");
	}
	if (json_is_string(json_object_get(task, "cancel")))
		fprintf(out, "cancel       %s\n", str(task, "cancel"));
	const json_t *q = json_object_get(task, "queue");
	if (json_is_object(q)) {
		const json_t *ahead = json_object_get(q, "ahead");
		fprintf(out, "queue        position %lld, %lld ahead (%lld MiB, %lld%% core)\n",
			num(q, "position"), num(ahead, "tasks"), num(ahead, "gpu_memory_mib"),
			num(ahead, "gpu_core_percent"));
		fprintf(out, "predicted    %s%s", json_is_string(json_object_get(q, "predicted_admit_at"))
						   ? str(q, "predicted_admit_at")
						   : "(not predicted)",
			json_array_size(json_object_get(q, "basis")) ? ", after the end of" : "");
		const json_t *b;
		size_t i;
		json_array_foreach(json_object_get(q, "basis"), i, b)
			fprintf(out, " %s", json_string_value(b));
		fprintf(out, "\n");
	}
}

void show_queue(FILE *out, enum show_mode m, const json_t *q)
{
	const json_t *tasks = json_object_get(q, "tasks"), *t;
	size_t i;
	if (m == SHOW_JSON) {
		show_json(out, q);
		return;
	}
	if (m == SHOW_NAME) {
		json_array_foreach(tasks, i, t)
			fprintf(out, "%s\n", str(t, "id"));
		return;
	}
	fprintf(out, "team %s: %zu waiting shown\n", str(q, "team"), json_array_size(tasks));
	fprintf(out, "%4s %-16s %-14s %7s %5s %-24s %s\n", "POS", "ID", "NAME", "MEM", "CORE",
		"PREDICTED", "AFTER");
	json_array_foreach(tasks, i, t)
	{
		const json_t *req = json_object_get(t, "requested");
		const json_t *basis = json_object_get(t, "basis");
		fprintf(out, "%4lld %-16s %-14s %7lld %4lld%% %-24s %s\n", num(t, "position"),
			str(t, "id"), str(t, "name"), num(req, "gpu_memory_mib"),
			num(req, "gpu_core_percent"),
			json_is_string(json_object_get(t, "predicted_admit_at"))
				? str(t, "predicted_admit_at")
				: "-",
			json_array_size(basis) ? json_string_value(json_array_get(basis, 0)) : "-");
	}
	if (json_is_string(json_object_get(q, "next_cursor")))
		fprintf(out, "more: --cursor %s\n", str(q, "next_cursor"));
}

void show_queues(FILE *out, enum show_mode m, const json_t *qs)
{
	if (m == SHOW_JSON) {
		show_json(out, qs);
		return;
	}
	const json_t *q;
	size_t i;
	json_array_foreach(json_object_get(qs, "queues"), i, q)
		show_queue(out, m, q);
}

void show_tasks(FILE *out, enum show_mode m, const json_t *list)
{
	const json_t *tasks = json_object_get(list, "tasks"), *t;
	size_t i;
	if (m == SHOW_JSON) {
		show_json(out, list);
		return;
	}
	if (m == SHOW_NAME) {
		json_array_foreach(tasks, i, t)
			fprintf(out, "%s\n", str(t, "id"));
		return;
	}
	fprintf(out, "%-16s %-12s %-10s %7s %5s %-16s %-14s %s\n", "ID", "TEAM", "STATE", "MEM", "CORE",
		"CARD", "NAME", "REASON");
	json_array_foreach(tasks, i, t)
	{
		char card[128];
		const json_t *req = json_object_get(t, "request");
		card_text(t, card, sizeof card);
		fprintf(out, "%-16s %-12s %-10s %7lld %4lld%% %-16s %-14s %s\n", str(t, "id"),
			str(t, "team"), str(t, "state"), num(req, "gpu_memory_mib"),
			num(req, "gpu_core_percent"), card, str(t, "name"), str(t, "reason"));
	}
	if (json_array_size(tasks) == 0)
		fprintf(out, "(no tasks)\n");
	if (json_is_string(json_object_get(list, "next_cursor")))
		fprintf(out, "more: --cursor %s\n", str(list, "next_cursor"));
}

void show_events(FILE *out, enum show_mode m, const json_t *ev)
{
	if (m == SHOW_JSON) {
		show_json(out, ev);
		return;
	}
	if (m == SHOW_NAME) {
		fprintf(out, "%s\n", str(ev, "task"));
		return;
	}
	const json_t *e;
	size_t i;
	json_array_foreach(json_object_get(ev, "events"), i, e)
	{
		char change[64] = "";
		if (json_is_string(json_object_get(e, "to")))
			snprintf(change, sizeof change, " %s -> %s", str(e, "from"), str(e, "to"));
		const json_t *d = json_object_get(e, "detail");
		char *detail = json_is_null(d) || !d ? NULL : json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS);
		fprintf(out, "%-24s %-22s%s%s%s\n", str(e, "ts"), str(e, "type"), change,
			detail ? "  " : "", detail ? detail : "");
		gwb_free(detail);
	}
}

void show_devices(FILE *out, enum show_mode m, const json_t *dev)
{
	const json_t *cards = json_object_get(dev, "cards"), *c;
	size_t i;
	if (m == SHOW_JSON) {
		show_json(out, dev);
		return;
	}
	if (m == SHOW_NAME) {
		json_array_foreach(cards, i, c)
			fprintf(out, "%s/%lld\n", str(c, "node"), num(c, "minor"));
		return;
	}
	fprintf(out, "%-14s %5s %-10s %-17s %-11s %s\n", "NODE", "MINOR", "HEALTH", "MEMORY MiB",
		"CORE %", "TASKS");
	json_array_foreach(cards, i, c)
	{
		const json_t *tot = json_object_get(c, "total"), *al = json_object_get(c, "allocated");
		char mem[40], core[32], tasks[512] = "";
		snprintf(mem, sizeof mem, "%lld/%lld", num(al, "gpu_memory_mib"),
			 num(tot, "gpu_memory_mib"));
		snprintf(core, sizeof core, "%lld/%lld", num(al, "gpu_core_percent"),
			 num(tot, "gpu_core_percent"));
		size_t used = 0, k;
		const json_t *t;
		json_array_foreach(json_object_get(c, "tasks"), k, t)
		{
			if (used < sizeof tasks)
				used += (size_t)snprintf(tasks + used, sizeof tasks - used, "%s%s",
							 k ? "," : "", str(t, "task"));
		}
		/* A team's token sees other teams' tasks as one total per card, without ids. */
		const json_t *oth = json_object_get(c, "others");
		if ((num(oth, "gpu_memory_mib") || num(oth, "gpu_core_percent")) && used < sizeof tasks)
			used += (size_t)snprintf(tasks + used, sizeof tasks - used, "%sother teams",
						 used ? "," : "");
		int healthy = json_is_true(json_object_get(c, "healthy"));
		fprintf(out, "%-14s %5lld %-10s %-17s %-11s %s\n", str(c, "node"), num(c, "minor"),
			healthy ? "healthy" : "unhealthy", mem, core, used ? tasks : "-");
	}
	if (json_array_size(cards) == 0)
		fprintf(out, "(no cards)\n");
	if (json_is_false(json_object_get(dev, "fresh")))
		fprintf(out, "note: the cluster picture is stale (fresh: false)\n");
}

static void team_line(FILE *out, const json_t *t)
{
	const json_t *q = json_object_get(t, "quota"), *r = json_object_get(t, "reserved");
	const json_t *a = json_object_get(t, "available");
	char quota[48], resv[48], avail[48];
	snprintf(quota, sizeof quota, "%lld/%lld%%", num(q, "gpu_memory_mib"),
		 num(q, "gpu_core_percent"));
	snprintf(resv, sizeof resv, "%lld/%lld%%", num(r, "gpu_memory_mib"),
		 num(r, "gpu_core_percent"));
	snprintf(avail, sizeof avail, "%lld/%lld%%", num(a, "gpu_memory_mib"),
		 num(a, "gpu_core_percent"));
	fprintf(out, "%-14s %-16s %-16s %-16s %6lld\n", str(t, "team"), quota, resv, avail,
		num(t, "active_tasks"));
}

void show_teams(FILE *out, enum show_mode m, const json_t *teams)
{
	const json_t *arr = json_object_get(teams, "teams"), *t;
	size_t i;
	if (m == SHOW_JSON) {
		show_json(out, teams);
		return;
	}
	if (m == SHOW_NAME) {
		if (!arr)
			fprintf(out, "%s\n", str(teams, "team"));
		json_array_foreach(arr, i, t)
			fprintf(out, "%s\n", str(t, "team"));
		return;
	}
	fprintf(out, "%-14s %-16s %-16s %-16s %6s\n", "TEAM", "QUOTA MiB/CORE", "RESERVED",
		"AVAILABLE", "ACTIVE");
	if (!arr)
		team_line(out, teams);
	json_array_foreach(arr, i, t)
		team_line(out, t);
}

void show_dry_run(FILE *out, enum show_mode m, const json_t *d)
{
	if (m == SHOW_JSON)
		return show_json(out, d);
	const json_t *q = json_object_get(d, "quota");
	const json_t *p = json_object_get(d, "placement");
	int admitted = json_is_true(json_object_get(q, "admitted"));
	const char *outcome = !admitted ? "refused" : json_is_object(p) ? str(p, "outcome") : "-";
	if (m == SHOW_NAME) {
		fprintf(out, "%s\n", outcome);
		return;
	}
	const json_t *rq = json_object_get(q, "requested"), *rs = json_object_get(q, "reserved");
	const json_t *qu = json_object_get(q, "quota");
	fprintf(out, "dry run (nothing written)\nquota:     %s: asks %lld MiB / %lld%%, team holds "
		     "%lld MiB / %lld%% of %lld MiB / %lld%%\n",
		admitted ? "admitted" : "refused (quota_exceeded)", num(rq, "gpu_memory_mib"),
		num(rq, "gpu_core_percent"), num(rs, "gpu_memory_mib"),
		num(rs, "gpu_core_percent"), num(qu, "gpu_memory_mib"),
		num(qu, "gpu_core_percent"));
	const json_t *basis = json_object_get(d, "basis");
	if (!json_is_object(p)) {
		if (admitted)
			fprintf(out, "placement: unknown (%s)\n", str(basis, "note"));
		return;
	}
	if (strcmp(outcome, "bind") == 0) {
		fprintf(out, "placement: binds now on %s, card", str(p, "node"));
		size_t i;
		const json_t *c;
		json_array_foreach(json_object_get(p, "cards"), i, c)
			fprintf(out, "%s%lld", i ? "," : " ", (long long)json_integer_value(c));
		fprintf(out, "\n");
	} else {
		const json_t *diag = json_object_get(p, "diagnosis");
		fprintf(out, "placement: stays pending (%s): %s\n", str(diag, "kind"),
			str(diag, "summary"));
		size_t i, k;
		const json_t *u, *t;
		json_array_foreach(json_object_get(p, "unblock"), i, u) {
			fprintf(out, "unblock:   card %lld on %s once", num(u, "minor"), str(u, "node"));
			json_array_foreach(json_object_get(u, "tasks"), k, t) {
				const json_t *in = json_object_get(t, "due_in_seconds");
				if (json_is_integer(in))
					fprintf(out, "%s %s ends (due in %lld s)", k ? " and" : "",
						str(t, "task"), (long long)json_integer_value(in));
				else
					fprintf(out, "%s %s ends", k ? " and" : "", str(t, "task"));
			}
			fprintf(out, "\n");
		}
	}
	fprintf(out, "basis:     picture %s, strategy %s\n",
		json_is_true(json_object_get(basis, "picture_fresh")) ? "fresh" : "STALE",
		str(basis, "strategy"));
}

static void audit_pair(FILE *out, const json_t *p)
{
	fprintf(out, "%lld MiB / %lld%%", num(p, "gpu_memory_mib"), num(p, "gpu_core_percent"));
}

void show_audit(FILE *out, enum show_mode m, const json_t *a)
{
	if (m == SHOW_JSON)
		return show_json(out, a);
	size_t i;
	const json_t *t;
	const json_t *teams = json_object_get(a, "teams"), *tasks = json_object_get(a, "tasks");
	if (m == SHOW_NAME) {
		json_array_foreach(teams, i, t)
			if (!json_is_true(json_object_get(t, "ok")))
				fprintf(out, "%s\n", str(t, "team"));
		json_array_foreach(tasks, i, t)
			fprintf(out, "%s\n", str(t, "task"));
		return;
	}
	const json_t *c = json_object_get(a, "cluster");
	fprintf(out, "audit at %s: drift %lld (%zu teams checked; %s)\n", str(a, "checked_at"),
		num(a, "drift"), json_array_size(teams), str(c, "note"));
	json_array_foreach(teams, i, t) {
		if (json_is_true(json_object_get(t, "ok")))
			continue;
		fprintf(out, "team %s: stored ", str(t, "team"));
		audit_pair(out, json_object_get(t, "stored"));
		fprintf(out, ", its tasks hold ");
		audit_pair(out, json_object_get(t, "computed"));
		fprintf(out, "\n");
	}
	json_array_foreach(tasks, i, t) {
		const json_t *obj = json_object_get(t, "pod");
		if (!obj)
			obj = json_object_get(t, "job");
		fprintf(out, "task %s: %s", str(t, "task"), str(t, "problem"));
		if (json_object_get(t, "state"))
			fprintf(out, " (team %s, %s)", str(t, "team"), str(t, "state"));
		if (json_is_string(obj))
			fprintf(out, " [%s]", json_string_value(obj));
		fprintf(out, "\n");
	}
}

void show_audit_repair(FILE *out, enum show_mode m, const json_t *a)
{
	if (m == SHOW_JSON)
		return show_json(out, a);
	size_t i;
	const json_t *t;
	const json_t *changes = json_object_get(a, "changes");
	json_array_foreach(changes, i, t) {
		if (m == SHOW_NAME) {
			fprintf(out, "%s\n", str(t, "team"));
			continue;
		}
		fprintf(out, "team %s: reserved ", str(t, "team"));
		audit_pair(out, json_object_get(t, "before"));
		fprintf(out, " -> ");
		audit_pair(out, json_object_get(t, "after"));
		fprintf(out, "\n");
	}
	if (m == SHOW_TEXT && json_array_size(changes) == 0)
		fprintf(out, "no team total needed a repair\n");
}
