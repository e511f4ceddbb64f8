/* The front door's framing on a real gwb-server, as a raw client sends it: every request that
 * a proxy could frame another way (smuggling) gets one JSON 400 and the connection closes; a
 * trickled head or body is cut at its deadline; connections are capped in all and per
 * address; what libevent used to answer in HTML is the API's JSON; and well-framed requests
 * (pipelined, chunked) still work. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"

static void put_alpha(const char *url)
{
	long st = h_team_put(url, ADMIN, "alpha",
			     "{\"gpu_memory_mib\": 4096, \"gpu_core_percent\": 100, \"token\": \""
			     ALPHA "\"}");
	CHECKF(st == 200 || st == 201, "PUT /v1/teams/alpha: %ld", st);
}

/* Status lines: "HTTP/1." at the start or at a line's start. */
static int count_answers(const char *ans)
{
	int n = strncmp(ans, "HTTP/1.", 7) == 0;
	for (const char *p = strstr(ans, "\nHTTP/1."); p; p = strstr(p + 1, "\nHTTP/1."))
		n++;
	return n;
}

/* A refusal: exactly one answer, the status given, the API's JSON error with code, and the
 * connection closed (h_raw returned at EOF, well before its time-out). */
static void check_refused(const char *what, const char *ans, int status, const char *code)
{
	char want[32];
	snprintf(want, sizeof want, "HTTP/1.1 %d ", status);
	CHECKF(strncmp(ans, want, strlen(want)) == 0, "%s: %.300s", what, ans);
	CHECKF(count_answers(ans) == 1, "%s: more than one answer: %.600s", what, ans);
	CHECKF(strstr(ans, "\r\nConnection: close\r\n"), "%s: not closed: %.300s", what, ans);
	CHECKF(strstr(ans, "\r\nContent-Type: application/json"), "%s: %.300s", what, ans);
	const char *body = strstr(ans, "\r\n\r\n");
	CHECK(body);
	json_error_t je;
	json_t *j = json_loads(body + 4, 0, &je);
	CHECKF(j, "%s: the body is not JSON: %s", what, body + 4);
	const char *got = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
	CHECKF(got && strcmp(got, code) == 0, "%s: code %s, want %s", what, got ? got : "-", code);
	json_decref(j);
}

static void send_refused(const char *url, const char *what, const char *bytes, size_t len,
			 int status, const char *code)
{
	int64_t t0 = clock_mono_ms();
	char *ans = h_raw(url, bytes, len, 10000);
	check_refused(what, ans, status, code);
	CHECKF(clock_mono_ms() - t0 < 9000, "%s: the connection stayed open", what);
	gwb_free(ans);
}

#define SEND_REFUSED(url, what, lit, status, code) \
	send_refused(url, what, lit, sizeof lit - 1, status, code)

