/* GET /v1/stream: live updates as Server-Sent Events. This module owns the open streams: each
 * is an evhttp request answered with a chunked reply that never ends, fed by one timer that
 * reads, at a steady pace, the store's task event history (whose increasing id is the SSE id
 * and the resume point), the teams, and the cluster's cards. Streams are bounded in number and
 * in unsent bytes: a client that stops reading is closed (it reconnects and resumes), never
 * buffered without end. It reaches the rest of the server only through the store's read
 * functions and reconciler_devices_json. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/jsonx.h"
#include "lib/log.h"
#include "server/api/api.h"
#include "server/api/conn.h"
#include "server/recon/reconciler.h"
#include "server/store/store_stream.h"

/* Task events read from the store for one stream in one tick; a stream further behind catches
 * up over the next ticks. */
#define STREAM_BATCH 256
/* A Last-Event-ID further behind the newest event than this gets "resync" instead of a replay
 * that would hold the client (and the loop) for long. */
#define STREAM_REPLAY_MAX 10000
/* A comment line after this much silence: docs/API.md promises one at least every 15 s, and a
 * write is also how a client that went away is noticed. */
#define STREAM_HEARTBEAT_MS 10000
/* The reconnect delay suggested to EventSource-style clients. */
#define STREAM_RETRY_MS 2000

struct hub;

/* One open stream: OPEN while evhttp holds its connection; freed when the connection closes. */
struct stream {
	struct evhttp_request *req;
	struct hub *hub;
	char team[64];          /* the only team shown; "" = every team (the admin, no filter) */
	char owner[64];         /* the team whose token opened it; "" = the admin's */
	int64_t cursor;         /* the last task event id considered */
	int64_t last_write_ms;  /* monotonic */
	json_t *sent;           /* "team/NAME", "device/NODE/MINOR" -> last data sent (string) */
	struct stream *next;
};

/* Every open stream and the timer that feeds them. It exists while a stream is open. */
struct hub {
	struct event_base *base;
	struct store *store;
	struct reconciler *recon;
	int64_t max_clients, max_buffer;
	struct event *tick;
	struct stream *streams;
	int n;
	int in_tick;                   /* set while on_tick runs: the hub is freed after it */
	struct store_stream_row *rows; /* STREAM_BATCH rows of scratch space */
};

/* The server has one event loop and so one hub; it lives while a stream is open. */
static struct hub *the_hub;

static void hub_free(struct hub *h)
{
	if (!h)
		return;
	if (h->tick)
		event_free(h->tick);
	gwb_free(h->rows);
	gwb_free(h);
	if (the_hub == h)
		the_hub = NULL;
}

/* Appends one event (data is a compact JSON text: no newline) to out. */
static void sse_event(struct evbuffer *out, int64_t id, const char *type, const json_t *data)
{
	char *d = jx_dump(data);
	evbuffer_add_printf(out, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, type, d);
	gwb_free(d);
}

/* Sends data as event type under key unless the same data was the last sent under it. */
static void send_if_changed(struct stream *s, struct evbuffer *out, const char *key,
			    const char *type, json_t *data)
{
	char *d = jx_dump(data);
	const char *last = json_string_value(json_object_get(s->sent, key));
	if (!last || strcmp(last, d) != 0) {
		evbuffer_add_printf(out, "id: %lld\nevent: %s\ndata: %s\n\n", (long long)s->cursor,
				    type, d);
		json_object_set_new(s->sent, key, json_string(d));
	}
	gwb_free(d);
}

static json_t *time_json(int64_t ms)
{
	char buf[40];
	return json_string(clock_fmt_rfc3339_ms(ms, buf, sizeof buf));
}

