/* The worker's budget: the GPU cards, memory and compute share the scheduler gave this Pod,
 * read from the device-allocated annotation in the downward-API annotations file. This module
 * owns reading that file and deciding whether the budget is usable. */
#ifndef GWB_WORKER_BUDGET_H
#define GWB_WORKER_BUDGET_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/devalloc.h"

/* The Kubernetes limit on all annotations of an object together: a bigger file is not ours. */
#define BUDGET_FILE_MAX (256 * 1024)

struct budget {
	struct devalloc alloc;
	int64_t mem_bytes;    /* device memory over all cards */
	int64_t core_percent; /* gpu-core over all cards that carry it */
	int has_core;         /* at least one card carries gpu-core */
};

/* Why a budget could not be had: problem is a stable code for logs and tests
 * ("file_missing", "file_unreadable", "file_too_large", "file_malformed",
 * "annotation_missing", "annotation_malformed", "no_gpu", "no_memory", "bad_core");
 * reason says what exactly, for people. */
struct budget_err {
	const char *problem;
	char reason[256];
};

/* Reads the downward-API file at path and takes the budget from its device-allocated
 * annotation. Every card must carry gpu-memory (> 0); gpu-core, when present, must be at most
 * 100 per card. Returns 0 with *b filled, or GWB_ENOTFOUND (file or annotation absent),
 * GWB_EIO (unreadable) or GWB_EINVAL (malformed) with *e filled. */
int budget_load(const char *path, struct budget *b, struct budget_err *e);

/* The same, from the file's text already in memory. */
int budget_from_text(const char *text, size_t len, struct budget *b, struct budget_err *e);

/* The CPU duty cycle, in percent of one CPU, that stands for the compute share: the gpu-core
 * total, capped at 100 (the worker computes on one thread); 100 when no card carries gpu-core,
 * since then nothing limits compute. */
int budget_duty_percent(const struct budget *b);

/* A new object for the budget event: totals plus the cards (devalloc_to_json). */
json_t *budget_to_json(const struct budget *b);

#endif
