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

struct t_case *t_cases_;
static struct t_case **cases_tail = &t_cases_;
jmp_buf t_case_jmp_;
int t_soft_failed_;

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

void t_run_defers_(void)
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
	longjmp(t_case_jmp_, 1);
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
	t_soft_failed_ = 1;
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
