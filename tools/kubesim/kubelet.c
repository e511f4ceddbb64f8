/* Kubelet: containers are child processes in their own sessions (kill() goes to the process
 * group), started with posix_spawn by the spawner's thread (exec failures come back as its
 * return value; the loop hears of each start from a pipe event), reaped from a SIGCHLD event.
 * Pod state is reconciled level-triggered from the store:
 *
 *   container:  STARTING --started--> RUNNING --exit--> EXITED
 *               STARTING --exec failed--> EXITED (StartError)
 *               WAITING (not allowed, or not creatable: CreateContainerError, nothing runs)
 *                   --deleted or deadline--> EXITED (ContainerStatusUnknown, 137)
 *               RUNNING --deleted--> TERMINATING (SIGTERM) --grace over--> KILLED (SIGKILL)
 *
 * A stop asked of a STARTING container waits for its pid. A pod is not written while one of
 * its containers is STARTING; the start's report marks it for the next pass. A child can end
 * before its start is reported: its exit waits in a short list until the pid is known.
 *
 * A container of a pod that vanished from the store is stopped the same way with a 2 s grace.
 * A pod running past its spec.activeDeadlineSeconds (counted from status.startTime) has its
 * containers stopped with the pod's grace period and ends Failed with reason
 * DeadlineExceeded, as the kubelet enforces it on the node without the control plane.
 * A pass visits the pods that changed (the store's fan-out), those with a container
 * terminating or just exited, and once a second every pod that has containers (restart
 * back-offs); pods bound to any Node of the store are run here. A child's exit or a start's
 * report runs a pass of the kubelet's own (kubelet_wake); its writes wake the other
 * controllers through the registry. The pod folder, downward-API files and environment are
 * podenv.c's. */
#include "tools/kubesim/kubelet.h"

#include <errno.h>
#include <event2/event.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/quantity.h"
#include "tools/kubesim/events.h"
#include "tools/kubesim/faults.h"
#include "tools/kubesim/obj.h"
#include "tools/kubesim/podenv.h"
#include "tools/kubesim/registry.h"
#include "tools/kubesim/spawner.h"
#include "tools/kubesim/store.h"

/* Grace for containers whose pod disappeared (force deletion). */
#define ORPHAN_GRACE_MS 2000
/* Crash-loop back-off cap for restartPolicy OnFailure/Always. */
#define RESTART_BACKOFF_MAX_MS 300000
/* Every pod with containers is visited at least this often (restart back-off). */
#define FULL_PASS_MS 1000
/* Arguments of a container (command[1..] and args) at most: more cannot be created. */
#define MAX_ARGS 4096
/* The worker image's program: a container whose command names it runs --worker. */
#define WORKER_NAME "gwb-worker"
/* Bytes of a CreateContainerError message at most (it names the allow list). */
#define WHY_MAX 9000
/* Exits of children whose start is not reported yet (one per start in flight at most, in
 * practice a handful); older entries are dropped first. */
#define EARLY_EXITS 64

enum cstate { C_WAITING, C_STARTING, C_RUNNING, C_TERMINATING, C_EXITED };

struct proc {
	char uid[40];
	char ns[256], pod[256];
	char container[64];
	pid_t pid;
	enum cstate state;
	int status;          /* waitpid status once EXITED */
	int start_error;     /* exec failed: errno */
	char *program;       /* what the last start ran (argv[0]) */
	char *waiting;       /* WAITING: why the container cannot be created */
	char *message;       /* EXITED: its termination message, read once per exit */
	int message_read;    /* message was taken for this exit */
	int never_ran;       /* EXITED straight from WAITING (stopped before it could run) */
	int64_t started_ms, finished_ms;
	int64_t kill_at_ms;  /* SIGKILL deadline while TERMINATING */
	int sigkilled;
	int restarts;
	int reported;        /* terminal state written to the pod */
	int first_start;     /* STARTING: the first start (its report records the event) */
	int stop_pending;    /* STARTING: a stop was asked; kill_at_ms holds its deadline */
	int just_started;    /* a start was reported: the next pass writes the pod's status */
	int settled;         /* EXITED in a pod that ended: nothing is left for a pass to do
			      * until the pod changes (a deletion), so the timed pass skips it */
	struct proc *next;
	struct proc *uid_next; /* the other containers of the same pod */
};

struct kubelet {
	struct ks *ks;
	struct event *sigchld;
	struct event *wake_ev;   /* zero-timeout: a kubelet pass at the next loop turn */
	struct proc *procs;
	unsigned ip_seq;
	json_t *dirty;        /* keys "ns/name" of bound pods to visit in the next pass */
	json_t *uids;         /* pod uid -> its first proc (the address as an integer): pods keep
			       * their exited containers' records, so lists grow with every pod */
	int gone;             /* a pod was deleted since the last orphan check */
	int sub;
	int64_t last_full_ms;
	struct spawner *spawner; /* NULL: containers start on the loop (no thread to be had) */
	int starting;            /* starts handed to the spawner and not reported yet */
	struct early_exit {
		pid_t pid;
		int status;
	} early[EARLY_EXITS];
	int nearly;
	int freeing;             /* inside kubelet_free: reports only record pids */
};

