/* GET /v1/stream on a real gwb-server (and, for a task that runs, a real kubesim whose kubelet
 * runs gwb-worker): a state change reaches the stream, a reconnect with Last-Event-ID misses
 * nothing, a team token sees only its team, no token gets 401, and the number of streams is
 * bounded. The stream is read over a raw socket, as HTTP/1.1 with chunked transfer. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/h_schema.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"
#define BETA "beta-token-4567"
/* How long a case waits for an event the server owes it (generous: a loaded machine). */
#define WAIT_MS 20000

/* ---- a small SSE client ---- */

struct sse {
	int fd;
	long status;
	int chunked;
	char headers[4096];
	char *raw;        /* bytes read, not decoded yet */
	size_t rawlen;
	char *body;       /* decoded stream bytes, not parsed yet */
	size_t bodylen;
};

struct sse_event {
	long long id;     /* -1 when the event had no id */
	char type[32];
	json_t *data;     /* parsed data, or NULL */
};

static void append(char **buf, size_t *len, const char *p, size_t n)
{
	*buf = gwb_realloc(*buf, *len + n + 1);
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
}

static void consume(char **buf, size_t *len, size_t n)
{
	memmove(*buf, *buf + n, *len - n);
	*len -= n;
	(*buf)[*len] = '\0';
}

/* Reads what is there within timeout_ms. Returns bytes read, 0 at a time-out, -1 at the end. */
static int sse_fill(struct sse *s, int timeout_ms)
{
	struct pollfd pf = { s->fd, POLLIN, 0 };
	if (poll(&pf, 1, timeout_ms) <= 0)
		return 0;
	char buf[8192];
	ssize_t n = read(s->fd, buf, sizeof buf);
	if (n <= 0)
		return -1;
	append(&s->raw, &s->rawlen, buf, (size_t)n);
	return (int)n;
}

/* Moves whole chunks from raw to body. */
static void sse_decode(struct sse *s)
{
	if (!s->chunked) {
		if (s->rawlen)
			append(&s->body, &s->bodylen, s->raw, s->rawlen);
		if (s->raw)
			consume(&s->raw, &s->rawlen, s->rawlen);
		return;
	}
	for (;;) {
		char *crlf = s->raw ? memmem(s->raw, s->rawlen, "\r\n", 2) : NULL;
		if (!crlf)
			return;
		size_t size = strtoul(s->raw, NULL, 16);
		size_t hl = (size_t)(crlf - s->raw) + 2;
		if (s->rawlen < hl + size + 2)
			return;
		append(&s->body, &s->bodylen, s->raw + hl, size);
		consume(&s->raw, &s->rawlen, hl + size + 2);
	}
}

/* Opens GET /v1/stream (path may carry a query) with token (NULL: none) and Last-Event-ID
 * (NULL: none); reads the status line and headers. */
