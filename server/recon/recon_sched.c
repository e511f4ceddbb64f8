/* Scheduler events: Events about gwb Pods, noted once per new count. */
#include "server/recon/recon_sched.h"

#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/kobj.h"
#include "server/kube/informer.h"
#include "server/task.h"

struct recon_sched {
	struct informer *inf;
	json_t *seen; /* event uid -> count already noted in a task's history */
	recon_sched_note_fn note;
	void *arg;
};

static void on_upsert(void *arg, json_t *ev)
{
	struct recon_sched *s = arg;
	const char *reason = kobj_str(ev, "reason"), *kind = kobj_pstr(ev, "involvedObject", "kind");
	const char *pod = kobj_pstr(ev, "involvedObject", "name"), *uid = kobj_uid(ev);
	if (!reason || !kind || !pod || !uid || strcmp(kind, "Pod") != 0 ||
	    (strcmp(reason, "FailedScheduling") != 0 && strcmp(reason, "Scheduled") != 0))
		return;
	char task[32];
	if (task_of_name(pod, 1, task, sizeof task))
		return; /* not a Pod of a gwb Job */
	json_int_t count = json_integer_value(kobj_get(ev, "count"));
	json_t *seen = json_object_get(s->seen, uid);
	if (seen && json_integer_value(seen) >= count)
		return;
	json_object_set_new(s->seen, uid, json_integer(count));
	s->note(s->arg, task, "scheduler_event",
		json_pack("{s:s, s:s?, s:s?, s:s, s:I}", "reason", reason, "message",
			  kobj_str(ev, "message"), "type", kobj_str(ev, "type"), "pod", pod,
			  "count", count));
}

static void on_nop(void *arg)
{
	(void)arg;
}

static void on_remove(void *arg, json_t *ev)
{
	struct recon_sched *s = arg;
	const char *uid = kobj_uid(ev);
	if (uid)
		json_object_del(s->seen, uid);
}

static void on_fresh(void *arg, int fresh)
{
	(void)arg;
	(void)fresh;
}

static const struct informer_ops event_ops = { on_nop, on_upsert, on_remove, on_nop, on_fresh };

struct recon_sched *recon_sched_new(struct kube *k, struct event_base *base, const char *ns,
				    int watch_timeout_s, int idle_s, recon_sched_note_fn note,
				    void *arg)
{
	struct recon_sched *s = gwb_calloc(1, sizeof *s);
	s->seen = json_object();
	s->note = note;
	s->arg = arg;
	char path[256];
	snprintf(path, sizeof path, "/api/v1/namespaces/%s/events", ns);
	s->inf = informer_new(k, base, "events", path, NULL, watch_timeout_s, idle_s, &event_ops, s);
	return s;
}

void recon_sched_start(struct recon_sched *s)
{
	informer_start(s->inf);
}

void recon_sched_describe(const struct recon_sched *s, json_t *o)
{
	informer_describe(s->inf, o);
}

void recon_sched_free(struct recon_sched *s)
{
	if (!s)
		return;
	informer_free(s->inf);
	json_decref(s->seen);
	gwb_free(s);
}