static void mark_key(struct kubelet *k, const char *ns, const char *name)
{
	char key[520];
	snprintf(key, sizeof key, "%s/%s", ns, name);
	json_object_set_new(k->dirty, key, json_null());
}

/* Store fan-out: remembers which bound pods changed and whether one went. */
static void on_change(const struct store_event *ev, void *arg)
{
	struct kubelet *k = arg;
	if (ev->res != RES_PODS)
		return;
	if (ev->type == STORE_DELETED)
		k->gone = 1;
	const char *node = obj_str(ev->obj, "spec.nodeName");
	if (node && node[0])
		mark_key(k, obj_ns(ev->obj), obj_name(ev->obj));
}

static const char *cstate_name(enum cstate s)
{
	switch (s) {
	case C_WAITING: return "waiting";
	case C_STARTING: return "starting";
	case C_RUNNING: return "running";
	case C_TERMINATING: return "terminating";
	case C_EXITED: return "exited";
	}
	return "?";
}

/* The first proc of a pod (chained by uid_next), or NULL. */
static struct proc *procs_of(const struct kubelet *k, const char *uid)
{
	json_t *v = uid ? json_object_get(k->uids, uid) : NULL;
	return v ? (struct proc *)(intptr_t)json_integer_value(v) : NULL;
}

static struct proc *find_proc(struct kubelet *k, const char *uid, const char *container)
{
	for (struct proc *p = procs_of(k, uid); p; p = p->uid_next)
		if (!strcmp(p->uid, uid) && !strcmp(p->container, container))
			return p;
	return NULL;
}

static void proc_free(struct proc *p)
{
	gwb_free(p->program);
	gwb_free(p->waiting);
	gwb_free(p->message);
	gwb_free(p);
}

static void proc_exited(struct kubelet *k, struct proc *p, int st)
{
	p->state = C_EXITED;
	p->status = st;
	p->finished_ms = clock_now_ms();
	mark_key(k, p->ns, p->pod);
	/* When a container's main process ends, the runtime kills what it left. */
	kill(-p->pid, SIGKILL);
	log_info("kubelet", "container_exited", "pod=%s/%s container=%s pid=%d status=%d", p->ns,
		 p->pod, p->container, (int)p->pid,
		 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

/* A child no container claims: while starts are in flight it may be one of theirs. */
static void early_exit_keep(struct kubelet *k, pid_t pid, int st)
{
	if (!k->starting)
		return;
	if (k->nearly == EARLY_EXITS) {
		memmove(&k->early[0], &k->early[1], (EARLY_EXITS - 1) * sizeof k->early[0]);
		k->nearly--;
	}
	k->early[k->nearly++] = (struct early_exit){ pid, st };
}

/* The exit of pid if it came before its start was reported (and forgets it), else -1. */
static int early_exit_take(struct kubelet *k, pid_t pid, int *st)
{
	for (int i = 0; i < k->nearly; i++)
		if (k->early[i].pid == pid) {
			*st = k->early[i].status;
			memmove(&k->early[i], &k->early[i + 1],
				(size_t)(k->nearly - i - 1) * sizeof k->early[0]);
			k->nearly--;
			return 0;
		}
	return -1;
}

static void reap(struct kubelet *k)
{
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid <= 0)
			break;
		int claimed = 0;
		for (struct proc *p = k->procs; p; p = p->next) {
			if (p->pid != pid || p->state == C_EXITED || p->state == C_STARTING)
				continue;
			proc_exited(k, p, st);
			claimed = 1;
			break; /* one live container has this pid */
		}
		if (!claimed)
			early_exit_keep(k, pid, st);
	}
}

static void sigchld_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct kubelet *k = arg;
	reap(k);
	kubelet_wake(k);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	kubelet_sync(arg);
}

void kubelet_wake(struct kubelet *k)
{
	if (k && !k->freeing && !k->ks->stopping)
		event_active(k->wake_ev, EV_TIMEOUT, 0);
}

static void on_started(void *tag, pid_t pid, int err, int64_t started_ms, void *arg);

struct kubelet *kubelet_new(struct ks *ks)
{
	struct kubelet *k = gwb_calloc(1, sizeof *k);
	k->ks = ks;
	k->sigchld = evsignal_new(ks->base, SIGCHLD, sigchld_cb, k);
	evsignal_add(k->sigchld, NULL);
	k->wake_ev = event_new(ks->base, -1, 0, wake_cb, k);
	k->dirty = json_object();
	k->uids = json_object();
	k->sub = store_subscribe(ks->store, on_change, k);
	k->spawner = spawner_new(ks->base, on_started, k);
	if (!k->spawner)
		log_warn("kubelet", "spawner_unavailable", "containers start on the loop");
	return k;
}

void kubelet_free(struct kubelet *k)
{
	if (!k)
		return;
	k->freeing = 1;
	spawner_free(k->spawner); /* reports the starts it ran, so their pids are known */
	for (struct proc *p = k->procs; p; p = p->next)
		if (p->state != C_EXITED && p->pid > 0)
			kill(-p->pid, SIGKILL);
	for (struct proc *p = k->procs; p; p = p->next)
		if (p->state != C_EXITED && p->pid > 0)
			waitpid(p->pid, NULL, 0);
	while (k->procs) {
		struct proc *p = k->procs;
		k->procs = p->next;
		proc_free(p);
	}
	event_free(k->sigchld);
	event_free(k->wake_ev);
	store_unsubscribe(k->ks->store, k->sub);
	json_decref(k->dirty);
	json_decref(k->uids);
	gwb_free(k);
}