static void sse_open(struct sse *s, const char *url, const char *path, const char *token,
		     const char *last_id)
{
	memset(s, 0, sizeof *s);
	char host[64];
	int port;
	if (sscanf(url, "http://%63[^:]:%d", host, &port) != 2)
		t_fail(__FILE__, __LINE__, "bad url %s", url);
	s->fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, host, &sa.sin_addr);
	if (connect(s->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
		t_fail(__FILE__, __LINE__, "connect: %s", strerror(errno));
	char req[1024], auth[256] = "", lei[128] = "";
	if (token)
		snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
	if (last_id)
		snprintf(lei, sizeof lei, "Last-Event-ID: %s\r\n", last_id);
	int n = snprintf(req, sizeof req,
			 "GET %s HTTP/1.1\r\nHost: %s:%d\r\nAccept: text/event-stream\r\n%s%s\r\n",
			 path, host, port, auth, lei);
	if (write(s->fd, req, (size_t)n) != n)
		t_fail(__FILE__, __LINE__, "write: %s", strerror(errno));
	int64_t deadline = clock_mono_ms() + WAIT_MS;
	for (;;) {
		char *end = s->raw ? memmem(s->raw, s->rawlen, "\r\n\r\n", 4) : NULL;
		if (end) {
			size_t hl = (size_t)(end - s->raw) + 4;
			snprintf(s->headers, sizeof s->headers, "%.*s", (int)hl, s->raw);
			sscanf(s->headers, "HTTP/1.%*d %ld", &s->status);
			s->chunked = strcasestr(s->headers, "transfer-encoding: chunked") != NULL;
			consume(&s->raw, &s->rawlen, hl);
			sse_decode(s);
			return;
		}
		if (clock_mono_ms() > deadline || sse_fill(s, 200) < 0)
			t_fail(__FILE__, __LINE__, "no answer to GET %s", path);
	}
}

static void sse_close(struct sse *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
	gwb_free(s->raw);
	gwb_free(s->body);
	s->raw = s->body = NULL;
	s->rawlen = s->bodylen = 0;
}

/* Parses one event block ("field: value" lines); comments and retry: are skipped. */
static void parse_block(const char *blk, size_t len, struct sse_event *ev)
{
	ev->id = -1;
	ev->type[0] = '\0';
	ev->data = NULL;
	char *copy = gwb_strndup(blk, len);
	for (char *line = copy, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		if (strncmp(line, "id: ", 4) == 0)
			ev->id = strtoll(line + 4, NULL, 10);
		else if (strncmp(line, "event: ", 7) == 0)
			snprintf(ev->type, sizeof ev->type, "%s", line + 7);
		else if (strncmp(line, "data: ", 6) == 0)
			ev->data = json_loads(line + 6, 0, NULL);
	}
	gwb_free(copy);
	char why[1024]; /* every event is held to the document's schema of its type */
	if (ev->type[0] && h_schema_check_event(ev->type, ev->data, why, sizeof why) < 0)
		t_fail_soft("openapi: %s", why);
}

/* The next event with a type (comments and the retry field are skipped), or 0 when none comes
 * within timeout_ms. */
static int sse_next(struct sse *s, struct sse_event *ev, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;
	for (;;) {
		char *end = s->body ? strstr(s->body, "\n\n") : NULL;
		if (end) {
			size_t n = (size_t)(end - s->body);
			parse_block(s->body, n, ev);
			consume(&s->body, &s->bodylen, n + 2);
			if (ev->type[0])
				return 1;
			continue;
		}
		int left = (int)(deadline - clock_mono_ms());
		if (left <= 0)
			return 0;
		if (sse_fill(s, left) < 0)
			return 0;
		sse_decode(s);
	}
}

/* Waits for an event of type whose data field key equals want (NULL: any); frees the others
 * after passing each task event to seen (may be NULL). Fails the case on a time-out. */
typedef void (*seen_fn)(const struct sse_event *ev, void *arg);
static void sse_wait(struct sse *s, struct sse_event *out, const char *type, const char *key,
		     const char *want, seen_fn seen, void *arg)
{
	int64_t deadline = clock_mono_ms() + WAIT_MS;
	for (;;) {
		int left = (int)(deadline - clock_mono_ms());
		struct sse_event ev;
		if (left <= 0 || !sse_next(s, &ev, left))
			t_fail(__FILE__, __LINE__, "no event %s with %s=%s", type, key ? key : "-",
			       want ? want : "-");
		if (seen)
			seen(&ev, arg);
		const char *v = key ? json_string_value(json_object_get(ev.data, key)) : NULL;
		if (strcmp(ev.type, type) == 0 && (!key || (v && strcmp(v, want) == 0))) {
			*out = ev;
			return;
		}
		json_decref(ev.data);
	}
}

/* ---- the server ---- */

static void put_team(const char *url, const char *team, const char *token)
{
	char body[256];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"%s\"}", token);
	h_team_put(url, ADMIN, team, body);
}

