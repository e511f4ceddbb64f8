/* Test runner: forks each case into its own process group, enforces its time limit, kills
 * whatever it left running, and prints the summary line the CI reads. */
#include "tests/harness/t.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"

static struct t_case *cases, **cases_tail = &cases;
static jmp_buf case_jmp;
static int soft_failed;

struct deferred {
	void (*fn)(void *);
	void *arg;
};
static struct deferred defers[64];
static int ndefers;

void t_register(struct t_case *c)
{
	*cases_tail = c;
	cases_tail = &c->next;
}

void t_defer(void (*fn)(void *), void *arg)
{
	if (ndefers < (int)(sizeof defers / sizeof defers[0]))
		defers[ndefers++] = (struct deferred){ fn, arg };
}

static void run_defers(void)
{
	while (ndefers > 0) {
		ndefers--;
		defers[ndefers].fn(defers[ndefers].arg);
	}
}

void t_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	printf("    %s:%d: ", file, line);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	longjmp(case_jmp, 1);
}

void t_fail_soft(const char *fmt, ...)
{
	va_list ap;
	printf("    ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	soft_failed = 1;
}

void t_log(const char *fmt, ...)
{
	va_list ap;
	printf("    # ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

static int run_child(struct t_case *c)
{
	setpgid(0, 0);
	alarm((unsigned)c->timeout_s);
	volatile int failed = 0;
	if (setjmp(case_jmp) == 0)
		c->fn();
	else
		failed = 1;
	run_defers();
	fflush(stdout);
	return failed || soft_failed;
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const char *filter = argc > 1 && argv[1][0] ? argv[1] : NULL;
	int passed = 0, failed = 0;
	gwb_alloc_init();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (struct t_case *c = cases; c; c = c->next) {
		char full[256];
		snprintf(full, sizeof full, "%s.%s", prog, c->name);
		if (filter && !strstr(full, filter))
			continue;
		int64_t t0 = clock_mono_ms();
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0)
			_exit(run_child(c));
		setpgid(pid, pid);
		int st = 0;
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		/* Anything the case started and left behind goes with it. */
		kill(-pid, SIGKILL);
		int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (WIFSIGNALED(st))
			printf("    killed by signal %d%s\n", WTERMSIG(st),
			       WTERMSIG(st) == SIGALRM ? " (time limit)" : "");
		printf("%s %s (%lld ms)\n", ok ? "ok  " : "FAIL", full,
		       (long long)(clock_mono_ms() - t0));
		if (ok)
			passed++;
		else
			failed++;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
