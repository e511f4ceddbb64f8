/* A task that carries the team's own container (issue 35), on a real gwb-server over HTTP:
 * each workload field refused with its name and nothing written, the team's workload policy
 * (allowed images, cpu and memory defaults and maxima) shown and enforced with 403
 * image_not_allowed, the fingerprint covering the workload, and the workload kept across a
 * restart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

#define ADMIN "admin-secret"
#define ALPHA "alpha-token-123"

#define POLICY                                                                              \
	"\"workload_policy\": {\"allowed_images\": [\"reg.example.com/alpha\", \"busybox:\"], " \
	"\"cpu\": {\"default\": \"250m\", \"max\": \"2\"}, "                                    \
	"\"memory\": {\"default\": \"512Mi\", \"max\": \"4Gi\"}}"

static void start(struct h_server *s, int with_policy)
{
	h_server_init(s);
	h_server_start(s);
	char body[512];
	snprintf(body, sizeof body,
		 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, \"token\": \"%s\"%s%s}",
		 ALPHA, with_policy ? ", " : "", with_policy ? POLICY : "");
	CHECK(h_team_put(s->proc.url, ADMIN, "alpha", body) == 201);
}

static long long tasks_in(const struct h_server *s)
{
	return h_sql_int(s->db, "SELECT COUNT(*) FROM tasks");
}

/* A submission of alpha's with workload (JSON text) and extra members (may be ""). */
static void submit(struct h_resp *r, const struct h_server *s, const char *workload,
		   const char *extra, const char *const *headers)
{
	size_t n = strlen(workload) + strlen(extra) + 256;
	char *body = gwb_malloc(n);
	snprintf(body, n,
		 "{\"team\": \"alpha\", \"gpu_memory_mib\": 1024, \"gpu_core_percent\": 10, "
		 "\"workload\": %s%s}",
		 workload, extra);
	h_req(r, "POST", s->proc.url, "/v1/tasks", ALPHA, body, headers);
	gwb_free(body);
}

static const char *err_field(const struct h_resp *r)
{
	const char *f = json_string_value(json_object_get(json_object_get(r->json, "error"),
							   "field"));
	return f ? f : "";
}

/* A text of n copies of c, gwb_malloc'd. */
static char *repeat(char c, size_t n)
{
	char *s = gwb_malloc(n + 1);
	memset(s, c, n);
	s[n] = '\0';
	return s;
}

