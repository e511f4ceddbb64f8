/* What the kubelet gives a container besides its process: the pod's folder under the state
 * dir (logs, HOME), the downward-API volume files (Kubernetes format) and the environment (the
 * container's env and fieldRefs, koordlet's GPU env of koordinator.md §5.1, the host path of
 * the annotations file). Owns no state: every function works from the pod document. */
#ifndef KUBESIM_PODENV_H
#define KUBESIM_PODENV_H

#include <jansson.h>
#include <stddef.h>

#define PODENV_MAX 256

/* A container's environment: n "NAME=value" strings (gwb_malloc'd), NULL-terminated. */
struct podenv_env {
	int n;
	char *v[PODENV_MAX];
};

/* Writes "<state_dir>/pods/<uid>" into buf. */
void podenv_dir(const char *state_dir, const char *uid, char *buf, size_t len);
/* Creates path and its missing parents (mkdir -p). Returns 0, or -1. */
int podenv_mkdirs(const char *path);
/* Removes the folder of the pod with that uid and everything in it. */
void podenv_remove_dir(const char *state_dir, const char *uid);
/* Writes every downwardAPI volume of pod under <pod folder>/volumes/<volume>/, rewriting a
 * file only when its content changed (readers may poll it). */
void podenv_write_downward(const char *state_dir, const json_t *pod);
/* Fills e (zeroed by the caller) with the environment of container ctr of pod: PATH,
 * HOSTNAME, HOME (the pod folder), the container's env, the GPU env and
 * GWB_ANNOTATIONS_FILE at its host path. */
void podenv_env_build(const char *state_dir, const json_t *pod, const json_t *ctr,
		      struct podenv_env *e);
/* Frees the strings of e and empties it. */
void podenv_env_free(struct podenv_env *e);

#endif