int kubelet_terminating(const struct kubelet *k)
{
	int n = 0;
	for (const struct proc *p = k->procs; p; p = p->next)
		n += p->state == C_TERMINATING;
	return n;
}

int kubelet_running(const struct kubelet *k)
{
	int n = 0;
	for (const struct proc *p = k->procs; p; p = p->next)
		n += p->state != C_EXITED && p->state != C_WAITING;
	return n;
}

int kubelet_log_path(struct kubelet *k, const json_t *pod, const char *container, char *buf,
		     size_t len)
{
	char dir[PATH_MAX];
	podenv_dir(k->ks->cfg.state_dir, obj_uid(pod), dir, sizeof dir);
	snprintf(buf, len, "%s/%s.log", dir, container);
	struct stat st;
	return stat(buf, &st) == 0 ? 0 : -1;
}

/* ---- processes ---- */

static void stop_proc(struct kubelet *k, struct proc *p, int64_t deadline_ms, const json_t *pod);

/* The pod of p as the store has it now, when it is still the same pod (same uid). */
static json_t *pod_of(struct kubelet *k, const struct proc *p)
{
	json_t *pod = store_get(k->ks->store, RES_PODS, p->ns, p->pod);
	return pod && !strcmp(obj_uid(pod), p->uid) ? pod : NULL;
}

/* A start ended (on the loop, or from spawner_free): p leaves STARTING. */
static void start_done(struct kubelet *k, struct proc *p, pid_t pid, int err, int64_t when)
{
	const char *program = p->program ? p->program : "";
	p->pid = pid;
	p->started_ms = when;
	if (k->freeing) {
		p->state = pid > 0 ? C_RUNNING : C_EXITED;
		return;
	}
	if (pid < 0) {
		p->state = C_EXITED;
		p->start_error = err ? err : EIO;
		p->finished_ms = p->started_ms;
		char dir[PATH_MAX], log[PATH_MAX + 80];
		podenv_dir(k->ks->cfg.state_dir, p->uid, dir, sizeof dir);
		snprintf(log, sizeof log, "%s/%s.log", dir, p->container);
		FILE *f = fopen(log, "a");
		if (f) {
			fprintf(f, "kubesim: exec %s: %s\n", program, strerror(p->start_error));
			fclose(f);
		}
		log_warn("kubelet", "start_failed", "pod=%s/%s container=%s program=%s err=%s",
			 p->ns, p->pod, p->container, log_q(program), strerror(p->start_error));
	} else {
		p->state = C_RUNNING;
		log_info("kubelet", "container_started", "pod=%s/%s container=%s pid=%d", p->ns,
			 p->pod, p->container, (int)p->pid);
	}
	p->just_started = 1;
	mark_key(k, p->ns, p->pod);
	json_t *pod = pod_of(k, p);
	if (p->first_start && pod) {
		char msg[600];
		snprintf(msg, sizeof msg, "Started container %s", p->container);
		events_record(k->ks, pod, p->start_error ? "Warning" : "Normal",
			      p->start_error ? "Failed" : "Started",
			      p->start_error ? "Error: failed to start container" : msg, "kubelet");
	}
	p->first_start = 0;
	int st;
	if (pid > 0 && early_exit_take(k, pid, &st) == 0)
		proc_exited(k, p, st);
	if (p->stop_pending) {
		p->stop_pending = 0;
		stop_proc(k, p, p->kill_at_ms, pod);
	}
}

static void on_started(void *tag, pid_t pid, int err, int64_t started_ms, void *arg)
{
	struct kubelet *k = arg;
	k->starting--;
	start_done(k, tag, pid, err, started_ms);
	if (!k->starting)
		k->nearly = 0; /* every start is reported: no kept exit can be one of theirs */
	kubelet_wake(k);
}

/* The CPU weight of a container, from its cpu request (its limit when it has no request, as
 * the API server defaults it), as a kubelet sets the cgroup's cpu.shares: on this one machine
 * a simulated card's worker must not take the CPU from kubesim and gwb-server, which on a
 * real cluster run elsewhere. */
static int container_nice(const json_t *ctr)
{
	const char *q = obj_str(ctr, "resources.requests.cpu");
	if (!q)
		q = obj_str(ctr, "resources.limits.cpu");
	int64_t milli = 0;
	if (!q || quantity_parse_milli(q, &milli) != 0)
		milli = 0;
	return spawner_nice_for_cpu(milli);
}

/* Whether the comma-separated list holds path exactly. */
static int in_list(const char *list, const char *path)
{
	size_t len = strlen(path);
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");
		if (n == len && !strncmp(p, path, n))
			return 1;
		p += n;
		if (*p == ',')
			p++;
	}
	return 0;
}

/* The program container ctr runs: --worker when it has no command or its command names
 * gwb-worker (the worker image's program) or --worker itself; else command[0] when it is an
 * absolute path of --exec-allow. Returns NULL with why filled when the container cannot be
 * created: nothing that is not allowed is ever run. */
