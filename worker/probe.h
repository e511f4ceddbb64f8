/* The isolation probe: what this process can observe about GPU isolation (the allocation,
 * the HAMi-core environment, whether libvgpu.so is really mapped, and, only when a CUDA
 * driver loads at run time, whether an over-limit allocation is refused), boiled down to a
 * verdict that claims `enforced` only when a refusal was actually seen. No build-time CUDA
 * dependency: the driver is reached through dlopen/dlsym. */
#ifndef GWB_WORKER_PROBE_H
#define GWB_WORKER_PROBE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/devalloc.h"

/* How much the over-limit test asks beyond the limit. */
#define PROBE_OVER_EXTRA (64ULL * 1024 * 1024)

/* What a HAMi-core limit variable means, read the way HAMi-core reads it. */
enum probe_limit {
	PROBE_LIMIT_UNSET,    /* unset or empty: no limit */
	PROBE_LIMIT_ZERO,     /* parses to 0: HAMi-core logs it and sets no limit */
	PROBE_LIMIT_OVERFLOW, /* the suffix multiplication overflows: no limit */
	PROBE_LIMIT_SET,      /* a limit of *out */
};

/* Reads s as HAMi-core reads CUDA_DEVICE_MEMORY_LIMIT and CUDA_DEVICE_SM_LIMIT (koordinator.md
 * §5.2): strtoul with base 0 (so "0x..." and leading-0 octal count, and text after the digits
 * is ignored), an optional last character g/G, m/M or k/K multiplying by 1024^3, 1024^2 or
 * 1024. s may be NULL. *out is set only for PROBE_LIMIT_SET. */
enum probe_limit probe_limit_parse(const char *s, uint64_t *out);

/* Looks for a mapping of a file whose name starts with libname (e.g. "libvgpu.so") in the
 * /proc/<pid>/maps-format file at path. Returns 1 and its path in found, 0 when absent, or
 * GWB_EIO when the file cannot be read. */
int probe_maps_find(const char *path, const char *libname, char *found, size_t foundlen);

/* The result of the over-limit allocation test. */
enum probe_test {
	PROBE_TEST_NOT_RUN,   /* no driver, or nothing to test against; see the reason */
	PROBE_TEST_REFUSED,   /* the over-limit cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY */
	PROBE_TEST_SUCCEEDED, /* the over-limit cuMemAlloc succeeded (and was freed) */
	PROBE_TEST_FAILED,    /* the test could not be completed; see the reason */
};

/* What the probe saw; the input of the verdict. */
struct probe_facts {
	int limit_set;     /* CUDA_DEVICE_MEMORY_LIMIT gives a limit */
	int preload_vgpu;  /* LD_PRELOAD names libvgpu.so */
	int vgpu_mapped;   /* 1 mapped, 0 not, -1 maps file unreadable */
	int mig;           /* NVIDIA_VISIBLE_DEVICES names MIG devices */
	int driver_loaded; /* the CUDA driver library was dlopen'ed */
	enum probe_test test;
	char why[256]; /* the driver's or the test's own explanation */
};

/* Decides the verdict: "enforced" only when the over-limit test was refused while libvgpu.so
 * is mapped; "not_enforced" when an over-limit allocation succeeded, or when no driver could
 * test and no isolation layer is in the process; "unknown" otherwise. Writes the reason. */
const char *probe_verdict(const struct probe_facts *f, char *reason, size_t len);

struct probe_opts {
	const char *maps_path;        /* /proc/self/maps, or a test file */
	const char *cuda_library;     /* libcuda.so.1, or a test library */
	const struct devalloc *alloc; /* the allocation, or NULL when none could be read */
};

/* Runs the probe and returns a new object with the fields of the `isolation` event (caller
 * owns): annotation, nvidia_visible_devices, cuda_device_memory_limit, cuda_device_sm_limit,
 * ld_preload, libvgpu_mapped, cuda_driver, over_limit_test, verdict and reason. */
json_t *probe_run(const struct probe_opts *o);

#endif
