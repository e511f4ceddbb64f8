/* Benchmark (not a test): the CPU share gwb-worker really takes for a requested gpu-core share,
 * measured from the child's rusage over its whole run, next to two baselines measured in the
 * same run: a child that spins (what one busy CPU gives on this machine right now) and one
 * that sleeps. Usage: GWB_BIN=/abs/bin bench_worker [seconds per run, default 3]. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/podinfo.h"

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* Waits for pid; returns its CPU seconds (user + system) and sets *wall from t0_ms. */
static double reap(pid_t pid, int64_t t0_ms, double *wall, int *code)
{
	int st = 0;
	struct rusage ru;
	while (wait4(pid, &st, 0, &ru) < 0 && errno == EINTR)
		;
	*wall = (double)(clock_mono_ms() - t0_ms) / 1000.0;
	*code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
}

/* Share of one CPU taken by a child that spins (busy) or sleeps for seconds. */
static double baseline(int busy, double seconds)
{
	fflush(stdout); /* a child must not inherit, and print again, what is buffered */
	int64_t t0 = clock_mono_ms();
	pid_t pid = fork();
	if (pid == 0) {
		if (!busy) {
			struct timespec ts = {(time_t)seconds,
			                      (long)((seconds - (double)(time_t)seconds) * 1e9)};
			nanosleep(&ts, NULL);
			_exit(0);
		}
		volatile unsigned long x = 0;
		while (clock_mono_ms() - t0 < (int64_t)(seconds * 1000))
			for (int i = 0; i < 100000; i++)
				x += (unsigned long)i;
		_exit(0);
	}
	double wall;
	int code;
	double cpu = reap(pid, t0, &wall, &code);
	return 100.0 * cpu / wall;
}

static int write_annotations(const char *path, int core)
{
	char json[512], corestr[16];
	snprintf(corestr, sizeof corestr, "%d", core);
	snprintf(
	    json, sizeof json,
	    "{\"gpu\":[{\"minor\":0,\"resources\":{\"koordinator.sh/gpu-core\":\"%s\","
	    "\"koordinator.sh/gpu-memory\":\"1Gi\",\"koordinator.sh/gpu-memory-ratio\":\"1\"}}]}",
	    corestr);
	const char *keys[] = {"scheduling.koordinator.sh/device-allocated"};
	const char *vals[] = {json};
	char *text = podinfo_format(keys, vals, 1);
	FILE *f = fopen(path, "w");
	if (!f) {
		gwb_free(text);
		return -1;
	}
	fputs(text, f);
	fclose(f);
	gwb_free(text);
	return 0;
}

/* Runs the worker for seconds at core percent; returns its CPU share of one CPU, or -1. */
static double worker_share(const char *bin, const char *ann, int core, double seconds)
{
	if (write_annotations(ann, core) != 0)
		return -1;
	char dur[32];
	snprintf(dur, sizeof dur, "%g", seconds);
	fflush(stdout);
	int64_t t0 = clock_mono_ms();
	pid_t pid = fork();
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stdout))
			_exit(127);
		execl(bin, bin, "--annotations-file", ann, "--duration-seconds", dur,
		      "--cuda-library", "/nonexistent/libcuda.so.1", (char *)NULL);
		_exit(127);
	}
	double wall;
	int code;
	double cpu = reap(pid, t0, &wall, &code);
	if (code != 0) {
		fprintf(stderr, "gwb-worker exited %d\n", code);
		return -1;
	}
	return 100.0 * cpu / wall;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? strtod(argv[1], NULL) : 3.0;
	if (!(seconds > 0 && seconds <= 600))
		seconds = 3.0;
	const char *dir = getenv("GWB_BIN");
	char bin[4096], tmp[] = "/tmp/gwbbench.XXXXXX", ann[4200];
	snprintf(bin, sizeof bin, "%s/gwb-worker", dir && dir[0] ? dir : "bin");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(ann, sizeof ann, "%s/annotations", tmp);
	printf("bench_worker: CPU share of gwb-worker for a requested gpu-core share\n"
	       "(%.1f s per run, 100 ms periods, share = child CPU time / wall time)\n\n",
	       seconds);
	double busy = baseline(1, seconds), idle = baseline(0, seconds);
	printf("baseline  spinning child   %6.1f %% of one CPU\n", busy);
	printf("baseline  sleeping child   %6.1f %%\n\n", idle);
	printf("requested  measured  difference  measured/spinning-baseline\n");
	static const int shares[] = {0, 25, 50, 100};
	int rc = 0;
	for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++) {
		double m = worker_share(bin, ann, shares[i], seconds);
		if (m < 0) {
			rc = 1;
			continue;
		}
		printf("%6d %%   %6.1f %%   %+7.1f     %6.1f %%\n", shares[i], m, m - shares[i],
		       busy > 0 ? 100.0 * m / busy : 0);
	}
	unlink(ann);
	rmdir(tmp);
	return rc;
}