static const char *container_program(const struct kubelet *k, const json_t *ctr, char *why,
				     size_t len)
{
	const struct ks_config *c = &k->ks->cfg;
	json_t *cmd = json_object_get(ctr, "command");
	if (!json_array_size(cmd))
		return c->worker;
	const char *cmd0 = json_string_value(json_array_get(cmd, 0));
	const char *base = cmd0 ? strrchr(cmd0, '/') : NULL;
	base = base ? base + 1 : cmd0;
	if (cmd0 && (!strcmp(cmd0, c->worker) || !strcmp(base, WORKER_NAME)))
		return c->worker;
	if (cmd0 && cmd0[0] == '/' && in_list(c->exec_allow, cmd0))
		return cmd0;
	snprintf(why, len,
		 "failed to create container: %s \"%s\" is not allowed on this node: its kubelet "
		 "runs only absolute programs of its allow list [%s%s%s] (kubesim --exec-allow)",
		 cmd0 && cmd0[0] == '/' ? "program" : "command[0]", cmd0 ? cmd0 : "(not a string)",
		 c->worker, c->exec_allow[0] ? "," : "", c->exec_allow);
	return NULL;
}

/* The argument vector of ctr (program, command[1..], args; NULL-terminated, the strings
 * borrowed from ctr), or NULL with why filled. */
static char **container_argv(const struct kubelet *k, const json_t *ctr, char *why, size_t len)
{
	const char *program = container_program(k, ctr, why, len);
	if (!program)
		return NULL;
	json_t *cmd = json_object_get(ctr, "command"), *args = json_object_get(ctr, "args");
	size_t ncmd = json_array_size(cmd), n = (ncmd ? ncmd - 1 : 0) + json_array_size(args);
	if (n > MAX_ARGS) {
		snprintf(why, len, "failed to create container: %zu arguments, more than %d", n,
			 MAX_ARGS);
		return NULL;
	}
	char **argv = gwb_calloc(n + 2, sizeof *argv);
	size_t argc = 0, i;
	argv[argc++] = (char *)program;
	json_t *a;
	json_array_foreach(cmd, i, a)
	{
		if (i > 0 && json_is_string(a))
			argv[argc++] = (char *)json_string_value(a);
	}
	json_array_foreach(args, i, a)
	{
		if (json_is_string(a))
			argv[argc++] = (char *)json_string_value(a);
	}
	argv[argc] = NULL;
	return argv;
}

/* The container's workingDir when it has one (an existing absolute folder: the runtime
 * enters it, it creates nothing on this host), else the pod folder in dir. Returns NULL with
 * why filled when the workingDir cannot be entered. */
static const char *container_dir(const json_t *ctr, const char *dir, char *why, size_t len)
{
	const char *wd = obj_str(ctr, "workingDir");
	if (!wd || !wd[0])
		return dir;
	struct stat st;
	int err = 0;
	if (wd[0] != '/')
		err = EINVAL;
	else if (stat(wd, &st) < 0)
		err = errno;
	else if (!S_ISDIR(st.st_mode))
		err = ENOTDIR;
	if (!err)
		return wd;
	snprintf(why, len, "failed to create container: workingDir \"%s\": %s", wd,
		 err == EINVAL ? "not an absolute path" : strerror(err));
	return NULL;
}

/* The container cannot be created: it waits (CreateContainerError, as a kubelet reports it)
 * and nothing runs; the pod stays Pending until it is deleted or its deadline passes. */
static void container_waiting(struct kubelet *k, const json_t *pod, struct proc *p,
			      const char *why, int first)
{
	p->state = C_WAITING;
	p->pid = 0;
	p->started_ms = clock_now_ms();
	gwb_free(p->waiting);
	p->waiting = gwb_strdup(why);
	mark_key(k, p->ns, p->pod);
	log_warn("kubelet", "create_container_error", "pod=%s/%s container=%s why=%s", p->ns,
		 p->pod, p->container, log_q(why));
	if (first) {
		char msg[WHY_MAX + 16];
		snprintf(msg, sizeof msg, "Error: %s", why);
		events_record(k->ks, pod, "Warning", "Failed", msg, "kubelet");
	}
}

/* Starts one container: on the spawner's thread when there is one (p is STARTING until its
 * report), else here; or leaves it WAITING when it cannot be created. first: the pod's first
 * start of it (the report records an Event). */
static void start_container(struct kubelet *k, const json_t *pod, const json_t *ctr,
			    struct proc *p, int first)
{
	char dir[PATH_MAX], log[PATH_MAX + 80], why[WHY_MAX];
	podenv_dir(k->ks->cfg.state_dir, obj_uid(pod), dir, sizeof dir);
	podenv_mkdirs(dir);
	podenv_write_downward(k->ks->cfg.state_dir, pod);
	snprintf(log, sizeof log, "%s/%s.log", dir, p->container);
	char **argv = container_argv(k, ctr, why, sizeof why);
	const char *cwd = argv ? container_dir(ctr, dir, why, sizeof why) : NULL;
	if (!cwd) {
		gwb_free(argv);
		container_waiting(k, pod, p, why, first);
		return;
	}
	struct podenv_env env = { 0 };
	podenv_env_build(k->ks->cfg.state_dir, pod, ctr, &env);
	podenv_termination_reset(k->ks->cfg.state_dir, p->uid, p->container);
	gwb_free(p->message);
	p->message = NULL;
	p->message_read = 0;
	gwb_free(p->program);
	p->program = gwb_strdup(argv[0]);
	p->state = C_STARTING;
	p->pid = 0;
	p->first_start = first;
	p->stop_pending = 0;
	if (k->spawner) {
		k->starting++;
		spawner_submit(k->spawner, p, cwd, log, argv, env.v, container_nice(ctr));
	} else {
		int err;
		pid_t pid = spawner_run(cwd, log, argv, env.v, container_nice(ctr), &err);
		start_done(k, p, pid, err, clock_now_ms());
	}
	gwb_free(argv);
	podenv_env_free(&env);
}

