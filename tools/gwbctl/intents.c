/* gwbctl intents: the intent stream read straight from Redis (synchronous hiredis), with each
 * entry's pending state, deliveries and decoded msgpack body. */
#include "tools/gwbctl/intents.h"

#include <hiredis/hiredis.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include "queue/codec.h"
#include "queue/conn.h"
#include "tools/gwbctl/show.h"

#define EXIT_FAIL 1
/* XPENDING reads at most this many pending entries of the group. */
#define INTENTS_SCAN_MAX 10000

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

int intents_show(const char *redis, const char *prefix, long count, int dead)
{
	redisContext *c = redis_open(redis);
	if (!c)
		return EXIT_FAIL;
	struct q_keys keys;
	q_keys_init(&keys, prefix);
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
						    INTENTS_SCAN_MAX)
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
	show_json(stdout, out);
	json_decref(out);
	return 0;
}

