/* The teams' part of struct store (store_teams.c): the tokens found, and a batch's team totals
 * (kept by store_tasks.c's submissions, written by the batch's hooks). */
#ifndef GWB_STORE_TEAMS_H
#define GWB_STORE_TEAMS_H

#include <stdint.h>

#include "server/store/store_batch.h"

/* Team tokens remembered by store_team_by_token (direct-mapped by the hash's first byte). */
#define STORE_TOKEN_CACHE 64
/* How long a remembered token is trusted after the read that found it: a change this
 * connection makes empties the cache at once; this bounds how long a change written by
 * another process (another server on the same file) can go unseen. */
#define STORE_TOKEN_TTL_MS 1000

struct store_teams {
	/* Tokens found in the teams table, so that a request authenticates without a read
	 * transaction: the SHA-256 (never the token), its team, and the monotonic time of the
	 * read (0: the slot is empty). */
	struct store_token {
		unsigned char hash[32];
		char team[64];
		int64_t read_ms;
	} tokens[STORE_TOKEN_CACHE];
	/* A batch's team: the totals of the team its last submission was for, as read from the
	 * row, and what the batch's submissions have reserved for it since, written with one
	 * UPDATE when the batch commits or moves to another team, not one per submission.
	 * stale: another statement wrote the teams table since the read (the update hook), so
	 * the next submission reads the row again (without the additions, which are not written
	 * yet). pend_sp: pend when the batch's current unit began. */
	struct store_team_pend {
		char team[64];
		int64_t quota_mem, quota_core, reserved_mem, reserved_core;
		int64_t add_mem, add_core, updated_at;
		int read, stale;
	} pend, pend_sp;
};

/* The teams' batch hooks: the pending totals kept per unit, written at the batch's commit
 * (store_team_flush), forgotten at its start and end (store_team_forget). */
extern const struct store_batch_hooks store_team_batch_hooks;

#endif