/* New task events since the stream's cursor. Returns 0, or -1 when the store failed. */
static int pump_tasks(struct stream *s, struct evbuffer *out)
{
	struct hub *h = s->hub;
	int64_t head = 0;
	if (store_stream_head(h->store, &head))
		return -1;
	int n = store_stream_events(h->store, s->cursor, s->team[0] ? s->team : NULL, h->rows,
				    STREAM_BATCH);
	if (n < 0)
		return -1;
	int i;
	for (i = 0; i < n; i++) {
		/* No more in one tick than the stream may hold unsent: a replay goes out over
		 * several ticks at the client's pace instead of tripping the slow-client cap. */
		if ((int64_t)evbuffer_get_length(out) >= h->max_buffer)
			break;
		const struct store_stream_row *row = &h->rows[i];
		json_t *d = json_pack("{s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:I, s:o, s:o}", "id",
				      row->task, "seq", (json_int_t)row->id, "team", row->team,
				      "event", row->type, "name", row->name, "gpu_memory_mib",
				      (json_int_t)row->gpu_memory_mib, "gpu_core_percent",
				      (json_int_t)row->gpu_core_percent, "gpu_count",
				      (json_int_t)row->gpu_count, "updated_at", time_json(row->ts_ms),
				      "created_at", time_json(row->created_ms));
		jx_set_str_or_null(d, "state", row->state[0] ? row->state : NULL);
		jx_set_str_or_null(d, "reason", row->reason[0] ? row->reason : NULL);
		sse_event(out, row->id, "task", d);
		json_decref(d);
		s->cursor = row->id;
	}
	/* Fewer than a batch: nothing else matches up to head (read before the events), so a
	 * team's stream does not rescan other teams' events next time. */
	if (i == n && n < STREAM_BATCH && head > s->cursor)
		s->cursor = head;
	return 0;
}

/* Team snapshots that changed since they were last sent on this stream. */
static void pump_teams(struct stream *s, struct evbuffer *out, json_t *teams)
{
	size_t i;
	json_t *t;
	json_array_foreach(teams, i, t) {
		const char *name = json_string_value(json_object_get(t, "team"));
		if (!name || (s->team[0] && strcmp(name, s->team) != 0))
			continue;
		json_t *d = json_pack("{s:s, s:O?, s:O?, s:O?, s:O?, s:O?}", "team", name, "quota",
				      json_object_get(t, "quota"), "reserved",
				      json_object_get(t, "reserved"), "available",
				      json_object_get(t, "available"), "active_tasks",
				      json_object_get(t, "active_tasks"), "waiting_tasks",
				      json_object_get(t, "waiting_tasks"));
		char key[96];
		snprintf(key, sizeof key, "team/%s", name);
		send_if_changed(s, out, key, "team", d);
		json_decref(d);
	}
}

/* Card snapshots (no task ids: those may be other teams') that changed on this stream. */
static void pump_devices(struct stream *s, struct evbuffer *out, json_t *devices)
{
	json_t *fresh = json_object_get(devices, "fresh");
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(devices, "cards"), i, c) {
		const char *node = json_string_value(json_object_get(c, "node"));
		json_int_t minor = json_integer_value(json_object_get(c, "minor"));
		json_t *d = json_pack("{s:s?, s:I, s:O?, s:O?, s:O?, s:O?, s:O?, s:O?, s:b}", "node",
				      node, "minor", minor, "id", json_object_get(c, "id"), "total",
				      json_object_get(c, "total"), "allocated",
				      json_object_get(c, "allocated"), "free",
				      json_object_get(c, "free"), "healthy",
				      json_object_get(c, "healthy"), "health_reason",
				      json_object_get(c, "health_reason"), "fresh",
				      json_is_true(fresh));
		char key[160];
		snprintf(key, sizeof key, "device/%s/%lld", node ? node : "", (long long)minor);
		send_if_changed(s, out, key, "device", d);
		json_decref(d);
	}
}

/* Bytes written to the connection that the client has not taken yet. */
static size_t unsent_bytes(struct stream *s)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(s->req);
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
	return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

/* Writes what is new for s. Returns 0, or -1 when the stream must be closed (its client left
 * too much unread, or the store failed). */
static int stream_pump(struct stream *s, json_t *teams, json_t *devices, int64_t now_ms)
{
	if (http_peer_closed(s->req))
		return -1;
	if ((int64_t)unsent_bytes(s) > s->hub->max_buffer) {
		log_warn("stream", "slow_client_dropped", "team=%s unsent=%zu",
			 log_q(s->team[0] ? s->team : "*"), unsent_bytes(s));
		return -1;
	}
	struct evbuffer *out = evbuffer_new();
	int rc = 0;
	if (teams)
		pump_teams(s, out, teams);
	if (devices)
		pump_devices(s, out, devices);
	if (pump_tasks(s, out) < 0) {
		log_warn("stream", "store_read_failed", "error=%s",
			 log_q(store_errmsg(s->hub->store)));
		rc = -1;
	}
	if (evbuffer_get_length(out) == 0 && now_ms - s->last_write_ms >= STREAM_HEARTBEAT_MS)
		evbuffer_add_printf(out, ": keep-alive\n\n");
	if (rc == 0 && evbuffer_get_length(out) > 0) {
		/* evhttp_send_reply_chunk moves the bytes out; the buffer stays ours. */
		evhttp_send_reply_chunk(s->req, out);
		s->last_write_ms = now_ms;
	}
	evbuffer_free(out);
	return rc;
}

