/* The lab's first four experiments: idempotent submission (with what a new key after a
 * time-out does), same-card sharing, the over-limit failure and insufficient capacity. Also
 * the table of every experiment. */
#include <stdio.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "tools/gwb-lab/exp.h"

const struct exp_def exp_table[] = {
    {"idempotent-submission", exp_idempotent, 0},
    {"same-card-sharing", exp_sharing, 0},
    {"over-limit", exp_overlimit, 0},
    {"insufficient-capacity", exp_capacity, 0},
    {"cancel-and-reclaim", exp_cancel, 0},
    {"restart-recovery", exp_restart, NEED_RESTART},
    {"fragmentation-resolved", exp_fragmentation, 0},
    {"device-health-change", exp_health, NEED_FAULTS},
    {"ls-be", exp_lsbe, 0},
    {"no-release-cases", exp_norelease, NEED_FAULTS},
    {"timeout-after-create", exp_timeout, NEED_FAULTS},
    {NULL, NULL, 0},
};

int exp_count(void)
{
	int n = 0;
	while (exp_table[n].name)
		n++;
	return n;
}

/* The rules of idempotent submission (docs/API.md), as predictions. */
static void predict_idempotent(struct lab *l)
{
	lab_predict(l, "first.status", json_integer(201), "a key never seen: a new task");
	lab_predict(l, "replay.status", json_integer(200), "the same key and parameters");
	lab_predict(l, "replay.same_task", json_true(), "a replay returns the first task");
	lab_predict(l, "replay.idempotent_replayed", json_true(), "the replay says so in a header");
	lab_predict(l, "conflict.status", json_integer(409), "the same key, other parameters");
	lab_predict(l, "conflict.error", json_string("idempotency_key_reused"), "docs/API.md");
	lab_predict(l, "new_key_after_timeout.status", json_integer(201),
	            "key b is a different submission for the server");
	lab_predict(l, "new_key_after_timeout.second_task", json_true(),
	            "request 1 was committed; its answer was lost, not its task");
	lab_predict(l, "new_key_after_timeout.tasks", json_integer(2), "two tasks");
	lab_predict(l, "new_key_after_timeout.reserved_added_mib", json_integer(2048),
	            "two reservations of 1024 MiB");
	lab_predict(l, "retry_with_key_a.status", json_integer(200),
	            "key a returns the first task whatever happened to its answer");
	lab_predict(l, "retry_with_key_a.same_task", json_true(), "the first task");
}

