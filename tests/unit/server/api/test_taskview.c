/* The API's view of a task (server/api/api_taskview.c): built with every key in sorted order, so
 * that a view api_task_view_sorted vouches for dumps to the same text with or without jansson
 * sorting it; and written as text by api_task_view_write, byte for byte what jansson dumps
 * (escapes, non-ASCII, every optional part), refusing what jansson would refuse. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/jsonw.h"
#include "server/api/api.h"
#include "tests/harness/t.h"

static struct task *task_new(void)
{
	struct task *t = gwb_calloc(1, sizeof *t);
	snprintf(t->id, sizeof t->id, "t-abcdefgh2345");
	snprintf(t->team, sizeof t->team, "alpha");
	snprintf(t->name, sizeof t->name, "n\xc3\xa9\"e");
	snprintf(t->qos, sizeof t->qos, "LS");
	snprintf(t->experiment, sizeof t->experiment, "normal");
	snprintf(t->job_name, sizeof t->job_name, "gwb-t-abcdefgh2345");
	t->state = TASK_QUEUED;
	t->gpu_memory_mib = t->reserved_mem_mib = 1024;
	t->gpu_core_percent = t->reserved_core_percent = 25;
	t->gpu_count = 1;
	t->duration_seconds = 60;
	t->created_at = t->updated_at = 1764540000123;
	return t;
}

/* The view's text dumped as it was built equals the text with its keys sorted. */
static void same_unsorted(const struct task *t, int detail)
{
	json_t *v = detail ? api_task_detail_view(t) : api_task_view(t);
	CHECK(v != NULL);
	size_t flags = JSON_COMPACT | JSON_ENCODE_ANY;
	static char sorted[8192], as_built[8192];
	size_t n = json_dumpb(v, sorted, sizeof sorted - 1, flags | JSON_SORT_KEYS);
	size_t m = json_dumpb(v, as_built, sizeof as_built - 1, flags);
	CHECK(n > 0 && n < sizeof sorted && m == n);
	sorted[n] = as_built[m] = '\0';
	CHECKF(strcmp(sorted, as_built) == 0, "sorted:   %s\nas built: %s", sorted, as_built);
	json_decref(v);
}

/* Moves t further on: a Job and a Pod, an exit code, released, cancelled on request, an
 * idempotency key, a later update. */
static void further_on(struct task *t, int exit_code)
{
	snprintf(t->idempotency_key, sizeof t->idempotency_key, "key-1");
	snprintf(t->job_uid, sizeof t->job_uid, "uid-j");
	snprintf(t->pod_name, sizeof t->pod_name, "gwb-t-abcdefgh2345-x");
	snprintf(t->pod_uid, sizeof t->pod_uid, "uid-p");
	snprintf(t->pod_node, sizeof t->pod_node, "node");
	snprintf(t->pod_phase, sizeof t->pod_phase, "Running");
	snprintf(t->pod_deleted_at, sizeof t->pod_deleted_at, "2026-11-30T21:00:00Z");
	snprintf(t->reason, sizeof t->reason, "cancelled");
	snprintf(t->release_reason, sizeof t->release_reason, "job_suspended");
	t->has_exit_code = 1;
	t->exit_code = exit_code;
	t->job_suspended = 1;
	t->released = 1;
	t->has_released_at = 1;
	t->released_at = 1764540009000;
	t->has_cancel_requested_at = 1;
	t->cancel_requested_at = 1764540005000;
	t->updated_at = 1764540009000;
	t->state = TASK_CANCELLED;
}

/* The text api_task_view_write gives equals the view dumped as every reply is. */
static void same_text(const struct task *t, int detail)
{
	json_t *v = detail ? api_task_detail_view(t) : api_task_view(t);
	CHECK(v != NULL);
	char *want = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
	json_decref(v);
	struct jw w;
	jw_init(&w);
	CHECK_INT(api_task_view_write(t, detail, &w), 0);
	CHECK(jw_ok(&w));
	CHECKF(w.len == strlen(want) && memcmp(w.buf, want, w.len) == 0,
	       "jansson: %s\nwritten: %.*s", want, (int)w.len, w.buf);
	jw_free(&w);
	gwb_free(want); /* jansson allocates through gwb_malloc (lib/alloc.c) */
}

