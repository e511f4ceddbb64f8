/* The workload's checks, one reader per field, each naming its field in the error. */
#include "server/api/workload.h"

#include <stdio.h>
#include <string.h>

#include "lib/err.h"
#include "lib/imageref.h"
#include "lib/quantity.h"
#include "server/task.h"

static int bad(struct jx_err *e, const char *field, const char *rule)
{
	snprintf(e->field, sizeof e->field, "%s", field);
	snprintf(e->rule, sizeof e->rule, "%s", rule);
	return GWB_EINVAL;
}

/* A JSON string of 1..max bytes without NUL (jansson keeps an escaped one). */
static int text_ok(const json_t *v, size_t min, size_t max)
{
	if (!json_is_string(v))
		return 0;
	size_t n = json_string_length(v);
	return n >= min && n <= max && strlen(json_string_value(v)) == n;
}

static int image_check(const json_t *v, struct jx_err *e)
{
	char rule[sizeof e->rule];
	const char *why = NULL;
	if (!json_is_string(v))
		return bad(e, "workload.image", "must be a string");
	if (!text_ok(v, 1, IMAGEREF_MAX)) {
		snprintf(rule, sizeof rule, "must be an image reference of 1 to %d bytes",
			 IMAGEREF_MAX);
		return bad(e, "workload.image", rule);
	}
	if (!imageref_valid(json_string_value(v), &why)) {
		snprintf(rule, sizeof rule, "must be an image reference ([registry/]path[:tag]"
					    "[@sha256:digest]): %s",
			 why);
		return bad(e, "workload.image", rule);
	}
	return 0;
}

/* command or args: an array of at most max strings of at most WORKLOAD_ARG_BYTES; a command
 * starts with an absolute path (the program, as a node runs it). */
static int strings_check(const json_t *v, const char *key, size_t max, int is_command,
			 struct jx_err *e)
{
	char field[64], rule[160];
	snprintf(field, sizeof field, "workload.%s", key);
	if (!json_is_array(v) || json_array_size(v) > max || (is_command && !json_array_size(v))) {
		snprintf(rule, sizeof rule, "must be an array of %s to %zu strings",
			 is_command ? "1" : "0", max);
		return bad(e, field, rule);
	}
	size_t i;
	json_t *s;
	json_array_foreach(v, i, s) {
		snprintf(field, sizeof field, "workload.%s[%zu]", key, i);
		if (!text_ok(s, is_command && i == 0 ? 2 : 0, WORKLOAD_ARG_BYTES)) {
			snprintf(rule, sizeof rule, "must be a string of at most %d bytes",
				 WORKLOAD_ARG_BYTES);
			return bad(e, field, rule);
		}
		if (is_command && i == 0 && json_string_value(s)[0] != '/')
			return bad(e, field, "must be the program's absolute path");
	}
	return 0;
}

/* The names the GPU-sharing stack and gwb set themselves: a workload never sets them. */
static int env_reserved(const char *name)
{
	static const char *const exact[] = { "NVIDIA_VISIBLE_DEVICES", "LD_PRELOAD", NULL };
	static const char *const prefix[] = { "CUDA_DEVICE_MEMORY_LIMIT", "CUDA_DEVICE_SM_LIMIT",
					      "GWB_", NULL };
	for (const char *const *p = exact; *p; p++)
		if (strcmp(name, *p) == 0)
			return 1;
	for (const char *const *p = prefix; *p; p++)
		if (strncmp(name, *p, strlen(*p)) == 0)
			return 1;
	return 0;
}

static int env_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 1 || n > WORKLOAD_ENV_NAME_BYTES || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
			return 0;
	return 1;
}

static int env_check(const json_t *v, struct jx_err *e)
{
	char field[sizeof e->field], rule[160];
	if (!json_is_object(v) || json_object_size(v) > WORKLOAD_ENV_MAX) {
		snprintf(rule, sizeof rule, "must be an object of at most %d NAME: value strings",
			 WORKLOAD_ENV_MAX);
		return bad(e, "workload.env", rule);
	}
	const char *name;
	json_t *val;
	json_object_foreach((json_t *)v, name, val) {
		snprintf(field, sizeof field, "workload.env.%s", name);
		if (!env_name_ok(name)) {
			snprintf(rule, sizeof rule, "a name must be 1 to %d of [A-Za-z0-9_], not "
						    "starting with a digit",
				 WORKLOAD_ENV_NAME_BYTES);
			return bad(e, field, rule);
		}
		if (env_reserved(name))
			return bad(e, field,
				   "is set by the GPU-sharing stack or gwb, never by a workload "
				   "(NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT*, "
				   "CUDA_DEVICE_SM_LIMIT*, LD_PRELOAD, GWB_*)");
		if (!text_ok(val, 0, WORKLOAD_ENV_VALUE_BYTES)) {
			snprintf(rule, sizeof rule, "must be a string of at most %d bytes",
				 WORKLOAD_ENV_VALUE_BYTES);
			return bad(e, field, rule);
		}
	}
	return 0;
}

/* cpu or memory: a quantity string above 0 and at most max (millicores or bytes), written
 * back canonical into out under key. */