TEST_T(frontdoor_smuggling_gets_one_json_400, 90)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	const char *url = s.proc.url;
	put_alpha(url);
	/* The finding's repro: the second request hidden in the first's body is never answered. */
	SEND_REFUSED(url, "two Content-Lengths",
		     "GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 91\r\n"
		     "\r\nGET /v1/teams/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " ALPHA
		     "\r\nConnection: close\r\n\r\n",
		     400, "invalid_header");
	SEND_REFUSED(url, "a signed Content-Length",
		     "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: +2\r\n\r\n{}", 400,
		     "invalid_header");
	SEND_REFUSED(url, "Transfer-Encoding other than chunked",
		     "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
		     "0\r\n\r\n",
		     400, "unsupported_transfer_encoding");
	SEND_REFUSED(url, "Content-Length and Transfer-Encoding",
		     "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
		     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		     400, "ambiguous_framing");
	SEND_REFUSED(url, "a NUL in Authorization",
		     "GET /v1/teams/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " ALPHA
		     "\0junk\r\n\r\n",
		     400, "invalid_header");
	SEND_REFUSED(url, "a bare CR",
		     "GET /healthz HTTP/1.1\r\nHost: x\rX-Other: 1\r\n\r\n", 400, "invalid_header");
	SEND_REFUSED(url, "a folded line",
		     "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\tmore\r\n\r\n", 400,
		     "invalid_header");
	SEND_REFUSED(url, "two Host headers",
		     "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, "invalid_header");
	SEND_REFUSED(url, "two Authorization headers",
		     "GET /v1/teams/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " ALPHA
		     "\r\nAuthorization: Bearer " ADMIN "\r\n\r\n",
		     400, "invalid_header");
	SEND_REFUSED(url, "HTTP/1.1 without Host", "GET /healthz HTTP/1.1\r\n\r\n", 400,
		     "missing_host");
	/* What libevent answered in HTML: a request line it cannot parse, headers and a body far
	 * past its own caps. */
	SEND_REFUSED(url, "an unparseable request line", "HELLO\r\n\r\n", 400,
		     "invalid_request_line");
	size_t big = 16384 * 4 + 8192;
	char *huge = gwb_malloc(big + 128);
	int n = snprintf(huge, big + 128, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(huge + n, 'a', big);
	memcpy(huge + n + big, "\r\n\r\n", 4);
	send_refused(url, "headers past libevent's cap", huge, (size_t)n + big + 4, 431,
		     "headers_too_large");
	gwb_free(huge);
	SEND_REFUSED(url, "a body past libevent's cap",
		     "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		     "Content-Length: 999999999\r\n\r\n{",
		     413, "body_too_large");
	/* Nothing of the refused requests was written. */
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks"), 0);
	h_server_stop(&s);
}

TEST_T(frontdoor_well_framed_requests_still_work, 60)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	const char *url = s.proc.url;
	put_alpha(url);
	/* Two requests in one write: two answers, in order. */
	static const char two[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
				  "GET /v1/teams/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
				  ALPHA "\r\nConnection: close\r\n\r\n";
	char *ans = h_raw(url, two, sizeof two - 1, 10000);
	CHECKF(count_answers(ans) == 2, "pipelined: %.600s", ans);
	CHECKF(strncmp(ans, "HTTP/1.1 200 ", 13) == 0, "%.300s", ans);
	CHECKF(strstr(ans, "\"alpha\""), "the second answer is missing: %.600s", ans);
	gwb_free(ans);
	/* A chunked submission (in two chunks, with a trailer) is read and admitted. */
	static const char body[] = "{\"team\": \"alpha\", \"gpu_memory_mib\": 512, "
				   "\"gpu_core_percent\": 10, \"duration_seconds\": 1}";
	char req[1024];
	snprintf(req, sizeof req,
		 "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " ALPHA "\r\n"
		 "Content-Type: application/json\r\nIdempotency-Key: chunked-1\r\n"
		 "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
		 "a\r\n%.10s\r\n%zx\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n",
		 body, sizeof body - 1 - 10, body + 10);
	ans = h_raw(url, req, strlen(req), 10000);
	CHECKF(strncmp(ans, "HTTP/1.1 201 ", 13) == 0, "chunked submission: %.600s", ans);
	gwb_free(ans);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks"), 1);
	h_server_stop(&s);
}

/* A connection to url's port from 127.0.0.1, or -1. */
static int dial(const char *url)
{
	const char *c = strrchr(url, ':');
	CHECK(c);
	char *end;
	long port = strtol(c + 1, &end, 10);
	CHECKF(port > 0 && port < 65536, "bad port in %s", url);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Sends bytes one every gap_ms until the server answers or closes; returns what it sent
 * back (gwb-allocated) and how many bytes went out in *sent. */
static char *trickle(const char *url, const char *bytes, size_t len, int gap_ms, size_t *sent)
{
	int fd = dial(url);
	CHECK(fd >= 0);
	*sent = 0;
	while (*sent < len) {
		if (send(fd, bytes + *sent, 1, MSG_NOSIGNAL) != 1)
			break;
		(*sent)++;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, gap_ms) > 0)
			break;
	}
	char *out = h_read_all(fd);
	close(fd);
	return out;
}

TEST_T(frontdoor_trickled_head_and_body_are_cut_at_their_deadlines, 90)
{
	struct h_server s;
	h_server_init(&s);
	s.env[0] = "GWB_HTTP_HEADER_TIMEOUT_SECONDS=1";
	s.env[1] = "GWB_HTTP_BODY_TIMEOUT_SECONDS=1";
	s.env[2] = NULL;
	h_server_start(&s);
	const char *url = s.proc.url;
	put_alpha(url);
	/* One byte every 150 ms: the idle time-out (30 s) never fires, the head's deadline does. */
	static const char head[] = "GET /v1/teams/alpha HTTP/1.1\r\nHost: x\r\nAuthorization: "
				   "Bearer " ALPHA "\r\nConnection: close\r\n\r\n";
	size_t sent;
	char *ans = trickle(url, head, sizeof head - 1, 150, &sent);
	t_log("head: cut after %zu of %zu bytes", sent, sizeof head - 1);
	CHECKF(sent < sizeof head - 1, "the whole head was taken: %.300s", ans);
	check_refused("trickled head", ans, 408, "header_timeout");
	gwb_free(ans);
	/* The head at once, then the body one byte at a time. */
	static const char body[] = "{\"team\": \"alpha\", \"gpu_memory_mib\": 512, "
				   "\"gpu_core_percent\": 10, \"duration_seconds\": 1}";
	char req[1024];
	int n = snprintf(req, sizeof req,
			 "POST /v1/tasks HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " ALPHA
			 "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
			 "Connection: close\r\n\r\n",
			 sizeof body - 1);
	int fd = dial(url);
	CHECK(fd >= 0);
	CHECK_INT(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	size_t i = 0;
	for (; i < sizeof body - 1; i++) {
		if (send(fd, body + i, 1, MSG_NOSIGNAL) != 1)
			break;
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 150) > 0)
			break;
	}
	ans = h_read_all(fd);
	close(fd);
	t_log("body: cut after %zu of %zu bytes", i, sizeof body - 1);
	CHECKF(i < sizeof body - 1, "the whole body was taken: %.300s", ans);
	check_refused("trickled body", ans, 408, "body_timeout");
	gwb_free(ans);
	CHECK_INT(h_sql_int(s.db, "SELECT count(*) FROM tasks"), 0);
	/* A client that sends its head at once and then nothing is not cut by these: it is
	 * kept-alive and idle after its answer. */
	struct h_resp r;
	char u[300];
	snprintf(u, sizeof u, "%s/healthz", url);
	CHECK_INT(h_http(&r, "GET", u, NULL, NULL, NULL), 0);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	h_server_stop(&s);
}

