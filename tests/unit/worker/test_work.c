/* Unit tests of worker/work: the product is right, the duty cycle costs about the share of
 * CPU it stands for, and a stop request ends the loop within a period. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h> /* make deps installs it; without it, never under valgrind */
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "tests/harness/t.h"
#include "worker/work.h"

TEST(work_matmul_is_a_real_product)
{
	double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8}, c[4];
	double tr = work_matmul(a, b, c, 2);
	CHECK(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50);
	CHECK(tr == 69);
}

static volatile sig_atomic_t stop;

static struct work_stats run(int duty, double seconds)
{
	struct work_opts o = {.duty_percent = duty,
	                      .period_ms = 50,
	                      .duration_s = seconds,
	                      .progress_s = 1,
	                      .stop = &stop};
	struct work_stats s;
	CHECK_INT(work_run(&o, NULL, NULL, &s), 0);
	t_log("duty %d%%: cpu share %.1f%% over %.2f s, %lld products", duty, s.cpu_share,
	      s.elapsed_s, (long long)s.products);
	return s;
}

TEST_T(work_duty_cycle_matches_the_share, 30)
{
	struct work_stats s = run(25, 1.0);
	CHECK(s.elapsed_s >= 0.99 && s.elapsed_s < 1.3);
	/* Wide bounds: a loaded test machine can only lower the share, never raise it much.
	 * Under valgrind (make valgrind) the pauses cost CPU of their own: only the lower one. */
	double most = RUNNING_ON_VALGRIND ? 100 : 35;
	CHECKF(s.cpu_share > 10 && s.cpu_share < most, "25%% duty gave %.1f%%", s.cpu_share);
	CHECK(s.products > 0);
	s = run(0, 0.3);
	CHECKF(s.cpu_share < 5, "0%% duty gave %.1f%%", s.cpu_share);
	CHECK_INT(s.products, 0);
}

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

TEST_T(work_stops_within_a_period, 30)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigaction(SIGUSR1, &sa, NULL);
	/* 300 ms from now, in the middle of a 10 s run. A helper process sends the signal: the
	 * framework's own alarm() must stay untouched. */
	pid_t parent = getpid();
	if (fork() == 0) {
		usleep(300000);
		kill(parent, SIGUSR1);
		_exit(0);
	}
	struct work_opts o = {
	    .duty_percent = 50, .period_ms = 100, .duration_s = 10, .progress_s = 1, .stop = &stop};
	struct work_stats s;
	CHECK_INT(work_run(&o, NULL, NULL, &s), 1);
	CHECKF(s.elapsed_s < 0.3 + 0.1 + 0.05, "stopped after %.3f s", s.elapsed_s);
}
