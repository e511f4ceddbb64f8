/* The kubelet of every simulated node: runs each bound pod's containers as local processes
 * (the worker, or a container's own program when --exec-allow lists it, with the container's
 * env, args and workingDir, the koordlet GPU env of koordinator.md §5.1 and a downward-API
 * annotations file; any other container waits with CreateContainerError and never runs),
 * reports phases and container states with exit
 * codes, keeps logs for /log, performs graceful deletion (SIGTERM, SIGKILL after the grace
 * period, then the final delete), and reaps children from SIGCHLD. */
#ifndef KUBESIM_KUBELET_H
#define KUBESIM_KUBELET_H

#include <jansson.h>
#include <stddef.h>

#include "tools/kubesim/kubesim.h"

struct kubelet;

/* A kubelet for every Node in the store; installs the SIGCHLD event. Never NULL. */
struct kubelet *kubelet_new(struct ks *ks);
/* Kills every running container (SIGKILL to its process group), reaps it and frees the
 * kubelet. Accepts NULL. */
void kubelet_free(struct kubelet *k);
/* One reconcile pass over the bound pods that changed or have containers to watch. */
void kubelet_sync(struct kubelet *k);
/* Asks for a kubelet pass at the next loop turn (idempotent): for what changes outside the
 * store, such as a child's exit, a start's report or a fault on terminating pods. Its writes
 * wake the other controllers through the registry. Accepts NULL. */
void kubelet_wake(struct kubelet *k);
/* Writes the log file path of a pod's container into buf. Returns 0, or -1 when the
 * container never started. */
int kubelet_log_path(struct kubelet *k, const json_t *pod, const char *container, char *buf,
		     size_t len);
/* Number of containers between SIGTERM and their exit (they need SIGKILL on time). */
int kubelet_terminating(const struct kubelet *k);
/* Number of containers currently running as processes. */
int kubelet_running(const struct kubelet *k);

#endif
