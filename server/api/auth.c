/* Authentication of /v1 requests: the bearer token's SHA-256 (through a memo of recent
 * tokens) against the admin's and the teams' token hashes, then the per-token request
 * limit; and of the operator's /metrics and detailed /readyz (the admin or metrics token). */
#include "server/api/auth.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/clock.h"
#include "lib/strmap.h"
#include "server/api/api.h"
#include "server/api/ratelimit.h"

void auth_start(struct auth_state *a, const struct gwb_config *cfg)
{
	if (cfg->admin_token[0]) {
		http_sha256(cfg->admin_token, strlen(cfg->admin_token), a->admin_hash);
		a->has_admin = 1;
	}
	if (cfg->http_metrics_token[0]) {
		http_sha256(cfg->http_metrics_token, strlen(cfg->http_metrics_token),
			    a->metrics_hash);
		a->has_metrics = 1;
	}
	if (cfg->http_rate_limit_per_s > 0)
		a->rl = ratelimit_new(cfg->http_rate_limit_per_s, cfg->http_rate_limit_burst);
}

void auth_stop(struct auth_state *a)
{
	ratelimit_free(a->rl);
	a->rl = NULL;
}

int auth_is_admin_hash(const struct auth_state *a, const unsigned char *hash)
{
	return a->has_admin && CRYPTO_memcmp(hash, a->admin_hash, sizeof a->admin_hash) == 0;
}

/* The SHA-256 of bearer token tok, from the memo when it was seen lately: the same few tokens
 * come again and again, and hashing each is a visible part of a submission's cost. The slot is
 * chosen by the token's strmap_hash and the comparison is constant-time over the whole slot,
 * so the memo's timing tells nothing of a token beyond whether it is there. */
static void token_hash(struct auth_state *a, const char *tok, unsigned char out[32])
{
	size_t n = strlen(tok);
	if (n == 0 || n > AUTH_MEMO_BYTES) {
		http_sha256(tok, n, out);
		return;
	}
	struct auth_memo *m = &a->memo[strmap_hash(tok) % AUTH_MEMO_SLOTS];
	char padded[AUTH_MEMO_BYTES] = { 0 };
	memcpy(padded, tok, n);
	/* Constant-time, a word at a time (CRYPTO_memcmp goes a byte at a time). */
	uint64_t diff = m->len ^ n;
	for (size_t i = 0; i < sizeof padded; i += 8) {
		uint64_t x, y;
		memcpy(&x, m->tok + i, 8);
		memcpy(&y, padded + i, 8);
		diff |= x ^ y;
	}
	if (diff == 0) {
		memcpy(out, m->hash, 32);
		return;
	}
	http_sha256(tok, n, out);
	m->len = n;
	memcpy(m->tok, padded, sizeof padded);
	memcpy(m->hash, out, 32);
}

/* Authenticates the bearer token: the admin's, or a team's (looked up by its SHA-256). Returns
 * 1, or 0 after replying 401. */
static int authenticate(struct req *r)
{
	const char *h = http_header(r, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0 || !h[7]) {
		http_add_header(r, "WWW-Authenticate", "Bearer");
		http_reply_error(r, 401, "unauthorized", "an Authorization: Bearer token is required",
				 NULL);
		return 0;
	}
	const char *tok = h + 7;
	unsigned char hash[SHA256_DIGEST_LENGTH];
	token_hash(&r->api->auth, tok, hash);
	if (auth_is_admin_hash(&r->api->auth, hash)) {
		r->is_admin = 1;
		return 1;
	}
	/* Teams are found by the hash of their token; only hashes are stored, and the lookup's
	 * timing can reveal nothing about a token beyond its hash. */
	if (store_team_by_token(r->api->store, hash, r->team, sizeof r->team) == 0)
		return 1;
	http_add_header(r, "WWW-Authenticate", "Bearer error=\"invalid_token\"");
	http_reply_error(r, 401, "unauthorized", "the token is not valid", NULL);
	return 0;
}

/* The per-token request limit (http.rate_limit_*): 1 when r may go on, or 0 after replying 429
 * with Retry-After. The admin is exempt unless http.rate_limit_admin says otherwise. */
static int rate_ok(struct req *r)
{
	const struct gwb_config *cfg = r->api->cfg;
	struct auth_state *a = &r->api->auth;
	if (!a->rl || (r->is_admin && !cfg->http_rate_limit_admin))
		return 1;
	const char *tok = http_header(r, "Authorization") + 7; /* authenticate checked it */
	unsigned char hash[SHA256_DIGEST_LENGTH];
	token_hash(a, tok, hash);
	int64_t wait_s = 1;
	if (ratelimit_take(a->rl, hash, clock_mono_ms(), &wait_s))
		return 1;
	char ra[24];
	snprintf(ra, sizeof ra, "%lld", (long long)wait_s);
	http_add_header(r, "Retry-After", ra);
	http_reply_error(r, 429, "rate_limited", "too many requests with this token; retry later",
			 json_pack("{s:I, s:I}", "retry_after_seconds", (json_int_t)wait_s,
				   "limit_per_second", (json_int_t)cfg->http_rate_limit_per_s));
	return 0;
}

int auth_admit(struct req *r)
{
	return authenticate(r) && rate_ok(r);
}

int auth_is_operator(struct req *r)
{
	const char *h = http_header(r, "Authorization");
	if (!h || strncasecmp(h, "Bearer ", 7) != 0 || !h[7])
		return 0;
	struct auth_state *a = &r->api->auth;
	unsigned char hash[SHA256_DIGEST_LENGTH];
	token_hash(a, h + 7, hash);
	return auth_is_admin_hash(a, hash) ||
	       (a->has_metrics &&
		CRYPTO_memcmp(hash, a->metrics_hash, sizeof a->metrics_hash) == 0);
}

int auth_admit_operator(struct req *r)
{
	if (auth_is_operator(r))
		return 1;
	http_add_header(r, "WWW-Authenticate", "Bearer");
	http_reply_error(r, 401, "unauthorized",
			 "the admin's or the metrics token (http.metrics_token) is required", NULL);
	return 0;
}
