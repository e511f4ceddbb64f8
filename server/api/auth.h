/* Authentication of /v1 requests (server/api/auth.c): the bearer token against the admin's and
 * the teams' token hashes, through a memo of the SHA-256 of tokens seen lately, then the
 * per-token request limit. */
#ifndef GWB_AUTH_H
#define GWB_AUTH_H

#include <stddef.h>

#include "config/config.h"
#include "server/api/http.h"

struct ratelimit;

/* The token memo: slots, and the longest token it keeps (longer ones are hashed each time). */
#define AUTH_MEMO_SLOTS 16
#define AUTH_MEMO_BYTES 128 /* a multiple of 8: compared a word at a time */

/* Authentication's part of the API's context (server/api/api.h), zero before auth_start. */
struct auth_state {
	unsigned char admin_hash[32]; /* SHA-256 of the admin token */
	int has_admin;
	unsigned char metrics_hash[32]; /* SHA-256 of http.metrics_token */
	int has_metrics;
	struct ratelimit *rl; /* per-token request limit; NULL when off */
	/* Bearer tokens seen lately with their SHA-256 (token_hash): a function of the token
	 * alone, so an entry is never stale. Tokens are zero-padded to the slot. */
	struct auth_memo {
		size_t len; /* 0: empty */
		char tok[AUTH_MEMO_BYTES];
		unsigned char hash[32];
	} memo[AUTH_MEMO_SLOTS];
};

/* Sets a up from cfg: the admin token's hash (when there is one) and the request limit
 * (http.rate_limit_*, when on). */
void auth_start(struct auth_state *a, const struct gwb_config *cfg);
/* Frees what auth_start made. Accepts a state that never started. */
void auth_stop(struct auth_state *a);
/* Authenticates r's bearer token (the admin's, setting r->is_admin, or a team's, setting
 * r->team) and takes one request from its limit. 1 when r may go on, or 0 after replying 401
 * or 429. */
int auth_admit(struct req *r);
/* 1 when r carries the admin's or the metrics token (http.metrics_token): who may read
 * /metrics and the detailed /readyz. Replies nothing. */
int auth_is_operator(struct req *r);
/* 1 when r may read /metrics, or 0 after replying 401 (no or another bearer token). */
int auth_admit_operator(struct req *r);
/* 1 when hash (32 bytes) is the admin token's SHA-256. */
int auth_is_admin_hash(const struct auth_state *a, const unsigned char *hash);

#endif
