/* The one blocking HTTP + JSON client (libcurl easy, jansson), for programs without an event
 * loop: gwbctl, the test harness and the benchmarks. A client keeps one connection alive
 * between requests; the answer keeps its status, body, parsed JSON and the headers callers act
 * on (Location, Idempotent-Replayed, Retry-After). Never use it on an event loop: it blocks. */
#ifndef GWB_HTTPC_H
#define GWB_HTTPC_H

#include <jansson.h>
#include <stddef.h>

/* Answers larger than this are refused unless the request sets max_body. */
#define HTTPC_BODY_MAX_DEFAULT (16u << 20)
/* A request without timeout_ms gives up after this long. */
#define HTTPC_TIMEOUT_MS_DEFAULT 30000

struct httpc_req {
	const char *method;          /* "GET", "POST", ...; NULL means GET */
	const char *url;             /* http(s)://host[:port]/path?query */
	const char *unix_socket;     /* connect to this socket instead of the URL's host; may be NULL */
	const char *token;           /* sent as "Authorization: Bearer TOKEN"; NULL sends none */
	const char *body;            /* NULL sends none (a POST then sends an empty one) */
	size_t body_len;             /* 0 with a body: strlen(body) */
	const json_t *json;          /* alternative to body: serialised compactly; wins over body */
	const char *const *headers;  /* extra "Name: value" lines, NULL-terminated; may be NULL.
				      * Content-Type: application/json is added for a body unless
				      * one of these sets a Content-Type */
	long timeout_ms;             /* whole request; 0 = HTTPC_TIMEOUT_MS_DEFAULT; < 0: none
				      * (a stream: only the connect is bounded) */
	size_t max_body;             /* 0 = HTTPC_BODY_MAX_DEFAULT */
	/* When set, a 2xx answer's body is handed to it as it arrives (r->body stays empty and
	 * max_body does not apply); any other answer's body is kept as usual. */
	void (*on_data)(void *arg, const char *data, size_t len);
	void *on_data_arg;
};

struct httpc_resp {
	long status;          /* 0 when no answer came */
	char *body;           /* NUL-terminated, gwb-allocated, never NULL after httpc_do */
	size_t body_len;
	json_t *json;         /* the body parsed, or NULL when it is not JSON */
	char location[1024];  /* Location, or "" */
	int replayed;         /* 1 when Idempotent-Replayed: true */
	long retry_after_s;   /* Retry-After in seconds, or -1 when absent or not a number */
	char headers[8192];   /* the final answer's raw header block (after any 100 Continue),
			       * cut at 8191 bytes */
	char error[256];      /* why no answer came, or "" */
};

struct httpc;

/* A client with one libcurl handle (and so one kept-alive connection). Never NULL. The first
 * call in a process initialises libcurl globally; it is not thread-safe, like libcurl's own. */
struct httpc *httpc_new(void);
/* Accepts NULL. */
void httpc_free(struct httpc *c);

/* Sends one request and waits for its answer. Returns 0 when an answer came (any status: a 4xx
 * is an answer), or GWB_ETIMEOUT (time-out), GWB_EUNAVAIL (could not connect), GWB_ETOOBIG
 * (answer above max_body), GWB_EIO (any other transport failure), each with r->error set and
 * r->status 0. r is always filled (free it with httpc_resp_free, whatever the return). */
int httpc_do(struct httpc *c, const struct httpc_req *req, struct httpc_resp *r);

/* httpc_do with a client of its own, for one-off requests. */
int httpc_request(const struct httpc_req *req, struct httpc_resp *r);

/* The value of header name (case-insensitive) in r's header block, copied into buf (cut to
 * len), or NULL when absent. */
const char *httpc_header(const struct httpc_resp *r, const char *name, char *buf, size_t len);

/* The "code" of a JSON error body ({"error": {"code": ...}}), or "" (never NULL; points into
 * r->json). */
const char *httpc_error_code(const struct httpc_resp *r);

/* Frees the body and JSON and clears r. Accepts a zeroed r. */
void httpc_resp_free(struct httpc_resp *r);

#endif
