/* The spawner of spawner.h: a FIFO of starts guarded by one mutex, the thread that runs them,
 * and a non-blocking pipe whose read end wakes the loop to report what the thread finished.
 * The thread only calls spawner_run and the queue's functions: it never touches the store,
 * the logs or anything else of the loop. */
#include "tools/kubesim/spawner.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"

struct job {
	void *tag;
	char *dir, *log;
	char **argv, **envp;
	int nice;
	pid_t pid;
	int err;
	int64_t started_ms;
	struct job *next;
};

struct queue {
	struct job *head, **tail;
};

struct spawner {
	spawner_done_fn fn;
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct queue todo, done; /* under mu */
	int stop;                /* under mu */
	int wake[2];             /* [0] read by the loop, [1] written by the thread */
	struct event *ev;
};

static void q_init(struct queue *q)
{
	q->head = NULL;
	q->tail = &q->head;
}

static void q_push(struct queue *q, struct job *j)
{
	j->next = NULL;
	*q->tail = j;
	q->tail = &j->next;
}

static struct job *q_pop(struct queue *q)
{
	struct job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = &q->head;
	}
	return j;
}

static char **strv_dup(char *const *v)
{
	size_t n = 0;
	while (v[n])
		n++;
	char **c = gwb_calloc(n + 1, sizeof *c);
	for (size_t i = 0; i < n; i++)
		c[i] = gwb_strdup(v[i]);
	return c;
}

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		gwb_free(v[i]);
	gwb_free(v);
}

static void job_free(struct job *j)
{
	gwb_free(j->dir);
	gwb_free(j->log);
	strv_free(j->argv);
	strv_free(j->envp);
	gwb_free(j);
}

int spawner_nice_for_cpu(int64_t milli_cpu)
{
	/* The kernel's weights for nice 0 to 19 (sched_prio_to_weight). */
	static const int weight[20] = { 1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
					110,  87,  70,  56,  45,  36,  29,  23,  18,  15 };
	if (milli_cpu >= 1000)
		return 0; /* a core or more: nice 0's weight, the most we may give */
	int64_t shares = milli_cpu * 1024 / 1000;
	if (shares < 2)
		shares = 2;
	int best = 0;
	for (int n = 1; n < 20; n++)
		if (llabs(shares - weight[n]) < llabs(shares - weight[best]))
			best = n;
	return best;
}

/* Gives the child pid the weight of nice: its own nice value, and its session's autogroup
 * (absent when the kernel has none, which leaves the nice value to do the work). */
static void set_weight(pid_t pid, int nice)
{
	if (nice <= 0)
		return;
	setpriority(PRIO_PROCESS, (id_t)pid, nice);
	char path[48], val[8];
	snprintf(path, sizeof path, "/proc/%d/autogroup", (int)pid);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	int n = snprintf(val, sizeof val, "%d", nice);
	ssize_t w = write(fd, val, (size_t)n);
	(void)w; /* best effort, like the nice value */
	close(fd);
}

pid_t spawner_run(const char *dir, const char *log, char *const *argv, char *const *envp,
		  int nice, int *err)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, all;
	pid_t pid = -1;
	/* Opened here, close-on-exec, so the child sees only the dup2 copies. */
	int lfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct stat st;
	int enter = stat(dir, &st) == 0 && S_ISDIR(st.st_mode) && access(dir, X_OK) == 0;
	*err = 0;
	int rc = posix_spawn_file_actions_init(&fa);
	if (rc) {
		*err = rc;
		goto out_fds;
	}
	rc = posix_spawnattr_init(&at);
	if (rc) {
		*err = rc;
		goto out_fa;
	}
	sigemptyset(&none);
	sigfillset(&all);
	rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK |
						   POSIX_SPAWN_SETSIGDEF);
	if (!rc)
		rc = posix_spawnattr_setsigmask(&at, &none);
	if (!rc)
		rc = posix_spawnattr_setsigdefault(&at, &all);
	if (!rc && lfd >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, lfd, 1);
	if (!rc && lfd >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, lfd, 2);
	if (!rc && nul >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, nul, 0);
	/* Descriptors kubesim opened without close-on-exec stay out of the worker. */
	if (!rc)
		rc = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
	if (!rc && enter)
		rc = posix_spawn_file_actions_addchdir_np(&fa, dir);
	if (!rc)
		rc = posix_spawn(&pid, argv[0], &fa, &at, argv, envp);
	if (rc) {
		*err = rc;
		pid = -1;
	} else {
		set_weight(pid, nice);
	}
	posix_spawnattr_destroy(&at);
