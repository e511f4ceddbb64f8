/* The per-token request limit: an open-addressed table of token buckets. Only authenticated
 * tokens reach it (teams and the admin), so the table is sized for them; when it is full, the
 * bucket idle the longest is reused, which can only make that token's limit more lenient. */
#include "server/api/ratelimit.h"

#include <string.h>

#include "lib/alloc.h"

/* Buckets kept: far more than the teams one server serves; probing stays short. */
#define RL_SLOTS 1024
#define RL_PROBE 16

struct bucket {
	unsigned char key[32];
	int used;
	double tokens;
	int64_t last_ms;
};

struct ratelimit {
	double per_ms, burst;
	struct bucket slots[RL_SLOTS];
};

struct ratelimit *ratelimit_new(int64_t per_s, int64_t burst)
{
	struct ratelimit *rl = gwb_calloc(1, sizeof *rl);
	rl->per_ms = (double)(per_s > 0 ? per_s : 1) / 1000.0;
	rl->burst = (double)(burst > 0 ? burst : 1);
	return rl;
}

void ratelimit_free(struct ratelimit *rl)
{
	gwb_free(rl);
}

/* The bucket of key: its own, a free one, or the one idle the longest among the probed. */
static struct bucket *find(struct ratelimit *rl, const unsigned char *key)
{
	uint32_t h;
	memcpy(&h, key, sizeof h); /* a SHA-256: any four bytes are well spread */
	struct bucket *oldest = NULL;
	for (int i = 0; i < RL_PROBE; i++) {
		struct bucket *b = &rl->slots[(h + (uint32_t)i) % RL_SLOTS];
		if (b->used && memcmp(b->key, key, sizeof b->key) == 0)
			return b;
		if (!b->used) {
			oldest = b;
			break;
		}
		if (!oldest || b->last_ms < oldest->last_ms)
			oldest = b;
	}
	memcpy(oldest->key, key, sizeof oldest->key);
	oldest->used = 0;
	return oldest;
}

int ratelimit_take(struct ratelimit *rl, const unsigned char *key, int64_t now_ms,
		   int64_t *retry_after_s)
{
	struct bucket *b = find(rl, key);
	if (!b->used) {
		b->used = 1;
		b->tokens = rl->burst;
		b->last_ms = now_ms;
	}
	if (now_ms > b->last_ms) {
		b->tokens += (double)(now_ms - b->last_ms) * rl->per_ms;
		if (b->tokens > rl->burst)
			b->tokens = rl->burst;
		b->last_ms = now_ms;
	}
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
		return 1;
	}
	double wait_ms = (1.0 - b->tokens) / rl->per_ms;
	int64_t s = (int64_t)(wait_ms / 1000.0);
	if ((double)s * 1000.0 < wait_ms)
		s++;
	*retry_after_s = s < 1 ? 1 : s;
	return 0;
}