/* Reads what fd's server sent within ms (NULL when nothing came and it stays open). */
static char *answer_within(int fd, int ms)
{
	struct pollfd pf = { fd, POLLIN, 0 };
	if (poll(&pf, 1, ms) <= 0)
		return NULL;
	return h_read_all(fd);
}

TEST_T(frontdoor_connections_are_capped_in_all_and_per_address, 90)
{
	enum { PER_ADDR = 4, ALL = 6 };
	struct h_server s;
	h_server_init(&s);
	s.env[0] = "GWB_HTTP_MAX_CONNECTIONS_PER_ADDRESS=4";
	s.env[1] = NULL;
	h_server_start(&s);
	int fds[PER_ADDR];
	for (int i = 0; i < PER_ADDR; i++) {
		fds[i] = dial(s.proc.url);
		CHECK(fds[i] >= 0);
	}
	int extra = dial(s.proc.url);
	CHECK(extra >= 0);
	char *ans = answer_within(extra, 5000);
	CHECKF(ans, "the connection over the per-address cap was not answered");
	check_refused("over the per-address cap", ans, 503, "too_many_connections");
	CHECKF(strstr(ans, "\r\nRetry-After: "), "%.300s", ans);
	gwb_free(ans);
	close(extra);
	/* The ones within the cap are served. */
	static const char hz[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	CHECK_INT(send(fds[0], hz, sizeof hz - 1, MSG_NOSIGNAL), (long)sizeof hz - 1);
	ans = h_read_all(fds[0]);
	CHECKF(strncmp(ans, "HTTP/1.1 200 ", 13) == 0, "%.300s", ans);
	gwb_free(ans);
	for (int i = 0; i < PER_ADDR; i++)
		close(fds[i]);
	h_server_stop(&s);

	h_server_init(&s);
	s.env[0] = "GWB_HTTP_MAX_CONNECTIONS=6";
	s.env[1] = NULL;
	h_server_start(&s);
	int all[ALL];
	for (int i = 0; i < ALL; i++) {
		all[i] = dial(s.proc.url);
		CHECK(all[i] >= 0);
	}
	extra = dial(s.proc.url);
	CHECK(extra >= 0);
	ans = answer_within(extra, 5000);
	CHECKF(ans, "the connection over the cap was not answered");
	check_refused("over the cap", ans, 503, "too_many_connections");
	gwb_free(ans);
	close(extra);
	/* One closes: a place is free again, at once. */
	close(all[0]);
	h_sleep_ms(200);
	struct h_resp r;
	char u[300];
	snprintf(u, sizeof u, "%s/healthz", s.proc.url);
	CHECK_INT(h_http(&r, "GET", u, NULL, NULL, NULL), 0);
	CHECK_INT(r.status, 200);
	h_resp_free(&r);
	CHECK(h_metric(s.proc.url, "gwb_http_connections_refused_total",
		       "code=\"too_many_connections\"") >= 1);
	for (int i = 1; i < ALL; i++)
		close(all[i]);
	h_server_stop(&s);
}
