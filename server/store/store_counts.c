/* The counters kept in memory for /metrics: tasks by state and state changes, counted from
 * the table at open and moved by each commit of this connection. */
#include "server/store/store_internal.h"

void store_counts_settle(struct store *s, int apply)
{
	for (int i = 0; i < TASK_NSTATES; i++) {
		if (apply)
			s->counts[i] += s->count_pend[i];
		s->count_pend[i] = 0;
	}
	for (int f = 0; f <= TASK_NSTATES; f++)
		for (int t = 0; t < TASK_NSTATES; t++) {
			if (apply)
				s->trans[f][t] += s->trans_pend[f][t];
			s->trans_pend[f][t] = 0;
		}
	if (apply)
		s->ob_unpub += s->ob_unpub_pend;
	s->ob_unpub_pend = 0;
}


void store_count_move(struct store *s, enum task_state from, enum task_state to)
{
	int now = sqlite3_get_autocommit(s->db);
	int64_t *c = now ? s->counts : s->count_pend;
	if (from >= 0 && from < TASK_NSTATES)
		c[from]--;
	if (to >= 0 && to < TASK_NSTATES)
		c[to]++;
	if (to >= 0 && to < TASK_NSTATES && from != to) {
		int row = from >= 0 && from < TASK_NSTATES ? (int)from : TASK_NSTATES;
		(now ? s->trans : s->trans_pend)[row][to]++;
	}
}


void store_task_counts(struct store *s, int64_t *counts)
{
	for (int i = 0; i < TASK_NSTATES; i++)
		counts[i] = s->counts[i];
}

int64_t store_task_transitions(struct store *s, enum task_state from, enum task_state to)
{
	int row = from >= 0 && from < TASK_NSTATES ? (int)from : TASK_NSTATES;
	return to >= 0 && to < TASK_NSTATES ? s->trans[row][to] : 0;
}
