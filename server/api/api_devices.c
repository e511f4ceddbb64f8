/* GET /v1/devices: the cards as the cluster reports them, with what the scheduler allocated on
 * each and to which tasks. A team token sees its own tasks; other teams' are one total per card
 * ("others"), with neither their ids nor a team's share. */
#include <string.h>

#include "lib/jsonx.h"
#include "server/api/api.h"
#include "server/recon/reconciler.h"
#include "server/recon/usage.h"

/* Keeps in card's "tasks" only r's team's own and sums the rest into "others". A task the
 * store does not know (or cannot read) counts as another team's. */
static void card_reduce(struct req *r, json_t *card)
{
	json_t *tasks = json_object_get(card, "tasks");
	json_t *mine = json_array();
	json_int_t mem = 0, core = 0;
	size_t i;
	json_t *t;
	json_array_foreach(tasks, i, t) {
		const char *id = json_string_value(json_object_get(t, "task"));
		char team[64];
		if (id && store_task_team(r->api->store, id, team, sizeof team) == 0 &&
		    strcmp(team, r->team) == 0) {
			json_array_append(mine, t);
			continue;
		}
		mem += json_integer_value(json_object_get(t, "gpu_memory_mib"));
		core += json_integer_value(json_object_get(t, "gpu_core_percent"));
	}
	json_object_set_new(card, "tasks", mine);
	json_object_set_new(card, "others", jx_gpu_pair(mem, core));
}

void api_devices(struct req *r)
{
	if (!r->api->recon)
		return http_reply_error(r, 503, "no_cluster",
					"no Kubernetes API is configured (GWB_KUBE_SERVER or a "
					"kubeconfig)",
					NULL);
	json_t *dev = reconciler_devices_json(r->api->recon);
	size_t i;
	json_t *card;
	json_array_foreach(json_object_get(dev, "cards"), i, card) {
		if (!r->is_admin)
			card_reduce(r, card);
		/* What a monitor says the card holds, beside what was allocated on it. */
		json_t *m = usage_card_json(json_string_value(json_object_get(card, "id")));
		if (m)
			json_object_set_new(card, "measured", m);
	}
	http_reply_json(r, 200, dev);
}
