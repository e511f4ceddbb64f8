/* The store's reads for the live stream (GET /v1/stream): the task event history in id order,
 * each event with the task's state as of that event, so a reader can follow every change from
 * any event id on. Kept apart from store.h so the stream needs no change to the store's core. */
#ifndef GWB_STORE_STREAM_H
#define GWB_STORE_STREAM_H

#include <stdint.h>

#include "server/store/store.h"

/* One task event as the stream sends it. */
struct store_stream_row {
	int64_t id;             /* task_events.id: increasing, the stream's resume point */
	int64_t ts_ms;          /* when the event was recorded */
	int64_t created_ms;     /* the task's creation */
	char task[32];
	char team[64];
	char type[32];          /* event type: submitted, state, released, scheduler_event, ... */
	char state[16];         /* the task's state as of this event ("" when none recorded yet) */
	char reason[128];       /* the task's reason, when this event's state is its current one */
	char name[129];
	int64_t gpu_memory_mib, gpu_core_percent, gpu_count;
};

/* Fills out with up to max events whose id is above after, oldest first; team NULL means every
 * team. Returns how many (>= 0) or GWB_EDB. */
int store_stream_events(struct store *s, int64_t after, const char *team, struct store_stream_row *out,
			int max);
/* The highest task event id (0 when there is none) into *head. 0 or GWB_EDB. */
int store_stream_head(struct store *s, int64_t *head);

#endif
