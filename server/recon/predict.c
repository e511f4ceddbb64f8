/* Placement prediction: lib/deviceshare run on each node of the card picture. */
#include "server/recon/predict.h"

#include <stdio.h>
#include <string.h>

#include "lib/deviceshare.h"

const char *predict_strategy_name(enum predict_strategy s)
{
	return s == PREDICT_MOST_ALLOCATED ? "MostAllocated" : "LeastAllocated";
}

int predict_strategy_parse(const char *name, enum predict_strategy *out)
{
	if (strcmp(name, "LeastAllocated") == 0)
		*out = PREDICT_LEAST_ALLOCATED;
	else if (strcmp(name, "MostAllocated") == 0)
		*out = PREDICT_MOST_ALLOCATED;
	else
		return -1;
	return 0;
}

static enum deviceshare_strategy ds_strategy(enum predict_strategy s)
{
	return s == PREDICT_MOST_ALLOCATED ? DEVICESHARE_MOST_ALLOCATED
					   : DEVICESHARE_LEAST_ALLOCATED;
}

/* The cards of one node as DeviceShare sees them, in ascending minor. Returns how many. */
static int node_cards(const struct diag_cards *cs, const char *node, struct deviceshare_card *out)
{
	int idx[DIAG_MAX_CARDS];
	int n = 0;
	for (int i = 0; i < cs->n; i++)
		if (strcmp(cs->c[i].node, node) == 0)
			idx[n++] = i;
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && cs->c[idx[j - 1]].minor > cs->c[idx[j]].minor; j--) {
			int t = idx[j];
			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	for (int i = 0; i < n; i++)
		diag_card_deviceshare(&cs->c[idx[i]], &out[i]);
	return n;
}

void predict_place(const struct diag_cards *cs, const struct diag_req *req,
		   enum predict_strategy strategy, struct predict_result *out)
{
	memset(out, 0, sizeof *out);
	struct deviceshare_request r;
	if (diag_req_deviceshare(req, &r) != 1)
		return; /* refused at PreFilter: it stays Pending */
	enum deviceshare_strategy s = ds_strategy(strategy);
	const char *nodes[PREDICT_MAX_NODES];
	int nnodes = 0;
	for (int i = 0; i < cs->n && nnodes < PREDICT_MAX_NODES; i++) {
		int seen = 0;
		for (int j = 0; j < nnodes; j++)
			seen |= strcmp(nodes[j], cs->c[i].node) == 0;
		if (!seen)
			nodes[nnodes++] = cs->c[i].node;
	}
	int64_t best_score = -1;
	for (int k = 0; k < nnodes; k++) {
		struct deviceshare_card cards[DIAG_MAX_CARDS];
		int chosen[DIAG_MAX_CARDS];
		int n = node_cards(cs, nodes[k], cards);
		int got = deviceshare_allocate(cards, n, &r, s, chosen);
		if (!got)
			continue;
		int64_t score = deviceshare_node_score(cards, n, &r, s);
		if (score == best_score && out->ntied < PREDICT_MAX_NODES) {
			snprintf(out->tied[out->ntied++], sizeof out->tied[0], "%s", nodes[k]);
			continue;
		}
		if (score < best_score)
			continue;
		best_score = score;
		out->bind = 1;
		out->ntied = 0;
		snprintf(out->node, sizeof out->node, "%s", nodes[k]);
		out->nminors = got;
		for (int i = 0; i < got; i++)
			out->minors[i] = cards[chosen[i]].minor;
	}
}

json_t *predict_placement_json(const struct diag_cards *cards, const struct diag_req *req,
			       enum predict_strategy strategy)
{
	struct predict_result res;
	predict_place(cards, req, strategy, &res);
	if (!res.bind) {
		json_t *d = diag_pending(req, cards);
		json_t *unblock = json_incref(json_object_get(d, "unblock"));
		return json_pack("{s:s, s:n, s:[], s:[], s:o, s:o}", "outcome", "pending", "node",
				 "cards", "tied_nodes", "diagnosis", d, "unblock",
				 unblock ? unblock : json_array());
	}
	json_t *minors = json_array(), *tied = json_array();
	for (int i = 0; i < res.nminors; i++)
		json_array_append_new(minors, json_integer(res.minors[i]));
	for (int i = 0; i < res.ntied; i++)
		json_array_append_new(tied, json_string(res.tied[i]));
	return json_pack("{s:s, s:s, s:o, s:o, s:n, s:[]}", "outcome", "bind", "node", res.node,
			 "cards", minors, "tied_nodes", tied, "diagnosis", "unblock");
}
