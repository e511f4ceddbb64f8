/* The evhttp client behind gwb-load. libevent calls a request's callback with NULL (after the
 * error callback) when the connection fails mid-request, and with a request whose status is 0
 * when it could not connect; both become status 0 here. libevent frees the request after its
 * callback returns; our per-request context is freed in that callback. */
#include "tools/gwb-load/client.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/alloc.h"

struct client {
	struct event_base *base;
	struct evhttp_connection *conn;
	const struct client_target *t;
	int inflight;
	int sending; /* inside evhttp_make_request */
};

struct call {
	struct client *c;
	client_done_fn done;
	void *arg;
	const char *why; /* set by the error callback */
	int early;       /* failed inside evhttp_make_request; delivered from the loop */
};

int client_target_parse(struct client_target *t, const char *url, const char *token, char *err,
                        size_t errlen)
{
	memset(t, 0, sizeof *t);
	struct evhttp_uri *u = evhttp_uri_parse(url);
	int rc = -1;
	if (!u) {
		snprintf(err, errlen, "--url: cannot parse \"%s\"", url);
		goto out;
	}
	const char *scheme = evhttp_uri_get_scheme(u), *host = evhttp_uri_get_host(u);
	const char *path = evhttp_uri_get_path(u);
	if (!scheme || strcasecmp(scheme, "http") != 0 || !host || !*host) {
		snprintf(err, errlen, "--url: expected http://HOST[:PORT], got \"%s\"", url);
		goto out;
	}
	if (path && *path && strcmp(path, "/") != 0) {
		snprintf(err, errlen, "--url: no path expected after the host, got \"%s\"", path);
		goto out;
	}
	if (strlen(host) >= sizeof t->host || strlen(token) > 512) {
		snprintf(err, errlen, "--url or --token: too long");
		goto out;
	}
	int port = evhttp_uri_get_port(u);
	t->port = port > 0 ? port : 80;
	/* evhttp_uri_get_host gives an IPv6 address without its brackets. */
	snprintf(t->host, sizeof t->host, "%s", host);
	if (strchr(host, ':'))
		snprintf(t->host_header, sizeof t->host_header, "[%s]:%d", host, t->port);
	else
		snprintf(t->host_header, sizeof t->host_header, "%s:%d", host, t->port);
	snprintf(t->auth, sizeof t->auth, "Bearer %s", token);
	snprintf(t->metrics_auth, sizeof t->metrics_auth, "%s", t->auth);
	rc = 0;
out:
	if (u)
		evhttp_uri_free(u);
	return rc;
}

struct client *client_new(struct event_base *base, const struct client_target *t, int timeout_s)
{
	struct client *c = gwb_calloc(1, sizeof *c);
	c->t = t;
	c->base = base;
	c->conn = evhttp_connection_base_new(base, NULL, t->host, (unsigned short)t->port);
	if (!c->conn) {
		gwb_free(c);
		return NULL;
	}
	evhttp_connection_set_timeout(c->conn, timeout_s);
	evhttp_connection_set_max_body_size(c->conn, CLIENT_BODY_MAX);
	evhttp_connection_set_max_headers_size(c->conn, 64 * 1024);
	return c;
}

void client_free(struct client *c)
{
	if (!c)
		return;
	if (c->conn)
		evhttp_connection_free(c->conn);
	gwb_free(c);
}

int client_inflight(const struct client *c)
{
	return c->inflight;
}

static const char *error_name(enum evhttp_request_error e)
{
	switch (e) {
	case EVREQ_HTTP_TIMEOUT:
		return "timed out";
	case EVREQ_HTTP_EOF:
		return "connection closed before the answer";
	case EVREQ_HTTP_INVALID_HEADER:
		return "invalid answer headers";
	case EVREQ_HTTP_BUFFER_ERROR:
		return "connection error";
	case EVREQ_HTTP_REQUEST_CANCEL:
		return "cancelled";
	case EVREQ_HTTP_DATA_TOO_LONG:
		return "answer too large";
	}
	return "connection error";
}

static void on_error(enum evhttp_request_error e, void *arg)
{
	struct call *k = arg;
	k->why = error_name(e);
}

/* A failure that evhttp reported from inside evhttp_make_request (a connect refused at once),
 * handed to the caller from the loop as the contract says. */
static void on_early(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct call *k = arg;
	struct client_result res = {0, k->why ? k->why : "connection refused or failed", "", NULL,
	                            0};
	k->c->inflight--;
	k->done(&res, k->arg);
	gwb_free(k);
}

static void on_done(struct evhttp_request *req, void *arg)
{
	struct call *k = arg;
	struct client_result res = {0, NULL, "", NULL, 0};
	char *body = NULL;
	if (k->c->sending) {
		/* Only a failure can come back this early; the request is evhttp's to free. */
		k->early = 1;
		return;
	}
	k->c->inflight--;
	res.status = req ? evhttp_request_get_response_code(req) : 0;
	if (res.status == 0) {
		res.err = k->why ? k->why : "no answer (connection refused or failed)";
	} else {
		struct evbuffer *in = evhttp_request_get_input_buffer(req);
		size_t n = evbuffer_get_length(in);
		body = gwb_malloc(n + 1);
		evbuffer_remove(in, body, n);
		body[n] = '\0';
		res.body = body;
		res.json = n ? json_loadb(body, n, 0, NULL) : NULL;
		const char *rp = evhttp_find_header(evhttp_request_get_input_headers(req),
		                                    "Idempotent-Replayed");
		res.replayed = rp && strcasecmp(rp, "true") == 0;
	}
	k->done(&res, k->arg);
	json_decref(res.json);
	gwb_free(body);
	gwb_free(k);
}

int client_send(struct client *c, const char *method, const char *path, const char *body,
                const char *idem_key, client_done_fn done, void *arg)
{
	enum evhttp_cmd_type cmd = strcmp(method, "POST") == 0 ? EVHTTP_REQ_POST : EVHTTP_REQ_GET;
	struct call *k = gwb_calloc(1, sizeof *k);
	k->c = c;
	k->done = done;
	k->arg = arg;
	struct evhttp_request *req = evhttp_request_new(on_done, k);
	if (!req) {
		gwb_free(k);
		return -1;
	}
	evhttp_request_set_error_cb(req, on_error);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	evhttp_add_header(h, "Host", c->t->host_header);
	evhttp_add_header(h, "Authorization",
	                  strcmp(path, "/metrics") == 0 ? c->t->metrics_auth : c->t->auth);
	evhttp_add_header(h, "Accept", "application/json");
	if (idem_key)
		evhttp_add_header(h, "Idempotency-Key", idem_key);
	if (body) {
		evhttp_add_header(h, "Content-Type", "application/json");
		evbuffer_add(evhttp_request_get_output_buffer(req), body, strlen(body));
	}
	c->sending = 1;
	int rc = evhttp_make_request(c->conn, req, cmd, path);
	c->sending = 0;
	if (k->early) {
		/* The callback already ran (and was held back): deliver it from the loop. */
		struct timeval now = {0, 0};
		if (event_base_once(c->base, -1, EV_TIMEOUT, on_early, k, &now) < 0) {
			gwb_free(k);
			return -1;
		}
		c->inflight++;
		return 0;
	}
	if (rc != 0) {
		/* Refused before it was queued: the request is gone and no callback fires. */
		gwb_free(k);
		return -1;
	}
	c->inflight++;
	return 0;
}
