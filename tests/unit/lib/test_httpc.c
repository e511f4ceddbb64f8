/* Unit tests of lib/httpc.c against the real gwb-server and kubesim: status and JSON body,
 * Location and Idempotent-Replayed, Retry-After, error codes, Unix sockets, one kept-alive
 * client across requests, and the transport failures (refused, time-out, answer too large). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/err.h"
#include "lib/httpc.h"
#include "tests/harness/h_kubesim.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

static const char *url_of(const struct h_server *s, const char *path)
{
	static char buf[4][512];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof buf[i], "%s%s", s->proc.url, path);
	return buf[i];
}

TEST_T(httpc_status_body_and_headers_from_gwb_server, 60)
{
	struct h_server s;
	h_server_init(&s);
	h_server_start(&s);
	struct httpc *c = httpc_new();
	struct httpc_resp r;
	json_t *team = json_pack("{s:i, s:i, s:s}", "gpu_memory_mib", 4096, "gpu_core_percent",
				 100, "token", "beta-token-1");
	struct httpc_req put = { .method = "PUT", .url = url_of(&s, "/v1/teams/beta"),
				 .token = s.admin, .json = team };
	CHECK_INT(httpc_do(c, &put, &r), 0);
	CHECK_INT(r.status, 201);
	CHECK(json_is_object(r.json));
	httpc_resp_free(&r);
	json_decref(team);

	const char *key[] = { "Idempotency-Key: hc-1", NULL };
	const char *body = "{\"team\": \"beta\", \"gpu_memory_mib\": 512, \"gpu_core_percent\": 10}";
	struct httpc_req sub = { .method = "POST", .url = url_of(&s, "/v1/tasks"),
				 .token = "beta-token-1", .body = body, .headers = key };
	CHECK_INT(httpc_do(c, &sub, &r), 0);
	CHECK_INT(r.status, 201);
	CHECK_INT(r.replayed, 0);
	const char *id = json_string_value(json_object_get(r.json, "id"));
	CHECK(id != NULL);
	char want[128];
	snprintf(want, sizeof want, "/v1/tasks/%s", id);
	CHECK_STR(r.location, want);
	CHECK_INT(r.retry_after_s, -1);
	char buf[64];
	CHECK_STR(httpc_header(&r, "content-type", buf, sizeof buf), "application/json");
	CHECK(httpc_header(&r, "X-Not-There", buf, sizeof buf) == NULL);
	httpc_resp_free(&r);
	/* The same key: 200 and the replay header, on the same client. */
	CHECK_INT(httpc_do(c, &sub, &r), 0);
	CHECK_INT(r.status, 200);
	CHECK_INT(r.replayed, 1);
	CHECK_STR(json_string_value(json_object_get(r.json, "id")), want + strlen("/v1/tasks/"));
	httpc_resp_free(&r);

	/* An error answer is an answer: 0, with its status and code. */
	struct httpc_req get = { .url = url_of(&s, "/v1/tasks/t-nonesuch"), .token = s.admin };
	CHECK_INT(httpc_do(c, &get, &r), 0);
	CHECK_INT(r.status, 404);
	CHECK_STR(httpc_error_code(&r), "not_found");
	httpc_resp_free(&r);
	struct httpc_req noauth = { .url = url_of(&s, "/v1/teams") };
	CHECK_INT(httpc_do(c, &noauth, &r), 0);
	CHECK_INT(r.status, 401);
	httpc_resp_free(&r);
	/* A POST without a body sends an empty one (cancel takes none). */
	char cancel[160];
	snprintf(cancel, sizeof cancel, "%s/cancel", want);
	struct httpc_req can = { .method = "POST", .url = url_of(&s, cancel), .token = s.admin };
	CHECK_INT(httpc_do(c, &can, &r), 0);
	CHECK_INT(r.status, 202);
	httpc_resp_free(&r);
	/* Not JSON: json stays NULL, the body is kept. */
	struct httpc_req metrics = { .url = url_of(&s, "/metrics"), .token = s.admin };
	CHECK_INT(httpc_request(&metrics, &r), 0);
	CHECK_INT(r.status, 200);
	CHECK(r.json == NULL);
	CHECK(strstr(r.body, "gwb_") != NULL);
	httpc_resp_free(&r);
	/* An answer above max_body is refused, not truncated. */
	metrics.max_body = 16;
	CHECK_INT(httpc_do(c, &metrics, &r), GWB_ETOOBIG);
	CHECK_INT(r.status, 0);
	CHECK_STR(r.error, "answer too large");
	httpc_resp_free(&r);
	httpc_free(c);
	h_server_stop(&s);
}

TEST_T(httpc_retry_after_and_unix_socket_from_kubesim, 60)
{
	struct h_kubesim k;
	h_kubesim_init(&k);
	k.args[0] = "--max-watchers";
	k.args[1] = "1";
	k.args[2] = NULL;
	h_kubesim_start(&k);
	/* The control endpoint is on a Unix socket. */
	struct httpc_resp r;
	struct httpc_req ctl = { .url = "http://localhost/_kubesim/faults", .unix_socket = k.ctl };
	CHECK_INT(httpc_request(&ctl, &r), 0);
	CHECK_INT(r.status, 200);
	CHECK(json_is_object(r.json));
	httpc_resp_free(&r);
	/* A watch holds the only slot; the next watch gets 429 with Retry-After. */
	struct h_watch hold;
	CHECK_INT(h_watch_open(&hold, &k, "/api/v1/namespaces/default/pods?watch=true", NULL), 0);
	CHECK_INT(hold.status, 200);
	char w[512];
	snprintf(w, sizeof w, "%s/api/v1/namespaces/default/pods?watch=true", k.url);
	struct httpc_req second = { .url = w };
	CHECK_INT(httpc_request(&second, &r), 0);
	CHECK_INT(r.status, 429);
	CHECK_INT(r.retry_after_s, 1);
	httpc_resp_free(&r);
	h_watch_close(&hold);
	h_kubesim_stop(&k);
}

TEST(httpc_transport_failures)
{
	/* Nothing listens: could not connect. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
	socklen_t sl = sizeof sa;
	CHECK(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/", ntohs(sa.sin_port));
	struct httpc_resp r;
	struct httpc_req req = { .url = url, .timeout_ms = 5000 };
	CHECK_INT(httpc_request(&req, &r), GWB_EUNAVAIL);
	CHECK_INT(r.status, 0);
	CHECK(r.error[0] != '\0');
	CHECK_STR(r.body, "");
	httpc_resp_free(&r);
	/* Listening but never answering: the time-out. */
	CHECK(listen(fd, 4) == 0);
	req.timeout_ms = 200;
	CHECK_INT(httpc_request(&req, &r), GWB_ETIMEOUT);
	CHECK_INT(r.status, 0);
	httpc_resp_free(&r);
	close(fd);
}
