/* Object helpers: small, allocation-light accessors used by every kubesim module. */
#include "tools/kubesim/obj.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/clock.h"
#include "lib/kobj.h"

json_t *obj_path(const json_t *o, const char *path)
{
	char key[128];
	const char *p = path;
	json_t *cur = (json_t *)o;
	while (cur && *p) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		if (n >= sizeof key || !json_is_object(cur))
			return NULL;
		memcpy(key, p, n);
		key[n] = '\0';
		cur = json_object_get(cur, key);
		p = dot ? dot + 1 : p + n;
	}
	return cur;
}

const char *obj_str(const json_t *o, const char *path)
{
	return json_string_value(obj_path(o, path));
}

int64_t obj_int(const json_t *o, const char *path, int64_t def)
{
	json_t *v = obj_path(o, path);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : def;
}

int obj_true(const json_t *o, const char *path)
{
	return json_is_true(obj_path(o, path));
}

json_t *obj_child(json_t *o, const char *key)
{
	json_t *c = json_object_get(o, key);
	if (!json_is_object(c)) {
		c = json_object();
		json_object_set_new(o, key, c);
	}
	return c;
}

void obj_set(json_t *o, const char *path, json_t *v)
{
	char key[128];
	const char *p = path;
	json_t *cur = o;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t n = dot ? (size_t)(dot - p) : strlen(p);
		if (n >= sizeof key) {
			json_decref(v);
			return;
		}
		memcpy(key, p, n);
		key[n] = '\0';
		if (!dot) {
			json_object_set_new(cur, key, v);
			return;
		}
		cur = obj_child(cur, key);
		p = dot + 1;
	}
}

void obj_set_str(json_t *o, const char *path, const char *v)
{
	obj_set(o, path, json_string(v));
}

const char *obj_name(const json_t *o)
{
	const char *s = kobj_name(o);
	return s ? s : "";
}

const char *obj_ns(const json_t *o)
{
	const char *s = kobj_namespace(o);
	return s ? s : "";
}

const char *obj_uid(const json_t *o)
{
	const char *s = kobj_uid(o);
	return s ? s : "";
}

const char *obj_label(const json_t *o, const char *key)
{
	return kobj_label(o, key);
}

const char *obj_annotation(const json_t *o, const char *key)
{
	return kobj_annotation(o, key);
}

int obj_deleting(const json_t *o)
{
	return kobj_deleting(o);
}

int obj_has_finalizers(const json_t *o)
{
	return json_array_size(obj_path(o, "metadata.finalizers")) > 0;
}

int obj_remove_finalizer(json_t *o, const char *name)
{
	json_t *f = obj_path(o, "metadata.finalizers");
	size_t i;
	json_t *v;
	json_array_foreach(f, i, v)
	{
		if (json_is_string(v) && !strcmp(json_string_value(v), name)) {
			json_array_remove(f, i);
			if (json_array_size(f) == 0)
				json_object_del(obj_path(o, "metadata"), "finalizers");
			return 1;
		}
	}
	return 0;
}

const char *obj_controller_uid(const json_t *o, const char *kind)
{
	size_t i;
	json_t *r;
	json_array_foreach(obj_path(o, "metadata.ownerReferences"), i, r)
	{
		const char *k = obj_str(r, "kind");
		if (obj_true(r, "controller") && k && !strcmp(k, kind))
			return obj_str(r, "uid");
	}
	return NULL;
}

int obj_pod_terminal(const json_t *pod)
{
	return kobj_pod_terminal(pod);
}

json_t *obj_condition(const json_t *o, const char *type)
{
	size_t i;
	json_t *c;
	json_array_foreach(obj_path(o, "status.conditions"), i, c)
	{
		const char *t = obj_str(c, "type");
		if (t && !strcmp(t, type))
			return c;
	}
	return NULL;
}

int obj_condition_true(const json_t *o, const char *type)
{
	return kobj_condition_true(o, type);
}