/* ---- status ---- */

static int exit_code(const struct proc *p)
{
	if (p->never_ran)
		return 137;
	if (p->start_error)
		return 128;
	if (WIFEXITED(p->status))
		return WEXITSTATUS(p->status);
	if (WIFSIGNALED(p->status))
		return 128 + WTERMSIG(p->status);
	return 1;
}

/* A container that never ran: waiting with its reason, or (stopped so) terminated with the
 * status a kubelet gives a container it could not find when the pod ended. The image is
 * recorded, never pulled. */
static json_t *unstarted_status(const struct proc *p, const char *image)
{
	json_t *state = p->state == C_WAITING
		? json_pack("{s:{s:s, s:s}}", "waiting", "reason", "CreateContainerError",
			    "message", p->waiting ? p->waiting : "")
		: json_pack("{s:{s:i, s:s, s:s}}", "terminated", "exitCode", exit_code(p),
			    "reason", "ContainerStatusUnknown", "message",
			    "The container could not be located when the pod was terminated");
	return json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:o, s:{}}", "name", p->container,
			 "image", image, "imageID", "", "ready", 0, "started", 0, "restartCount",
			 p->restarts, "state", state, "lastState");
}

/* The termination message of an exited p, taken once per exit (the file may change after). */
static const char *exit_message(struct kubelet *k, struct proc *p, const json_t *ctr)
{
	if (!p->message_read) {
		p->message_read = 1;
		p->message = podenv_termination_message(k->ks->cfg.state_dir, p->uid, ctr,
							exit_code(p) != 0);
	}
	return p->message;
}

static json_t *container_status(struct kubelet *k, struct proc *p, const json_t *ctr)
{
	char ts[32], fin[32], cid[64];
	const char *image = obj_str(ctr, "image");
	if (p->state == C_WAITING || p->never_ran)
		return unstarted_status(p, image ? image : "");
	clock_fmt_rfc3339(p->started_ms, ts, sizeof ts);
	snprintf(cid, sizeof cid, "kubesim://%d", (int)(p->pid > 0 ? p->pid : 0));
	json_t *state;
	int running = p->state != C_EXITED;
	if (running) {
		state = json_pack("{s:{s:s}}", "running", "startedAt", ts);
	} else {
		clock_fmt_rfc3339(p->finished_ms, fin, sizeof fin);
		int code = exit_code(p);
		json_t *t = json_pack("{s:i, s:s, s:s, s:s, s:s}", "exitCode", code, "reason",
				      p->start_error ? "StartError" : code == 0 ? "Completed" : "Error",
				      "startedAt", ts, "finishedAt", fin, "containerID", cid);
		if (p->start_error) {
			char msg[300];
			snprintf(msg, sizeof msg, "failed to start container: exec: %s",
				 strerror(p->start_error));
			json_object_set_new(t, "message", json_string(msg));
		} else if (exit_message(k, p, ctr)) {
			json_object_set_new(t, "message", json_string(p->message));
		}
		state = json_pack("{s:o}", "terminated", t);
	}
	return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:i, s:o, s:{}}", "name", p->container,
			 "image", image ? image : "", "imageID", image ? image : "", "containerID",
			 cid, "ready", running, "started", running, "restartCount", p->restarts,
			 "state", state, "lastState");
}

/* Writes the pod's status from its processes; with reason (not NULL) once they all exited,
 * the pod is Failed with that status.reason and message whatever their exit codes. Returns 1
 * when the pod became terminal. */
