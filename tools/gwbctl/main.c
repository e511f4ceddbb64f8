/* gwbctl: the command-line client of gpu-workbench. Every command but `intents` speaks the HTTP
 * API (blocking libcurl: a CLI has no event loop to keep free); `intents` reads the Redis
 * stream directly (synchronous hiredis) and decodes each msgpack body. Output is JSON on
 * stdout; errors go to stderr with a non-zero exit: 1 for a refused or failed request, 2 for
 * a usage error. */
#include <curl/curl.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "lib/addr.h"
#include "lib/alloc.h"
#include "lib/jsonx.h"
#include "queue/codec.h"
#include "queue/conn.h"

#define EXIT_FAIL 1
#define EXIT_USAGE 2
/* An API answer larger than this is refused: no list page comes near it. */
#define BODY_MAX (16 << 20)
#define INTENTS_MAX 10000

static const char usage_text[] =
	"usage: gwbctl [--url URL] [--token TOKEN] [--redis URL] [--prefix P] COMMAND ...\n"
	"\n"
	"  submit --team T --mem MIB --core PCT [--count N] [--duration S] [--qos LS|BE]\n"
	"         [--experiment normal|overlimit] [--name NAME] [--key IDEMPOTENCY_KEY]\n"
	"  get ID                      one task\n"
	"  list [--team T] [--state S] [--limit N] [--cursor C]\n"
	"  cancel ID                   request the cancel of a task (idempotent)\n"
	"  teams [TEAM]                quotas and reservations\n"
	"  intents [--count N] [--dead]\n"
	"                              the last N entries of the intent stream (or its\n"
	"                              dead-letter stream) read from Redis: fields, pending\n"
	"                              state, delivery count, idle time and decoded body\n"
	"\n"
	"Defaults come from GWB_URL (http://127.0.0.1:8080), GWB_TOKEN, GWB_REDIS and\n"
	"GWB_QUEUE_PREFIX (gwb).\n";

struct opts {
	const char *url, *token, *redis, *prefix;
};

static int usage(const char *why)
{
	if (why)
		fprintf(stderr, "gwbctl: %s\n\n", why);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

/* Takes "--name value" or "--name=value" at argv[*i]. Returns the value, or NULL when argv[*i]
 * is not --name; *bad is set when --name has no value. */
static const char *flag(int argc, char **argv, int *i, const char *name, int *bad)
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
		*bad = 1;
		return NULL;
	}
	return argv[++*i];
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

static void print_json(const json_t *v)
{
	char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (s) {
		puts(s);
		gwb_free(s); /* jansson allocates through the wrapper (gwb_alloc_init) */
	}
}

/* ---- HTTP ---- */

struct sink {
	char *buf;
	size_t len;
	int overflow;
};

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct sink *s = arg;
	size_t add = size * n;
	if (s->len + add > BODY_MAX) {
		s->overflow = 1;
		return 0;
	}
	s->buf = gwb_realloc(s->buf, s->len + add + 1);
	memcpy(s->buf + s->len, data, add);
	s->len += add;
	s->buf[s->len] = '\0';
	return add;
}

