/* POST /v1/tasks/{id}/cancel: records the durable cancel intent (state "cancelling", the time
 * it was asked, an outbox row of kind "cancel"), decided in the loop turn's group commit and
 * answered once durable. Repeating it changes nothing; a task that already ended answers with
 * its final state. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/api/api.h"
#include "server/recon/reconciler.h"

static void not_found(struct req *r, const char *id)
{
	http_reply_error(r, 404, "not_found", "no such task", json_pack("{s:s}", "id", id));
}

/* A cancel waiting for the group commit, and its decision once made. */
struct cancel_ctx {
	char id[40], team[64];
	int64_t now_ms;
	int rc, changed;
	enum task_state state;
};

static void cancel_decide(struct req *r, void *arg)
{
	struct cancel_ctx *c = arg;
	c->rc = store_task_cancel(r->api->store, c->id, c->now_ms, &c->state, &c->changed);
}

static void cancel_reply(struct req *r, void *arg, int commit_rc)
{
	struct cancel_ctx *c = arg;
	int rc = commit_rc ? commit_rc : c->rc;
	if (rc == GWB_ENOTFOUND)
		return not_found(r, c->id);
	if (rc) {
		if (rc != GWB_EBUSY)
			log_error("api", "cancel_failed", "task=%s error=%s db=%s", c->id,
				  err_name(rc), log_q(store_errmsg(r->api->store)));
		return http_reply_store_error(r, rc, "the cancel could not be stored");
	}
	if (c->changed) {
		log_info("api", "cancel_requested", "task=%s team=%s", c->id, log_q(c->team));
		api_task_changed(r->api, c->id);
	}
	json_t *t = api_task_detail(r->api->store, c->id);
	if (!t)
		return http_reply_error(r, 500, "internal", "the task cannot be read back", NULL);
	/* 202: the cancel is recorded and will be carried out; 200: nothing new was asked (a
	 * repeat, or a task that already ended, whose final state the body shows). */
	json_object_set_new(t, "cancel",
			    json_string(c->changed				 ? "requested"
					: task_state_is(c->state, TASK_FINAL) ? "already_ended"
									       : "already_requested"));
	http_reply_json(r, c->changed ? 202 : 200, t);
}

static void cancel_release(void *arg)
{
	gwb_free(arg);
}

static const struct commit_ops cancel_ops = { cancel_decide, cancel_reply,
						     cancel_release, NULL };

void api_task_cancel(struct req *r, const char *id)
{
	char team[64];
	if (!api_valid_task_id(id))
		return not_found(r, id);
	int rc = store_task_team(r->api->store, id, team, sizeof team);
	/* Another team's task answers as an unknown one. */
	if (rc == GWB_ENOTFOUND || (rc == 0 && !api_task_team_visible(r, team)))
		return not_found(r, id);
	if (rc)
		return http_reply_error(r, 500, "internal", "the task cannot be read", NULL);
	/* The decision waits for this loop turn's group commit. */
	struct cancel_ctx *c = gwb_calloc(1, sizeof *c);
	snprintf(c->id, sizeof c->id, "%s", id); /* api_valid_task_id: at most 32 bytes */
	snprintf(c->team, sizeof c->team, "%s", team);
	c->now_ms = clock_now_ms();
	c->state = TASK_NONE;
	commit_defer(r, &cancel_ops, c);
}