static void start(struct h_server *s, const char *const *env)
{
	h_server_init(s);
	int n = 0;
	for (const char *const *e = env; e && *e; e++)
		s->env[n++] = *e;
	s->env[n] = NULL;
	h_server_start(s);
	put_team(s->proc.url, "alpha", ALPHA);
	put_team(s->proc.url, "beta", BETA);
}

/* Submits a task for team and returns its id (static ring). */
static const char *submit(const char *url, const char *team, const char *token)
{
	static char ids[8][32];
	static int slot;
	char body[256];
	snprintf(body, sizeof body,
		 "{\"team\": \"%s\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 25, "
		 "\"duration_seconds\": 300}",
		 team);
	struct h_resp r;
	h_req(&r, "POST", url, "/v1/tasks", token, body, NULL);
	CHECKF(r.status == 201, "submit: %ld %s", r.status, r.body);
	char *id = ids[slot++ % 8];
	snprintf(id, 32, "%s", json_string_value(json_object_get(r.json, "id")));
	h_resp_free(&r);
	return id;
}

static void cancel(const char *url, const char *id, const char *token)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/tasks/%s/cancel", id);
	struct h_resp r;
	h_req(&r, "POST", url, path, token, NULL, NULL);
	CHECKF(r.status == 202, "cancel: %ld %s", r.status, r.body);
	h_resp_free(&r);
}

/* The hello event every stream starts with; returns its id (the resume point). */
static long long hello(struct sse *s)
{
	CHECKF(s->status == 200, "stream: status %ld\n%s", s->status, s->headers);
	CHECK(strcasestr(s->headers, "content-type: text/event-stream") != NULL);
	struct sse_event ev;
	CHECK(sse_next(s, &ev, WAIT_MS));
	CHECK_STR(ev.type, "hello");
	CHECK(ev.id >= 0);
	json_decref(ev.data);
	return ev.id;
}

/* ---- cases ---- */

TEST(stream_needs_a_token)
{
	struct h_server srv;
	start(&srv, NULL);
	struct h_resp r;
	h_req(&r, "GET", srv.proc.url, "/v1/stream", NULL, NULL, NULL);
	CHECK_INT(r.status, 401);
	CHECK_STR(h_err_code(&r), "unauthorized");
	h_resp_free(&r);
	h_req(&r, "GET", srv.proc.url, "/v1/stream", "not-a-token", NULL, NULL);
	CHECK_INT(r.status, 401);
	h_resp_free(&r);
	h_req(&r, "POST", srv.proc.url, "/v1/stream", ALPHA, "{}", NULL);
	CHECK_INT(r.status, 405);
	h_resp_free(&r);
	h_req(&r, "GET", srv.proc.url, "/v1/stream?team=alpha", BETA, NULL, NULL);
	CHECK_INT(r.status, 403);
	h_resp_free(&r);
	h_req(&r, "GET", srv.proc.url, "/v1/stream?color=red", ADMIN, NULL, NULL);
	CHECK_INT(r.status, 400);
	h_resp_free(&r);
}

/* Keeps the reserved memory of the last team event seen. */
static void note_reserved(const struct sse_event *ev, void *arg)
{
	if (strcmp(ev->type, "team") == 0)
		*(json_int_t *)arg = json_integer_value(
			json_object_get(json_object_get(ev->data, "reserved"), "gpu_memory_mib"));
}

/* A task submitted while the stream is open: its events arrive in order, through running,
 * and the team's reservation follows. */