static int amount_check(const json_t *v, const char *key, int milli, int64_t max, json_t *out,
			struct jx_err *e)
{
	char field[32], rule[160], buf[QUANTITY_BUF];
	snprintf(field, sizeof field, "workload.%s", key);
	int64_t x = 0;
	int rc = json_is_string(v) && text_ok(v, 1, QUANTITY_MAX_LEN)
			 ? (milli ? quantity_parse_milli : quantity_parse)(json_string_value(v), &x)
			 : GWB_EINVAL;
	if (rc || x <= 0 || x > max) {
		snprintf(rule, sizeof rule,
			 "must be a Kubernetes quantity above 0 and at most %s (e.g. %s)",
			 milli ? quantity_format_milli(max, buf, sizeof buf)
			       : quantity_format_binary(max, buf, sizeof buf),
			 milli ? "\"500m\" or \"2\"" : "\"512Mi\" or \"4Gi\"");
		return bad(e, field, rule);
	}
	json_object_set_new(out, key,
			    json_string(milli ? quantity_format_milli(x, buf, sizeof buf)
					      : quantity_format_binary(x, buf, sizeof buf)));
	return 0;
}

int workload_parse(const json_t *w, json_t **out, struct jx_err *e)
{
	static const char *const keys[] = { "image", "command", "args", "env", "working_dir",
					    "cpu", "memory", NULL };
	*out = NULL;
	if (!json_is_object(w))
		return bad(e, "workload", "must be an object");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)w, key, v) {
		int known = 0;
		for (const char *const *k = keys; *k; k++)
			known |= strcmp(*k, key) == 0;
		if (!known) {
			char field[64];
			snprintf(field, sizeof field, "workload.%s", key);
			return bad(e, field, "unknown field");
		}
	}
	json_t *img = json_object_get(w, "image");
	if (!img)
		return bad(e, "workload.image", "is required");
	int rc = image_check(img, e);
	const json_t *cmd = json_object_get(w, "command"), *args = json_object_get(w, "args");
	const json_t *env = json_object_get(w, "env"), *wd = json_object_get(w, "working_dir");
	if (!rc && cmd)
		rc = strings_check(cmd, "command", WORKLOAD_COMMAND_MAX, 1, e);
	if (!rc && args)
		rc = strings_check(args, "args", WORKLOAD_ARGS_MAX, 0, e);
	if (!rc && env)
		rc = env_check(env, e);
	if (!rc && wd && (!text_ok(wd, 1, WORKLOAD_PATH_BYTES) || json_string_value(wd)[0] != '/'))
		rc = bad(e, "workload.working_dir",
			 "must be an absolute path of at most 1024 bytes");
	if (rc)
		return rc;
	json_t *c = json_object();
	json_object_set(c, "image", img);
	if (cmd)
		json_object_set(c, "command", (json_t *)cmd);
	if (args && json_array_size(args))
		json_object_set(c, "args", (json_t *)args);
	if (env && json_object_size(env))
		json_object_set(c, "env", (json_t *)env);
	if (wd)
		json_object_set(c, "working_dir", (json_t *)wd);
	const json_t *cpu = json_object_get(w, "cpu"), *mem = json_object_get(w, "memory");
	if ((cpu && (rc = amount_check(cpu, "cpu", 1, WORKLOAD_CPU_MAX_MILLI, c, e))) ||
	    (mem && (rc = amount_check(mem, "memory", 0, WORKLOAD_MEMORY_MAX, c, e)))) {
		json_decref(c);
		return rc;
	}
	/* The stored text has room for TASK_WORKLOAD_MAX bytes (its amounts filled in later
	 * add at most a few dozen). */
	size_t n = json_dumpb(c, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
	if (n + 64 > TASK_WORKLOAD_MAX) {
		json_decref(c);
		char rule[96];
		snprintf(rule, sizeof rule, "must be at most %d bytes as compact JSON",
			 TASK_WORKLOAD_MAX - 64);
		return bad(e, "workload", rule);
	}
	*out = c;
	return 0;
}

/* The amount key of w as millicores or bytes (it was written canonical by workload_parse). */
static int64_t amount_of(const json_t *w, const char *key, int milli)
{
	const char *s = json_string_value(json_object_get(w, key));
	int64_t x = 0;
	if (s && (milli ? quantity_parse_milli : quantity_parse)(s, &x))
		x = 0;
	return x;
}

/* Fills in or checks one amount against the team's default and maximum. */
static int amount_policy(json_t *w, const char *key, int milli, int64_t def, int64_t max,
			 int64_t fallback, struct jx_err *e)
{
	char buf[QUANTITY_BUF], field[32], rule[160];
	int64_t x = amount_of(w, key, milli);
	if (x > 0 && max > 0 && x > max) {
		snprintf(field, sizeof field, "workload.%s", key);
		snprintf(rule, sizeof rule, "must be at most %s (the team's maximum)",
			 milli ? quantity_format_milli(max, buf, sizeof buf)
			       : quantity_format_binary(max, buf, sizeof buf));
		return bad(e, field, rule);
	}
	if (x > 0)
		return 0;
	x = def > 0 ? def : fallback;
	if (max > 0 && x > max)
		x = max;
	json_object_set_new(w, key,
			    json_string(milli ? quantity_format_milli(x, buf, sizeof buf)
					      : quantity_format_binary(x, buf, sizeof buf)));
	return 0;
}

int workload_apply_policy(json_t *w, const struct team_policy *pol, struct jx_err *e)
{
	const char *image = json_string_value(json_object_get(w, "image"));
	int allowed = 0;
	size_t i;
	json_t *p;
	json_array_foreach(pol->allowed_images, i, p) {
		const char *prefix = json_string_value(p);
		allowed |= prefix && imageref_has_prefix(image, prefix);
	}
	if (!allowed)
		return GWB_EFORBIDDEN;
	int rc = amount_policy(w, "cpu", 1, pol->cpu_default, pol->cpu_max,
			       WORKLOAD_CPU_FALLBACK_MILLI, e);
	return rc ? rc
		  : amount_policy(w, "memory", 0, pol->memory_default, pol->memory_max,
				  WORKLOAD_MEMORY_FALLBACK, e);
}