int exp_idempotent(struct lab *l)
{
	if (!lab_need_quota(l, 2048, 50))
		return 0;
	json_t *body = lab_body(l, 1024, 25, 60, "LS", "normal");
	json_t *other = lab_body(l, 2048, 25, 60, "LS", "normal");
	/* Keys are kept a day per team: a run's keys must be new, even against a running stack. */
	char key_a[64], key_b[64];
	long long now = (long long)clock_now_ms();
	snprintf(key_a, sizeof key_a, "lab-%lld-a", now);
	snprintf(key_b, sizeof key_b, "lab-%lld-b", now);
	json_object_set_new(json_object_get(l->rec, "parameters"), "keys",
	                    json_pack("{s:s, s:s}", "a", key_a, "b", key_b));
	long long before = lab_reserved_mib(l);

	json_decref(lab_predict_placement(l, "first", body));
	predict_idempotent(l);

	struct httpc_resp r;
	char first[40] = "", second[40] = "";
	long s = lab_submit(l, "submit key a", body, key_a, &r);
	snprintf(first, sizeof first, "%s", lab_str(r.json, "id") ? lab_str(r.json, "id") : "");
	httpc_resp_free(&r);
	lab_observe(l, "first.status", json_integer(s));

	s = lab_submit(l, "replay key a", body, key_a, &r);
	lab_observe(l, "replay.status", json_integer(s));
	const char *rid = lab_str(r.json, "id");
	lab_observe(l, "replay.same_task", json_boolean(rid && strcmp(rid, first) == 0));
	lab_observe(l, "replay.idempotent_replayed", json_boolean(r.replayed));
	httpc_resp_free(&r);

	s = lab_submit(l, "key a, other parameters", other, key_a, &r);
	lab_observe(l, "conflict.status", json_integer(s));
	lab_observe(l, "conflict.error", json_string(httpc_error_code(&r)));
	httpc_resp_free(&r);

	lab_say(l, "the client timed out on key a (its answer is treated as lost) and retries "
	           "with a new key b");
	s = lab_submit(l, "retry with new key b", body, key_b, &r);
	snprintf(second, sizeof second, "%s", lab_str(r.json, "id") ? lab_str(r.json, "id") : "");
	httpc_resp_free(&r);
	lab_observe(l, "new_key_after_timeout.status", json_integer(s));
	lab_observe(l, "new_key_after_timeout.second_task",
	            json_boolean(second[0] && strcmp(second, first) != 0));
	lab_observe(l, "new_key_after_timeout.tasks",
	            json_integer((json_int_t)json_array_size(l->mine)));
	lab_observe(l, "new_key_after_timeout.reserved_added_mib",
	            json_integer(lab_reserved_mib(l) - before));

	s = lab_submit(l, "retry with key a", body, key_a, &r);
	rid = lab_str(r.json, "id");
	lab_observe(l, "retry_with_key_a.status", json_integer(s));
	lab_observe(l, "retry_with_key_a.same_task", json_boolean(rid && strcmp(rid, first) == 0));
	httpc_resp_free(&r);

	if (first[0]) {
		json_t *t = lab_wait(l, first, "state", "running", 30000);
		char buf[96];
		lab_observe_placement(l, "first", lab_task_summary(t, buf, sizeof buf));
		lab_capture_logs(l, first);
		json_decref(t);
	}
	json_decref(body);
	json_decref(other);
	return 0;
}

/* The allocation annotation on the Pod itself, as the scheduler wrote it (new string), or
 * NULL. */
static json_t *pod_annotation(struct lab *l, const char *id)
{
	json_t *pods = lab_kube_of(l, "pods", id);
	json_t *a = lab_get(pods, "0.metadata.annotations");
	json_t *v = json_object_get(a, "scheduling.koordinator.sh/device-allocated");
	json_t *out = v ? json_incref(v) : NULL;
	json_decref(pods);
	return out;
}

int exp_sharing(struct lab *l)
{
	if (!lab_need_quota(l, 3072, 75))
		return 0;
	lab_predict(l, "shared_card", json_true(),
	            "three tasks on two cards: at least two share one (per-card accounting)");
	lab_predict(l, "tasks_on_cards", json_integer(3),
	            "/v1/devices lists each task on its card");
	lab_predict(l, "pod_annotation_is_task_allocation", json_true(),
	            "the task's allocation is the Pod's device-allocated annotation");
	char ids[3][40];
	long long minor[3] = {-1, -2, -3};
	int same_annotation = 1;
	for (int i = 0; i < 3; i++) {
		char label[16];
		snprintf(label, sizeof label, "task%d", i + 1);
		json_t *body = lab_body(l, 1024, 25, 120, "LS", "normal");
		json_t *t = lab_start(l, label, body, ids[i], sizeof ids[i]);
		json_decref(body);
		if (!t)
			return 0;
		minor[i] = json_integer_value(lab_get(t, "allocation.cards.0.minor"));
		json_t *pa = pod_annotation(l, ids[i]);
		json_t *ta = lab_get(t, "allocation.annotation");
		same_annotation &= pa && ta && json_equal(pa, ta);
		json_decref(pa);
		json_decref(t);
	}
	lab_observe(
	    l, "shared_card",
	    json_boolean(minor[0] == minor[1] || minor[1] == minor[2] || minor[0] == minor[2]));
	struct httpc_resp r;
	lab_api(l, "devices", "GET", "/v1/devices", NULL, &r);
	long long on_cards = 0;
	size_t i;
	json_t *c;
	json_array_foreach (json_object_get(r.json, "cards"), i, c) {
		size_t j;
		json_t *tk;
		json_array_foreach (json_object_get(c, "tasks"), j, tk) {
			const char *tid =
			    json_is_string(tk) ? json_string_value(tk) : lab_str(tk, "task");
			if (!tid)
				tid = lab_str(tk, "id");
			for (int k = 0; k < 3; k++)
				on_cards += tid && strcmp(tid, ids[k]) == 0;
		}
	}
	lab_measure(l, "devices", json_incref(json_object_get(r.json, "cards")));
	httpc_resp_free(&r);
	lab_observe(l, "tasks_on_cards", json_integer(on_cards));
	lab_observe(l, "pod_annotation_is_task_allocation", json_boolean(same_annotation));
	/* The node's total says nothing of which card: keep it beside the per-card view. */
	json_t *node = lab_kube_get(l, "/api/v1/nodes/colima-gwb");
	lab_measure(l, "node_allocatable", json_incref(lab_get(node, "status.allocatable")));
	json_decref(node);
	return 0;
}