static int write_status_why(struct kubelet *k, const json_t *pod, const char *reason,
			    const char *message)
{
	json_t *nw = json_deep_copy(pod);
	json_t *st = obj_child(nw, "status");
	json_t *statuses = json_array();
	int all_exited = 1, any_failed = 0, any = 0, any_waiting = 0;
	int64_t start = 0;
	size_t i;
	json_t *ctr;
	json_array_foreach(obj_path(pod, "spec.containers"), i, ctr)
	{
		struct proc *p = find_proc(k, obj_uid(pod), obj_str(ctr, "name"));
		if (!p)
			continue;
		any = 1;
		if (!start || p->started_ms < start)
			start = p->started_ms;
		json_array_append_new(statuses, container_status(k, p, ctr));
		any_waiting |= p->state == C_WAITING;
		if (p->state != C_EXITED)
			all_exited = 0;
		else if (exit_code(p) != 0)
			any_failed = 1;
	}
	if (!any) {
		json_decref(statuses);
		json_decref(nw);
		return 0;
	}
	json_object_set_new(st, "containerStatuses", statuses);
	char ts[32];
	if (!json_object_get(st, "startTime"))
		json_object_set_new(st, "startTime",
				    json_string(clock_fmt_rfc3339(start, ts, sizeof ts)));
	if (!json_object_get(st, "podIP")) {
		char ip[32];
		k->ip_seq++;
		snprintf(ip, sizeof ip, "10.244.0.%u", 2 + (k->ip_seq % 250));
		json_object_set_new(st, "podIP", json_string(ip));
		json_object_set_new(st, "podIPs", json_pack("[{s:s}]", "ip", ip));
		json_object_set_new(st, "hostIP", json_string("127.0.0.1"));
		json_object_set_new(st, "hostIPs", json_pack("[{s:s}]", "ip", "127.0.0.1"));
	}
	int terminal = all_exited;
	if (terminal) {
		const char *phase = any_failed || reason ? "Failed" : "Succeeded";
		json_object_set_new(st, "phase", json_string(phase));
		if (reason) {
			json_object_set_new(st, "reason", json_string(reason));
			json_object_set_new(st, "message", json_string(message));
		}
		obj_set_condition(nw, "PodReadyToStartContainers", "False", NULL, NULL, 0);
		obj_set_condition(nw, "Initialized", "True", "PodCompleted", NULL, 0);
		obj_set_condition(nw, "Ready", "False", "PodCompleted", NULL, 0);
		obj_set_condition(nw, "ContainersReady", "False", "PodCompleted", NULL, 0);
	} else if (any_waiting) {
		/* A container that cannot be created keeps the pod Pending, as on a node. */
		json_object_set_new(st, "phase", json_string("Pending"));
		obj_set_condition(nw, "PodReadyToStartContainers", "True", NULL, NULL, 0);
		obj_set_condition(nw, "Initialized", "True", NULL, NULL, 0);
		obj_set_condition(nw, "Ready", "False", "ContainersNotReady", NULL, 0);
		obj_set_condition(nw, "ContainersReady", "False", "ContainersNotReady", NULL, 0);
	} else {
		json_object_set_new(st, "phase", json_string("Running"));
		obj_set_condition(nw, "PodReadyToStartContainers", "True", NULL, NULL, 0);
		obj_set_condition(nw, "Initialized", "True", NULL, NULL, 0);
		obj_set_condition(nw, "Ready", "True", NULL, NULL, 0);
		obj_set_condition(nw, "ContainersReady", "True", NULL, NULL, 0);
	}
	registry_commit(k->ks->registry, RES_PODS, nw);
	return terminal;
}

static int write_status(struct kubelet *k, const json_t *pod)
{
	return write_status_why(k, pod, NULL, NULL);
}

static void final_delete(struct kubelet *k, const json_t *pod)
{
	struct registry_delete_opts o = REGISTRY_DELETE_OPTS_INIT;
	o.grace = 0;
	o.uid = obj_uid(pod);
	struct kerr e = { 0 };
	json_t *out = NULL;
	int gone = 0;
	char ns[256], name[256];
	snprintf(ns, sizeof ns, "%s", obj_ns(pod));
	snprintf(name, sizeof name, "%s", obj_name(pod));
	registry_delete(k->ks->registry, res_get(RES_PODS), ns, name, &o, &out, &gone, &e);
	json_decref(out);
	kerr_clear(&e);
}

static void stop_proc(struct kubelet *k, struct proc *p, int64_t deadline_ms, const json_t *pod)
{
	if (p->state == C_WAITING) {
		/* Nothing runs: the container is done at once. */
		p->state = C_EXITED;
		p->never_ran = 1;
		p->finished_ms = clock_now_ms();
		mark_key(k, p->ns, p->pod);
		return;
	}
	if (p->state == C_STARTING) {
		/* No pid yet: the start's report carries the stop out. */
		if (!p->stop_pending || deadline_ms < p->kill_at_ms)
			p->kill_at_ms = deadline_ms;
		p->stop_pending = 1;
		return;
	}
	if (p->state == C_RUNNING) {
		p->state = C_TERMINATING;
		p->kill_at_ms = deadline_ms;
		kill(-p->pid, SIGTERM);
		log_info("kubelet", "container_sigterm", "pod=%s/%s container=%s pid=%d", p->ns,
			 p->pod, p->container, (int)p->pid);
		if (pod) {
			char msg[128];
			snprintf(msg, sizeof msg, "Stopping container %s", p->container);
			events_record(k->ks, pod, "Normal", "Killing", msg, "kubelet");
		}
	}
	if (p->state == C_TERMINATING && deadline_ms < p->kill_at_ms)
		p->kill_at_ms = deadline_ms; /* a later delete shortened the grace period */
	if (p->state == C_TERMINATING && !p->sigkilled && clock_now_ms() >= p->kill_at_ms) {
		p->sigkilled = 1;
		kill(-p->pid, SIGKILL);
		log_info("kubelet", "container_sigkill", "pod=%s/%s container=%s pid=%d", p->ns,
			 p->pod, p->container, (int)p->pid);
	}
}

