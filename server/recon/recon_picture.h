/* The reconciler's picture of the cluster: the sink of the Job, Pod and Device informers, the
 * caches they fill (name -> object), an index of each task's Pods, and the record of Jobs
 * observed deleted. It tells its owner which tasks to look at again and what it saw deleted,
 * through a small table of callbacks; it never touches the store. The informers' rule holds
 * here: a stale picture is never evidence of anything. */
#ifndef GWB_RECON_PICTURE_H
#define GWB_RECON_PICTURE_H

#include <event2/event.h>
#include <jansson.h>

#include "server/kube/kube.h"
#include "server/recon/recon_decide.h"
#include "server/task.h"

struct picture;

/* What the owner is told; fired from informer callbacks, on the loop. */
struct picture_ops {
	/* Task id should be decided again (its Job or a Pod changed). */
	void (*dirty)(void *arg, const char *task_id);
	/* Every active task should be decided again (the picture became fresh, or a device
	 * changed, which can change every pending diagnosis). */
	void (*dirty_all)(void *arg);
	/* An observed deletion for the task's history: type "pod_deleted" or "job_deleted",
	 * detail stolen. */
	void (*note)(void *arg, const char *task_id, const char *type, json_t *detail);
};

/* Creates the picture of namespace ns: informers on the gwb-managed Jobs and Pods and on
 * every Device (watch_timeout_s and idle_s as informer_new). Nothing happens until
 * picture_start. Returns it (free with picture_free). */
struct picture *picture_new(struct kube *k, struct event_base *base, const char *ns,
			    int watch_timeout_s, int idle_s, const struct picture_ops *ops,
			    void *arg);
/* Starts the informers. */
void picture_start(struct picture *p);
/* Stops the informers and frees everything; no callback fires afterwards. Accepts NULL. */
void picture_free(struct picture *p);

/* 1 while the Job and Pod informers are both fresh and the cluster's identity was read after
 * their last lists. */
int picture_fresh(const struct picture *p);
/* 1 while the Device and Pod informers are both fresh (the card picture). */
int picture_cards_fresh(const struct picture *p);

/* The view of task t: its Job (when it carries our labels), whether the Job t recorded was
 * observed deleted (only once the cluster's identity is checked), its Pods from the index (no
 * scan of every Pod), the cluster's identity, the time and t's Pod deadline. Clear with
 * recon_view_clear; the objects are borrowed until the next informer callback. */
void picture_view(const struct picture *p, const struct task *t, struct recon_view *v);

/* Records that task id's Job (uid) was observed gone (a DELETED event, absence from a fresh
 * list, or a 404). */
void picture_job_gone(struct picture *p, const char *task_id, const char *uid);
/* Forgets the record of task id's gone Job (nothing more is decided for it). */
void picture_forget(struct picture *p, const char *task_id);

/* The Device objects (name -> Device) and the Pods (name -> Pod), borrowed, for the card
 * picture. */
const json_t *picture_devices(const struct picture *p);
const json_t *picture_pods(const struct picture *p);
/* The Jobs (name -> Job), borrowed until the next informer callback (for the audit). */
const json_t *picture_jobs(const struct picture *p);
/* The resourceVersions the Job and Pod informers are at (for evidence). */
const char *picture_jobs_rv(const struct picture *p);
const char *picture_pods_rv(const struct picture *p);
/* Adds {"jobs", "pods", "devices"} (each as informer_describe) to o. */
void picture_describe(const struct picture *p, json_t *o);
/* Adds the cluster's identity to o: {"identity" (what is read), "uid" (null when unknown or
 * unreadable), "checked", "replacements" (uid changes seen since the start), "previous_uid"}. */
void picture_describe_cluster(const struct picture *p, json_t *o);

#endif
