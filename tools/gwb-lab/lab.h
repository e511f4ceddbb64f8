/* The lab runner's context and the steps every experiment is made of: API calls recorded as
 * operations, predictions written before acting and observations compared with them, waits
 * with a progress line, the evidence of each task, and the clean-up that gives back what an
 * experiment held. It owns the record of the experiment in progress. */
#ifndef GWB_LAB_LAB_H
#define GWB_LAB_LAB_H

#include <jansson.h>
#include <limits.h>
#include <stdint.h>

#include "lib/httpc.h"
#include "tools/gwb-lab/stack.h"

/* What an experiment needs beyond the API. */
#define NEED_FAULTS  1u /* kubesim's control socket (--faults) */
#define NEED_RESTART 2u /* the private stack, to kill -9 and restart gwb-server */

struct lab;

struct exp_def {
	const char *name; /* as docs/API.md "Evidence" names it */
	int (*run)(struct lab *l);
	unsigned needs;
};

struct lab {
	struct httpc *http;
	char url[256];         /* gwb-server */
	char kube[256];        /* the Kubernetes API (kubesim) */
	char faults[PATH_MAX]; /* kubesim's control socket, or "" */
	char token[128];       /* the team's token (or the admin's) */
	char admin[128];       /* the admin token, or "" */
	char team[64];
	char ns[64]; /* the task Jobs' namespace, from /v1/info */
	char mode[16], version[64];
	struct stack *stack;    /* the private stack, or NULL against a running one */
	int dry_run;            /* 1 when the server answers POST /v1/tasks?dry_run=true */
	char dry_run_note[256]; /* why the prediction is unavailable when dry_run is 0 */
	json_t *inject;         /* --expect: {"name.field": value} replacing a prediction */
	int tty;                /* stdout is a terminal: the progress line is rewritten */

	/* The experiment in progress. */
	const struct exp_def *exp;
	int order;
	json_t *rec;    /* its record (docs/API.md "Evidence") */
	json_t *mine;   /* ids of the tasks it submitted */
	json_t *logs;   /* {task id: worker log excerpt} captured while pods exist */
	char fail[512]; /* the first disagreement or error: "field: why" */
	int set_faults; /* it set a kubesim fault: the clean-up clears them */
	int set_health; /* it changed a card's health: the clean-up makes the cards healthy */
};

/* ---- HTTP ---- */

/* One request to base+path (base is l->url, l->kube or "http://kubesim" with sock set).
 * body may be NULL (borrowed). When action is not NULL the request is recorded in the record's
 * operations with its time and status. Returns the HTTP status, 0 when no answer came. r is
 * always filled: free it with httpc_resp_free. */
long lab_http(struct lab *l, const char *action, const char *method, const char *base,
              const char *sock, const char *path, const json_t *body, const char *const *headers,
              struct httpc_resp *r);
/* gwb-server with the team token. */
long lab_api(struct lab *l, const char *action, const char *method, const char *path,
             const json_t *body, struct httpc_resp *r);
/* GET path on the Kubernetes API: the object (caller decrefs), or NULL (404 or no answer). */
json_t *lab_kube_get(struct lab *l, const char *path);
/* A kubesim fault (PUT /_kubesim/faults body) or, body NULL, clears them (DELETE). Recorded.
 * Returns the status. */
long lab_fault(struct lab *l, const char *body);
/* A kubesim action (POST /_kubesim/actions/NAME body). Recorded. Returns the status. */
long lab_action(struct lab *l, const char *name, const char *body);

/* ---- tasks ---- */

/* A submission body (new reference). */
json_t *lab_body(struct lab *l, int mem, int core, int secs, const char *qos, const char *exp);
/* Submits body (key may be NULL); remembers a new task (201) as the experiment's own. Returns
 * the status; r keeps the answer (free it with httpc_resp_free). */
long lab_submit(struct lab *l, const char *action, const json_t *body, const char *key,
                struct httpc_resp *r);
/* Predicts the placement from the dry run, submits (a 201 is required), waits until the task
 * runs, ends, or is pending with a diagnosis other than "waiting", and observes the placement.
 * label names it in the record ("A", "first"). Returns the task (caller decrefs) with its id in
 * id, or NULL (l->fail set). */
