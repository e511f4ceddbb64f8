/* The test runner's main(): kept apart from t.c so that a benchmark with its own main() can
 * link the harness without it. Forks each case into its own process group, enforces its time
 * limit, kills whatever it left running, and prints the summary line the CI reads. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/t.h"

static int run_child(struct t_case *c)
{
	setpgid(0, 0);
	alarm((unsigned)c->timeout_s);
	volatile int failed = 0;
	if (setjmp(t_case_jmp_) == 0)
		c->fn();
	else
		failed = 1;
	t_run_defers_();
	fflush(stdout);
	return failed || t_soft_failed_;
}

/* The filter selects a case when it occurs in "binary.case" at the start of a word: at the
 * beginning, or after '.', '_' or '-'. So T=race runs the race cases but not "graceful", and a
 * whole case name runs that one case. */
static int filter_matches(const char *full, const char *filter)
{
	for (const char *p = full; (p = strstr(p, filter)) != NULL; p++)
		if (p == full || p[-1] == '.' || p[-1] == '_' || p[-1] == '-')
			return 1;
	return 0;
}

int main(int argc, char **argv)
{
	const char *prog = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const char *filter = argc > 1 && argv[1][0] ? argv[1] : NULL;
	int passed = 0, failed = 0;
	gwb_alloc_init();
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	for (struct t_case *c = t_cases_; c; c = c->next) {
		char full[256];
		snprintf(full, sizeof full, "%s.%s", prog, c->name);
		if (filter && !filter_matches(full, filter))
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
