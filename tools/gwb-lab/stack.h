/* The lab's private stack: a redis-server on a Unix socket, kubesim with its control socket and
 * gwb-server, all under one folder (.runtime/lab/), started as child processes and stopped by
 * their PIDs. It owns those processes and nothing else: a running stack given with --url is
 * never touched. */
#ifndef GWB_LAB_STACK_H
#define GWB_LAB_STACK_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

struct stack_proc {
	pid_t pid;          /* 0 when not running */
	char log[PATH_MAX]; /* its stdout and stderr */
	char url[256];      /* from its "... listening on URL" line */
};

struct stack {
	char dir[PATH_MAX];    /* absolute: .runtime/lab */
	char bindir[PATH_MAX]; /* where gwb-server, kubesim, gwb-worker are */
	char redis_sock[PATH_MAX];
	char ctl_sock[PATH_MAX]; /* kubesim's --control-socket */
	char db[PATH_MAX];
	char admin[64]; /* the admin token it gives gwb-server */
	int port;       /* gwb-server's port, kept across restarts */
	struct stack_proc redis, kubesim, server;
};

/* Empties dir (the lab's own folder only), then starts redis-server, kubesim (worker
 * bindir/gwb-worker) and gwb-server, each waited for until it is ready. Returns 0, or -1 with
 * the reason in err (what did start is left running: call stack_stop). A SIGINT or SIGTERM to
 * this process from now on stops the stack's processes before exiting, and each child also gets
 * SIGTERM when this process dies. */
int stack_start(struct stack *s, const char *bindir, const char *dir, char *err, size_t errlen);

/* kill -9 of gwb-server, reaped. Returns 0, or -1 when it was not running. */
int stack_server_kill9(struct stack *s);

/* Starts gwb-server again on the same port, database and queue; waits for its listening line.
 * Returns 0, or -1 with err. */
int stack_server_start(struct stack *s, char *err, size_t errlen);

/* Stops every process of the stack (SIGTERM, then SIGKILL after a few seconds), by PID, in
 * reverse order of start. Safe to call twice and after a failed start. */
void stack_stop(struct stack *s);

#endif