json_t *lab_start(struct lab *l, const char *label, const json_t *body, char *id, size_t idlen);
/* GET /v1/tasks/ID: the task (caller decrefs), or NULL. */
json_t *lab_task(struct lab *l, const char *id);
/* Cancels a task (recorded); returns the status. r may be NULL; otherwise it keeps the answer. */
long lab_cancel(struct lab *l, const char *id, struct httpc_resp *r);
/* Polls the task until the value at path (dots; "true"/"false" for booleans) equals want, or
 * timeout_ms passes; shows a progress line. Returns the task (caller decrefs), or NULL after
 * the time-out (with l->fail set). */
json_t *lab_wait(struct lab *l, const char *id, const char *path, const char *want, int timeout_ms);
/* The team's reserved memory (MiB), or -1. */
long long lab_reserved_mib(struct lab *l);
/* The value at a dotted path ("a.b.0.c") in o, borrowed, or NULL. */
json_t *lab_get(json_t *o, const char *path);
/* The string at path, or NULL. */
const char *lab_str(json_t *o, const char *path);
/* The worker log of the task's Pod: the events that matter (start, isolation, budget, ledger,
 * simulated_limit_rejected, work, done, terminated) kept in l->logs. Returns 0 when a log was
 * read. */
int lab_capture_logs(struct lab *l, const char *id);
/* Every "progress" event of the task's worker log (new reference; an empty array when none). */
json_t *lab_worker_progress(struct lab *l, const char *id);
/* The Jobs (or Pods) carrying the task's label, as an array (caller decrefs), or NULL. */
json_t *lab_kube_of(struct lab *l, const char *kind, const char *id);

/* ---- prediction and observation ---- */

/* The dry run of body: the server's answer (caller decrefs), or NULL when the dry run is not
 * available (l->dry_run_note says why). */
json_t *lab_dry_run(struct lab *l, const json_t *body);
/* "bind:[m,...]", "pending:KIND" or "refused:CODE" from a dry-run answer, into buf. */
const char *lab_dry_summary(const json_t *dry, char *buf, size_t len);
/* The same summary from what happened to a task (running: its cards; pending: the diagnosis). */
const char *lab_task_summary(json_t *task, char *buf, size_t len);
/* Writes prediction[field] = value (stolen) with why (the rule or "dry run"), and prints it.
 * A --expect for this experiment and field replaces the value. */
void lab_predict(struct lab *l, const char *field, json_t *value, const char *why);
/* Predicts the placement of a submission from its dry run (field "<label>.placement"); when the
 * dry run is unavailable the prediction says so and the observation is recorded unchecked.
 * Returns the dry-run answer (caller decrefs) or NULL. */
json_t *lab_predict_placement(struct lab *l, const char *label, const json_t *body);
/* Writes observed[field] = value (stolen), compares it with the prediction, prints both and
 * whether they agree. Returns 1 when they agree. A field without a prediction disagrees. */
int lab_observe(struct lab *l, const char *field, json_t *value);
/* Observes "<label>.placement" (a summary as lab_task_summary gives), unchecked when it has no
 * prediction (the dry run was unavailable). */
void lab_observe_placement(struct lab *l, const char *label, const char *summary);
/* Records an error that ends the experiment (a wait that timed out, an API that refused):
 * the first one is kept in l->fail. */
void lab_error(struct lab *l, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* 1 when the team's quota has mem MiB and core % left; otherwise 0 and the experiment is
 * recorded as skipped with the numbers (its outcome would say nothing of the rule it shows). */
int lab_need_quota(struct lab *l, long long mem, long long core);
/* Adds a measurement or note to the record (stolen): record.measurements[key] = value. */
void lab_measure(struct lab *l, const char *key, json_t *value);
/* Prints one line of the experiment's story. */
void lab_say(struct lab *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sleeps ms milliseconds. */
void lab_sleep_ms(int ms);

/* ---- the experiment's frame ---- */

/* Starts the record of exp (order 1..N) with its parameters (stolen; may be NULL). */
void lab_begin(struct lab *l, const struct exp_def *exp, int order, json_t *params);
/* Gives back what the experiment holds (clears the faults and card health it changed, cancels
 * its tasks that still hold quota, waits for their release), then writes each task's evidence
 * and quota.after, checks that the record is complete, and sets passed. Returns the record
 * (borrowed; kept in l->rec until the next lab_begin). */
json_t *lab_end(struct lab *l);

#endif