TEST(taskview_written_text_equals_the_dumped_view)
{
	struct task *t = task_new();
	same_text(t, 0);
	same_text(t, 1);
	/* Every character class a text may hold: quotes, backslash, slash, controls (short and
	 * \u forms), DEL, two-, three- and four-byte UTF-8. */
	snprintf(t->name, sizeof t->name, "a\"b\\c/d\x01\x1f\b\f\n\r\t\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	snprintf(t->idempotency_key, sizeof t->idempotency_key, "k\"1");
	same_text(t, 1);
	further_on(t, -9);
	snprintf(t->cluster_uid, sizeof t->cluster_uid, "c-1");
	t->updated_at++;
	same_text(t, 0);
	same_text(t, 1);
	/* The reasons with a sentence, a Pod's deadline. */
	snprintf(t->reason, sizeof t->reason, "%s", task_reason_name(TASK_REASON_CLUSTER_WAIT));
	t->has_pod_deadline_at = 1;
	t->pod_deadline_at = 1764540060000;
	t->state = TASK_UNKNOWN;
	same_text(t, 1);
	snprintf(t->reason, sizeof t->reason, "%s", task_reason_name(TASK_REASON_CLUSTER_REPLACED));
	same_text(t, 1);
	/* What jansson would refuse (invalid UTF-8) and the parts from stored text are left to
	 * the dump. */
	struct jw w;
	jw_init(&w);
	snprintf(t->name, sizeof t->name, "bad\xc3");
	CHECK_INT(api_task_view_write(t, 1, &w), -1);
	jw_free(&w);
	snprintf(t->name, sizeof t->name, "ok");
	snprintf(t->allocation, sizeof t->allocation, "{}");
	jw_init(&w);
	CHECK_INT(api_task_view_write(t, 1, &w), -1);
	jw_free(&w);
	gwb_free(t);
}

TEST(taskview_keys_are_built_in_sorted_order)
{
	struct task *t = task_new();
	CHECK(api_task_view_sorted(t));
	same_unsorted(t, 0);
	same_unsorted(t, 1);
	further_on(t, 143);
	CHECK(api_task_view_sorted(t));
	same_unsorted(t, 0);
	same_unsorted(t, 1);
	/* Parts built from stored text are not vouched for. */
	snprintf(t->pending_message, sizeof t->pending_message, "0/1 nodes are available");
	CHECK(!api_task_view_sorted(t));
	t->pending_message[0] = '\0';
	snprintf(t->allocation, sizeof t->allocation, "{}");
	CHECK(!api_task_view_sorted(t));
	gwb_free(t);
}

static int template_used; /* by the last same_new */

/* api_task_view_write_new's text equals api_task_view_write's (with the cancel time) for t. */
static void same_new(const struct task *t)
{
	struct jw want, got;
	jw_init(&want);
	jw_init(&got);
	int rc = api_task_view_write(t, 1, &want);
	uint64_t uses = api_task_view_template_uses();
	CHECK_INT(api_task_view_write_new(t, &got), rc);
	template_used = api_task_view_template_uses() - uses;
	if (rc == 0)
		CHECKF(want.len == got.len && memcmp(want.buf, got.buf, want.len) == 0,
		       "writer:   %.*s\ntemplate: %.*s", (int)want.len, want.buf, (int)got.len,
		       got.buf);
	jw_free(&want);
	jw_free(&got);
}

/* A new task's view from the template cut out of the first one: byte for byte the writer's
 * for new tasks whatever their holes hold (every character class, empty texts, a key or
 * none, other numbers and times), and for tasks that are not new (any other field changed,
 * an update later than the creation), which the writer serves; what the writer refuses
 * (invalid UTF-8) is refused too. */
