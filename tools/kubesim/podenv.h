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
 * GWB_ANNOTATIONS_FILE at its host path, GWB_TERMINATION_LOG at its termination file. */
void podenv_env_build(const char *state_dir, const json_t *pod, const json_t *ctr,
		      struct podenv_env *e);
/* What a kubelet keeps of a container's termination message at most, and of its log under
 * FallbackToLogsOnError (the last lines and bytes). */
#define PODENV_TERM_MSG_MAX 4096
#define PODENV_TERM_LOG_LINES 80
#define PODENV_TERM_LOG_BYTES 2048
/* Writes the host file standing for the terminationMessagePath of container (named) of the pod
 * with that uid into buf: "<pod folder>/<container>.termination-log" (no mount namespaces here:
 * the container is told its path in GWB_TERMINATION_LOG). */
void podenv_termination_path(const char *state_dir, const char *uid, const char *container,
			     char *buf, size_t len);
/* Empties the termination file of a container about to start (each run writes its own). */
void podenv_termination_reset(const char *state_dir, const char *uid, const char *container);
/* The message of container ctr that ended (failed: a non-zero exit), as a kubelet takes it:
 * the last PODENV_TERM_MSG_MAX bytes of its termination file or, under
 * terminationMessagePolicy FallbackToLogsOnError when that file is empty and the container
 * failed, the last PODENV_TERM_LOG_LINES lines of its log within PODENV_TERM_LOG_BYTES. Bytes
 * that are not UTF-8 become '?'. A gwb_malloc'd string, or NULL when there is none. */
char *podenv_termination_message(const char *state_dir, const char *uid, const json_t *ctr,
				 int failed);
/* Frees the strings of e and empties it. */
void podenv_env_free(struct podenv_env *e);

#endif
