/* Placement prediction for the dry run: given the server's card picture and a request, which
 * node and cards Koordinator's DeviceShare would give the task now, or that it would stay
 * Pending. The DeviceShare rules are lib/deviceshare's, the same code kubesim's scheduler runs;
 * this module picks the node by DeviceShare's node score. Pure functions of their inputs. */
#ifndef GWB_PREDICT_H
#define GWB_PREDICT_H

#include <jansson.h>

#include "server/recon/diagnose.h"

enum predict_strategy { PREDICT_LEAST_ALLOCATED, PREDICT_MOST_ALLOCATED };

#define PREDICT_MAX_NODES 16

struct predict_result {
	int bind;       /* 1: the task would bind now to node/minors; 0: it would stay Pending */
	char node[64];
	int nminors;
	int minors[DIAG_MAX_CARDS];
	int ntied;      /* other nodes with the same node score (kube-scheduler picks among them) */
	char tied[PREDICT_MAX_NODES][64];
};

/* "LeastAllocated" / "MostAllocated". */
const char *predict_strategy_name(enum predict_strategy s);
/* Parses a strategy name. Returns 0, or -1 when name is neither. */
int predict_strategy_parse(const char *name, enum predict_strategy *out);

/* Chooses the node and cards for req (mem_mib and core per card, count cards; core 0 asks for
 * none) among cards, skipping nothing: the caller builds cards without the task's own share.
 * Nodes are tried in the order their cards appear; the node with the highest DeviceShare node
 * score (not normalised) wins, the first of equals in that order (the others are listed in
 * tied). A request DeviceShare refuses at PreFilter binds nowhere. Fills out. */
void predict_place(const struct diag_cards *cards, const struct diag_req *req,
		   enum predict_strategy strategy, struct predict_result *out);

/* The dry run's "placement" object: {"outcome": "bind"|"pending", "node", "cards": [minors],
 * "tied_nodes", "diagnosis" (null when bind, else diag_pending's object), "unblock" (the
 * diagnosis' unblock list, [] when bind)}. Returns a new reference. */
json_t *predict_placement_json(const struct diag_cards *cards, const struct diag_req *req,
			       enum predict_strategy strategy);

#endif