/* The first worker log event named ev in the captured excerpt, borrowed, or NULL. */
static json_t *log_event(struct lab *l, const char *id, const char *ev)
{
	size_t i;
	json_t *o;
	json_array_foreach (json_object_get(l->logs, id), i, o) {
		const char *e = lab_str(o, "event");
		if (e && strcmp(e, ev) == 0)
			return o;
	}
	return NULL;
}

int exp_overlimit(struct lab *l)
{
	if (!lab_need_quota(l, 1024, 25))
		return 0;
	long long before = lab_reserved_mib(l);
	lab_predict(l, "state", json_string("failed"), "the ledger refuses budget + 128 MiB");
	lab_predict(l, "pod.exit_code", json_integer(42), "the worker's exit code for a refusal");
	lab_predict(l, "pod.reason", json_string("simulated_limit_rejected"), "the worker's log");
	lab_predict(l, "log.simulated_limit_rejected", json_true(), "the worker logs the refusal");
	lab_predict(l, "log.isolation_event", json_true(), "the worker reports what it observes");
	lab_predict(l, "isolation.enforced", json_false(),
	            "no libvgpu.so is mapped and no CUDA driver refuses anything here");
	lab_predict(l, "reservation.release_reason", json_string("job_failed"),
	            "podFailurePolicy fails the Job at once; released once the Pod is terminal");
	lab_predict(l, "reserved_back_to_before", json_true(), "the release gives the quota back");
	json_t *body = lab_body(l, 1024, 25, 30, "LS", "overlimit");
	char id[40];
	json_t *t = lab_start(l, "task", body, id, sizeof id);
	json_decref(body);
	json_decref(t);
	if (!t)
		return 0;
	t = lab_wait(l, id, "state", "failed", 30000);
	json_decref(t);
	t = lab_wait(l, id, "reservation.released", "true", 30000);
	if (!t)
		return 0;
	lab_capture_logs(l, id);
	lab_observe(l, "state", json_incref(lab_get(t, "state")));
	lab_observe(l, "pod.exit_code", json_incref(lab_get(t, "pod.exit_code")));
	lab_observe(l, "pod.reason", json_incref(lab_get(t, "pod.reason")));
	json_t *rej = log_event(l, id, "simulated_limit_rejected");
	json_t *iso = log_event(l, id, "isolation");
	lab_observe(l, "log.simulated_limit_rejected", json_boolean(rej != NULL));
	lab_observe(l, "log.isolation_event", json_boolean(iso != NULL));
	const char *verdict = lab_str(iso, "verdict");
	lab_observe(l, "isolation.enforced",
	            json_boolean(verdict && strcmp(verdict, "enforced") == 0));
	lab_measure(l, "isolation_verdict", verdict ? json_string(verdict) : json_null());
	lab_observe(l, "reservation.release_reason",
	            json_incref(lab_get(t, "reservation.release_reason")));
	lab_observe(l, "reserved_back_to_before", json_boolean(lab_reserved_mib(l) == before));
	json_decref(t);
	return 0;
}

