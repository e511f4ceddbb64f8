/* Test helpers for kubesim: start it on a free loopback port with a private state folder,
 * control socket and worker script; talk to its API (JSON in, JSON out), its control
 * endpoint, and its watch streams (a raw HTTP/1.1 chunked reader); run the installed kubectl
 * against it with a kubeconfig and a fresh cache in the case folder. */
#ifndef GWB_H_KUBESIM_H
#define GWB_H_KUBESIM_H

#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "tests/harness/harness.h"

struct h_kubesim {
	struct h_proc proc;
	char url[256];             /* http://127.0.0.1:PORT */
	char kubeconfig[PATH_MAX];
	char home[PATH_MAX];       /* HOME for kubectl: its caches live here */
	char ctl[PATH_MAX];        /* control socket */
	char state[PATH_MAX];      /* --state-dir */
	char worker[PATH_MAX];     /* --worker; the default script unless changed before start */
	const char *args[32];      /* extra flags, NULL-terminated; set before start */
	char exec_allow[1024];     /* --exec-allow: programs besides the worker a container may
				    * run ("" none; comma-separated); set before start */
};

/* Fills defaults and writes the default worker script (see h_kubesim.c) into the case folder. */
void h_kubesim_init(struct h_kubesim *k);
/* Starts kubesim and waits for its listening line; writes the kubeconfig. Fails the case if it
 * does not come up. At the end of the case it is stopped with SIGTERM and a non-zero exit
 * (say, a sanitizer report) fails the case. */
void h_kubesim_start(struct h_kubesim *k);
/* SIGTERM; fails the case unless kubesim exits 0. */
void h_kubesim_stop(struct h_kubesim *k);
/* Writes an executable /bin/sh script with body into the case folder; returns its path
 * (static ring, like h_path). */
const char *h_kubesim_script(const char *name, const char *body);

/* One API request. body may be NULL; ctype NULL means application/json. Returns the HTTP
 * status (0 when no answer) and *out the parsed body (NULL when not JSON; caller decrefs). */
long h_kube(const struct h_kubesim *k, const char *method, const char *path, const char *body,
	    const char *ctype, json_t **out);
/* GET path: the object (caller decrefs), NULL on 404; fails the case on anything else. */
json_t *h_kube_get(const struct h_kubesim *k, const char *path);
/* POST body to path, expecting 201; returns the created object (caller decrefs). */
json_t *h_kube_create(const struct h_kubesim *k, const char *path, const char *body);
/* Polls GET path every 20 ms until pred(obj, arg) (obj may be NULL for 404) or timeout_ms;
 * returns the matching object (caller decrefs; NULL if the match was "absent") or fails the
 * case naming what. */
typedef int (*h_kube_pred)(const json_t *obj, void *arg);
json_t *h_kube_wait(const struct h_kubesim *k, const char *path, h_kube_pred pred, void *arg,
		    int timeout_ms, const char *what);
/* Predicates: the object is gone; status.phase equals arg (a string); spec.nodeName set. */
int h_pred_gone(const json_t *obj, void *arg);
int h_pred_phase(const json_t *obj, void *arg);
int h_pred_bound(const json_t *obj, void *arg);
/* Job condition arg (a string) is True. */
int h_pred_condition(const json_t *obj, void *arg);

/* A request to the control endpoint over the control socket. Returns the status. */
long h_kubesim_ctl(const struct h_kubesim *k, const char *method, const char *path,
		   const char *body, json_t **out);

/* Runs `kubectl args...` (20 s limit) with the case kubeconfig and HOME. Returns its exit
 * code and *out its stdout+stderr (gwb_malloc'd; caller frees with gwb_free). */
int h_kubectl(const struct h_kubesim *k, char **out, const char *const *args);
/* Starts kubectl in the background with output to file; returns its pid (killed with the
 * case's process group at the latest). */
pid_t h_kubectl_bg(const struct h_kubesim *k, const char *file, const char *const *args);

/* A watch stream read over a raw socket (chunked transfer decoded). */
struct h_watch {
	int fd;
	long status;
	int chunked;
	int ended;        /* the server ended the stream (terminal chunk or EOF) */
	char *raw;        /* undecoded bytes */
	size_t rawlen, rawcap;
	char *body;       /* decoded bytes not yet returned */
	size_t bodylen, bodycap;
	char headers[4096];
};
/* GETs path (with its query) and reads the status line and headers. accept NULL means
 * application/json. Returns 0, or -1 when no answer came within 5 s. */
int h_watch_open(struct h_watch *w, const struct h_kubesim *k, const char *path,
		 const char *accept);
/* The same against any http:// server, with a bearer token (NULL: none). */
int h_watch_open_url(struct h_watch *w, const char *url, const char *path, const char *token,
		     const char *accept);
/* The next newline-ended line of the body without its newline (gwb_malloc'd), or NULL when
 * none comes within timeout_ms or the stream ended (see w->ended). */
char *h_watch_line(struct h_watch *w, int timeout_ms);
/* The next newline-ended event (caller decrefs), or NULL when none comes within timeout_ms
 * or the stream ended (see w->ended). */
json_t *h_watch_next(struct h_watch *w, int timeout_ms);
void h_watch_close(struct h_watch *w);

/* A Pod template spec (new reference) for koord-scheduler: one container "worker" asking
 * gpu.shared 1, mem_mib MiB of gpu-memory and core % gpu-core (0: no core), the downward-API
 * annotations volume on /etc/podinfo, env from a NULL-terminated "K=V" list, and
 * restartPolicy Never. */
json_t *h_kubesim_pod_spec(int mem_mib, int core, const char *const *env);
/* A Pod document (JSON text, gwb_malloc'd) in gpu-workbench with the HAMi label and
 * h_kubesim_pod_spec. */
char *h_kubesim_gpu_pod(const char *name, int mem_mib, int core, const char *const *env);
/* A Job document (JSON text, gwb_malloc'd) in gpu-workbench with backoffLimit, the HAMi label
 * on its template and h_kubesim_pod_spec; extra_spec (JSON object text or NULL) is merged into
 * the Job spec (podFailurePolicy, suspend, ttlSecondsAfterFinished ...). */
char *h_kubesim_gpu_job(const char *name, int mem_mib, int core, const char *const *env,
			int backoff, const char *extra_spec);

/* The repository root (where deploy/ lives), found from the cwd or $GWB_BIN. */
const char *h_repo_root(void);

/* The whole local stack of an integration case: kubesim running the real gwb-worker, a
 * redis-server when asked, and gwb-server on them. */
struct h_stack {
	struct h_kubesim ks;
	struct h_redis redis;
	struct h_server srv;
	char env_kube[300];
	char env_redis[PATH_MAX + 32];
	char env_usage[400];
};
/* Starts kubesim (with kubesim_flags, NULL-terminated, may be NULL), redis-server when
 * with_redis, and gwb-server with a 100 ms housekeeping tick, a 500 ms resync and env (more
 * "K=V" settings, NULL-terminated, may be NULL; later ones win; "GWB_USAGE_URL=@kubesim" is
 * kubesim's simulated monitor, /sim/metrics/hami); then creates team with
 * team_body (PUT /v1/teams/TEAM as the admin). Fails the case on any error. */
void h_stack_start(struct h_stack *st, int with_redis, const char *const *kubesim_flags,
		   const char *const *env, const char *team, const char *team_body);

#endif
