/* Unit tests of worker/probe: HAMi-core's limit syntax, finding libvgpu.so in a memory map,
 * the verdict rules (enforced only on an observed refusal with the library mapped), and a
 * probe run with no driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/err.h"
#include "lib/jsonx.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"
#include "worker/probe.h"

TEST(probe_limit_reads_like_hami)
{
	uint64_t v = 0;
	CHECK_INT(probe_limit_parse("1073741824", &v), PROBE_LIMIT_SET);
	CHECK_INT(v, 1073741824ULL);
	const char *same[] = {"1g",       "1G",       "1024m",      "1024M",
	                      "1048576k", "1048576K", "0x40000000", NULL};
	for (int i = 0; same[i]; i++) {
		v = 0;
		CHECKF(probe_limit_parse(same[i], &v) == PROBE_LIMIT_SET && v == 1073741824ULL,
		       "%s gave %llu", same[i], (unsigned long long)v);
	}
	CHECK_INT(probe_limit_parse("010", &v), PROBE_LIMIT_SET); /* base 0: octal */
	CHECK_INT(v, 8);
	CHECK_INT(probe_limit_parse("2048mb", &v), PROBE_LIMIT_SET); /* trailing text ignored */
	CHECK_INT(v, 2048);
	CHECK_INT(probe_limit_parse(NULL, &v), PROBE_LIMIT_UNSET);
	CHECK_INT(probe_limit_parse("", &v), PROBE_LIMIT_UNSET);
	CHECK_INT(probe_limit_parse("0", &v), PROBE_LIMIT_ZERO);
	CHECK_INT(probe_limit_parse("abc", &v), PROBE_LIMIT_ZERO);
	CHECK_INT(probe_limit_parse("99999999999999g", &v), PROBE_LIMIT_OVERFLOW);
	CHECK_INT(probe_limit_parse("25", &v), PROBE_LIMIT_SET);
	CHECK_INT(v, 25);
}

TEST(probe_maps_finds_the_library)
{
	const char *with = h_write_file(
	    "maps1", "55d4c000-55d4d000 r--p 00000000 08:01 123 /usr/bin/gwb-worker\n"
	             "7f00-7f10 r-xp 00000000 08:01 456 /usr/local/vgpu/libvgpu.so\n"
	             "7f20-7f30 rw-p 00000000 00:00 0 \n"
	             "7ffd-7ffe rw-p 00000000 00:00 0                          [stack]\n");
	char found[256] = "";
	CHECK_INT(probe_maps_find(with, "libvgpu.so", found, sizeof found), 1);
	CHECK_STR(found, "/usr/local/vgpu/libvgpu.so");
	const char *without =
	    h_write_file("maps2", "7f00-7f10 r-xp 00000000 08:01 456 /usr/lib/libc.so.6\n"
	                        "7f20-7f30 r-xp 00000000 08:01 457 /opt/not-libvgpu.so/x.so\n");
	CHECK_INT(probe_maps_find(without, "libvgpu.so", found, sizeof found), 0);
	CHECK_INT(probe_maps_find(h_path("none"), "libvgpu.so", found, sizeof found), GWB_EIO);
	/* The real map of this process has no libvgpu.so. */
	CHECK_INT(probe_maps_find("/proc/self/maps", "libvgpu.so", found, sizeof found), 0);
	CHECK_INT(probe_maps_find("/proc/self/maps", "libc.so", found, sizeof found), 1);
}

static const char *verdict(struct probe_facts f, char *reason)
{
	snprintf(f.why, sizeof f.why, "why");
	return probe_verdict(&f, reason, 512);
}

