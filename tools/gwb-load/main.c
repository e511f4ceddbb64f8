/* gwb-load: the load generator of gpu-workbench. It sends a mix of submissions, idempotent
 * replays and cancels to gwb-server over keep-alive HTTP connections (open or closed loop),
 * checks every answer, samples each team's quota, optionally follows every task to its end,
 * and prints a summary (text, or JSON with --json). Exit 0 when every check passed, 1 when one
 * failed or the server could not be used, 2 on a usage error. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "tools/gwb-load/drain.h"
#include "tools/gwb-load/gen.h"
#include "tools/gwb-load/load.h"
#include "tools/gwb-load/opts.h"
#include "tools/gwb-load/report.h"
#include "tools/gwb-load/verify.h"

#define EXIT_FAIL          1
#define EXIT_USAGE         2
#define CONNECT_TIMEOUT_MS 3000

/* A plain TCP connect before anything else, so an unreachable server gets the system's own
 * words ("Connection refused") instead of evhttp's silence. Returns 0, or -1 with err. */
static int reachable(const struct client_target *t, char *err, size_t errlen)
{
	struct addrinfo hints = {0}, *res = NULL;
	hints.ai_socktype = SOCK_STREAM;
	char port[16];
	snprintf(port, sizeof port, "%d", t->port);
	int gai = getaddrinfo(t->host, port, &hints, &res);
	if (gai) {
		snprintf(err, errlen, "cannot resolve %s: %s", t->host, gai_strerror(gai));
		return -1;
	}
	int rc = -1, why = 0;
	for (struct addrinfo *a = res; a && rc < 0; a = a->ai_next) {
		int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK, a->ai_protocol);
		if (fd < 0) {
			why = errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
			rc = 0;
		} else if (errno == EINPROGRESS) {
			struct pollfd p = {fd, POLLOUT, 0};
			int soerr = 0;
			socklen_t len = sizeof soerr;
			if (poll(&p, 1, CONNECT_TIMEOUT_MS) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0)
				rc = 0;
			else
				why = soerr ? soerr : ETIMEDOUT;
		} else {
			why = errno;
		}
		close(fd);
	}
	freeaddrinfo(res);
	if (rc < 0)
		snprintf(err, errlen, "cannot connect to %s:%d: %s", t->host, t->port,
		         strerror(why));
	return rc;
}

static int run(struct load *l)
{
	const struct load_opts *o = l->o;
	char err[512];
	if (reachable(&l->target, err, sizeof err) < 0 ||
	    verify_teams_sample(l, err, sizeof err) < 0) {
		fprintf(stderr, "gwb-load: %s: %s\n", o->url, err);
		return EXIT_FAIL;
	}
	verify_dead_letters(l, 0);
	gen_run(l);
	if (verify_teams_sample(l, err, sizeof err) < 0)
		fprintf(stderr, "gwb-load: after sending: %s\n", err);
	if (o->drain)
		drain_run(l);
	l->phase = PHASE_END;
	verify_quota_end(l);
	verify_dead_letters(l, 1);
	load_quiesce(l);
	json_t *summary = report_build(l);
	if (o->json) {
		char *s = json_dumps(summary, JSON_COMPACT | JSON_SORT_KEYS);
		if (s)
			puts(s);
		gwb_free(s); /* jansson allocates through the wrapper */
	} else {
		report_print_text(summary, stdout);
	}
	int passed = json_is_true(json_object_get(summary, "passed"));
	json_decref(summary);
	return passed ? 0 : EXIT_FAIL;
}

int main(int argc, char **argv)
{
	gwb_alloc_init();
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stderr, NULL, _IOLBF, 0);
	struct load_opts o;
	char err[512];
	int rc = opts_parse(&o, argc, argv, err, sizeof err);
	if (rc == 1) {
		fputs(opts_usage(), stdout);
		return 0;
	}
	if (rc < 0) {
		fprintf(stderr, "gwb-load: %s\n\n%s", err, opts_usage());
		return EXIT_USAGE;
	}
	struct load l;
	rc = load_init(&l, &o, err, sizeof err);
	if (rc < 0) {
		fprintf(stderr, "gwb-load: %s\n", err);
		load_fini(&l);
		return rc == -2 ? EXIT_USAGE : EXIT_FAIL;
	}
	rc = run(&l);
	load_quiesce(&l);
	load_fini(&l);
	return rc;
}
