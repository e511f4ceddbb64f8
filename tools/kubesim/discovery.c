/* Discovery documents are generated from the resource table, so a new resource shows up in
 * /api, /apis, its group-version list and OpenAPI at once. */
#include "tools/kubesim/discovery.h"

#include <stdio.h>
#include <string.h>

#include "tools/kubesim/kubesim.h"
#include "tools/kubesim/res.h"

/* OpenAPI documents never change during a run; kubectl caches them by this hash. */
#define OPENAPI_HASH "kubesim-1"

static json_t *verbs_full(void)
{
	return json_pack("[s,s,s,s,s,s,s,s]", "create", "delete", "deletecollection", "get",
			 "list", "patch", "update", "watch");
}

static json_t *resource_entry(const struct res_def *r)
{
	json_t *e = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", r->plural, "singularName",
			      r->singular, "namespaced", r->namespaced, "kind", r->kind, "verbs",
			      verbs_full());
	json_t *sn = json_array();
	for (int i = 0; i < 3 && r->short_names[i]; i++)
		json_array_append_new(sn, json_string(r->short_names[i]));
	if (json_array_size(sn))
		json_object_set_new(e, "shortNames", sn);
	else
		json_decref(sn);
	json_t *cat = json_array();
	for (int i = 0; i < 2 && r->categories[i]; i++)
		json_array_append_new(cat, json_string(r->categories[i]));
	if (json_array_size(cat))
		json_object_set_new(e, "categories", cat);
	else
		json_decref(cat);
	return e;
}

static json_t *sub_entry(const struct res_def *r, const char *sub, const char *kind,
			 json_t *verbs)
{
	char name[96];
	snprintf(name, sizeof name, "%s/%s", r->plural, sub);
	return json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", name, "singularName", "",
			 "namespaced", r->namespaced, "kind", kind, "verbs", verbs);
}

static json_t *resource_list(const char *group, const char *version)
{
	char gv[128];
	if (group[0])
		snprintf(gv, sizeof gv, "%s/%s", group, version);
	else
		snprintf(gv, sizeof gv, "%s", version);
	json_t *res = json_array();
	for (int i = 0; i < RES_COUNT; i++) {
		const struct res_def *r = res_get((enum res_id)i);
		if (strcmp(r->group, group) || strcmp(r->version, version))
			continue;
		json_array_append_new(res, resource_entry(r));
		if (r->has_status)
			json_array_append_new(res, sub_entry(r, "status", r->kind,
							     json_pack("[s,s,s]", "get", "patch",
								       "update")));
		if (r->has_log)
			json_array_append_new(res,
					      sub_entry(r, "log", "Pod", json_pack("[s]", "get")));
		if (r->has_binding)
			json_array_append_new(res, sub_entry(r, "binding", "Binding",
							     json_pack("[s]", "create")));
		if (r->id == RES_PODS)
			json_array_append_new(res, sub_entry(r, "eviction", "Eviction",
							     json_pack("[s]", "create")));
	}
	return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
			 "groupVersion", gv, "resources", res);
}

static json_t *group_list(void)
{
	json_t *groups = json_array();
	for (int i = 0; i < RES_COUNT; i++) {
		const struct res_def *r = res_get((enum res_id)i);
		if (!r->group[0])
			continue;
		int seen = 0;
		for (int j = 0; j < i; j++)
			seen |= !strcmp(res_get((enum res_id)j)->group, r->group);
		if (seen)
			continue;
		char gv[128];
		snprintf(gv, sizeof gv, "%s/%s", r->group, r->version);
		json_t *ver = json_pack("{s:s, s:s}", "groupVersion", gv, "version", r->version);
		json_array_append_new(groups,
				      json_pack("{s:s, s:[O], s:O}", "name", r->group, "versions",
						ver, "preferredVersion", ver));
		json_decref(ver);
	}
	return json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1", "groups",
			 groups);
}

static json_t *openapi_root(void)
{
	json_t *paths = json_object();
	for (int i = 0; i < RES_COUNT; i++) {
		const struct res_def *r = res_get((enum res_id)i);
		char key[128], url[200];
		if (r->group[0])
			snprintf(key, sizeof key, "apis/%s/%s", r->group, r->version);
		else
			snprintf(key, sizeof key, "api/%s", r->version);
		snprintf(url, sizeof url, "/openapi/v3/%s?hash=%s", key, OPENAPI_HASH);
		json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url));
	}
	return json_pack("{s:o}", "paths", paths);
}

/* A minimal group-version document: for each kind, a PATCH operation tagged with its
 * group-version-kind and a fieldValidation parameter, which is what kubectl's validation
 * probe looks for before it leaves validation to the server. */
