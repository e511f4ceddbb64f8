/* The isolation probe: environment and mapping checks, and the over-limit allocation test
 * through the CUDA driver API reached with dlopen/dlsym. */
#include "worker/probe.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/err.h"
#include "worker/wlog.h"

#define VGPU_LIB "libvgpu.so"

/* Driver API types as the driver ABI defines them (64-bit): results and devices are ints, a
 * device pointer is an unsigned 64-bit integer, a context an opaque pointer. */
typedef int cu_result;
typedef unsigned long long cu_devptr;
#define CU_SUCCESS             0
#define CU_ERROR_OUT_OF_MEMORY 2

enum probe_limit probe_limit_parse(const char *s, uint64_t *out)
{
	if (!s || !s[0])
		return PROBE_LIMIT_UNSET;
	uint64_t scalar = 1;
	switch (s[strlen(s) - 1]) {
	case 'G':
	case 'g':
		scalar = 1ULL << 30;
		break;
	case 'M':
	case 'm':
		scalar = 1ULL << 20;
		break;
	case 'K':
	case 'k':
		scalar = 1ULL << 10;
		break;
	}
	/* Like HAMi-core: no errno check, the end pointer unused, unsigned wrap-around kept. */
	uint64_t res = strtoull(s, NULL, 0);
	uint64_t scaled = res * scalar;
	if (scaled == 0)
		return PROBE_LIMIT_ZERO;
	if (scaled / scalar != res)
		return PROBE_LIMIT_OVERFLOW;
	*out = scaled;
	return PROBE_LIMIT_SET;
}

/* The path column of one maps line: after five whitespace-separated fields. */
static const char *maps_path_of(char *line)
{
	char *p = line;
	for (int field = 0; field < 5; field++) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			return NULL;
		while (*p && *p != ' ' && *p != '\t')
			p++;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	p[strcspn(p, "\n")] = '\0';
	return *p ? p : NULL;
}

int probe_maps_find(const char *path, const char *libname, char *found, size_t foundlen)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return GWB_EIO;
	char line[PATH_MAX + 256];
	int hit = 0, whole = 1;
	while (!hit && fgets(line, sizeof line, f)) {
		int starts = whole;
		whole = strchr(line, '\n') != NULL;
		if (!starts) /* the tail of an over-long line */
			continue;
		const char *p = maps_path_of(line);
		if (!p)
			continue;
		const char *base = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
		if (strncmp(base, libname, strlen(libname)) == 0) {
			snprintf(found, foundlen, "%s", p);
			hit = 1;
		}
	}
	fclose(f);
	return hit;
}

const char *probe_verdict(const struct probe_facts *f, char *reason, size_t len)
{
	switch (f->test) {
	case PROBE_TEST_REFUSED:
		if (f->vgpu_mapped == 1) {
			snprintf(reason, len, "an allocation over the limit was refused (%s)",
			         f->why);
			return "enforced";
		}
		snprintf(reason, len,
		         "an allocation over the limit was refused (%s), but libvgpu.so is not "
		         "mapped: the card's own capacity may have refused it",
		         f->why);
		return "unknown";
	case PROBE_TEST_SUCCEEDED:
		snprintf(reason, len, "an allocation over the limit succeeded (%s)", f->why);
		return "not_enforced";
	case PROBE_TEST_FAILED:
		snprintf(reason, len, "the over-limit test could not be completed: %s", f->why);
		return "unknown";
	case PROBE_TEST_NOT_RUN:
		break;
	}
	if (f->vgpu_mapped < 0) {
		snprintf(reason, len,
		         "the memory map could not be read and no over-limit test ran "
		         "(%s)",
		         f->why);
		return "unknown";
	}
	if (f->vgpu_mapped == 1 || f->mig) {
		snprintf(reason, len, "%s, but no over-limit allocation was tried: %s",
		         f->vgpu_mapped == 1 ? "libvgpu.so is mapped" : "MIG devices are visible",
		         f->why);
		return "unknown";
	}
	if (f->limit_set || f->preload_vgpu) {
		snprintf(reason, len,
		         "%s but libvgpu.so is not mapped into this process, so nothing "
		         "acts on it; no over-limit test ran (%s)",
		         f->limit_set ? "CUDA_DEVICE_MEMORY_LIMIT is set"
		                      : "LD_PRELOAD names libvgpu.so",
		         f->why);
		return "not_enforced";
	}
	snprintf(reason, len,
	         "no isolation layer is visible (no libvgpu.so mapped, no "
	         "CUDA_DEVICE_MEMORY_LIMIT); no over-limit test ran (%s)",
	         f->why);
	return "not_enforced";
}