/* Closes a stream's connection; its close callback unlinks and frees the stream. */
static void stream_drop(struct stream *s)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(s->req);
	if (conn)
		evhttp_connection_free(conn);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	struct hub *h = arg;
	json_t *teams = store_teams_json(h->store);
	json_t *devices = h->recon ? reconciler_devices_json(h->recon) : NULL;
	int64_t now = clock_mono_ms();
	h->in_tick = 1;
	for (struct stream *s = h->streams, *next; s; s = next) {
		next = s->next; /* stream_drop frees s */
		if (stream_pump(s, teams, devices, now) < 0)
			stream_drop(s);
	}
	h->in_tick = 0;
	json_decref(teams);
	json_decref(devices);
	/* The last stream is gone: the timer goes with the hub. libevent re-arms a persistent
	 * timer before calling it and touches it no more afterwards, so it may be freed here,
	 * after this tick's work is done. */
	if (h->n == 0)
		hub_free(h);
}

/* evhttp's close callback: the client went away (the request is then ours: evhttp has
 * detached it from the connection), or the server closed the connection (evhttp frees the
 * request after this returns). Either way the stream ends here. */
static void on_close(struct evhttp_connection *conn, void *arg)
{
	(void)conn;
	struct stream *s = arg;
	struct hub *h = s->hub;
	if (s->req && !evhttp_request_get_connection(s->req))
		evhttp_request_free(s->req); /* detached: nothing in evhttp refers to it now */
	for (struct stream **p = &h->streams; *p; p = &(*p)->next) {
		if (*p == s) {
			*p = s->next;
			break;
		}
	}
	h->n--;
	json_decref(s->sent);
	gwb_free(s);
	log_debug("stream", "closed", "open=%d", h->n);
	if (h->n == 0 && !h->in_tick)
		hub_free(h);
}

static struct hub *hub_get(struct req *r)
{
	if (the_hub)
		return the_hub;
	struct hub *h = gwb_calloc(1, sizeof *h);
	h->base = r->api->base;
	h->store = r->api->store;
	h->recon = r->api->recon;
	h->max_clients = r->api->cfg->stream_max_clients;
	h->max_buffer = r->api->cfg->stream_max_buffer_bytes;
	h->rows = gwb_calloc(STREAM_BATCH, sizeof *h->rows);
	h->tick = event_new(h->base, -1, EV_PERSIST, on_tick, h);
	int64_t ms = r->api->cfg->stream_poll_ms;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)((ms % 1000) * 1000) };
	event_add(h->tick, &tv);
	the_hub = h;
	return h;
}

/* Parses Last-Event-ID: 0 and *id, or -1 when absent (*id untouched) or not a number (*id -1). */
static int last_event_id(struct req *r, int64_t *id)
{
	const char *v = http_header(r, "Last-Event-ID");
	if (!v)
		return -1;
	char *end;
	errno = 0;
	long long x = strtoll(v, &end, 10);
	if (errno || end == v || *end || x < 0) {
		*id = -1;
		return -1;
	}
	*id = x;
	return 0;
}

/* Checks the query (?team= only; a team token may name only its own team) into team. Returns
 * 0, or -1 after replying. */
static int stream_team(struct req *r, char *team, size_t len)
{
	for (struct evkeyval *kv = r->query.tqh_first; kv; kv = kv->next.tqe_next) {
		if (strcmp(kv->key, "team") != 0) {
			http_reply_invalid_field(r, kv->key, "unknown query parameter");
			return -1;
		}
	}
	const char *q = evhttp_find_header(&r->query, "team");
	if (q && !api_valid_team(q)) {
		http_reply_invalid_field(r, "team", "must be a team name");
		return -1;
	}
	if (q && !http_may_act_on(r, q))
		return -1;
	snprintf(team, len, "%s", r->is_admin ? (q ? q : "") : r->team);
	return 0;
}

/* Whether r may open one more stream: 1, or 0 after replying too_many_streams (503 when the
 * server, or the part of it teams may use, is full; 429 when this token holds its share).
 * stream.max_clients bounds them all; http.stream_admin_reserved of those (at most all but
 * one) are the admin's alone, and a team's token holds at most http.stream_max_per_token. */