static json_t *openapi_gv(const char *group, const char *version)
{
	json_t *paths = json_object();
	for (int i = 0; i < RES_COUNT; i++) {
		const struct res_def *r = res_get((enum res_id)i);
		if (strcmp(r->group, group) || strcmp(r->version, version))
			continue;
		char path[256], prefix[128];
		if (group[0])
			snprintf(prefix, sizeof prefix, "/apis/%s/%s", group, version);
		else
			snprintf(prefix, sizeof prefix, "/api/%s", version);
		snprintf(path, sizeof path, "%s/%s%s/{name}", prefix,
			 r->namespaced ? "namespaces/{namespace}/" : "", r->plural);
		json_t *gvk = json_pack("{s:s, s:s, s:s}", "group", group, "version", version,
					"kind", r->kind);
		json_t *params = json_pack("[{s:s, s:s, s:{s:s}}, {s:s, s:s, s:{s:s}}]", "name",
					   "fieldValidation", "in", "query", "schema", "type",
					   "string", "name", "fieldManager", "in", "query", "schema",
					   "type", "string");
		json_t *op = json_pack("{s:o, s:o, s:{s:{s:s}}}", "x-kubernetes-group-version-kind",
				       gvk, "parameters", params, "responses", "200",
				       "description", "OK");
		json_t *post = json_deep_copy(op);
		json_object_set_new(paths, path, json_pack("{s:o}", "patch", op));
		snprintf(path, sizeof path, "%s/%s%s", prefix,
			 r->namespaced ? "namespaces/{namespace}/" : "", r->plural);
		json_object_set_new(paths, path, json_pack("{s:o}", "post", post));
	}
	return json_pack("{s:s, s:{s:s, s:s}, s:o, s:{s:{}}}", "openapi", "3.0.0", "info",
			 "title", "Kubernetes", "version", "v1.32.4", "paths", paths, "components",
			 "schemas");
}

static int method_get(const struct hreq *h)
{
	return h->cmd == EVHTTP_REQ_GET || h->cmd == EVHTTP_REQ_HEAD;
}

int discovery_handle(struct hreq *h)
{
	const char *p = h->path;
	if (!strcmp(p, "/healthz") || !strcmp(p, "/readyz") || !strcmp(p, "/livez")) {
		http_reply(h, 200, "text/plain; charset=utf-8", "ok", 2);
		return 1;
	}
	if (!method_get(h))
		return 0;
	if (!strcmp(p, "/version") || !strcmp(p, "/version/")) {
		char minor[16], git[32];
		snprintf(minor, sizeof minor, "%ld", h->ks->cfg.kube_minor);
		snprintf(git, sizeof git, "v1.%ld.4", h->ks->cfg.kube_minor);
		http_reply_json(h, 200,
				json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "major",
					  "1", "minor", minor, "gitVersion", git, "gitCommit",
					  "0000000000000000000000000000000000000000", "gitTreeState",
					  "clean", "buildDate", "2026-01-01T00:00:00Z", "goVersion",
					  "go1.23.8", "compiler", "gc", "platform", "linux/amd64"));
		return 1;
	}
	if (!strcmp(p, "/api") || !strcmp(p, "/api/")) {
		char addr[64];
		snprintf(addr, sizeof addr, "%s", "127.0.0.1:0");
		http_reply_json(h, 200,
				json_pack("{s:s, s:[s], s:[{s:s, s:s}]}", "kind", "APIVersions",
					  "versions", "v1", "serverAddressByClientCIDRs",
					  "clientCIDR", "0.0.0.0/0", "serverAddress", addr));
		return 1;
	}
	if (!strcmp(p, "/apis") || !strcmp(p, "/apis/")) {
		http_reply_json(h, 200, group_list());
		return 1;
	}
	if (!strcmp(p, "/api/v1") || !strcmp(p, "/api/v1/")) {
		http_reply_json(h, 200, resource_list("", "v1"));
		return 1;
	}
	char g[128], v[64], rest[8];
	if (sscanf(p, "/apis/%127[^/]/%63[^/]%7s", g, v, rest) == 2 ||
	    (sscanf(p, "/apis/%127[^/]/%63[^/]%7s", g, v, rest) == 3 && !strcmp(rest, "/"))) {
		if (!res_gv_served(g, v))
			return 0;
		http_reply_json(h, 200, resource_list(g, v));
		return 1;
	}
	if (sscanf(p, "/apis/%127[^/]%7s", g, rest) == 1) {
		for (int i = 0; i < RES_COUNT; i++) {
			const struct res_def *r = res_get((enum res_id)i);
			if (strcmp(r->group, g))
				continue;
			char gv[128];
			snprintf(gv, sizeof gv, "%s/%s", r->group, r->version);
			json_t *ver = json_pack("{s:s, s:s}", "groupVersion", gv, "version",
						r->version);
			http_reply_json(h, 200,
					json_pack("{s:s, s:s, s:s, s:[O], s:o}", "kind", "APIGroup",
						  "apiVersion", "v1", "name", r->group, "versions",
						  ver, "preferredVersion", ver));
			return 1;
		}
		return 0;
	}
	if (!strcmp(p, "/openapi/v3") || !strcmp(p, "/openapi/v3/")) {
		http_reply_json(h, 200, openapi_root());
		return 1;
	}
	if (!strcmp(p, "/openapi/v3/api/v1")) {
		http_reply_json(h, 200, openapi_gv("", "v1"));
		return 1;
	}
	if (sscanf(p, "/openapi/v3/apis/%127[^/]/%63s", g, v) == 2 && res_gv_served(g, v)) {
		http_reply_json(h, 200, openapi_gv(g, v));
		return 1;
	}
	return 0;
}