/* The driver entry points the test needs, resolved by name. */
struct cu_api {
	cu_result (*init)(unsigned int);
	cu_result (*device_get_count)(int *);
	cu_result (*device_get)(int *, int);
	cu_result (*ctx_retain)(void **, int);
	cu_result (*ctx_release)(int);
	cu_result (*ctx_set_current)(void *);
	cu_result (*mem_get_info)(size_t *, size_t *);
	cu_result (*mem_alloc)(cu_devptr *, size_t);
	cu_result (*mem_free)(cu_devptr);
};

struct cu_test {
	uint64_t limit, requested;
	const char *limit_source;
	size_t free_bytes, total_bytes;
	int have_info;
};

static int resolve(void *h, struct cu_api *api, char *why, size_t len)
{
	static const char *const names[] = {"cuInit",
	                                    "cuDeviceGetCount",
	                                    "cuDeviceGet",
	                                    "cuDevicePrimaryCtxRetain",
	                                    "cuDevicePrimaryCtxRelease_v2",
	                                    "cuCtxSetCurrent",
	                                    "cuMemGetInfo_v2",
	                                    "cuMemAlloc_v2",
	                                    "cuMemFree_v2"};
	void *syms[sizeof names / sizeof names[0]];
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		syms[i] = dlsym(h, names[i]);
		/* Drivers before CUDA 11 export only the first version of this one. */
		if (!syms[i] && i == 4)
			syms[i] = dlsym(h, "cuDevicePrimaryCtxRelease");
		if (!syms[i]) {
			snprintf(why, len, "the driver has no %s", names[i]);
			return GWB_ENOTFOUND;
		}
	}
	/* POSIX guarantees that a dlsym result converts to a function pointer. */
	memcpy(&api->init, &syms[0], sizeof syms[0]);
	memcpy(&api->device_get_count, &syms[1], sizeof syms[1]);
	memcpy(&api->device_get, &syms[2], sizeof syms[2]);
	memcpy(&api->ctx_retain, &syms[3], sizeof syms[3]);
	memcpy(&api->ctx_release, &syms[4], sizeof syms[4]);
	memcpy(&api->ctx_set_current, &syms[5], sizeof syms[5]);
	memcpy(&api->mem_get_info, &syms[6], sizeof syms[6]);
	memcpy(&api->mem_alloc, &syms[7], sizeof syms[7]);
	memcpy(&api->mem_free, &syms[8], sizeof syms[8]);
	return 0;
}

/* Asks device 0 for limit + PROBE_OVER_EXTRA bytes in its primary context. */
static enum probe_test alloc_over(const struct cu_api *api, struct cu_test *t, char *why,
                                  size_t len)
{
	int count = 0, dev = 0;
	void *ctx = NULL;
	cu_result r = api->init(0);
	if (r != CU_SUCCESS) {
		snprintf(why, len, "cuInit returned %d", r);
		return PROBE_TEST_FAILED;
	}
	if ((r = api->device_get_count(&count)) != CU_SUCCESS || count < 1) {
		snprintf(why, len, "no CUDA device is visible (cuDeviceGetCount: %d, count %d)", r,
		         count);
		return PROBE_TEST_FAILED;
	}
	if ((r = api->device_get(&dev, 0)) != CU_SUCCESS ||
	    (r = api->ctx_retain(&ctx, dev)) != CU_SUCCESS) {
		snprintf(why, len, "no context on device 0 (driver error %d)", r);
		return PROBE_TEST_FAILED;
	}
	enum probe_test res = PROBE_TEST_FAILED;
	if ((r = api->ctx_set_current(ctx)) != CU_SUCCESS) {
		snprintf(why, len, "cuCtxSetCurrent returned %d", r);
		goto out;
	}
	t->have_info = api->mem_get_info(&t->free_bytes, &t->total_bytes) == CU_SUCCESS;
	cu_devptr p = 0;
	r = api->mem_alloc(&p, (size_t)t->requested);
	if (r == CU_SUCCESS) {
		api->mem_free(p);
		res = PROBE_TEST_SUCCEEDED;
		snprintf(why, len, "cuMemAlloc_v2 of %llu bytes, limit %llu from %s, succeeded",
		         (unsigned long long)t->requested, (unsigned long long)t->limit,
		         t->limit_source);
	} else if (r == CU_ERROR_OUT_OF_MEMORY) {
		res = PROBE_TEST_REFUSED;
		snprintf(why, len,
		         "cuMemAlloc_v2 of %llu bytes, limit %llu from %s, returned "
		         "CUDA_ERROR_OUT_OF_MEMORY",
		         (unsigned long long)t->requested, (unsigned long long)t->limit,
		         t->limit_source);
	} else {
		snprintf(why, len, "cuMemAlloc_v2 returned %d, not a success or an out-of-memory",
		         r);
	}
out:
	api->ctx_release(dev);
	return res;
}

