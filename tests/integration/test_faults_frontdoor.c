/* The fault suite at the front door: while gwb-load drives its mix from 127.0.0.1, attackers
 * from other loopback addresses hold connections open with trickled heads (slowloris), or
 * open connections and send refused framing as fast as they can (a flood). The frame's checks
 * hold afterwards (h_faults.h), the attackers' connections were cut or refused by the server,
 * and the figure line reports the good client's submissions' p99 beside the baseline case's. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_faults.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

struct attack {
	int port;
	const char *from;     /* the attackers' source address */
	int conns;            /* connections held at once (slowloris) */
	atomic_int stop;
	atomic_long cut;      /* connections the server closed or refused */
	atomic_long answered; /* of those, with an HTTP answer */
};

static int port_of(const char *url)
{
	const char *c = strrchr(url, ':');
	CHECK(c);
	char *end;
	long port = strtol(c + 1, &end, 10);
	CHECKF(port > 0 && port < 65536, "bad port in %s", url);
	return (int)port;
}

/* A non-blocking connection from a's source address, or -1. */
static int dial_from(const struct attack *a)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in src = { .sin_family = AF_INET };
	inet_pton(AF_INET, a->from, &src.sin_addr);
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons((uint16_t)a->port) };
	inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
	if (bind(fd, (struct sockaddr *)&src, sizeof src) < 0 ||
	    (connect(fd, (struct sockaddr *)&dst, sizeof dst) < 0 && errno != EINPROGRESS)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Whether the server answered or closed fd; counts it. Returns 1 when fd is done. */
static int server_done(struct attack *a, int fd)
{
	char buf[512];
	ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n > 0 && strncmp(buf, "HTTP/1.1 ", 9) == 0)
		atomic_fetch_add(&a->answered, 1);
	atomic_fetch_add(&a->cut, 1);
	return 1;
}

/* Slowloris: a->conns connections, each sending one byte of a head every second; one the
 * server cuts is opened again. */
static void *slowloris(void *arg)
{
	struct attack *a = arg;
	static const char head[] = "GET /v1/teams/alpha HTTP/1.1\r\nHost: x\r\nX-Pad: "
				   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	int *fds = gwb_calloc((size_t)a->conns, sizeof *fds);
	size_t *at = gwb_calloc((size_t)a->conns, sizeof *at);
	for (int i = 0; i < a->conns; i++)
		fds[i] = -1;
	while (!atomic_load(&a->stop)) {
		for (int i = 0; i < a->conns; i++) {
			if (fds[i] >= 0 && server_done(a, fds[i])) {
				close(fds[i]);
				fds[i] = -1;
			}
			if (fds[i] < 0) {
				fds[i] = dial_from(a);
				at[i] = 0;
			}
			if (fds[i] >= 0 && at[i] < sizeof head - 3 &&
			    send(fds[i], head + at[i], 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
				at[i]++;
		}
		h_sleep_ms(1000);
	}
	for (int i = 0; i < a->conns; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	gwb_free(fds);
	gwb_free(at);
	return NULL;
}

/* A flood: new connections as fast as they are answered, each with a smuggling attempt. */
static void *flood(void *arg)
{
	struct attack *a = arg;
	static const char bad[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
				  "Content-Length: 40\r\n\r\nGET /v1/teams HTTP/1.1\r\nHost: x\r\n\r\n";
	while (!atomic_load(&a->stop)) {
		int fd = dial_from(a);
		if (fd < 0) {
			h_sleep_ms(10);
			continue;
		}
		struct pollfd pf = { fd, POLLOUT, 0 };
		if (poll(&pf, 1, 1000) > 0)
			(void)send(fd, bad, sizeof bad - 1, MSG_NOSIGNAL);
		pf.events = POLLIN;
		if (poll(&pf, 1, 2000) > 0)
			(void)server_done(a, fd);
		close(fd);
	}
	return NULL;
}

/* How long the attack lasts at least: beyond a few of the server's head deadlines. */
#define ATTACK_MIN_MS 7000

static void under_attack(const char *name, void *(*fn)(void *), int threads, int conns)
{
	struct rlimit rl;
	CHECK_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur < (rlim_t)conns + 256 && rl.rlim_max >= (rlim_t)conns + 256) {
		rl.rlim_cur = (rlim_t)conns + 256;
		CHECK_INT(setrlimit(RLIMIT_NOFILE, &rl), 0);
	}
	static const char *const env[] = { "GWB_HTTP_HEADER_TIMEOUT_SECONDS=2", NULL };
	struct h_faults f;
	h_faults_start(&f, name, h_faults_n(120, 1000), NULL, env);
	int64_t t0 = clock_mono_ms();
	struct attack a = { .port = port_of(f.st.srv.proc.url), .from = "127.0.0.2",
			    .conns = conns };
	pthread_t th[8];
	for (int i = 0; i < threads; i++)
		CHECK_INT(pthread_create(&th[i], NULL, fn, &a), 0);
	h_faults_load_wait(&f, 600000);
	int64_t took = clock_mono_ms() - t0;
	if (took < ATTACK_MIN_MS)
		h_sleep_ms((int)(ATTACK_MIN_MS - took));
	atomic_store(&a.stop, 1);
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	h_faults_cleared(&f);
	t_log("%s: %ld attacking connections cut or refused by the server, %ld with an answer",
	      name, atomic_load(&a.cut), atomic_load(&a.answered));
	h_faults_verify(&f, h_faults_n(120, 400));
	CHECKF(atomic_load(&a.cut) > 0, "%s: the server cut none of the attacking connections",
	       name);
	CHECKF(f.submit_p99_ms >= 0, "%s: gwb-load reported no submissions' p99", name);
}

/* 300 connections trickling their heads: each is cut at http.header_timeout_seconds (2 s here,
 * 10 by default). */
TEST_T(faults_frontdoor_slowloris, 900)
{
	under_attack("frontdoor_slowloris", slowloris, 1, 300);
}

/* Four threads opening connections and sending two Content-Lengths, as fast as answered. */
TEST_T(faults_frontdoor_flood, 900)
{
	under_attack("frontdoor_flood", flood, 4, 0);
}
