/* The manifests in deploy/ against the code they configure: they parse, every GWB_ variable
 * they set is a real setting, and the server's RBAC grants what the reconciler does (and no
 * delete). Runs from the repository root, as `make test` does. */
#include <stdio.h>
#include <string.h>

#include "config/config.h"
#include "lib/yamlx.h"
#include "tests/harness/t.h"

static json_t *load(const char *path)
{
	char err[512];
	json_t *docs = yamlx_load_file(path, err, sizeof err);
	CHECKF(docs != NULL, "%s", err);
	return docs;
}

static json_t *find(json_t *docs, const char *kind, const char *name)
{
	size_t i;
	json_t *d;
	json_array_foreach(docs, i, d) {
		const char *k = json_string_value(json_object_get(d, "kind"));
		const char *n = json_string_value(
			json_object_get(json_object_get(d, "metadata"), "name"));
		if (k && n && strcmp(k, kind) == 0 && strcmp(n, name) == 0)
			return d;
	}
	t_fail(__FILE__, __LINE__, "no %s %s", kind, name);
}

static int has(json_t *arr, const char *s)
{
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
		if (json_is_string(v) && strcmp(json_string_value(v), s) == 0)
			return 1;
	return 0;
}

/* The rule of role for (group, resource). */
static json_t *rule(json_t *role, const char *group, const char *resource)
{
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(role, "rules"), i, r)
		if (has(json_object_get(r, "apiGroups"), group) &&
		    has(json_object_get(r, "resources"), resource))
			return r;
	t_fail(__FILE__, __LINE__, "no rule for %s/%s", group, resource);
}

static void verbs(json_t *role, const char *group, const char *resource, const char *const *want)
{
	json_t *v = json_object_get(rule(role, group, resource), "verbs");
	for (const char *const *w = want; *w; w++)
		CHECKF(has(v, *w), "%s/%s lacks verb %s", group, resource, *w);
	CHECKF(!has(v, "delete") && !has(v, "*"), "%s/%s may delete", group, resource);
}

TEST(deploy_rbac_grants_what_the_reconciler_does)
{
	json_t *docs = load("deploy/gwb/10-rbac.yaml");
	json_t *role = find(docs, "Role", "gwb-server");
	CHECK_STR(json_string_value(json_object_get(json_object_get(role, "metadata"), "namespace")),
		  "gpu-workbench");
	verbs(role, "batch", "jobs", (const char *const[]){ "get", "list", "watch", "create",
							    "patch", NULL });
	verbs(role, "", "pods", (const char *const[]){ "get", "list", "watch", NULL });
	verbs(role, "", "pods/log", (const char *const[]){ "get", NULL });
	verbs(role, "", "events", (const char *const[]){ "list", "watch", NULL });
	json_t *cr = find(docs, "ClusterRole", "gwb-server-read");
	verbs(cr, "scheduling.koordinator.sh", "devices",
	      (const char *const[]){ "get", "list", "watch", NULL });
	json_decref(docs);
}

TEST(deploy_server_settings_are_real_settings)
{
	json_t *docs = load("deploy/gwb/30-server.yaml");
	json_t *dep = find(docs, "Deployment", "gwb-server");
	json_t *spec = json_object_get(dep, "spec");
	CHECK_STR(json_string_value(json_object_get(spec, "replicas")), "1");
	CHECK_STR(json_string_value(json_object_get(json_object_get(spec, "strategy"), "type")),
		  "Recreate");
	json_t *c = json_array_get(
		json_object_get(json_object_get(json_object_get(spec, "template"), "spec"),
				"containers"),
		0);
	size_t i;
	json_t *e;
	int n = 0;
	json_array_foreach(json_object_get(c, "env"), i, e) {
		const char *name = json_string_value(json_object_get(e, "name"));
		CHECK(name != NULL);
		CHECKF(strncmp(name, "GWB_", 4) != 0 || config_env_known(name),
		       "%s is not a gwb-server setting", name);
		if (strcmp(name, "GWB_NAMESPACE") == 0)
			CHECK_STR(json_string_value(json_object_get(e, "value")), "gpu-workbench");
		n++;
	}
	CHECK(n >= 5);
	CHECK(!config_env_known("GWB_NO_SUCH_THING"));
	json_decref(docs);
}

TEST(deploy_task_namespace_enforces_the_restricted_profile)
{
	json_t *docs = load("deploy/gwb/00-namespaces.yaml");
	json_t *labels = json_object_get(json_object_get(find(docs, "Namespace", "gpu-workbench"),
							 "metadata"),
					 "labels");
	CHECK_STR(json_string_value(json_object_get(labels, "pod-security.kubernetes.io/enforce")),
		  "restricted");
	json_decref(docs);
}

TEST(deploy_every_manifest_parses)
{
	static const char *const files[] = { "deploy/gwb/00-namespaces.yaml",
					     "deploy/gwb/20-redis.yaml",
					     "deploy/gwb/40-prometheus.yaml",
					     "deploy/kubesim/device-colima-gwb.yaml",
					     "deploy/kubesim/colocation-profile.yaml", NULL };
	for (const char *const *f = files; *f; f++) {
		json_t *docs = load(*f);
		CHECKF(json_array_size(docs) >= 1, "%s is empty", *f);
		json_decref(docs);
	}
}