/* Loads the driver and runs the test. The handle is never closed: unloading a CUDA driver
 * (and the hooks a preloaded libvgpu.so set on it) mid-process is not safe. */
static enum probe_test cuda_test(const char *library, struct cu_test *t, int *loaded, char *why,
                                 size_t len)
{
	*loaded = 0;
	void *h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, len, "no CUDA driver could be loaded: %s", e ? e : library);
		return PROBE_TEST_NOT_RUN;
	}
	*loaded = 1;
	struct cu_api api;
	if (resolve(h, &api, why, len) != 0)
		return PROBE_TEST_FAILED;
	if (!t->limit) {
		snprintf(why, len,
		         "no memory limit to test against (no CUDA_DEVICE_MEMORY_LIMIT, "
		         "no gpu-memory in the annotation)");
		return PROBE_TEST_NOT_RUN;
	}
	if (t->limit > SIZE_MAX - PROBE_OVER_EXTRA) {
		snprintf(why, len, "the limit is too large to ask for more");
		return PROBE_TEST_NOT_RUN;
	}
	t->requested = t->limit + PROBE_OVER_EXTRA;
	return alloc_over(&api, t, why, len);
}

static const char *limit_meaning(enum probe_limit m, int sm)
{
	switch (m) {
	case PROBE_LIMIT_UNSET:
		return "unset: no limit";
	case PROBE_LIMIT_ZERO:
		return "zero: no limit";
	case PROBE_LIMIT_OVERFLOW:
		return "overflow: no limit";
	case PROBE_LIMIT_SET:
		break;
	}
	return sm ? "percent of SMs" : "bytes";
}

