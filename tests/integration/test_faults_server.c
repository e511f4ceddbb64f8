/* The fault suite, the server's own parts: gwb-server killed with SIGKILL at random moments,
 * and Redis killed and restarted, with and without its data, each while gwb-load drives a mix
 * of submissions, replays and cancels. After each fault the frame's checks (h_faults.h): every
 * acknowledged task present and ended, nothing reserved, no audit drift, one Job per task.
 * GWB_FAULTS_LONG=1 runs the long forms (make test-faults). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_faults.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

/* The same load with no fault: the checks hold on a healthy stack, and its time to end every
 * task is the baseline the faults' times compare with. */
TEST_T(faults_server_baseline_without_a_fault, 900)
{
	struct h_faults f;
	h_faults_start(&f, "no_fault_baseline", h_faults_n(120, 1000), NULL, NULL);
	h_faults_load_wait(&f, 600000);
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(120, 400));
}

TEST_T(faults_server_kill9_at_random_moments, 900)
{
	long kills = h_faults_n(3, 20);
	struct h_faults f;
	h_faults_start(&f, "server_kill9", h_faults_n(120, 1000), NULL, NULL);
	srand((unsigned)clock_mono_ms());
	for (long k = 0; k < kills; k++) {
		/* While the burst is sent, then while its tasks run and end. */
		h_sleep_ms(300 + rand() % 1700);
		h_faults_kill9_server(&f);
	}
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(120, 400));
}

/* Redis killed with SIGKILL and restarted; keep: with its append-only file (fsync per write),
 * else with everything lost, the stream and its consumer group included. */
static void redis_killed(const char *name, int keep)
{
	struct h_faults f;
	h_faults_start(&f, name, h_faults_n(120, 1000), NULL, NULL);
	long rounds = h_faults_n(1, 5);
	if (keep) {
		f.st.redis.keep_data = 1;
		const char *aof[] = { "CONFIG", "SET", "appendonly", "yes", NULL };
		gwb_free(h_redis_cli(&f.st.redis, aof));
	}
	srand((unsigned)clock_mono_ms());
	for (long k = 0; k < rounds; k++) {
		h_sleep_ms(500 + rand() % 1500);
		h_proc_exempt(&f.st.redis.proc);
		h_proc_stop(&f.st.redis.proc, SIGKILL, 5000);
		h_sleep_ms(1000 + rand() % 2000); /* the server works on without it meanwhile */
		h_redis_restart(&f.st.redis);
	}
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(120, 400));
}

TEST_T(faults_server_redis_killed_and_restarted_with_its_data, 900)
{
	redis_killed("redis_killed_data_kept", 1);
}

TEST_T(faults_server_redis_killed_and_restarted_empty, 900)
{
	redis_killed("redis_killed_data_lost", 0);
}

/* FLUSHALL while the burst is queued: the stream, its group and every entry vanish at once. */
TEST_T(faults_server_redis_flushall, 900)
{
	struct h_faults f;
	h_faults_start(&f, "redis_flushall", h_faults_n(120, 1000), NULL, NULL);
	long rounds = h_faults_n(1, 5);
	srand((unsigned)clock_mono_ms());
	for (long k = 0; k < rounds; k++) {
		h_sleep_ms(500 + rand() % 1500);
		const char *flush[] = { "FLUSHALL", NULL };
		gwb_free(h_redis_cli(&f.st.redis, flush));
	}
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(120, 400));
}