static int set_if_diff(json_t *c, const char *key, const char *v)
{
	const char *cur = obj_str(c, key);
	if (!v) {
		if (!json_object_get(c, key))
			return 0;
		json_object_del(c, key);
		return 1;
	}
	if (cur && !strcmp(cur, v))
		return 0;
	json_object_set_new(c, key, json_string(v));
	return 1;
}

int obj_set_condition(json_t *o, const char *type, const char *status, const char *reason,
		      const char *message, int probe)
{
	char now[32];
	obj_now(now, sizeof now);
	json_t *st = obj_child(o, "status");
	json_t *conds = json_object_get(st, "conditions");
	if (!json_is_array(conds)) {
		conds = json_array();
		json_object_set_new(st, "conditions", conds);
	}
	json_t *c = obj_condition(o, type);
	int changed = 0;
	if (!c) {
		c = json_object();
		json_object_set_new(c, "type", json_string(type));
		json_array_append_new(conds, c);
		changed = 1;
	}
	const char *old = obj_str(c, "status");
	if (!old || strcmp(old, status) != 0) {
		json_object_set_new(c, "status", json_string(status));
		json_object_set_new(c, "lastTransitionTime", json_string(now));
		if (probe)
			json_object_set_new(c, "lastProbeTime", json_string(now));
		changed = 1;
	}
	if (!json_object_get(c, "lastProbeTime"))
		json_object_set_new(c, "lastProbeTime", probe ? json_string(now) : json_null());
	changed |= set_if_diff(c, "reason", reason);
	changed |= set_if_diff(c, "message", message);
	if (changed && probe)
		json_object_set_new(c, "lastProbeTime", json_string(now));
	return changed;
}

char *obj_now(char *buf, size_t len)
{
	return clock_fmt_rfc3339(clock_now_ms(), buf, len);
}

char *obj_now_micro(char *buf, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000);
	return buf;
}

int obj_time_ms(const json_t *o, const char *path, int64_t *ms)
{
	const char *s = obj_str(o, path);
	if (!s)
		return -1;
	return clock_parse_rfc3339(s, ms) == 0 ? 0 : -1;
}

void obj_random(void *buf, size_t len)
{
	unsigned char *p = buf;
	size_t got = 0;
	while (got < len) {
		ssize_t n = getrandom(p + got, len - got, GRND_NONBLOCK);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (got < len) {
		/* No entropy yet (early boot): a clock-seeded LCG is enough for names and uids. */
		static uint64_t seed;
		if (!seed)
			seed = (uint64_t)clock_now_ms() * 6364136223846793005ULL + 1;
		for (; got < len; got++) {
			seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
			p[got] = (unsigned char)(seed >> 33);
		}
	}
}

void obj_uuid(char out[37])
{
	unsigned char b[16];
	obj_random(b, sizeof b);
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
}

void obj_gen_name(const char *base, char *out, size_t len)
{
	/* Kubernetes' rand.String alphabet: no vowels, no look-alike digits. */
	static const char alpha[] = "bcdfghjklmnpqrstvwxz2456789";
	unsigned char r[5];
	char sfx[6];
	obj_random(r, sizeof r);
	for (int i = 0; i < 5; i++)
		sfx[i] = alpha[r[i] % (sizeof alpha - 1)];
	sfx[5] = '\0';
	snprintf(out, len, "%.58s%s", base, sfx);
}

static int label_ok(const char *s, size_t n)
{
	if (n == 0 || n > 63)
		return 0;
	if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!(islower(c) || isdigit(c) || c == '-'))
			return 0;
	}
	return 1;
}

int obj_dns_label(const char *s)
{
	return label_ok(s, strlen(s));
}

int obj_dns_subdomain(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 253)
		return 0;
	const char *p = s;
	for (;;) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		if (!label_ok(p, l))
			return 0;
		if (!dot)
			return 1;
		p = dot + 1;
	}
}