static int stream_slot_free(struct req *r)
{
	const struct gwb_config *cfg = r->api->cfg;
	int64_t max = cfg->stream_max_clients, per = cfg->http_stream_max_per_token;
	int64_t reserved = cfg->http_stream_admin_reserved;
	if (reserved > max - 1)
		reserved = max > 0 ? max - 1 : 0;
	int64_t all = 0, teams = 0, mine = 0;
	for (struct stream *s = the_hub ? the_hub->streams : NULL; s; s = s->next) {
		all++;
		teams += s->owner[0] != 0;
		mine += !r->is_admin && strcmp(s->owner, r->team) == 0;
	}
	if (!r->is_admin && per > 0 && mine >= per) {
		http_add_header(r, "Retry-After", "5");
		http_reply_error(r, 429, "too_many_streams",
				 "this token holds as many live streams as one token may",
				 json_pack("{s:I, s:I}", "max_streams", (json_int_t)max,
					   "max_per_token", (json_int_t)per));
		return 0;
	}
	if (max == 0 || all >= max || (!r->is_admin && teams >= max - reserved)) {
		http_add_header(r, "Retry-After", "5");
		http_reply_error(r, 503, "too_many_streams",
				 "the server holds as many live streams as it allows",
				 json_pack("{s:I}", "max_streams", (json_int_t)max));
		return 0;
	}
	return 1;
}

void api_stream(struct req *r)
{
	char team[64];
	if (stream_team(r, team, sizeof team) < 0)
		return;
	if (!stream_slot_free(r))
		return;
	int64_t head = 0;
	if (store_stream_head(r->api->store, &head))
		return http_reply_error(r, 500, "internal", "the event history cannot be read", NULL);
	int64_t lei = 0;
	int has_lei = last_event_id(r, &lei) == 0;
	const char *resync = NULL;
	if (!has_lei && lei == -1)
		resync = "invalid_last_event_id";
	else if (has_lei && lei > head)
		resync = "unknown_last_event_id"; /* another database's, or one that was reset */
	else if (has_lei && head - lei > STREAM_REPLAY_MAX)
		resync = "too_old";

	struct hub *h = hub_get(r);
	struct stream *s = gwb_calloc(1, sizeof *s);
	s->req = r->ev;
	s->hub = h;
	snprintf(s->team, sizeof s->team, "%s", team);
	snprintf(s->owner, sizeof s->owner, "%s", r->is_admin ? "" : r->team);
	s->cursor = has_lei && !resync ? lei : head;
	s->sent = json_object();
	s->next = h->streams;
	h->streams = s;
	h->n++;

	http_add_header(r, "Content-Type", "text/event-stream; charset=utf-8");
	http_add_header(r, "Cache-Control", "no-store");
	http_add_header(r, "X-Accel-Buffering", "no"); /* proxies: do not hold the events back */
	evhttp_send_reply_start(r->ev, 200, "OK");
	http_count_reply(r, 200); /* /metrics counts replies by class */
	struct evhttp_connection *conn = evhttp_request_get_connection(r->ev);
	conn_set_closecb(conn, on_close, s);
	/* The kernel's send buffer holds a stream's bytes too: capped like ours, so a client that
	 * stops reading is noticed after about twice stream.max_buffer_bytes, not megabytes. */
	int sndbuf = (int)h->max_buffer;
	evutil_socket_t fd = bufferevent_getfd(evhttp_connection_get_bufferevent(conn));
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);

	struct evbuffer *out = evbuffer_new();
	evbuffer_add_printf(out, "retry: %d\n\n", STREAM_RETRY_MS);
	json_t *hello = json_pack("{s:I, s:s?, s:b}", "head", (json_int_t)head, "team",
				  team[0] ? team : NULL, "admin", r->is_admin);
	if (resync)
		json_object_set_new(hello, "reason", json_string(resync));
	sse_event(out, s->cursor, resync ? "resync" : "hello", hello);
	json_decref(hello);
	evhttp_send_reply_chunk(r->ev, out);
	evbuffer_free(out);
	log_debug("stream", "opened", "team=%s cursor=%lld resync=%s open=%d",
		  log_q(team[0] ? team : "*"), (long long)s->cursor, resync ? resync : "no", h->n);

	/* The snapshots and any missed events go out now, not at the next tick. A failure is
	 * left to the tick, which closes the stream: this is evhttp's request callback, where
	 * its connection must not be freed. */
	json_t *teams = store_teams_json(h->store);
	json_t *devices = h->recon ? reconciler_devices_json(h->recon) : NULL;
	(void)stream_pump(s, teams, devices, clock_mono_ms());
	json_decref(teams);
	json_decref(devices);
}