out_fa:
	posix_spawn_file_actions_destroy(&fa);
out_fds:
	if (lfd >= 0)
		close(lfd);
	if (nul >= 0)
		close(nul);
	return pid;
}

static void *thread_main(void *arg)
{
	struct spawner *s = arg;
	/* Signals are the loop's business (libevent's SIGCHLD event among them). */
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->todo.head && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		if (s->stop)
			break;
		struct job *j = q_pop(&s->todo);
		pthread_mutex_unlock(&s->mu);
		j->pid = spawner_run(j->dir, j->log, j->argv, j->envp, j->nice, &j->err);
		j->started_ms = clock_now_ms();
		pthread_mutex_lock(&s->mu);
		int was_empty = !s->done.head;
		q_push(&s->done, j);
		if (was_empty) {
			/* One byte per batch: the loop takes the whole done queue when it wakes. */
			ssize_t w = write(s->wake[1], "x", 1);
			(void)w; /* a full pipe is already a wake-up */
		}
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* Reports the finished starts in the order they were run. */
static void report(struct spawner *s)
{
	pthread_mutex_lock(&s->mu);
	struct queue done = s->done;
	q_init(&s->done);
	if (!done.head)
		done.tail = &done.head;
	pthread_mutex_unlock(&s->mu);
	struct job *j;
	while ((j = q_pop(&done))) {
		s->fn(j->tag, j->pid, j->err, j->started_ms, s->arg);
		job_free(j);
	}
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	(void)what;
	char buf[64];
	while (read(fd, buf, sizeof buf) > 0)
		;
	report(arg);
}

struct spawner *spawner_new(struct event_base *base, spawner_done_fn fn, void *arg)
{
	struct spawner *s = gwb_calloc(1, sizeof *s);
	s->fn = fn;
	s->arg = arg;
	q_init(&s->todo);
	q_init(&s->done);
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
		gwb_free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->ev = event_new(base, s->wake[0], EV_READ | EV_PERSIST, on_wake, s);
	if (!s->ev || event_add(s->ev, NULL) < 0 ||
	    pthread_create(&s->thread, NULL, thread_main, s) != 0) {
		if (s->ev)
			event_free(s->ev);
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->mu);
		close(s->wake[0]);
		close(s->wake[1]);
		gwb_free(s);
		return NULL;
	}
	return s;
}

void spawner_free(struct spawner *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = 1;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thread, NULL);
	report(s);
	struct job *j;
	while ((j = q_pop(&s->todo))) {
		s->fn(j->tag, -1, ECANCELED, clock_now_ms(), s->arg);
		job_free(j);
	}
	event_free(s->ev);
	close(s->wake[0]);
	close(s->wake[1]);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
	gwb_free(s);
}

void spawner_submit(struct spawner *s, void *tag, const char *dir, const char *log,
		    char *const *argv, char *const *envp, int nice)
{
	struct job *j = gwb_calloc(1, sizeof *j);
	j->tag = tag;
	j->nice = nice;
	j->dir = gwb_strdup(dir);
	j->log = gwb_strdup(log);
	j->argv = strv_dup(argv);
	j->envp = strv_dup(envp);
	pthread_mutex_lock(&s->mu);
	q_push(&s->todo, j);
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}
