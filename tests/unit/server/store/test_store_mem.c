/* SQLite's memory through the pool (server/store/store_mem.c): installed only before SQLite starts,
 * the sizes SQLite is told its blocks have, a freed block taken back through SQLite's own
 * functions, and a store that works over it. */
#include <sqlite3.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "server/store/store.h"
#include "server/store/store_internal.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

TEST(store_mem_sqlite_allocates_through_the_pool)
{
	CHECK_INT(store_mem_install(), 0);
	CHECK_INT(sqlite3_initialize(), SQLITE_OK);
	CHECK_INT(store_mem_install(), -1); /* too late now: SQLite says so */
	static const struct {
		int ask, got;
	} sizes[] = { { 1, 32 }, { 33, 64 }, { 4096, 4096 }, { 100000, 100000 } };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		void *p = sqlite3_malloc(sizes[i].ask);
		CHECK(p != NULL);
		CHECK_INT(sqlite3_msize(p), sizes[i].got);
		sqlite3_free(p);
	}
	void *a = sqlite3_malloc(100);
	sqlite3_free(a);
	CHECK(sqlite3_malloc(120) == a);
	char *r = sqlite3_realloc(a, 3000);
	CHECK_INT(sqlite3_msize(r), 4096);
	sqlite3_free(r);

	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, h_path("mem.db"), 1000, err, sizeof err) == 0, "%s", err);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 400, NULL, clock_now_ms(), &created), 0);
	CHECK_INT(created, 1);
	store_close(s);
}
