/* The fault suite's frame: the whole local stack under load from gwb-load (a closed-loop mix
 * of submissions, replays and cancels of 16 MiB, 1 %, 1 s tasks), a fault the case injects
 * and clears, and the same checks after every fault:
 *
 *   - every task gwb-load saw acknowledged (201) is present;
 *   - every task ends (a final state, its reservation released), none is left unknown, and
 *     the team's reservation is back to zero;
 *   - the quota audit (GET /v1/audit) reports no drift;
 *   - the cluster holds at most one Job per task.
 *
 * Each case prints one figure line (acknowledged, present, drift, Jobs, the time until every
 * task ended counted from the moment the fault was cleared and from the start of the load,
 * the submissions' p99 latency as gwb-load saw it) and, when GWB_FAULTS_REPORT names a file,
 * appends it there
 * as one JSON object per line. GWB_FAULTS_LONG=1 (make test-faults) selects each case's long
 * form: more requests and more repetitions of the fault. */
#ifndef GWB_H_FAULTS_H
#define GWB_H_FAULTS_H

#include <limits.h>
#include <stdint.h>

#include "tests/harness/h_kubesim.h"

struct h_faults {
	struct h_stack st;
	struct h_proc load;   /* gwb-load, in the background */
	char acked[PATH_MAX]; /* its --acked file */
	char name[64];
	long requests;
	int64_t started_ms;   /* when gwb-load started */
	int64_t cleared_ms;   /* when the case cleared its fault (0: at the verification) */
	char listen[300];     /* GWB_LISTEN=host:port, so a restarted server keeps its URL */
	double submit_p99_ms; /* gwb-load's submissions' p99 latency (-1: not known) */
};

/* 1 when the long forms run (GWB_FAULTS_LONG set and not "0"). */
int h_faults_long(void);
/* short_n, or long_n in the long form. */
long h_faults_n(long short_n, long long_n);

/* Starts redis-server, kubesim (kubesim_flags, NULL-terminated, may be NULL) and gwb-server
 * (env as for h_stack_start; it keeps its port across restarts), a team "alpha" whose quota
 * holds every task at once, and gwb-load sending requests requests over 4 connections. */
void h_faults_start(struct h_faults *f, const char *name, long requests,
		    const char *const *kubesim_flags, const char *const *env);
/* Waits up to timeout_ms for gwb-load to finish sending; fails the case if it does not. */
void h_faults_load_wait(struct h_faults *f, int timeout_ms);
/* 1 while gwb-load is still sending. */
int h_faults_loading(struct h_faults *f);
/* The fault is cleared now: the time to recover is counted from here. */
void h_faults_cleared(struct h_faults *f);
/* kill -9 of gwb-server and a start on the same port (the database and Redis kept). */
void h_faults_kill9_server(struct h_faults *f);
/* The checks above, waiting up to timeout_s for every task to end; fails the case naming
 * what did not hold. */
void h_faults_verify(struct h_faults *f, int timeout_s);

#endif
