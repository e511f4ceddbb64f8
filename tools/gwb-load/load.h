/* The state of one gwb-load run, shared by its phases (send, drain, report): the connections,
 * every accepted task, the per-operation figures, the quota samples and the drain's results.
 * Also the run's small services: a call that waits for its answer while the loop keeps
 * running, a pause, and the once-a-second tick (progress line and quota sample). */
#ifndef GWB_LOAD_LOAD_H
#define GWB_LOAD_LOAD_H

#include <event2/event.h>
#include <stdio.h>
#include <jansson.h>
#include <stdint.h>

#include "tools/gwb-load/client.h"
#include "tools/gwb-load/hist.h"
#include "tools/gwb-load/opts.h"

/* One task this run created (an accepted submission, or a replay that wrongly made a new one). */
struct load_task {
	char id[32];
	uint32_t seq;  /* its Idempotency-Key is "<run id>-<seq>" */
	uint16_t team; /* index into opts.teams */
	uint8_t cancel_sent;
	uint8_t stray;  /* created by a replay: not ours to replay or count as accepted */
	uint8_t seen;   /* listed in the current drain pass */
	uint8_t ended;  /* final state and reservation released */
	uint8_t events; /* 0 not read, 1 asked, 2 read, 3 could not be read */
	uint8_t ever_unknown;
	char state[16];
	int64_t created_ms, ended_ms; /* server clock: created_at, reservation released_at */
};

/* What one kind of request did. status[0] counts requests that got no answer. */
struct load_op_stats {
	long sent, answered, ok, errors;
	struct hist lat; /* microseconds */
	long status[600];
};

/* A team's quota as sampled during the run and checked at the end. */
struct load_team {
	long quota_mem, quota_core;
	long max_mem, max_core; /* highest reserved seen */
	long samples, over;     /* samples with reserved above quota */
	int sample_inflight;
	/* the end check */
	int end_checked, end_exact, end_stable;
	long end_reserved_mem, end_reserved_core, end_active_mem, end_active_core;
	long end_active_tasks;
};

enum load_phase { PHASE_PREFLIGHT, PHASE_SEND, PHASE_DRAIN, PHASE_END };

struct load_drain {
	int run;
	int64_t start_us, end_us; /* monotonic: drain began, last task seen ended */
	long ended, not_ended, passes, list_requests, list_errors;
	long events_read, events_failed;
	long states[9]; /* final states of the ended tasks, see load_state_index */
	struct hist intent_to_job, job_to_pod; /* milliseconds */
	long ever_unknown, unknown_transitions;
	int64_t first_created_ms, last_ended_ms; /* server clock */
	int timed_out;
};

struct load_dead {
	const char *source; /* "metrics", "redis" or NULL (not available) */
	long before, after;
};

struct load {
	const struct load_opts *o;
	struct event_base *base;
	struct client_target target;
	struct client **conns;
	int nconns;
	struct client *ctl;     /* preflight, drain passes, end checks */
	struct client *sampler; /* quota samples */
	char run_id[24];
	uint64_t rng;
	enum load_phase phase;
	struct event *tick;
	struct event *sigint; /* the first Ctrl-C ends the run early, with its summary */
	int interrupted;
	struct event *wake_on_interrupt; /* the open loop's timer, made active by Ctrl-C */
	int64_t t0_us;                   /* monotonic start of sending */
	int64_t send_end_us;             /* when the last answer came */
	long sent, answered, errors, last_tick_answered;
	long fallbacks;     /* replays or cancels sent as submits (nothing to act on) */
	long refused_quota; /* submissions answered 403 quota_exceeded */
	long replay_same, replay_mismatch, strays;
	struct load_op_stats ops[OP_COUNT];
	struct load_task *tasks;
	long ntasks, cap;
	json_t *index; /* task id -> index into tasks */
	FILE *acked;   /* --acked: one line per acknowledged task, flushed as it comes */
	struct load_team teams[OPTS_TEAMS_MAX];
	long quota_sample_errors;
	/* The server's flow-control gauges scraped from /metrics each second, when it has them
	 * (-1: never seen). */
	long metrics_samples;
	long kube_inflight_max, kube_queue_max;
	int metrics_inflight;
	struct load_drain drain;
	struct load_dead dead;
};

/* An answer kept after its callback: err and body are copies, json a new reference. */
struct load_answer {
	int status;
	char err[128];
	char *body;
	json_t *json;
	int replayed;
};

/* Monotonic microseconds. */
int64_t load_now_us(void);
/* A uniformly random integer in [0, n) from the run's generator (n > 0). */
uint64_t load_rand(struct load *l, uint64_t n);

/* Sets up l for o: event base, target, connections, the tick. Returns 0; -2 when the URL or
 * token cannot be used (a usage error); -1 otherwise; err says why. Call load_fini in every
 * case. */
int load_init(struct load *l, const struct load_opts *o, char *err, size_t errlen);
/* Frees everything load_init and the phases made. Call when no request is in flight. */
void load_fini(struct load *l);

/* Registers a created task; returns its index. The id is copied. */
long load_task_add(struct load *l, const char *id, uint32_t seq, int team, int stray);
/* Index of the task with this id, or -1. */
long load_task_find(const struct load *l, const char *id);

/* Sends a request on c and runs the loop until its answer (other events keep being served).
 * Returns 0 with a filled (status may be any), or -1 when no answer came (a->err says why).
 * Free a with load_answer_clear. */
int load_call(struct load *l, struct client *c, const char *method, const char *path,
              const char *body, struct load_answer *a);
void load_answer_clear(struct load_answer *a);
/* Runs the loop for ms milliseconds. */
void load_sleep_ms(struct load *l, int ms);
/* Runs the loop until no connection of l has a request in flight (every callback fired). */
void load_quiesce(struct load *l);
/* Runs the loop until *flag becomes non-zero. */
void load_wait_flag(struct load *l, const int *flag);

/* Checks one GET /v1/teams/T answer against the team's quota (reserved <= quota in both
 * dimensions) and records it. Returns 1 when it was within quota, 0 when over, -1 when the
 * answer is not a team. */
int load_team_sample(struct load_team *t, const json_t *team);

/* Index of a task state in struct load_drain.states, or -1. */
int load_state_index(const char *state);
/* Name of a task state by index. */
const char *load_state_name(int i);
/* 1 for succeeded, failed and cancelled. */
int load_state_final(const char *state);

#endif
