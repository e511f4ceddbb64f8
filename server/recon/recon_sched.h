/* Scheduler events into task history: an informer on the namespace's Events keeps the
 * scheduler's own words about our Pods (FailedScheduling, Scheduled), and each new occurrence
 * goes into the task's history once, with its count, so "why is my task not running?" has
 * the scheduler's answer with its times. Reaches the store only through its note callback. */
#ifndef GWB_RECON_SCHED_H
#define GWB_RECON_SCHED_H

#include <event2/event.h>
#include <jansson.h>

#include "server/kube/kube.h"

struct recon_sched;

/* An event for task_id's history (detail stolen); the task should then be decided again. */
typedef void (*recon_sched_note_fn)(void *arg, const char *task_id, const char *type,
				    json_t *detail);

/* Creates the Events informer of namespace ns (see informer_new for the two times); nothing
 * happens until recon_sched_start. Returns it (free with recon_sched_free). */
struct recon_sched *recon_sched_new(struct kube *k, struct event_base *base, const char *ns,
				    int watch_timeout_s, int idle_s, recon_sched_note_fn note,
				    void *arg);
/* Starts the informer. */
void recon_sched_start(struct recon_sched *s);
/* Stops and frees; no callback fires afterwards. Accepts NULL. */
void recon_sched_free(struct recon_sched *s);
/* Adds the Events informer's description (informer_describe) to o. */
void recon_sched_describe(const struct recon_sched *s, json_t *o);

#endif