int exp_capacity(struct lab *l)
{
	char path[96];
	snprintf(path, sizeof path, "/v1/teams/%s", l->team);
	struct httpc_resp r;
	lab_api(l, "team", "GET", path, NULL, &r);
	long long quota = json_integer_value(lab_get(r.json, "quota.gpu_memory_mib"));
	long long reserved = json_integer_value(lab_get(r.json, "reserved.gpu_memory_mib"));
	httpc_resp_free(&r);
	lab_api(l, "devices", "GET", "/v1/devices", NULL, &r);
	long long largest = 0;
	size_t i;
	json_t *c;
	json_array_foreach (json_object_get(r.json, "cards"), i, c) {
		long long m = json_integer_value(lab_get(c, "total.gpu_memory_mib"));
		largest = m > largest ? m : largest;
	}
	httpc_resp_free(&r);
	/* Above what the quota leaves: refused at the door. Within the quota but above the largest
	 * card: admitted, and pending for ever. */
	long long over = quota - reserved + 2048, big = largest + 1024;
	json_object_set_new(json_object_get(l->rec, "parameters"), "requests",
	                    json_pack("{s:I, s:I, s:I, s:I}", "over_quota_mib", (json_int_t)over,
	                              "over_card_mib", (json_int_t)big, "quota_mib",
	                              (json_int_t)quota, "largest_card_mib", (json_int_t)largest));
	json_t *b_over = lab_body(l, (int)over, 25, 60, "LS", "normal");
	json_t *b_big = lab_body(l, (int)big, 25, 60, "LS", "normal");
	json_decref(lab_predict_placement(l, "over_quota", b_over));
	lab_predict(l, "over_quota.status", json_integer(403), "requested > quota - reserved");
	lab_predict(l, "over_quota.error", json_string("quota_exceeded"), "docs/API.md");
	lab_predict(l, "over_quota.numbers", json_true(),
	            "the refusal gives requested, reserved and quota");
	long s = lab_submit(l, "over quota", b_over, NULL, &r);
	lab_observe(l, "over_quota.status", json_integer(s));
	lab_observe(l, "over_quota.error", json_string(httpc_error_code(&r)));
	json_t *err = json_object_get(r.json, "error");
	lab_observe(l, "over_quota.numbers",
	            json_boolean(json_object_get(err, "requested") &&
	                         json_object_get(err, "reserved") &&
	                         json_object_get(err, "quota")));
	lab_measure(l, "over_quota_refusal", json_incref(err));
	char summary[96];
	snprintf(summary, sizeof summary, "refused:%s", httpc_error_code(&r));
	lab_observe_placement(l, "over_quota", summary);
	httpc_resp_free(&r);

	lab_predict(l, "over_card.status", json_integer(201),
	            "the quota holds it: the quota is a budget, not a card");
	lab_predict(l, "over_card.diagnosis", json_string("card_capacity"),
	            "no card is that large; more quota would not help");
	char id[40];
	json_t *t = lab_start(l, "over_card", b_big, id, sizeof id);
	lab_observe(l, "over_card.status", json_integer(t ? 201 : 0));
	lab_observe(l, "over_card.diagnosis",
	            t && lab_get(t, "pending.diagnosis.kind")
	                ? json_incref(lab_get(t, "pending.diagnosis.kind"))
	                : json_null());
	lab_measure(l, "over_card_pending", t ? json_incref(lab_get(t, "pending")) : json_null());
	json_decref(t);
	json_decref(b_over);
	json_decref(b_big);
	return 0;
}
