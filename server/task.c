/* The task model's pure parts: the lifecycle table read by name, flag and transition, the
 * reasons, proofs and events by name, the moves every decider starts from, and the Job name
 * of a task. */
#include "server/task.h"

#include <stdio.h>
#include <string.h>

static const struct {
	const char *name;
	unsigned flags;
	unsigned next; /* bit TASK_x set: x is a legal next state */
} states[TASK_NSTATES] = {
#define TASK_STATE_ROW(id, name_, kind, next_) [TASK_##id] = { name_, TASK_KIND_##kind, next_ },
	TASK_STATES(TASK_STATE_ROW)
#undef TASK_STATE_ROW
};

static int in_table(enum task_state s)
{
	return (int)s >= 0 && s < TASK_NSTATES;
}

const char *task_state_name(enum task_state s)
{
	return in_table(s) ? states[s].name : "?";
}

enum task_state task_state_parse(const char *name)
{
	if (!name)
		return TASK_NONE;
	for (int i = 0; i < TASK_NSTATES; i++)
		if (strcmp(states[i].name, name) == 0)
			return (enum task_state)i;
	return TASK_NONE;
}

unsigned task_state_flags(enum task_state s)
{
	return in_table(s) ? states[s].flags : 0;
}

int task_state_is(enum task_state s, unsigned flags)
{
	return in_table(s) && (states[s].flags & flags) == flags;
}

unsigned task_flags(enum task_state s, int released)
{
	unsigned f = task_state_flags(s);
	if ((f & TASK_AWAITS_RELEASE) && !released)
		f |= TASK_ACTIVE | TASK_HOLDS_QUOTA;
	return f;
}

int task_transition_ok(enum task_state from, enum task_state to)
{
	if (!in_table(to) || !in_table(from))
		return 0;
	if (from == to)
		return 1;
	return (states[from].next >> to) & 1u;
}

char *task_states_json(unsigned with, unsigned without, char *buf, size_t len)
{
	size_t used = 0;
	int n = 0;
	if (len == 0)
		return buf;
	buf[0] = '\0';
	used += (size_t)snprintf(buf, len, "[");
	for (int i = 0; i < TASK_NSTATES && used < len; i++) {
		if ((states[i].flags & with) != with || (states[i].flags & without))
			continue;
		/* State names are plain lowercase words: nothing to escape. */
		used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", n++ ? "," : "",
					 states[i].name);
	}
	if (used < len)
		snprintf(buf + used, len - used, "]");
	return buf;
}

static const char *const reasons[TASK_NREASONS] = {
#define TASK_REASON_ROW(id, text) [TASK_REASON_##id] = text,
	TASK_REASONS(TASK_REASON_ROW)
#undef TASK_REASON_ROW
};

const char *task_reason_name(enum task_reason r)
{
	return (int)r >= 0 && r < TASK_NREASONS ? reasons[r] : NULL;
}

int task_reason_is(const char *text, enum task_reason r)
{
	const char *name = task_reason_name(r);
	return text && name && strcmp(text, name) == 0;
}

static const char *const proofs[TASK_NPROOFS] = {
#define TASK_PROOF_ROW(id, text) [TASK_PROOF_##id] = text,
	TASK_PROOFS(TASK_PROOF_ROW)
#undef TASK_PROOF_ROW
};

const char *task_proof_name(enum task_proof p)
{
	return (int)p >= 0 && p < TASK_NPROOFS ? proofs[p] : "?";
}

static const char *const events[TASK_NEVENTS] = {
#define TASK_EVENT_ROW(id, text) [TASK_EVENT_##id] = text,
	TASK_EVENTS(TASK_EVENT_ROW)
#undef TASK_EVENT_ROW
};

const char *task_event_name(enum task_event_type e)
{
	return (int)e >= 0 && e < TASK_NEVENTS ? events[e] : "?";
}

struct task_move task_stay(const struct task *t)
{
	struct task_move m = { t->state, TASK_REASON_KEEP, TASK_EVENT_STATE, NULL };
	return m;
}

int task_take(const struct task *t, enum task_event_type event, const struct json_t *detail,
	      struct task_move *m)
{
	if (t->state != TASK_QUEUED)
		return 0;
	m->to = TASK_CREATING;
	m->reason = TASK_REASON_KEEP;
	m->event = event;
	m->detail = detail;
	return 1;
}

int task_cancel(const struct task *t, struct task_move *m)
{
	if (!task_state_is(t->state, TASK_CANCELLABLE))
		return 0;
	int waiting = t->state == TASK_WAITING;
	m->to = waiting ? TASK_CANCELLED : TASK_CANCELLING;
	m->reason = waiting ? TASK_REASON_CANCELLED : TASK_REASON_KEEP;
	m->event = TASK_EVENT_CANCEL;
	m->detail = NULL;
	return 1;
}

char *task_job_name(const char *task_id, char *out, size_t len)
{
	/* What snprintf(out, len, "gwb-%s", task_id) writes (cut short the same way). */
	static const char prefix[] = "gwb-";
	if (!len)
		return out;
	size_t n = strlen(task_id), p = sizeof prefix - 1;
	size_t room = len - 1;
	size_t take_p = p < room ? p : room;
	memcpy(out, prefix, take_p);
	size_t take_id = n < room - take_p ? n : room - take_p;
	memcpy(out + take_p, task_id, take_id);
	out[take_p + take_id] = '\0';
	return out;
}

int task_of_name(const char *name, int pod, char *out, size_t len)
{
	if (!name || strncmp(name, "gwb-", 4) != 0)
		return -1;
	const char *id = name + 4;
	size_t n = strlen(id);
	if (pod) {
		/* Pod "gwb-<task id>-xxxxx": the task id sits between the prefix and the last dash. */
		const char *dash = strrchr(id, '-');
		if (!dash)
			return -1;
		n = (size_t)(dash - id);
	}
	if (n == 0 || n >= len)
		return -1;
	snprintf(out, len, "%.*s", (int)n, id);
	return 0;
}

#define CLEAR_TEXT(t, f) (t)->f[0] = '\0';
#define CLEAR_INT(t, f) (t)->f = 0;
#define CLEAR_BOOL(t, f) (t)->f = 0;
#define CLEAR_OPT(t, f) (t)->f = 0; (t)->has_##f = 0;
#define CLEAR_STATE(t, f) (t)->f = TASK_NONE;

void task_clear(struct task *t)
{
#define CLEAR(kind, f, tbl, col, size, role) CLEAR_##kind(t, f)
	TASK_COLUMNS(CLEAR)
#undef CLEAR
	t->loaded_state = TASK_NONE;
	t->changed = 0;
}

void task_set_text(struct task *t, char *field, size_t size, const char *v)
{
	if (!v)
		v = "";
	if (strncmp(field, v, size - 1) == 0)
		return; /* equal as far as the field can hold: storing it again changes nothing */
	snprintf(field, size, "%s", v);
	t->changed = 1;
}

void task_set_int(struct task *t, int64_t *field, int64_t v)
{
	if (*field != v) {
		*field = v;
		t->changed = 1;
	}
}

void task_set_bool(struct task *t, int *field, int v)
{
	v = v != 0;
	if (*field != v) {
		*field = v;
		t->changed = 1;
	}
}

int task_cancel_requested(const struct task *t)
{
	return t->has_cancel_requested_at || t->state == TASK_CANCELLING;
}