TEST(probe_verdict_rules)
{
	char r[512];
	struct probe_facts f;
	memset(&f, 0, sizeof f);
	/* Nothing at all: nothing would enforce. */
	CHECK_STR(verdict(f, r), "not_enforced");
	CHECK(strstr(r, "no isolation layer") != NULL);
	/* The variable without the library: never enforced. */
	f.limit_set = 1;
	CHECK_STR(verdict(f, r), "not_enforced");
	CHECK(strstr(r, "not mapped") != NULL);
	f.limit_set = 0;
	f.preload_vgpu = 1;
	CHECK_STR(verdict(f, r), "not_enforced");
	/* The library mapped but no driver: cannot tell. */
	f.vgpu_mapped = 1;
	CHECK_STR(verdict(f, r), "unknown");
	CHECK(strstr(r, "libvgpu.so is mapped") != NULL);
	f.vgpu_mapped = -1;
	CHECK_STR(verdict(f, r), "unknown");
	f.vgpu_mapped = 0;
	f.preload_vgpu = 0;
	f.mig = 1;
	CHECK_STR(verdict(f, r), "unknown");
	f.mig = 0;
	/* With a driver, the test decides. */
	f.driver_loaded = 1;
	f.test = PROBE_TEST_SUCCEEDED;
	CHECK_STR(verdict(f, r), "not_enforced");
	f.vgpu_mapped = 1;
	CHECK_STR(verdict(f, r), "not_enforced");
	f.test = PROBE_TEST_REFUSED;
	CHECK_STR(verdict(f, r), "enforced");
	f.vgpu_mapped = 0; /* a refusal without the library may be the card's own capacity */
	CHECK_STR(verdict(f, r), "unknown");
	f.limit_set = 1;
	CHECK_STR(verdict(f, r), "unknown");
	f.test = PROBE_TEST_FAILED;
	f.vgpu_mapped = 1;
	CHECK_STR(verdict(f, r), "unknown");
}

static json_t *run_probe(const char *maps, const struct devalloc *a)
{
	struct probe_opts o = {
	    .maps_path = maps, .cuda_library = h_path("no-such-libcuda.so.1"), .alloc = a};
	return probe_run(&o);
}

TEST(probe_run_without_driver)
{
	unsetenv("CUDA_DEVICE_MEMORY_LIMIT");
	unsetenv("CUDA_DEVICE_SM_LIMIT");
	unsetenv("LD_PRELOAD");
	unsetenv("NVIDIA_VISIBLE_DEVICES");
	json_t *ev = run_probe("/proc/self/maps", NULL);
	const char *v = json_string_value(json_object_get(ev, "verdict"));
	CHECKF(v && (strcmp(v, "not_enforced") == 0 || strcmp(v, "unknown") == 0), "%s", v);
	CHECK(json_is_false(json_object_get(json_object_get(ev, "cuda_driver"), "loaded")));
	CHECK_STR(
	    json_string_value(json_object_get(json_object_get(ev, "over_limit_test"), "result")),
	    "not_run");
	json_decref(ev);

	struct devalloc a = {.ncards = 2};
	a.cards[0] = (struct devalloc_card){.minor = 0, .mem_bytes = 1073741824LL, .has_mem = 1};
	a.cards[1] = (struct devalloc_card){.minor = 1, .mem_bytes = 1073741824LL, .has_mem = 1};
	setenv("CUDA_DEVICE_MEMORY_LIMIT", "1g", 1);
	setenv("CUDA_DEVICE_SM_LIMIT", "25", 1);
	setenv("NVIDIA_VISIBLE_DEVICES", "0,1", 1);
	setenv("LD_PRELOAD", "/usr/local/vgpu/libvgpu.so", 1);
	ev = run_probe("/proc/self/maps", &a);
	unsetenv("LD_PRELOAD"); /* children of this case (the clean-up) must not inherit it */
	char *s = jx_dump(ev);
	t_log("%s", s);
	CHECK_STR(json_string_value(json_object_get(ev, "verdict")), "not_enforced");
	json_t *lim = json_object_get(ev, "cuda_device_memory_limit");
	CHECK_INT(json_integer_value(json_object_get(lim, "bytes")), 1073741824LL);
	CHECK(json_is_true(json_object_get(lim, "matches_annotation")));
	CHECK(json_is_true(json_object_get(ev, "nvidia_visible_devices_match_annotation")));
	CHECK_INT(json_integer_value(
	              json_object_get(json_object_get(ev, "cuda_device_sm_limit"), "percent")),
	          25);
	gwb_free(s);
	json_decref(ev);

	const char *maps = h_write_file("maps", "7f00-7f10 r-xp 00000000 08:01 456 "
	                                      "/usr/local/vgpu/libvgpu.so\n");
	ev = run_probe(maps, &a);
	CHECK_STR(json_string_value(json_object_get(ev, "verdict")), "unknown");
	CHECK(strstr(json_string_value(json_object_get(ev, "reason")), "no CUDA driver") != NULL);
	json_decref(ev);
}
