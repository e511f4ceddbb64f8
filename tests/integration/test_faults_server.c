/* The fault suite, the server's own parts: gwb-server killed with SIGKILL at random moments,
 * and Redis killed and restarted, with and without its data, each while gwb-load drives a mix
 * of submissions, replays and cancels. After each fault the frame's checks (h_faults.h): every
 * acknowledged task present and ended, nothing reserved, no audit drift, one Job per task.
 * GWB_FAULTS_LONG=1 runs the long forms (make test-faults). */
#include <stdio.h>
#include <stdlib.h>

#include "lib/clock.h"
#include "tests/harness/h_faults.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

TEST_T(faults_server_kill9_at_random_moments, 600)
{
	long kills = h_faults_n(4, 20);
	struct h_faults f;
	h_faults_start(&f, "server_kill9", h_faults_n(200, 1500), NULL, NULL);
	srand((unsigned)clock_mono_ms());
	for (long k = 0; k < kills; k++) {
		/* While the burst is sent, then while its tasks run and end. */
		h_sleep_ms(300 + rand() % 1700);
		h_faults_kill9_server(&f);
	}
	h_faults_cleared(&f);
	h_faults_verify(&f, h_faults_n(120, 400));
}