static struct proc *new_proc(struct kubelet *k, const json_t *pod, const char *container)
{
	struct proc *p = gwb_calloc(1, sizeof *p);
	snprintf(p->uid, sizeof p->uid, "%s", obj_uid(pod));
	snprintf(p->ns, sizeof p->ns, "%s", obj_ns(pod));
	snprintf(p->pod, sizeof p->pod, "%s", obj_name(pod));
	snprintf(p->container, sizeof p->container, "%s", container);
	p->uid_next = procs_of(k, p->uid);
	json_object_set_new(k->uids, p->uid, json_integer((json_int_t)(intptr_t)p));
	p->next = k->procs;
	k->procs = p;
	return p;
}

/* Pods that are running their containers: start missing ones, restart per policy. */
static void run_pod(struct kubelet *k, const json_t *pod)
{
	const char *policy = obj_str(pod, "spec.restartPolicy");
	int started = 0;
	size_t i;
	json_t *ctr;
	json_array_foreach(obj_path(pod, "spec.containers"), i, ctr)
	{
		const char *name = obj_str(ctr, "name");
		if (!name)
			continue;
		struct proc *p = find_proc(k, obj_uid(pod), name);
		if (!p) {
			p = new_proc(k, pod, name);
			start_container(k, pod, ctr, p, 1);
			started = 1;
			continue;
		}
		int restart = policy && p->state == C_EXITED &&
			      (!strcmp(policy, "Always") ||
			       (!strcmp(policy, "OnFailure") && exit_code(p) != 0));
		if (restart) {
			int64_t backoff = k->ks->cfg.job_backoff_ms << (p->restarts < 16 ? p->restarts : 16);
			if (backoff > RESTART_BACKOFF_MAX_MS)
				backoff = RESTART_BACKOFF_MAX_MS;
			if (clock_now_ms() - p->finished_ms >= backoff) {
				p->restarts++;
				p->status = 0;
				p->start_error = 0;
				p->sigkilled = 0;
				start_container(k, pod, ctr, p, 0);
				started = 1;
			}
		}
	}
	if (started || !obj_pod_terminal(pod))
		podenv_write_downward(k->ks->cfg.state_dir, pod);
	/* A start in flight: its report marks the pod, and that pass writes the status (as
	 * right after a start). */
	int starting = 0;
	for (struct proc *p = procs_of(k, obj_uid(pod)); p; p = p->uid_next) {
		starting |= p->state == C_STARTING;
		if (p->state != C_STARTING && p->just_started) {
			p->just_started = 0;
			started = 1;
		}
	}
	if (starting)
		return;
	int restarting = policy && strcmp(policy, "Never") != 0;
	if (!restarting || started) {
		write_status(k, pod);
		return;
	}
	/* With restarts, the pod ends only for OnFailure when every container succeeded. */
	int all_ok = 1;
	json_array_foreach(obj_path(pod, "spec.containers"), i, ctr)
	{
		struct proc *p = find_proc(k, obj_uid(pod), obj_str(ctr, "name"));
		all_ok &= p && p->state == C_EXITED && exit_code(p) == 0;
	}
	if (all_ok && !strcmp(policy, "OnFailure"))
		write_status(k, pod);
	else {
		json_t *cur = store_get(k->ks->store, RES_PODS, obj_ns(pod), obj_name(pod));
		if (cur && !obj_str(cur, "status.startTime"))
			write_status(k, cur);
		else if (cur) {
			/* Keep the Running phase; refresh container states. */
			json_t *nw = json_deep_copy(cur);
			json_t *statuses = json_array();
			json_array_foreach(obj_path(cur, "spec.containers"), i, ctr)
			{
				struct proc *p = find_proc(k, obj_uid(cur), obj_str(ctr, "name"));
				if (p)
					json_array_append_new(statuses, container_status(k, p, ctr));
			}
			json_object_set_new(obj_child(nw, "status"), "containerStatuses", statuses);
			registry_commit(k->ks->registry, RES_PODS, nw);
		}
	}
}

/* A running pod past its activeDeadlineSeconds: its containers are stopped with the pod's
 * grace period, then the pod ends Failed, reason DeadlineExceeded. Returns 1 when the deadline
 * has passed (the pod is not to be run any more), 0 otherwise. */
static int enforce_deadline(struct kubelet *k, const json_t *pod)
{
	int64_t ads = obj_int(pod, "spec.activeDeadlineSeconds", -1), start;
	if (ads <= 0 || obj_time_ms(pod, "status.startTime", &start) < 0 ||
	    clock_now_ms() < start + ads * 1000)
		return 0;
	int all_exited = 1;
	int64_t grace = obj_int(pod, "spec.terminationGracePeriodSeconds", 30);
	for (struct proc *p = procs_of(k, obj_uid(pod)); p; p = p->uid_next) {
		if (p->state == C_RUNNING || p->state == C_WAITING)
			log_info("kubelet", "deadline_exceeded", "pod=%s/%s active_deadline_s=%lld",
				 p->ns, p->pod, (long long)ads);
		if (p->state != C_EXITED)
			stop_proc(k, p, clock_now_ms() + grace * 1000, pod);
	}
	/* A container that never ran is done at once; the others once they exit. */
	for (struct proc *p = procs_of(k, obj_uid(pod)); p; p = p->uid_next)
		all_exited &= p->state == C_EXITED;
	if (all_exited) {
		char msg[160];
		snprintf(msg, sizeof msg, "the pod was active %lld s, its activeDeadlineSeconds",
			 (long long)ads);
		write_status_why(k, pod, "DeadlineExceeded", msg);
	}
	return 1;
}