TEST(workload_each_bad_field_is_refused_by_name_writing_nothing)
{
	struct h_server s;
	start(&s, 1);
	char *big = repeat('x', 5000), *many = gwb_malloc(10000 * 4 + 16);
	strcpy(many, "[");
	for (int i = 0; i < 10000; i++)
		strcat(many, i ? ",\"a\"" : "\"a\"");
	strcat(many, "]");
	char envs[4096] = "{";
	for (int i = 0; i < 65; i++)
		snprintf(envs + strlen(envs), sizeof envs - strlen(envs), "%s\"V%d\": \"x\"",
			 i ? ", " : "", i);
	strcat(envs, "}");
	char bigenv[5200], bigarg[5200], longimg[400];
	snprintf(bigenv, sizeof bigenv, "{\"image\": \"busybox:1\", \"env\": {\"A\": \"%s\"}}",
		 big);
	snprintf(bigarg, sizeof bigarg, "{\"image\": \"busybox:1\", \"args\": [\"%s\"]}", big);
	char *manyargs = gwb_malloc(strlen(many) + 64);
	sprintf(manyargs, "{\"image\": \"busybox:1\", \"args\": %s}", many);
	char *manyenv = gwb_malloc(strlen(envs) + 64);
	sprintf(manyenv, "{\"image\": \"busybox:1\", \"env\": %s}", envs);
	char *img = repeat('a', 300);
	snprintf(longimg, sizeof longimg, "{\"image\": \"%s\"}", img);
	const struct {
		const char *workload, *field;
	} cases[] = {
		{ "\"busybox:1\"", "workload" },
		{ "{}", "workload.image" },
		{ "{\"image\": \"bad image\"}", "workload.image" },
		{ "{\"image\": \"Busybox\"}", "workload.image" },
		{ "{\"image\": \"busybox@sha256:abc\"}", "workload.image" },
		{ longimg, "workload.image" },
		{ "{\"image\": 7}", "workload.image" },
		{ "{\"image\": \"busybox:1\", \"colour\": 1}", "workload.colour" },
		{ "{\"image\": \"busybox:1\", \"command\": [\"sh\", \"-c\"]}", "workload.command[0]" },
		{ "{\"image\": \"busybox:1\", \"command\": []}", "workload.command" },
		{ "{\"image\": \"busybox:1\", \"command\": [\"/bin/sh\", 3]}", "workload.command[1]" },
		{ "{\"image\": \"busybox:1\", \"args\": \"-c\"}", "workload.args" },
		{ manyargs, "workload.args" },
		{ bigarg, "workload.args[0]" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"1X\": \"v\"}}", "workload.env.1X" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"A-B\": \"v\"}}", "workload.env.A-B" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"NVIDIA_VISIBLE_DEVICES\": \"all\"}}",
		  "workload.env.NVIDIA_VISIBLE_DEVICES" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"CUDA_DEVICE_MEMORY_LIMIT_0\": \"1g\"}}",
		  "workload.env.CUDA_DEVICE_MEMORY_LIMIT_0" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"CUDA_DEVICE_SM_LIMIT\": \"100\"}}",
		  "workload.env.CUDA_DEVICE_SM_LIMIT" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"LD_PRELOAD\": \"/x.so\"}}",
		  "workload.env.LD_PRELOAD" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"GWB_TASK_ID\": \"t\"}}",
		  "workload.env.GWB_TASK_ID" },
		{ "{\"image\": \"busybox:1\", \"env\": {\"A\": 1}}", "workload.env.A" },
		{ bigenv, "workload.env.A" },
		{ manyenv, "workload.env" },
		{ "{\"image\": \"busybox:1\", \"working_dir\": \"tmp\"}", "workload.working_dir" },
		{ "{\"image\": \"busybox:1\", \"cpu\": \"-1\"}", "workload.cpu" },
		{ "{\"image\": \"busybox:1\", \"cpu\": 1}", "workload.cpu" },
		{ "{\"image\": \"busybox:1\", \"cpu\": \"0\"}", "workload.cpu" },
		{ "{\"image\": \"busybox:1\", \"cpu\": \"3\"}", "workload.cpu" },
		{ "{\"image\": \"busybox:1\", \"memory\": \"lots\"}", "workload.memory" },
		{ "{\"image\": \"busybox:1\", \"memory\": \"5Gi\"}", "workload.memory" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct h_resp r;
		submit(&r, &s, cases[i].workload, "", NULL);
		CHECKF(r.status == 400 && strcmp(h_err_code(&r), "invalid_field") == 0,
		       "case %zu (%s): %ld %.300s", i, cases[i].field, r.status, r.body);
		CHECKF(strcmp(err_field(&r), cases[i].field) == 0, "case %zu: field %s, not %s", i,
		       err_field(&r), cases[i].field);
		h_resp_free(&r);
	}
	/* experiment is the simulated worker's: refused beside a workload. */
	struct h_resp r;
	submit(&r, &s, "{\"image\": \"busybox:1\"}", ", \"experiment\": \"normal\"", NULL);
	CHECKF(r.status == 400 && strcmp(err_field(&r), "experiment") == 0, "%ld %s", r.status,
	       r.body);
	h_resp_free(&r);
	/* The whole body is capped (http.max_body_bytes, 64 KiB by default): a 1 MiB env value
	 * is refused before it is parsed. */
	char *huge = repeat('v', 1 << 20), *hb = gwb_malloc((1 << 20) + 128);
	sprintf(hb, "{\"image\": \"busybox:1\", \"env\": {\"A\": \"%s\"}}", huge);
	submit(&r, &s, hb, "", NULL);
	CHECKF(r.status == 413, "1 MiB body: %ld %.200s", r.status, r.body);
	h_resp_free(&r);
	gwb_free(huge);
	gwb_free(hb);
	/* The workload's own bound: 64 env values of 1 KiB fit the body, not the workload. */
	char *v1k = repeat('w', 1024), *env64 = gwb_malloc(64 * 1100 + 64);
	strcpy(env64, "{\"image\": \"busybox:1\", \"env\": {");
	for (int i = 0; i < 60; i++)
		sprintf(env64 + strlen(env64), "%s\"V%d\": \"%s\"", i ? ", " : "", i, v1k);
	strcat(env64, "}}");
	submit(&r, &s, env64, "", NULL);
	CHECKF(r.status == 400 && strcmp(err_field(&r), "workload") == 0, "%ld %.200s", r.status,
	       r.body);
	h_resp_free(&r);
	gwb_free(v1k);
	gwb_free(env64);
	CHECK_INT(tasks_in(&s), 0);
	gwb_free(big);
	gwb_free(many);
	gwb_free(manyargs);
	gwb_free(manyenv);
	gwb_free(img);
}

TEST(workload_image_outside_the_policy_is_403_writing_nothing)
{
	struct h_server s;
	start(&s, 0);
	/* No allowed_images: only the simulated worker runs. */
	struct h_resp r;
	submit(&r, &s, "{\"image\": \"busybox:1\"}", "", NULL);
	CHECKF(r.status == 403 && strcmp(h_err_code(&r), "image_not_allowed") == 0, "%ld %s",
	       r.status, r.body);
	json_t *d = json_object_get(r.json, "error");
	CHECK(strcmp(json_string_value(json_object_get(d, "image")), "busybox:1") == 0);
	CHECK_INT(json_array_size(json_object_get(d, "allowed_images")), 0);
	h_resp_free(&r);
	/* The policy set: a prefix matches at a component boundary only. */
	CHECK(h_team_put(s.proc.url, ADMIN, "alpha",
			 "{\"gpu_memory_mib\": 40960, \"gpu_core_percent\": 800, " POLICY "}") == 200);
	const char *refused[] = { "{\"image\": \"reg.example.com/alphabet/x:1\"}",
				  "{\"image\": \"evil.io/busybox:1\"}",
				  "{\"image\": \"busybox2:1\"}" };
	for (size_t i = 0; i < 3; i++) {
		submit(&r, &s, refused[i], "", NULL);
		CHECKF(r.status == 403 && strcmp(h_err_code(&r), "image_not_allowed") == 0,
		       "%s: %ld %s", refused[i], r.status, r.body);
		json_t *a = json_object_get(json_object_get(r.json, "error"), "allowed_images");
		CHECK_INT(json_array_size(a), 2);
		CHECK(strcmp(json_string_value(json_array_get(a, 0)), "reg.example.com/alpha") == 0);
		h_resp_free(&r);
	}
	/* A dry run is refused the same way. */
	h_req(&r, "POST", s.proc.url, "/v1/tasks?dry_run=true", ALPHA,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, "
	      "\"workload\": {\"image\": \"evil.io/x\"}}",
	      NULL);
	CHECKF(r.status == 403, "%ld %s", r.status, r.body);
	h_resp_free(&r);
	CHECK_INT(tasks_in(&s), 0);
	/* An allowed one is accepted, its amounts filled in from the team's defaults. */
	submit(&r, &s, "{\"image\": \"reg.example.com/alpha/train:v1\"}", "", NULL);
	CHECKF(r.status == 201, "%ld %s", r.status, r.body);
	json_t *w = json_object_get(r.json, "workload");
	CHECK(strcmp(json_string_value(json_object_get(w, "cpu")), "250m") == 0);
	CHECK(strcmp(json_string_value(json_object_get(w, "memory")), "512Mi") == 0);
	h_resp_free(&r);
	CHECK_INT(tasks_in(&s), 1);
}

TEST(workload_policy_is_shown_and_checked)
{
	struct h_server s;
	start(&s, 1);
	struct h_resp r;
	h_req(&r, "GET", s.proc.url, "/v1/teams/alpha", ALPHA, NULL, NULL);
	CHECK(r.status == 200);
	json_t *p = json_object_get(r.json, "workload_policy");
	CHECK_INT(json_array_size(json_object_get(p, "allowed_images")), 2);
	CHECK(strcmp(json_string_value(json_object_get(json_object_get(p, "cpu"), "max")), "2") ==
	      0);
	CHECK(strcmp(json_string_value(
			     json_object_get(json_object_get(p, "memory"), "default")),
		     "512Mi") == 0);
	h_resp_free(&r);
	/* A PUT without workload_policy keeps it. */
	CHECK(h_team_put(s.proc.url, ADMIN, "alpha",
			 "{\"gpu_memory_mib\": 4096, \"gpu_core_percent\": 800}") == 200);
	h_req(&r, "GET", s.proc.url, "/v1/teams/alpha", ADMIN, NULL, NULL);
	p = json_object_get(r.json, "workload_policy");
	CHECK_INT(json_array_size(json_object_get(p, "allowed_images")), 2);
	h_resp_free(&r);
	const struct {
		const char *policy, *field;
	} bad[] = {
		{ "[]", "workload_policy" },
		{ "{\"allowed_images\": \"busybox\"}", "workload_policy.allowed_images" },
		{ "{\"allowed_images\": [\"bad prefix\"]}", "workload_policy.allowed_images[0]" },
		{ "{\"cpu\": {\"default\": \"3\", \"max\": \"2\"}}", "workload_policy.cpu.default" },
		{ "{\"memory\": {\"max\": \"-1\"}}", "workload_policy.memory.max" },
		{ "{\"gpu\": 1}", "workload_policy.gpu" },
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		char body[512];
		snprintf(body, sizeof body,
			 "{\"gpu_memory_mib\": 1, \"gpu_core_percent\": 1, \"workload_policy\": %s}",
			 bad[i].policy);
		h_req(&r, "PUT", s.proc.url, "/v1/teams/alpha", ADMIN, body, NULL);
		CHECKF(r.status == 400 && strcmp(err_field(&r), bad[i].field) == 0, "%s: %ld %s",
		       bad[i].policy, r.status, r.body);
		h_resp_free(&r);
	}
	/* Refused bodies changed nothing. */
	CHECK(h_sql_int(s.db, "SELECT quota_mem_mib FROM teams WHERE name = 'alpha'") == 4096);
}

TEST(workload_fingerprint_covers_it_and_a_restart_keeps_it)
{
	struct h_server s;
	start(&s, 1);
	const char *key[] = { "Idempotency-Key: wl-1", NULL };
	const char *wl = "{\"image\": \"busybox:1.36\", \"command\": [\"/bin/sh\", \"-c\"], "
			 "\"args\": [\"echo hi; exit 3\"], \"env\": {\"B\": \"2\", \"A\": \"1\"}, "
			 "\"working_dir\": \"/tmp\", \"cpu\": \"1000m\", \"memory\": \"1024Mi\"}";
	struct h_resp r;
	submit(&r, &s, wl, "", key);
	CHECKF(r.status == 201, "%ld %s", r.status, r.body);
	char id[40];
	snprintf(id, sizeof id, "%s", json_string_value(json_object_get(r.json, "id")));
	json_t *w = json_object_get(r.json, "workload");
	CHECK(strcmp(json_string_value(json_object_get(w, "cpu")), "1") == 0);
	CHECK(strcmp(json_string_value(json_object_get(w, "memory")), "1Gi") == 0);
	h_resp_free(&r);
	/* The same workload, its env written in another order and the amounts in other units:
	 * a replay. */
	submit(&r, &s,
	       "{\"env\": {\"A\": \"1\", \"B\": \"2\"}, \"memory\": \"1Gi\", \"cpu\": \"1\", "
	       "\"image\": \"busybox:1.36\", \"command\": [\"/bin/sh\", \"-c\"], "
	       "\"args\": [\"echo hi; exit 3\"], \"working_dir\": \"/tmp\"}",
	       "", key);
	CHECKF(r.status == 200 && strcmp(json_string_value(json_object_get(r.json, "id")), id) == 0,
	       "%ld %s", r.status, r.body);
	h_resp_free(&r);
	/* A changed env value: another submission under the same key. */
	submit(&r, &s,
	       "{\"image\": \"busybox:1.36\", \"command\": [\"/bin/sh\", \"-c\"], "
	       "\"args\": [\"echo hi; exit 3\"], \"env\": {\"B\": \"3\", \"A\": \"1\"}, "
	       "\"working_dir\": \"/tmp\", \"cpu\": \"1\", \"memory\": \"1Gi\"}",
	       "", key);
	CHECKF(r.status == 409 && strcmp(h_err_code(&r), "idempotency_key_reused") == 0, "%ld %s",
	       r.status, r.body);
	h_resp_free(&r);
	CHECK_INT(tasks_in(&s), 1);
	/* Stored durably: the view after a restart shows the same workload. */
	h_server_stop(&s);
	h_server_start(&s);
	char path[80];
	snprintf(path, sizeof path, "/v1/tasks/%s", id);
	h_req(&r, "GET", s.proc.url, path, ALPHA, NULL, NULL);
	CHECK(r.status == 200);
	w = json_object_get(r.json, "workload");
	CHECK(strcmp(json_string_value(json_object_get(w, "image")), "busybox:1.36") == 0);
	CHECK(strcmp(json_string_value(json_array_get(json_object_get(w, "command"), 0)),
		     "/bin/sh") == 0);
	CHECK(strcmp(json_string_value(json_object_get(json_object_get(w, "env"), "B")), "2") ==
	      0);
	CHECK(strcmp(json_string_value(json_object_get(w, "working_dir")), "/tmp") == 0);
	h_resp_free(&r);
	/* A task without a workload shows null: the simulated worker. */
	h_req(&r, "POST", s.proc.url, "/v1/tasks", ALPHA,
	      "{\"team\": \"alpha\", \"gpu_memory_mib\": 1, \"gpu_core_percent\": 1}", NULL);
	CHECKF(r.status == 201 && json_is_null(json_object_get(r.json, "workload")), "%ld %s",
	       r.status, r.body);
	h_resp_free(&r);
}