TEST(stream_state_change_reaches_it)
{
	struct h_kubesim ks;
	h_kubesim_init(&ks);
	snprintf(ks.worker, sizeof ks.worker, "%s", h_bin("gwb-worker"));
	h_need_exec(ks.worker);
	h_kubesim_start(&ks);
	char kube[300];
	snprintf(kube, sizeof kube, "GWB_KUBE_SERVER=%s", ks.url);
	const char *env[] = { kube, "GWB_HOUSEKEEPING_INTERVAL_MS=100", "GWB_STREAM_POLL_MS=50",
			      NULL };
	struct h_server srv;
	start(&srv, env);
	struct sse s;
	sse_open(&s, srv.proc.url, "/v1/stream", ALPHA, NULL);
	hello(&s);
	struct sse_event ev;
	/* The snapshots come first: the team as it is, and each card. */
	sse_wait(&s, &ev, "team", "team", "alpha", NULL, NULL);
	CHECK_INT(json_integer_value(json_object_get(json_object_get(ev.data, "reserved"),
						     "gpu_memory_mib")),
		  0);
	json_decref(ev.data);
	const char *id = submit(srv.proc.url, "alpha", ALPHA);
	json_int_t reserved = 0;
	sse_wait(&s, &ev, "task", "state", "queued", note_reserved, &reserved);
	CHECK_STR(json_string_value(json_object_get(ev.data, "id")), id);
	CHECK_STR(json_string_value(json_object_get(ev.data, "team")), "alpha");
	CHECK(json_is_string(json_object_get(ev.data, "updated_at")));
	long long first = ev.id;
	json_decref(ev.data);
	sse_wait(&s, &ev, "task", "state", "running", note_reserved, &reserved);
	CHECK_STR(json_string_value(json_object_get(ev.data, "id")), id);
	CHECK(ev.id > first);
	json_decref(ev.data);
	/* The reservation shows in a team event (before or after the task's). */
	while (reserved != 1024) {
		sse_wait(&s, &ev, "team", "team", "alpha", note_reserved, &reserved);
		json_decref(ev.data);
	}
	sse_close(&s);
	cancel(srv.proc.url, id, ALPHA);
}

struct collected {
	long long ids[256];
	char states[256][16];
	int n;
	long long last;
	int out_of_order;
};

static void collect(const struct sse_event *ev, void *arg)
{
	struct collected *c = arg;
	if (strcmp(ev->type, "task") != 0)
		return;
	if (ev->id <= c->last)
		c->out_of_order = 1;
	c->last = ev->id;
	if (c->n < 256) {
		c->ids[c->n] = ev->id;
		const char *st = json_string_value(json_object_get(ev->data, "state"));
		snprintf(c->states[c->n], sizeof c->states[0], "%s", st ? st : "");
		c->n++;
	}
}

/* Changes made while no stream is open are all delivered, in order, to the stream that
 * reconnects with the last id it saw; a Last-Event-ID from nowhere gets resync. */
