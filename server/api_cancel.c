/* POST /v1/tasks/{id}/cancel: records the durable cancel intent (state "cancelling", the time
 * it was asked, an outbox row of kind "cancel") in one transaction. Repeating it changes
 * nothing; a task that already ended answers with its final state. */
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/err.h"
#include "lib/log.h"
#include "server/http.h"
#include "server/reconciler.h"

static void not_found(struct req *r, const char *id)
{
	http_reply_error(r, 404, "not_found", "no such task", json_pack("{s:s}", "id", id));
}

void api_task_cancel(struct req *r, const char *id)
{
	char team[64];
	enum task_state state = TASK_NONE;
	if (!api_valid_task_id(id))
		return not_found(r, id);
	int rc = store_task_team(r->api->store, id, team, sizeof team);
	if (rc == GWB_ENOTFOUND)
		return not_found(r, id);
	if (rc)
		return http_reply_error(r, 500, "internal", "the task cannot be read", NULL);
	if (!http_may_act_on(r, team))
		return;
	int changed = 0;
	rc = store_task_cancel(r->api->store, id, clock_now_ms(), &state, &changed);
	if (rc == GWB_ENOTFOUND)
		return not_found(r, id);
	if (rc == GWB_EBUSY) {
		http_add_header(r, "Retry-After", "1");
		return http_reply_error(r, 503, "busy", "the database is busy; retry", NULL);
	}
	if (rc) {
		log_error("api", "cancel_failed", "task=%s error=%s db=%s", id, err_name(rc),
			  log_q(store_errmsg(r->api->store)));
		return http_reply_error(r, 500, "internal", "the cancel could not be stored", NULL);
	}
	if (changed) {
		log_info("api", "cancel_requested", "task=%s team=%s", id, log_q(team));
		api_task_changed(r->api, id);
	}
	json_t *t = api_task_detail(r->api->store, id);
	if (!t)
		return http_reply_error(r, 500, "internal", "the task cannot be read back", NULL);
	/* 202: the cancel is recorded and will be carried out; 200: nothing new was asked (a
	 * repeat, or a task that already ended, whose final state the body shows). */
	json_object_set_new(t, "cancel", json_string(changed			   ? "requested"
						     : task_state_is(state, TASK_FINAL) ? "already_ended"
										   : "already_requested"));
	http_reply_json(r, changed ? 202 : 200, t);
}
