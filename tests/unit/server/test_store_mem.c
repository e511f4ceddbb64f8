/* SQLite's allocator of size classes (server/store_mem.c), through SQLite's own functions:
 * the sizes SQLite is told it got, a freed block taken back by the next allocation of its
 * class, a realloc that keeps what the block held whichever classes it moves between, and a
 * thread's listed blocks given back when it exits (AddressSanitizer's leak check sees them
 * otherwise). A store opened afterwards works over it. */
#include <pthread.h>
#include <sqlite3.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/log.h"
#include "server/store.h"
#include "server/store_internal.h"
#include "tests/harness/harness.h"
#include "tests/harness/t.h"

__attribute__((constructor)) static void quiet(void)
{
	log_level_min = LOG_WARN;
}

TEST(store_mem_classes_sizes_and_reuse)
{
	CHECK_INT(store_mem_install(), 0);
	CHECK_INT(sqlite3_initialize(), SQLITE_OK);
	CHECK_INT(store_mem_install(), -1); /* too late now: SQLite says so */
	static const struct {
		int ask, got;
	} sizes[] = { { 1, 32 }, { 32, 32 }, { 33, 64 }, { 200, 256 }, { 4096, 4096 },
		      { 4097, 4104 }, { 100000, 100000 } };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		void *p = sqlite3_malloc(sizes[i].ask);
		CHECK(p != NULL);
		CHECK_INT(sqlite3_msize(p), sizes[i].got);
		memset(p, 0x5a, (size_t)sizes[i].got); /* all of it is the caller's */
		sqlite3_free(p);
	}
	/* The last block freed of a class is the next one given out. */
	void *a = sqlite3_malloc(100), *b = sqlite3_malloc(100);
	CHECK(a != b);
	sqlite3_free(a);
	CHECK(sqlite3_malloc(120) == a);
	sqlite3_free(b);
	sqlite3_free(a);
	CHECK(sqlite3_malloc(90) == a);
	sqlite3_free(a);
}

TEST(store_mem_realloc_keeps_contents)
{
	CHECK_INT(store_mem_install(), 0);
	char *p = sqlite3_malloc(40);
	memcpy(p, "0123456789", 11);
	CHECK(sqlite3_realloc(p, 60) == p); /* the same class: the same block */
	p = sqlite3_realloc(p, 3000);       /* to a bigger class */
	CHECK_STR(p, "0123456789");
	CHECK_INT(sqlite3_msize(p), 4096);
	memset(p + 10, 'x', 3000 - 10); /* over the NUL too */
	p = sqlite3_realloc(p, 20000); /* beyond the classes */
	CHECK_INT(sqlite3_msize(p), 20000);
	CHECK_INT(p[3000 - 1], 'x');
	p[3000 - 1] = 'y';
	p = sqlite3_realloc(p, 50000); /* from big to bigger */
	CHECK(memcmp(p, "0123456789xx", 12) == 0);
	CHECK_INT(p[3000 - 2], 'x');
	CHECK_INT(p[3000 - 1], 'y');
	p = sqlite3_realloc(p, 16); /* back down into the smallest class */
	CHECK_INT(sqlite3_msize(p), 32);
	CHECK(memcmp(p, "0123456789xxxxxx", 16) == 0);
	sqlite3_free(p);
}

static void *churn(void *arg)
{
	(void)arg;
	void *p[500];
	for (int i = 0; i < 500; i++)
		p[i] = sqlite3_malloc(16 + i * 8);
	for (int i = 0; i < 500; i++)
		sqlite3_free(p[i]);
	return NULL;
}

TEST(store_mem_threads_and_a_store_over_it)
{
	CHECK_INT(store_mem_install(), 0);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		CHECK_INT(pthread_create(&t[i], NULL, churn, NULL), 0);
	churn(NULL);
	for (int i = 0; i < 2; i++)
		CHECK_INT(pthread_join(t[i], NULL), 0);
	struct store *s = NULL;
	char err[256];
	CHECKF(store_open(&s, h_path("mem.db"), 1000, err, sizeof err) == 0, "%s", err);
	int created;
	CHECK_INT(store_team_put(s, "alpha", 10240, 400, NULL, clock_now_ms(), &created), 0);
	CHECK_INT(created, 1);
	store_close(s);
}
