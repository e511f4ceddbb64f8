/* The simulated ledger. */
#include "worker/ledger.h"

#include <string.h>

#include "lib/err.h"

void ledger_init(struct ledger *l, int64_t budget)
{
	l->budget = budget < 0 ? 0 : budget;
	l->used = 0;
	l->chunks = 0;
}

int ledger_reserve(struct ledger *l, int64_t n)
{
	if (n <= 0)
		return GWB_EINVAL;
	/* Written as a subtraction so a huge n cannot overflow the sum. */
	if (n > l->budget - l->used)
		return GWB_EQUOTA;
	l->used += n;
	l->chunks++;
	return 0;
}

int64_t ledger_working_set(int64_t budget, const char *experiment)
{
	if (strcmp(experiment, "overlimit") == 0)
		return budget > INT64_MAX - LEDGER_OVERLIMIT_EXTRA
		           ? INT64_MAX
		           : budget + LEDGER_OVERLIMIT_EXTRA;
	return budget / 4 * 3;
}

int ledger_fill(struct ledger *l, int64_t working_set, int64_t chunk, struct ledger_result *r)
{
	memset(r, 0, sizeof *r);
	r->working_set = working_set;
	r->budget = l->budget;
	if (chunk <= 0)
		return GWB_EINVAL;
	int64_t left = working_set;
	int rc = 0;
	while (left > 0) {
		int64_t n = left < chunk ? left : chunk;
		rc = ledger_reserve(l, n);
		if (rc != 0) {
			r->refused = 1;
			r->requested = n;
			break;
		}
		left -= n;
	}
	r->used = l->used;
	r->chunks = l->chunks;
	return rc;
}