/* One request. Prints the JSON answer (2xx) or the error (otherwise). Returns the exit code. */
static int http(const struct opts *o, const char *method, const char *path, const json_t *body,
		const char *idem_key)
{
	char url[2048], auth[600], key[200];
	snprintf(url, sizeof url, "%s%s", o->url, path);
	CURL *c = curl_easy_init();
	struct curl_slist *hl = NULL;
	if (o->token && o->token[0]) {
		snprintf(auth, sizeof auth, "Authorization: Bearer %s", o->token);
		hl = curl_slist_append(hl, auth);
	}
	if (idem_key) {
		snprintf(key, sizeof key, "Idempotency-Key: %s", idem_key);
		hl = curl_slist_append(hl, key);
	}
	char *payload = NULL;
	if (body) {
		payload = jx_dump(body);
		hl = curl_slist_append(hl, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(payload));
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
	}
	hl = curl_slist_append(hl, "Expect:");
	struct sink sink = { 0 };
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	CURLcode rc = curl_easy_perform(c);
	long status = 0;
	if (rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	gwb_free(payload);
	int code = EXIT_FAIL;
	json_t *ans = sink.buf ? json_loadb(sink.buf, sink.len, 0, NULL) : NULL;
	if (rc != CURLE_OK) {
		fprintf(stderr, "gwbctl: %s %s: %s\n", method, url,
			sink.overflow ? "answer too large" : curl_easy_strerror(rc));
	} else if (status >= 200 && status < 300) {
		if (ans)
			print_json(ans);
		code = 0;
	} else {
		json_t *e = json_object_get(ans, "error");
		const char *ec = json_string_value(json_object_get(e, "code"));
		const char *em = json_string_value(json_object_get(e, "message"));
		fprintf(stderr, "gwbctl: %s %s: HTTP %ld %s: %s\n", method, path, status,
			ec ? ec : "error", em ? em : (sink.buf ? sink.buf : ""));
		if (e)
			print_json(ans);
	}
	json_decref(ans);
	gwb_free(sink.buf);
	return code;
}

/* Path segment check: ids and team names are URL-safe by the API's rules. */
static int url_safe(const char *s)
{
	if (!s[0] || strlen(s) > 64)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
			return 0;
	return 1;
}

static int cmd_submit(const struct opts *o, int argc, char **argv)
{
	json_t *b = json_object();
	const char *key = NULL;
	int bad = 0, rc;
	static const char *const str_flags[] = { "team", "name", "qos", "experiment", NULL };
	static const char *const int_flags[][2] = { { "mem", "gpu_memory_mib" },
						    { "core", "gpu_core_percent" },
						    { "count", "gpu_count" },
						    { "duration", "duration_seconds" } };
	for (int i = 0; i < argc; i++) {
		const char *v;
		int done = 0;
		for (int k = 0; str_flags[k] && !done; k++)
			if ((v = flag(argc, argv, &i, str_flags[k], &bad))) {
				json_object_set_new(b, str_flags[k], json_string(v));
				done = 1;
			}
		for (int k = 0; k < 4 && !done; k++)
			if ((v = flag(argc, argv, &i, int_flags[k][0], &bad))) {
				long x;
				if (parse_long(v, 0, 1L << 40, &x)) {
					json_decref(b);
					return usage("submit: numbers must be non-negative integers");
				}
				json_object_set_new(b, int_flags[k][1], json_integer(x));
				done = 1;
			}
		if (!done && (v = flag(argc, argv, &i, "key", &bad))) {
			key = v;
			done = 1;
		}
		if (!done || bad) {
			json_decref(b);
			return usage(bad ? "submit: a flag needs a value" : "submit: unknown argument");
		}
	}
	if (!json_object_get(b, "team") || !json_object_get(b, "gpu_memory_mib") ||
	    !json_object_get(b, "gpu_core_percent")) {
		json_decref(b);
		return usage("submit needs --team, --mem and --core");
	}
	rc = http(o, "POST", "/v1/tasks", b, key);
	json_decref(b);
	return rc;
}

static int cmd_list(const struct opts *o, int argc, char **argv)
{
	char path[512] = "/v1/tasks";
	size_t used = strlen(path);
	int bad = 0;
	for (int i = 0; i < argc; i++) {
		static const char *const names[] = { "team", "state", "limit", "cursor", NULL };
		const char *v = NULL;
		int k = 0;
		for (; names[k] && !(v = flag(argc, argv, &i, names[k], &bad)); k++)
			;
		if (!v || bad)
			return usage(bad ? "list: a flag needs a value" : "list: unknown argument");
		if (!url_safe(v))
			return usage("list: values are lowercase letters, digits and '-'");
		used += (size_t)snprintf(path + used, sizeof path - used, "%c%s=%s",
					 used == strlen("/v1/tasks") ? '?' : '&', names[k], v);
		if (used >= sizeof path)
			return usage("list: arguments too long");
	}
	return http(o, "GET", path, NULL, NULL);
}

static int cmd_task(const struct opts *o, int argc, char **argv, const char *method,
		    const char *suffix)
{
	if (argc != 1 || !url_safe(argv[0]))
		return usage("expected one task id");
	char path[160];
	snprintf(path, sizeof path, "/v1/tasks/%s%s", argv[0], suffix);
	return http(o, method, path, NULL, NULL);
}

static int cmd_teams(const struct opts *o, int argc, char **argv)
{
	if (argc > 1 || (argc == 1 && !url_safe(argv[0])))
		return usage("teams takes at most one team name");
	char path[128];
	snprintf(path, sizeof path, "/v1/teams%s%s", argc ? "/" : "", argc ? argv[0] : "");
	return http(o, "GET", path, NULL, NULL);
}

/* ---- intents, straight from Redis ---- */

static redisContext *redis_open(const char *url)
{
	struct q_addr a;
	char err[160];
	if (!url || !url[0]) {
		fprintf(stderr, "gwbctl: intents: set --redis or GWB_REDIS\n");
		return NULL;
	}
	if (q_addr_parse(url, &a, err, sizeof err)) {
		fprintf(stderr, "gwbctl: redis %s: %s\n", url, err);
		return NULL;
	}
	struct timeval tv = { 5, 0 };
	redisContext *c = a.is_unix ? redisConnectUnixWithTimeout(a.path, tv)
				    : redisConnectWithTimeout(a.host, a.port, tv);
	if (!c || c->err) {
		fprintf(stderr, "gwbctl: redis %s: %s\n", url, c ? c->errstr : "out of memory");
		redisFree(c);
		return NULL;
	}
	redisSetTimeout(c, tv);
	if (a.db) {
		redisReply *r = redisCommand(c, "SELECT %d", a.db);
		int ok = r && r->type != REDIS_REPLY_ERROR;
		freeReplyObject(r);
		if (!ok) {
			fprintf(stderr, "gwbctl: redis %s: SELECT %d failed\n", url, a.db);
			redisFree(c);
			return NULL;
		}
	}
	return c;
}

static json_t *fields_json(const redisReply *fv, const redisReply **body)
{
	json_t *f = json_object();
	*body = NULL;
	for (size_t i = 0; fv && fv->type == REDIS_REPLY_ARRAY && i + 1 < fv->elements; i += 2) {
		const redisReply *k = fv->element[i], *v = fv->element[i + 1];
		if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
			continue;
		if (strcmp(k->str, "body") == 0) {
			*body = v;
			json_object_set_new(f, "body_bytes", json_integer((json_int_t)v->len));
			continue;
		}
		/* Field values are shown as text when they are valid UTF-8. */
		json_t *s = json_stringn(v->str, v->len);
		json_object_set_new(f, k->str, s ? s : json_string("(binary)"));
	}
	return f;
}

static json_t *groups_json(redisContext *c, const char *stream, struct q_id *delivered,
			   int *has_group)
{
	json_t *arr = json_array();
	*has_group = 0;
	redisReply *g = redisCommand(c, "XINFO GROUPS %s", stream);
	for (size_t i = 0; g && g->type == REDIS_REPLY_ARRAY && i < g->elements; i++) {
		const redisReply *e = g->element[i];
		json_t *o = json_object();
		const char *name = NULL, *last = NULL;
		for (size_t j = 0; e->type == REDIS_REPLY_ARRAY && j + 1 < e->elements; j += 2) {
			const redisReply *k = e->element[j], *v = e->element[j + 1];
			if (v->type == REDIS_REPLY_INTEGER)
				json_object_set_new(o, k->str, json_integer(v->integer));
			else if (v->type == REDIS_REPLY_STRING || v->type == REDIS_REPLY_STATUS)
				json_object_set_new(o, k->str, json_string(v->str));
			if (strcmp(k->str, "name") == 0 && v->str)
				name = v->str;
			if (strcmp(k->str, "last-delivered-id") == 0 && v->str)
				last = v->str;
		}
		if (name && last && strcmp(name, Q_GROUP) == 0 && q_id_parse(last, delivered) == 0)
			*has_group = 1;
		json_array_append_new(arr, o);
	}
	freeReplyObject(g);
	return arr;
}

static int cmd_intents(const struct opts *o, int argc, char **argv)
{
	long count = 20;
	int dead = 0, bad = 0;
	for (int i = 0; i < argc; i++) {
		const char *v;
		if ((v = flag(argc, argv, &i, "count", &bad))) {
			if (parse_long(v, 1, INTENTS_MAX, &count))
				return usage("intents: --count must be from 1 to 10000");
		} else if (strcmp(argv[i], "--dead") == 0) {
			dead = 1;
		} else {
			return usage(bad ? "intents: a flag needs a value" : "intents: unknown argument");
		}
	}
	redisContext *c = redis_open(o->redis);
	if (!c)
		return EXIT_FAIL;
	struct q_keys keys;
	q_keys_init(&keys, o->prefix);
	const char *stream = dead ? keys.dead : keys.stream;
	redisReply *len = redisCommand(c, "XLEN %s", stream);
	if (!len || len->type != REDIS_REPLY_INTEGER) {
		fprintf(stderr, "gwbctl: XLEN %s: %s\n", stream,
			len && len->str ? len->str : c->errstr);
		freeReplyObject(len);
		redisFree(c);
		return EXIT_FAIL;
	}
	json_t *out = json_pack("{s:s, s:I}", "stream", stream, "length", (json_int_t)len->integer);
	freeReplyObject(len);
	struct q_id delivered = { 0, 0 };
	int has_group = 0;
	if (!dead)
		json_object_set_new(out, "groups", groups_json(c, stream, &delivered, &has_group));
	/* Pending entries of the group: who holds them, how long, how many deliveries. */
	redisReply *pend = has_group ? redisCommand(c, "XPENDING %s %s - + %d", stream, Q_GROUP,
						    INTENTS_MAX)
				     : NULL;
	redisReply *x = redisCommand(c, "XREVRANGE %s + - COUNT %ld", stream, count);
	json_t *entries = json_array();
	for (size_t i = x && x->type == REDIS_REPLY_ARRAY ? x->elements : 0; i-- > 0;) {
		const redisReply *e = x->element[i];
		const redisReply *id = e->element[0], *body;
		json_t *ent = json_object();
		json_object_set_new(ent, "id", json_string(id->str));
		json_object_set_new(ent, "fields", fields_json(e->element[1], &body));
		if (!dead) {
			const char *state = "new";
			struct q_id eid;
			if (has_group && q_id_parse(id->str, &eid) == 0 &&
			    q_id_cmp(eid, delivered) <= 0)
				state = "acknowledged";
			for (size_t j = 0; pend && pend->type == REDIS_REPLY_ARRAY && j < pend->elements;
			     j++) {
				const redisReply *p = pend->element[j];
				if (strcmp(p->element[0]->str, id->str) != 0)
					continue;
				state = "pending";
				json_object_set_new(ent, "consumer", json_string(p->element[1]->str));
				json_object_set_new(ent, "idle_ms", json_integer(p->element[2]->integer));
				json_object_set_new(ent, "deliveries",
						    json_integer(p->element[3]->integer));
			}
			json_object_set_new(ent, "state", json_string(has_group ? state : "no_group"));
		}
		if (body) {
			struct q_intent in;
			char err[160];
			if (q_intent_decode(body->str, body->len, &in, err, sizeof err) == 0)
				json_object_set_new(ent, "body", q_intent_json(&in));
			else
				json_object_set_new(ent, "body", json_pack("{s:s}", "error", err));
		}
		json_array_append_new(entries, ent);
	}
	json_object_set_new(out, "entries", entries);
	freeReplyObject(pend);
	freeReplyObject(x);
	redisFree(c);
	print_json(out);
	json_decref(out);
	return 0;
}

int main(int argc, char **argv)
{
	gwb_alloc_init();
	struct opts o = { getenv("GWB_URL"), getenv("GWB_TOKEN"), getenv("GWB_REDIS"),
			  getenv("GWB_QUEUE_PREFIX") };
	if (!o.url || !o.url[0])
		o.url = "http://127.0.0.1:8080";
	if (!o.prefix || !o.prefix[0])
		o.prefix = "gwb";
	const char *url_src = "GWB_URL", *redis_src = "GWB_REDIS";
	int i = 1, bad = 0;
	for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
		const char *v;
		if (strcmp(argv[i], "--help") == 0) {
			fputs(usage_text, stdout);
			return 0;
		}
		if ((v = flag(argc, argv, &i, "url", &bad))) {
			o.url = v;
			url_src = "--url";
		}
		else if ((v = flag(argc, argv, &i, "token", &bad)))
			o.token = v;
		else if ((v = flag(argc, argv, &i, "redis", &bad))) {
			o.redis = v;
			redis_src = "--redis";
		}
		else if ((v = flag(argc, argv, &i, "prefix", &bad)))
			o.prefix = v;
		else
			return usage(bad ? "a flag needs a value" : "unknown option");
	}
	/* Addresses are checked before any command, with the grammar gwb-server uses. */
	struct addr ad;
	char why[200];
	if (addr_parse(o.url, ADDR_F_HTTP, &ad, why, sizeof why) < 0) {
		fprintf(stderr, "gwbctl: %s: %s\n", url_src, why);
		return EXIT_USAGE;
	}
	if (o.redis && o.redis[0] &&
	    addr_parse(o.redis, ADDR_F_REDIS | ADDR_F_UNIX, &ad, why, sizeof why) < 0) {
		fprintf(stderr, "gwbctl: %s: %s\n", redis_src, why);
		return EXIT_USAGE;
	}
	if (i >= argc)
		return usage("no command");
	const char *cmd = argv[i++];
	int n = argc - i;
	char **rest = argv + i;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	int rc;
	if (strcmp(cmd, "submit") == 0)
		rc = cmd_submit(&o, n, rest);
	else if (strcmp(cmd, "get") == 0)
		rc = cmd_task(&o, n, rest, "GET", "");
	else if (strcmp(cmd, "list") == 0)
		rc = cmd_list(&o, n, rest);
	else if (strcmp(cmd, "cancel") == 0)
		rc = cmd_task(&o, n, rest, "POST", "/cancel");
	else if (strcmp(cmd, "teams") == 0)
		rc = cmd_teams(&o, n, rest);
	else if (strcmp(cmd, "intents") == 0)
		rc = cmd_intents(&o, n, rest);
	else
		rc = usage("unknown command");
	curl_global_cleanup();
	return rc;
}