/* The allocation as the probe reports it, and the minors joined as koordlet joins them. */
static json_t *annotation_json(const struct devalloc *a, char *minors, size_t len)
{
	minors[0] = '\0';
	if (!a)
		return json_pack("{s:b}", "present", 0);
	size_t used = 0;
	for (int i = 0; i < a->ncards; i++) {
		int n =
		    snprintf(minors + used, len - used, "%s%d", i ? "," : "", a->cards[i].minor);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
	json_t *o = json_pack("{s:b,s:i,s:s}", "present", 1, "cards", a->ncards, "minors", minors);
	if (a->ncards > 0 && a->cards[0].has_mem)
		json_object_set_new(o, "first_card_gpu_memory_bytes",
		                    json_integer(a->cards[0].mem_bytes));
	return o;
}

static json_t *env_limit_json(const char *name, int sm, uint64_t *limit_out, int *set,
                              const struct devalloc *a)
{
	const char *raw = getenv(name);
	uint64_t v = 0;
	enum probe_limit m = probe_limit_parse(raw, &v);
	*set = m == PROBE_LIMIT_SET;
	if (limit_out)
		*limit_out = *set ? v : 0;
	json_t *o = json_object();
	json_object_set_new(o, "raw", wlog_str(raw));
	json_object_set_new(o, sm ? "percent" : "bytes",
	                    *set ? json_integer((json_int_t)v) : json_null());
	json_object_set_new(o, "meaning", json_string(limit_meaning(m, sm)));
	if (sm && *set && v >= 100)
		json_object_set_new(o, "meaning", json_string("100 or more: no throttling"));
	/* koordlet writes the first card's gpu-memory (§5.1); say whether they agree. */
	if (!sm && *set && a && a->ncards > 0 && a->cards[0].has_mem)
		json_object_set_new(o, "matches_annotation",
		                    json_boolean((int64_t)v == a->cards[0].mem_bytes));
	return o;
}

static json_t *test_json(enum probe_test r, const struct cu_test *t, const char *why)
{
	static const char *const names[] = {"not_run", "refused", "succeeded", "failed"};
	json_t *o = json_object();
	json_object_set_new(o, "result", json_string(names[r]));
	json_object_set_new(o, "detail", wlog_str(why));
	if (t->requested) {
		json_object_set_new(o, "limit_bytes", json_integer((json_int_t)t->limit));
		json_object_set_new(o, "limit_source", json_string(t->limit_source));
		json_object_set_new(o, "requested_bytes", json_integer((json_int_t)t->requested));
	}
	if (t->have_info) {
		/* As the driver reports them: libvgpu.so reports the limit as the total. */
		json_object_set_new(o, "device_free_bytes",
		                    json_integer((json_int_t)t->free_bytes));
		json_object_set_new(o, "device_total_bytes",
		                    json_integer((json_int_t)t->total_bytes));
	}
	return o;
}

static void maps_facts(const char *maps_path, struct probe_facts *f, json_t *o)
{
	char found[PATH_MAX];
	int m = probe_maps_find(maps_path, VGPU_LIB, found, sizeof found);
	f->vgpu_mapped = m < 0 ? -1 : m;
	json_object_set_new(o, "maps_path", wlog_str(maps_path));
	json_object_set_new(o, "libvgpu_mapped", m < 0 ? json_null() : json_boolean(m));
	json_object_set_new(o, "libvgpu_path", m == 1 ? wlog_str(found) : json_null());
}

json_t *probe_run(const struct probe_opts *o)
{
	struct probe_facts f;
	struct cu_test t;
	char minors[128], reason[768];
	memset(&f, 0, sizeof f);
	memset(&t, 0, sizeof t);
	json_t *ev = json_object();
	json_object_set_new(ev, "annotation", annotation_json(o->alloc, minors, sizeof minors));
	const char *nvd = getenv("NVIDIA_VISIBLE_DEVICES");
	f.mig = nvd && strstr(nvd, "MIG-") != NULL;
	json_object_set_new(ev, "nvidia_visible_devices", wlog_str(nvd));
	json_object_set_new(ev, "nvidia_visible_devices_match_annotation",
	                    nvd && o->alloc ? json_boolean(strcmp(nvd, minors) == 0) : json_null());
	json_object_set_new(
	    ev, "cuda_device_memory_limit",
	    env_limit_json("CUDA_DEVICE_MEMORY_LIMIT", 0, &t.limit, &f.limit_set, o->alloc));
	int sm_set;
	json_object_set_new(ev, "cuda_device_sm_limit",
	                    env_limit_json("CUDA_DEVICE_SM_LIMIT", 1, NULL, &sm_set, o->alloc));
	const char *pre = getenv("LD_PRELOAD");
	f.preload_vgpu = pre && strstr(pre, VGPU_LIB) != NULL;
	json_object_set_new(ev, "ld_preload", wlog_str(pre));
	maps_facts(o->maps_path, &f, ev);
	t.limit_source = "CUDA_DEVICE_MEMORY_LIMIT";
	if (!t.limit && o->alloc && o->alloc->ncards > 0 && o->alloc->cards[0].has_mem) {
		t.limit = (uint64_t)o->alloc->cards[0].mem_bytes;
		t.limit_source = "annotation";
	}
	f.test = cuda_test(o->cuda_library, &t, &f.driver_loaded, f.why, sizeof f.why);
	json_object_set_new(ev, "cuda_driver",
	                    json_pack("{s:o,s:b}", "library", wlog_str(o->cuda_library), "loaded",
	                              f.driver_loaded));
	json_object_set_new(ev, "over_limit_test", test_json(f.test, &t, f.why));
	json_object_set_new(ev, "verdict", json_string(probe_verdict(&f, reason, sizeof reason)));
	json_object_set_new(ev, "reason", wlog_str(reason));
	return ev;
}
