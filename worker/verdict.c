/* The worker's verdict document (verdict.h). */
#include "worker/verdict.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"

static json_t *int_or_null(json_t *v)
{
	return json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null();
}

static json_t *bool_or_null(json_t *v)
{
	return json_is_boolean(v) ? json_boolean(json_is_true(v)) : json_null();
}

/* The reason, cut at VERDICT_REASON_MAX bytes on a character boundary. */
static json_t *short_reason(json_t *r)
{
	const char *s = json_string_value(r);
	if (!s)
		return json_null();
	size_t n = strlen(s);
	if (n <= VERDICT_REASON_MAX)
		return json_string(s);
	n = VERDICT_REASON_MAX;
	while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--;
	return json_stringn(s, n);
}

/* The verdict boiled down from the probe's event ev. */
static json_t *isolation_json(json_t *ev)
{
	if (!ev)
		return json_null();
	const char *verdict = json_string_value(json_object_get(ev, "verdict"));
	const char *pre = json_string_value(json_object_get(ev, "ld_preload"));
	json_t *o = json_object();
	json_object_set_new(o, "verdict", json_string(verdict ? verdict : "unknown"));
	json_object_set_new(o, "reason", short_reason(json_object_get(ev, "reason")));
	json_object_set_new(o, "annotation_present",
			    bool_or_null(json_object_get(json_object_get(ev, "annotation"), "present")));
	json_object_set_new(o, "memory_limit_bytes",
			    int_or_null(json_object_get(json_object_get(ev, "cuda_device_memory_limit"),
							"bytes")));
	json_object_set_new(o, "sm_limit_percent",
			    int_or_null(json_object_get(json_object_get(ev, "cuda_device_sm_limit"),
							"percent")));
	json_object_set_new(o, "ld_preload_vgpu", json_boolean(pre && strstr(pre, "libvgpu.so")));
	json_object_set_new(o, "library_mapped", bool_or_null(json_object_get(ev, "libvgpu_mapped")));
	const char *test = json_string_value(json_object_get(json_object_get(ev, "over_limit_test"),
							     "result"));
	json_object_set_new(o, "over_limit_test", test ? json_string(test) : json_null());
	json_object_set_new(o, "enforced", json_boolean(verdict && !strcmp(verdict, "enforced")));
	return o;
}

static json_t *budget_json(const struct budget *b)
{
	if (!b)
		return json_null();
	return json_pack("{s:i,s:I,s:o}", "cards", b->alloc.ncards, "gpu_memory_bytes",
			 (json_int_t)b->mem_bytes, "gpu_core_percent",
			 b->has_core ? json_integer((json_int_t)b->core_percent) : json_null());
}

static json_t *ledger_json(const struct verdict *v)
{
	if (!v->has_ledger)
		return json_null();
	const struct ledger_result *r = &v->ledger;
	return json_pack("{s:s,s:I,s:I,s:I,s:o,s:I}", "kind", "simulated", "peak_bytes",
			 (json_int_t)r->used, "budget_bytes", (json_int_t)r->budget,
			 "working_set_bytes", (json_int_t)r->working_set, "refused_bytes",
			 r->refused ? json_integer((json_int_t)r->requested) : json_null(), "chunks",
			 (json_int_t)r->chunks);
}

static double finite_or_zero(double d)
{
	return isfinite(d) ? d : 0;
}

static json_t *work_json(const struct verdict *v)
{
	if (!v->has_work)
		return json_null();
	const struct work_stats *s = &v->work;
	return json_pack("{s:i,s:f,s:f,s:f,s:I,s:I}", "duty_percent", v->duty_percent,
			 "achieved_duty_percent", finite_or_zero(round(s->cpu_share * 10) / 10),
			 "elapsed_s", finite_or_zero(s->elapsed_s), "cpu_s", finite_or_zero(s->cpu_s), "periods",
			 (json_int_t)s->periods, "matmuls", (json_int_t)s->products);
}

json_t *verdict_json(const struct verdict *v)
{
	json_t *o = json_object();
	json_object_set_new(o, "worker", json_string("gwb-worker"));
	json_object_set_new(o, "exit_reason", json_string(v->exit_reason ? v->exit_reason : "unknown"));
	json_object_set_new(o, "exit_code", json_integer(v->exit_code));
	json_object_set_new(o, "isolation", isolation_json(v->isolation));
	json_object_set_new(o, "budget", budget_json(v->budget));
	json_object_set_new(o, "ledger", ledger_json(v));
	json_object_set_new(o, "work", work_json(v));
	return o;
}

int verdict_write(const struct verdict *v, const char *path)
{
	json_t *o = verdict_json(v);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return -1;
	FILE *f = fopen(path, "w");
	int rc = -1;
	if (f) {
		size_t n = strlen(text);
		rc = fwrite(text, 1, n, f) == n ? 0 : -1;
		rc = fclose(f) == 0 ? rc : -1;
	}
	gwb_free(text);
	return rc;
}