TEST(stream_resume_misses_nothing)
{
	struct h_server srv;
	start(&srv, NULL);
	const char *url = srv.proc.url;
	struct sse s;
	sse_open(&s, url, "/v1/stream", ALPHA, NULL);
	long long last = hello(&s);
	const char *a = submit(url, "alpha", ALPHA);
	struct sse_event ev;
	sse_wait(&s, &ev, "task", "id", a, NULL, NULL);
	last = ev.id;
	json_decref(ev.data);
	sse_close(&s);

	/* While disconnected: a cancel of a, a new task b and its cancel. */
	cancel(url, a, ALPHA);
	char b[32];
	snprintf(b, sizeof b, "%s", submit(url, "alpha", ALPHA));
	cancel(url, b, ALPHA);

	char lei[32];
	snprintf(lei, sizeof lei, "%lld", last);
	sse_open(&s, url, "/v1/stream", ALPHA, lei);
	CHECK_INT(hello(&s), last);
	struct collected c = { .last = last };
	/* b's cancel is the last change made: everything before it must come first. */
	for (;;) {
		sse_wait(&s, &ev, "task", "id", b, collect, &c);
		const char *st = json_string_value(json_object_get(ev.data, "state"));
		int done = st && strcmp(st, "cancelling") == 0;
		json_decref(ev.data);
		if (done)
			break;
	}
	sse_close(&s);
	CHECK(!c.out_of_order);
	/* Exactly the history after `last`, as the events endpoint tells it. */
	const char *ids[] = { a, b };
	int matched = 0;
	for (int k = 0; k < 2; k++) {
		char path[96];
		snprintf(path, sizeof path, "/v1/tasks/%s/events", ids[k]);
		struct h_resp r;
		h_req(&r, "GET", url, path, ALPHA, NULL, NULL);
		CHECK_INT(r.status, 200);
		size_t i;
		json_t *e;
		json_array_foreach(json_object_get(r.json, "events"), i, e) {
			long long seq = json_integer_value(json_object_get(e, "seq"));
			if (seq <= last)
				continue;
			int found = 0;
			for (int j = 0; j < c.n; j++) {
				if (c.ids[j] != seq)
					continue;
				found = 1;
				const char *to = json_string_value(json_object_get(e, "to"));
				if (to)
					CHECK_STR(c.states[j], to);
			}
			CHECKF(found, "event %lld of %s was missed on resume", seq, ids[k]);
			matched++;
		}
		h_resp_free(&r);
	}
	CHECK_INT(matched, c.n);
	CHECK(matched >= 3); /* a cancelling; b queued, cancelling */

	/* An id this database never had: resync, then the stream goes on from now. */
	sse_open(&s, url, "/v1/stream", ALPHA, "999999999");
	CHECK_INT(s.status, 200);
	CHECK(sse_next(&s, &ev, WAIT_MS));
	CHECK_STR(ev.type, "resync");
	json_decref(ev.data);
	sse_close(&s);
}

static void no_alpha(const struct sse_event *ev, void *arg)
{
	const char *alpha_id = arg;
	const char *id = json_string_value(json_object_get(ev->data, "id"));
	const char *team = json_string_value(json_object_get(ev->data, "team"));
	if (strcmp(ev->type, "task") == 0)
		CHECKF(id && strcmp(id, alpha_id) != 0, "beta's stream showed alpha's task %s",
		       id ? id : "?");
	if (team)
		CHECKF(strcmp(team, "beta") == 0, "beta's stream showed team %s", team);
}

/* A team token's stream carries its own team's tasks and team event only; the admin's
 * carries both. */
TEST(stream_team_token_sees_its_team_only)
{
	struct h_server srv;
	start(&srv, NULL);
	const char *url = srv.proc.url;
	struct sse sb, sa;
	sse_open(&sb, url, "/v1/stream", BETA, NULL);
	hello(&sb);
	sse_open(&sa, url, "/v1/stream", ADMIN, NULL);
	hello(&sa);
	char a[32];
	snprintf(a, sizeof a, "%s", submit(url, "alpha", ALPHA));
	const char *b = submit(url, "beta", BETA);
	struct sse_event ev;
	/* alpha's task was submitted first: had it been sent to beta, it would come before b's. */
	sse_wait(&sb, &ev, "task", "id", b, no_alpha, a);
	json_decref(ev.data);
	sse_wait(&sa, &ev, "task", "id", a, NULL, NULL);
	json_decref(ev.data);
	sse_wait(&sa, &ev, "task", "id", b, NULL, NULL);
	json_decref(ev.data);
	/* The admin may narrow its stream to one team. */
	struct sse sf;
	sse_open(&sf, url, "/v1/stream?team=beta", ADMIN, "0");
	hello(&sf);
	sse_wait(&sf, &ev, "task", "id", b, no_alpha, a);
	json_decref(ev.data);
	sse_close(&sf);
	sse_close(&sa);
	/* The server stops cleanly (exit 0, and under the sanitizers no leak) with a stream
	 * still open. */
	h_server_stop(&srv);
	sse_close(&sb);
}

