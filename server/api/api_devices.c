/* GET /v1/devices: the cards as the cluster reports them, with what the scheduler allocated on
 * each and to which tasks. */
#include "server/api/api.h"
#include "server/recon/reconciler.h"

void api_devices(struct req *r)
{
	if (!r->api->recon)
		return http_reply_error(r, 503, "no_cluster",
					"no Kubernetes API is configured (GWB_KUBE_SERVER or a "
					"kubeconfig)",
					NULL);
	http_reply_json(r, 200, reconciler_devices_json(r->api->recon));
}
