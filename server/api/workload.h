/* A submission's workload: the team's own container (image, command, args, env, working
 * directory, cpu and memory), checked field by field, put in one canonical form (the
 * fingerprint's and the store's), and held to the team's workload policy. */
#ifndef GWB_WORKLOAD_H
#define GWB_WORKLOAD_H

#include <jansson.h>

#include "lib/jsonx.h"
#include "server/store/store.h"

/* Bounds of a workload (docs/API.md). */
#define WORKLOAD_COMMAND_MAX 32
#define WORKLOAD_ARGS_MAX 256
#define WORKLOAD_ARG_BYTES 4096
#define WORKLOAD_ENV_MAX 64
#define WORKLOAD_ENV_NAME_BYTES 128
#define WORKLOAD_ENV_VALUE_BYTES 4096
#define WORKLOAD_PATH_BYTES 1024
#define WORKLOAD_CPU_MAX_MILLI 1000000LL /* 1000 cores */
#define WORKLOAD_MEMORY_MAX (1LL << 44)  /* 16 TiB */
/* What a workload gets when neither it nor its team's policy names an amount (each held to
 * the team's maximum). */
#define WORKLOAD_CPU_FALLBACK_MILLI 1000
#define WORKLOAD_MEMORY_FALLBACK (1LL << 30)

/* Checks the submission's "workload" value w. 0 and *out, a new object in canonical form
 * (cpu and memory as canonical quantities, only the members given); or GWB_EINVAL with *e
 * naming the field ("workload.env.FOO", "workload.args[3]"). */
int workload_parse(const json_t *w, json_t **out, struct jx_err *e);

/* Holds the canonical workload w to the team's policy: its image must start with one of the
 * allowed prefixes (GWB_EFORBIDDEN otherwise), its cpu and memory at most the maxima
 * (GWB_EINVAL with *e); the missing amounts are filled in (the policy's default, else the
 * fallback, held to the maximum). 0 when w may run. */
int workload_apply_policy(json_t *w, const struct team_policy *pol, struct jx_err *e);

#endif