/* stream.max_clients bounds the open streams; a closed one frees its place. */
TEST(stream_count_is_bounded)
{
	const char *env[] = { "GWB_STREAM_MAX_CLIENTS=1", NULL };
	struct h_server srv;
	start(&srv, env);
	struct sse s1;
	sse_open(&s1, srv.proc.url, "/v1/stream", ALPHA, NULL);
	hello(&s1);
	struct h_resp r;
	h_req(&r, "GET", srv.proc.url, "/v1/stream", BETA, NULL, NULL);
	CHECK_INT(r.status, 503);
	CHECK_STR(h_err_code(&r), "too_many_streams");
	h_resp_free(&r);
	sse_close(&s1);
	/* The server notices the closed stream at its next write at the latest; then a new one
	 * is let in. */
	int64_t deadline = clock_mono_ms() + 30000;
	for (;;) {
		struct sse s2;
		sse_open(&s2, srv.proc.url, "/v1/stream", BETA, NULL);
		long st = s2.status;
		if (st == 200)
			hello(&s2);
		sse_close(&s2);
		if (st == 200)
			break;
		CHECKF(st == 503, "status %ld", st);
		CHECKF(clock_mono_ms() < deadline, "the closed stream's place never came back");
		h_sleep_ms(200);
	}
}

/* A client that reads nothing while events pile up is closed once its unsent bytes pass
 * stream.max_buffer_bytes; the server goes on serving. The client's small receive window
 * keeps the kernel from absorbing the backlog. */
TEST(stream_slow_client_is_dropped)
{
	const char *env[] = { "GWB_STREAM_MAX_BUFFER_BYTES=4096", "GWB_STREAM_POLL_MS=20",
			      "GWB_HTTP_RATE_LIMIT_PER_S=0", NULL };
	struct h_server srv;
	start(&srv, env);
	const char *url = srv.proc.url;
	char host[64];
	int port;
	CHECK(sscanf(url, "http://%63[^:]:%d", host, &port) == 2);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int small = 2048;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small); /* before connect: the window */
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	inet_pton(AF_INET, host, &sa.sin_addr);
	CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	char req[256];
	int n = snprintf(req, sizeof req,
			 "GET /v1/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", ALPHA);
	CHECK(write(fd, req, (size_t)n) == n);
	/* Task events with long names, while the client reads nothing. */
	char name[129];
	memset(name, 'n', 128);
	name[128] = '\0';
	/* 700 events of some 560 bytes: far more than the kernel's buffers hold for a client
	 * whose window stays shut (and within the team's 800% of core at 1% each). */
	for (int i = 0; i < 700; i++) {
		char body[400];
		snprintf(body, sizeof body,
			 "{\"team\": \"alpha\", \"name\": \"%s\", \"gpu_memory_mib\": 1, "
			 "\"gpu_core_percent\": 1}",
			 name);
		struct h_resp r;
		h_req(&r, "POST", url, "/v1/tasks", ALPHA, body, NULL);
		CHECKF(r.status == 201, "submit %d: %ld %s", i, r.status, r.body);
		h_resp_free(&r);
	}
	/* Now read: a dropped stream gives what the kernel held, then its end; a stream still
	 * open would give everything and then wait. */
	int dropped = 0;
	size_t total = 0;
	int64_t deadline = clock_mono_ms() + WAIT_MS;
	while (!dropped && clock_mono_ms() < deadline) {
		struct pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 1000) <= 0)
			continue;
		char buf[65536];
		ssize_t got = read(fd, buf, sizeof buf);
		if (got <= 0)
			dropped = 1;
		else
			total += (size_t)got;
	}
	t_log("read %zu bytes before the end", total);
	CHECKF(total < 700 * 500, "the client got every event (%zu bytes): it was never dropped",
	       total);
	close(fd);
	CHECKF(dropped, "the stream of a client that reads nothing was never closed");
	/* The server still serves streams. */
	struct sse s;
	sse_open(&s, url, "/v1/stream", ALPHA, NULL);
	hello(&s);
	sse_close(&s);
}