TEST(taskview_new_task_from_the_template_equals_the_writer)
{
	struct task *t = task_new();
	same_new(t); /* cuts the template, and uses it */
	CHECK_INT(template_used, 1);
	static const char *const texts[] = { "", "x", "a\"b\\c/d\x01\x1f\b\f\n\r\t\x7f",
					     "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
					     "t-zzzzzzzzzzzz" };
	for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
		struct task *n = task_new();
		snprintf(n->id, sizeof n->id, "%s", texts[i]);
		snprintf(n->name, sizeof n->name, "%s%s", texts[i], "n");
		snprintf(n->team, sizeof n->team, "%s", texts[(i + 1) % 5]);
		snprintf(n->idempotency_key, sizeof n->idempotency_key, "%s", texts[(i + 2) % 5]);
		snprintf(n->job_name, sizeof n->job_name, "gwb-%s", texts[(i + 3) % 5]);
		snprintf(n->qos, sizeof n->qos, "%s", i % 2 ? "BE" : "LS");
		snprintf(n->experiment, sizeof n->experiment, "%s", texts[(i + 4) % 5]);
		n->gpu_memory_mib = (int64_t)i * 1000003;
		n->gpu_core_percent = 100 - (int64_t)i;
		n->gpu_count = (int64_t)i + 1;
		n->duration_seconds = 86400 * (int64_t)i;
		n->reserved_mem_mib = n->gpu_memory_mib * n->gpu_count;
		n->reserved_core_percent = -(int64_t)i;
		n->created_at = n->updated_at = 1764540000123 + (int64_t)i * 86400123;
		same_new(n);
		CHECK_INT(template_used, 1);
		gwb_free(n);
	}
	/* Plain texts in every hole (the template's way without a call per piece), empty ones
	 * among them, and numbers at their ends. */
	static const char *const plain[] = { "", "x", "t-zzzzzzzzzzzz", "a b~c" };
	for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		struct task *n = task_new();
		snprintf(n->id, sizeof n->id, "%s", plain[i]);
		snprintf(n->name, sizeof n->name, "%s", plain[(i + 1) % 4]);
		snprintf(n->team, sizeof n->team, "%s", plain[(i + 2) % 4]);
		snprintf(n->idempotency_key, sizeof n->idempotency_key, "%s", plain[(i + 3) % 4]);
		snprintf(n->job_name, sizeof n->job_name, "%s", plain[i]);
		snprintf(n->experiment, sizeof n->experiment, "%s", plain[(i + 1) % 4]);
		n->gpu_memory_mib = i % 2 ? INT64_MAX : 0;
		n->reserved_core_percent = i % 2 ? INT64_MIN : -1;
		n->duration_seconds = (int64_t)i * 1000000007;
		n->created_at = n->updated_at = 1764540000123 + (int64_t)i * 86400123;
		same_new(n);
		CHECK_INT(template_used, 1);
		gwb_free(n);
	}
	/* Not new: each of these is the writer's. */
	struct task *o = task_new();
	o->updated_at++;
	same_new(o);
	CHECK_INT(template_used, 0);
	gwb_free(o);
	o = task_new();
	further_on(o, 3);
	same_new(o);
	CHECK_INT(template_used, 0);
	gwb_free(o);
	o = task_new();
	snprintf(o->reason, sizeof o->reason, "%s", task_reason_name(TASK_REASON_API_UNREACHABLE));
	same_new(o);
	CHECK_INT(template_used, 0);
	gwb_free(o);
	o = task_new();
	o->has_cancel_requested_at = 1;
	o->cancel_requested_at = 1764540000999;
	same_new(o);
	CHECK_INT(template_used, 0);
	gwb_free(o);
	o = task_new();
	o->state = TASK_PENDING;
	same_new(o);
	CHECK_INT(template_used, 0);
	gwb_free(o);
	o = task_new();
	snprintf(o->name, sizeof o->name, "bad\xc3");
	same_new(o);
	gwb_free(o);
	gwb_free(t);
}
