/* The router: a request's decoded path split into segments, checked for names no resource has,
 * and handed to its handler by method and path (405 with Allow, 404 for the rest). */
#include <stdio.h>
#include <string.h>

#include "server/api/api.h"

/* 1 when the decoded path has an empty segment ("//") or a "." or ".." segment: no resource
 * is named so, and answering 404 here, before routing, keeps every handler, and any file
 * behind one, out of traversal's reach. A single trailing slash is not an empty segment. */
static int odd_path(const char *path)
{
	for (const char *p = path; *p; p++) {
		if (*p != '/')
			continue;
		const char *seg = p + 1;
		size_t n = strcspn(seg, "/");
		if ((n == 0 && seg[0] == '/') || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			return 1;
	}
	return 0;
}

/* Splits r->path into r->segs (pointing into r->segbuf): 0, or -1 when it has more segments
 * than r->segs holds. */
static int split_path(struct req *r)
{
	snprintf(r->segbuf, sizeof r->segbuf, "%s", r->path);
	r->nsegs = 0;
	for (char *p = r->segbuf; *p;) {
		while (*p == '/')
			*p++ = '\0';
		if (!*p)
			break;
		if (r->nsegs == (int)(sizeof r->segs / sizeof r->segs[0]))
			return -1;
		r->segs[r->nsegs++] = p;
		while (*p && *p != '/')
			p++;
	}
	return 0;
}

int router_split(struct req *r)
{
	if (odd_path(r->path) || split_path(r) < 0) { /* not found, whatever lies behind */
		http_reply_error(r, 404, "not_found", "no such resource", NULL);
		return -1;
	}
	return 0;
}

static void method_not_allowed(struct req *r, const char *allow)
{
	http_add_header(r, "Allow", allow);
	http_reply_error(r, 405, "method_not_allowed", "this method is not allowed here",
			 json_pack("{s:s}", "allow", allow));
}

static int seg_is(struct req *r, int i, const char *s)
{
	return i < r->nsegs && strcmp(r->segs[i], s) == 0;
}

/* Routes an authenticated /v1 request. HEAD is a GET without the body (http_send) wherever
 * GET reads without side effects; the stream, which never ends, takes GET alone. */
static void route_v1(struct req *r)
{
	int get = r->method == EVHTTP_REQ_GET || r->method == EVHTTP_REQ_HEAD;
	int post = r->method == EVHTTP_REQ_POST;
	if (seg_is(r, 1, "tasks")) {
		if (r->nsegs == 2) {
			if (get)
				return api_tasks_list(r);
			if (post)
				return api_tasks_submit(r);
			return method_not_allowed(r, "GET, HEAD, POST");
		}
		if (r->nsegs == 3) {
			if (get)
				return api_task_get(r, r->segs[2]);
			return method_not_allowed(r, "GET, HEAD");
		}
		if (r->nsegs == 4 && seg_is(r, 3, "events")) {
			if (get)
				return api_task_events(r, r->segs[2]);
			return method_not_allowed(r, "GET, HEAD");
		}
		if (r->nsegs == 4 && seg_is(r, 3, "logs"))
			return get ? api_task_logs(r, r->segs[2]) : method_not_allowed(r, "GET, HEAD");
		if (r->nsegs == 4 && seg_is(r, 3, "cancel")) {
			if (post)
				return api_task_cancel(r, r->segs[2]);
			return method_not_allowed(r, "POST");
		}
	} else if (seg_is(r, 1, "teams")) {
		if (r->nsegs == 2) {
			if (get)
				return api_teams_list(r);
			return method_not_allowed(r, "GET, HEAD");
		}
		if (r->nsegs == 3) {
			if (get)
				return api_team_get(r, r->segs[2]);
			if (r->method == EVHTTP_REQ_PUT)
				return api_team_put(r, r->segs[2]);
			return method_not_allowed(r, "GET, HEAD, PUT");
		}
		if (r->nsegs == 4 && seg_is(r, 3, "queue")) {
			if (get)
				return api_team_queue(r, r->segs[2]);
			return method_not_allowed(r, "GET, HEAD");
		}
	} else if (seg_is(r, 1, "devices") && r->nsegs == 2) {
		if (get)
			return api_devices(r);
		return method_not_allowed(r, "GET, HEAD");
	} else if (seg_is(r, 1, "stream") && r->nsegs == 2) {
		if (r->method == EVHTTP_REQ_GET)
			return api_stream(r);
		return method_not_allowed(r, "GET");
	} else if (seg_is(r, 1, "audit") && r->nsegs <= 3) {
		if (r->nsegs == 2)
			return get ? api_audit_get(r) : method_not_allowed(r, "GET, HEAD");
		if (seg_is(r, 2, "repair"))
			return post ? api_audit_repair(r) : method_not_allowed(r, "POST");
	} else if (seg_is(r, 1, "info") && r->nsegs == 2) {
		if (get)
			return api_info(r);
		return method_not_allowed(r, "GET, HEAD");
	}
	http_reply_error(r, 404, "not_found", "no such resource",
			 json_pack("{s:s}", "path", r->path));
}

void router_route(struct req *r)
{
	if (r->nsegs == 1 && (seg_is(r, 0, "healthz") || seg_is(r, 0, "readyz") ||
			      seg_is(r, 0, "metrics"))) {
		if (r->method != EVHTTP_REQ_GET && r->method != EVHTTP_REQ_HEAD)
			return method_not_allowed(r, "GET, HEAD");
		if (seg_is(r, 0, "metrics"))
			return auth_admit_operator(r) ? api_metrics(r) : (void)0;
		return seg_is(r, 0, "healthz") ? api_healthz(r) : api_readyz(r);
	}
	if (r->nsegs == 2 && seg_is(r, 0, "v1") && seg_is(r, 1, "openapi.json")) { /* no token */
		if (r->method != EVHTTP_REQ_GET && r->method != EVHTTP_REQ_HEAD)
			return method_not_allowed(r, "GET, HEAD");
		return api_openapi(r);
	}
	if (!seg_is(r, 0, "v1"))
		return api_web(r);
	if (!auth_admit(r))
		return;
	route_v1(r);
}
