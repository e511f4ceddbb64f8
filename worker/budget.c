/* Reading and checking the worker's budget. */
#include "worker/budget.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/podinfo.h"

__attribute__((format(printf, 4, 5))) static int fail(struct budget_err *e, int rc,
                                                      const char *problem, const char *fmt, ...)
{
	va_list ap;
	e->problem = problem;
	va_start(ap, fmt);
	vsnprintf(e->reason, sizeof e->reason, fmt, ap);
	va_end(ap);
	return rc;
}

static int check_cards(struct budget *b, struct budget_err *e)
{
	const struct devalloc *a = &b->alloc;
	if (a->ncards == 0)
		return fail(e, GWB_EINVAL, "no_gpu", "the annotation lists no \"gpu\" cards");
	for (int i = 0; i < a->ncards; i++) {
		const struct devalloc_card *c = &a->cards[i];
		if (!c->has_mem || c->mem_bytes <= 0)
			return fail(e, GWB_EINVAL, "no_memory",
			            "gpu[%d] (minor %d) has no positive " DEVALLOC_RES_MEM, i,
			            c->minor);
		if (b->mem_bytes > INT64_MAX - c->mem_bytes)
			return fail(e, GWB_EINVAL, "no_memory", "the memory total overflows");
		b->mem_bytes += c->mem_bytes;
		if (c->has_core) {
			if (c->core > 100)
				return fail(e, GWB_EINVAL, "bad_core",
				            "gpu[%d] (minor %d) has " DEVALLOC_RES_CORE
				            " %lld, above 100",
				            i, c->minor, (long long)c->core);
			b->core_percent += c->core;
			b->has_core = 1;
		}
	}
	return 0;
}

int budget_from_text(const char *text, size_t len, struct budget *b, struct budget_err *e)
{
	memset(b, 0, sizeof *b);
	memset(e, 0, sizeof *e);
	char *json = NULL;
	int rc = podinfo_get(text, len, DEVALLOC_ANNOTATION, &json);
	if (rc == GWB_ENOTFOUND)
		return fail(e, rc, "annotation_missing",
		            "no " DEVALLOC_ANNOTATION " line in the file (not scheduled yet?)");
	if (rc != 0)
		return fail(e, GWB_EINVAL, "file_malformed",
		            "not a downward-API file: a line is not key=\"Go-quoted value\"");
	char why[200];
	rc = devalloc_parse(json, strlen(json), &b->alloc, why, sizeof why);
	gwb_free(json);
	if (rc != 0)
		return fail(e, GWB_EINVAL, "annotation_malformed", DEVALLOC_ANNOTATION ": %s", why);
	rc = check_cards(b, e);
	if (rc != 0)
		memset(b, 0, sizeof *b);
	return rc;
}

int budget_load(const char *path, struct budget *b, struct budget_err *e)
{
	memset(b, 0, sizeof *b);
	memset(e, 0, sizeof *e);
	FILE *f = fopen(path, "rb");
	if (!f)
		return errno == ENOENT ? fail(e, GWB_ENOTFOUND, "file_missing", "%.200s: %s", path,
		                              strerror(errno))
		                       : fail(e, GWB_EIO, "file_unreadable", "%.200s: %s", path,
		                              strerror(errno));
	char *text = gwb_malloc(BUDGET_FILE_MAX + 1);
	size_t n = fread(text, 1, BUDGET_FILE_MAX + 1, f);
	int rc;
	if (ferror(f))
		rc = fail(e, GWB_EIO, "file_unreadable", "%.200s: read error", path);
	else if (n > BUDGET_FILE_MAX)
		rc = fail(e, GWB_EINVAL, "file_too_large", "%.200s: more than %d bytes", path,
		          BUDGET_FILE_MAX);
	else
		rc = budget_from_text(text, n, b, e);
	fclose(f);
	gwb_free(text);
	return rc;
}

int budget_duty_percent(const struct budget *b)
{
	if (!b->has_core)
		return 100;
	return b->core_percent > 100 ? 100 : (int)b->core_percent;
}

json_t *budget_to_json(const struct budget *b)
{
	json_t *o = json_object();
	json_object_set_new(o, "source", json_string(DEVALLOC_ANNOTATION));
	json_object_set_new(o, "gpu_memory_bytes", json_integer(b->mem_bytes));
	json_object_set_new(o, "gpu_core_percent",
	                    b->has_core ? json_integer(b->core_percent) : json_null());
	json_object_set_new(o, "cpu_duty_percent", json_integer(budget_duty_percent(b)));
	json_t *cards = devalloc_to_json(&b->alloc);
	json_object_set(o, "cards", json_object_get(cards, "cards"));
	json_decref(cards);
	return o;
}
