/* The counters kept in memory for /metrics: tasks by state, state changes and the intents not
 * published, counted from the tables at open and moved by each commit of this connection. */
#include <string.h>

#include "server/store/store_internal.h"

int store_counts_open(struct store *s)
{
	return store_task_state_counts(s, s->counters.counts);
}

void store_counts_save(struct store *s)
{
	memcpy(s->counters.sp, s->counters.pend, sizeof s->counters.sp);
	memcpy(s->counters.trans_sp, s->counters.trans_pend, sizeof s->counters.trans_sp);
	s->counters.unpub_sp = s->counters.unpub_pend;
}

void store_counts_undo(struct store *s)
{
	memcpy(s->counters.pend, s->counters.sp, sizeof s->counters.pend);
	memcpy(s->counters.trans_pend, s->counters.trans_sp, sizeof s->counters.trans_pend);
	s->counters.unpub_pend = s->counters.unpub_sp;
}

void store_counts_settle(struct store *s, int apply)
{
	for (int i = 0; i < TASK_NSTATES; i++) {
		if (apply)
			s->counters.counts[i] += s->counters.pend[i];
		s->counters.pend[i] = 0;
	}
	for (int f = 0; f <= TASK_NSTATES; f++)
		for (int t = 0; t < TASK_NSTATES; t++) {
			if (apply)
				s->counters.trans[f][t] += s->counters.trans_pend[f][t];
			s->counters.trans_pend[f][t] = 0;
		}
	if (apply)
		s->counters.unpub += s->counters.unpub_pend;
	s->counters.unpub_pend = 0;
}

void store_count_move(struct store *s, enum task_state from, enum task_state to)
{
	int now = sqlite3_get_autocommit(s->db);
	int64_t *c = now ? s->counters.counts : s->counters.pend;
	if (from >= 0 && from < TASK_NSTATES)
		c[from]--;
	if (to >= 0 && to < TASK_NSTATES)
		c[to]++;
	if (to >= 0 && to < TASK_NSTATES && from != to) {
		int row = from >= 0 && from < TASK_NSTATES ? (int)from : TASK_NSTATES;
		(now ? s->counters.trans : s->counters.trans_pend)[row][to]++;
	}
}

void store_task_counts(struct store *s, int64_t *counts)
{
	for (int i = 0; i < TASK_NSTATES; i++)
		counts[i] = s->counters.counts[i];
}

int64_t store_task_transitions(struct store *s, enum task_state from, enum task_state to)
{
	int row = from >= 0 && from < TASK_NSTATES ? (int)from : TASK_NSTATES;
	return to >= 0 && to < TASK_NSTATES ? s->counters.trans[row][to] : 0;
}
