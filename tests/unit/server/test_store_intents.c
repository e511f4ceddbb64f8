/* The store's count of failed intent attempts (migration 4): per intent, one more per call,
 * kept across a reopen (a restart), apart from the intent's outcome and its deliveries. */
#include <stdio.h>

#include "lib/log.h"
#include "server/store.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN; /* migrations log at info on every fresh file */
}

static struct store *open_store(const char *path)
{
	struct store *s = NULL;
	char err[256];
	int rc = store_open(&s, path, 10000, err, sizeof err);
	CHECKF(rc == 0, "store_open: %s", err);
	return s;
}

TEST(store_intent_failures_counted_per_intent_across_reopen)
{
	const char *db = h_path("failures.db");
	struct store *s = open_store(db);
	CHECK(store_schema_latest() >= 4);
	struct intent_rx a = { 7, "create", "t-a", "1-1", "me", 1 };
	struct intent_rx b = { 8, "cancel", "t-b", "1-2", "me", 9 };
	int64_t n = -1;
	CHECK_INT(store_intent_failure_add(s, &a, "EBUSY", 1000, &n), 0);
	CHECK_INT(n, 1);
	CHECK_INT(store_intent_failure_add(s, &a, "EDB", 2000, &n), 0);
	CHECK_INT(n, 2);
	/* Another intent has its own count, whatever its deliveries. */
	CHECK_INT(store_intent_failure_add(s, &b, "EDB", 2000, &n), 0);
	CHECK_INT(n, 1);
	/* A failure count is not an outcome: the intent is still to be handled. */
	CHECK_INT(store_intent_outcome_exists(s, 7), 0);
	store_close(s);
	s = open_store(db);
	CHECK_INT(store_intent_failure_add(s, &a, "EDB", 3000, &n), 0);
	CHECK_INT(n, 3);
	store_close(s);
}