static void sync_pod(struct kubelet *k, const json_t *pod)
{
	int terminal = obj_pod_terminal(pod);
	if (terminal && !obj_deleting(pod)) {
		for (struct proc *p = procs_of(k, obj_uid(pod)); p; p = p->uid_next)
			p->settled = p->state == C_EXITED;
		return;
	}
	int any_proc = 0, all_exited = 1;
	for (struct proc *p = procs_of(k, obj_uid(pod)); p; p = p->uid_next) {
		any_proc = 1;
		all_exited &= p->state == C_EXITED;
	}
	if (obj_deleting(pod)) {
		if (faults_pod_stuck(k->ks->faults, pod))
			return;
		if (terminal || !any_proc) {
			final_delete(k, pod);
			return;
		}
		if (!all_exited) {
			/* The grace period runs from when the kubelet sees the deletion (the
			 * timestamp has only second precision). */
			int64_t deadline =
				clock_now_ms() +
				obj_int(pod, "metadata.deletionGracePeriodSeconds", 0) * 1000;
			all_exited = 1; /* a container that never ran is done at once */
			for (struct proc *p = procs_of(k, obj_uid(pod)); p; p = p->uid_next) {
				stop_proc(k, p, deadline, pod);
				all_exited &= p->state == C_EXITED;
			}
			if (!all_exited)
				return;
		}
		write_status(k, pod);
		json_t *cur = store_get(k->ks->store, RES_PODS, obj_ns(pod), obj_name(pod));
		if (cur)
			final_delete(k, cur);
		return;
	}
	if (terminal || enforce_deadline(k, pod))
		return;
	run_pod(k, pod);
}

void kubelet_sync(struct kubelet *k)
{
	reap(k);
	int full = clock_mono_ms() - k->last_full_ms >= FULL_PASS_MS;
	if (full)
		k->last_full_ms = clock_mono_ms();
	/* Pods with containers that need a look without a change of theirs: those between
	 * SIGTERM and SIGKILL every pass, every pod with containers once a second (restart
	 * back-offs, a cleared stuck_terminating fault). An exit is marked by reap. */
	int live = 0;
	for (struct proc *p = k->procs; p; p = p->next)
		if ((full && !p->settled) || p->state == C_TERMINATING) {
			mark_key(k, p->ns, p->pod);
			live += p->state == C_TERMINATING;
		}
	/* Keys first: syncing writes pods (and marks them for the next pass). */
	json_t *dirty = k->dirty;
	k->dirty = json_object();
	size_t n = json_object_size(dirty), m = 0;
	char (*keys)[2][256] = gwb_calloc(n ? n : 1, sizeof *keys);
	const char *key;
	json_t *v;
	json_object_foreach(dirty, key, v)
	{
		const char *slash = strchr(key, '/');
		if (!slash)
			continue;
		snprintf(keys[m][0], 256, "%.*s", (int)(slash - key), key);
		snprintf(keys[m][1], 256, "%s", slash + 1);
		m++;
	}
	json_decref(dirty);
	for (size_t i = 0; i < m; i++) {
		json_t *pod = store_get(k->ks->store, RES_PODS, keys[i][0], keys[i][1]);
		const char *node = pod ? obj_str(pod, "spec.nodeName") : NULL;
		if (node && node[0] && store_get(k->ks->store, RES_NODES, NULL, node))
			sync_pod(k, pod);
	}
	gwb_free(keys);
	if (!full && !k->gone && !live)
		return;
	int gone = k->gone;
	k->gone = 0;
	/* Containers whose pod is gone (force-deleted, or re-created with a new uid). A settled
	 * container's pod can only go by a deletion, which sets gone. */
	for (struct proc **pp = &k->procs; *pp;) {
		struct proc *p = *pp;
		if (p->settled && !gone) {
			pp = &p->next;
			continue;
		}
		json_t *pod = store_get(k->ks->store, RES_PODS, p->ns, p->pod);
		int alive = pod && !strcmp(obj_uid(pod), p->uid);
		if (alive) {
			pp = &p->next;
			continue;
		}
		if (p->state != C_EXITED) {
			if (p->state == C_RUNNING)
				log_info("kubelet", "orphan_container", "pod=%s/%s container=%s state=%s",
					 p->ns, p->pod, p->container, cstate_name(p->state));
			stop_proc(k, p, clock_now_ms() + ORPHAN_GRACE_MS, NULL);
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		/* Out of its pod's chain; the pod folder goes with the last one. */
		struct proc *first = procs_of(k, p->uid);
		if (first == p) {
			if (p->uid_next)
				json_object_set_new(k->uids, p->uid,
						    json_integer((json_int_t)(intptr_t)p->uid_next));
			else
				json_object_del(k->uids, p->uid);
		} else {
			for (struct proc *q = first; q; q = q->uid_next)
				if (q->uid_next == p) {
					q->uid_next = p->uid_next;
					break;
				}
		}
		if (!procs_of(k, p->uid))
			podenv_remove_dir(k->ks->cfg.state_dir, p->uid);
		proc_free(p);
	}
}
