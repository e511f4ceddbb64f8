/* SQLite's memory through lib/pool.h's free lists of size classes.
 *
 * Debian's SQLite is built without its lookaside allocator (SQLITE_OMIT_LOOKASIDE), so every
 * cursor, record and statement buffer of every statement is a malloc and a free. Through the
 * pool a freed block of up to 4 KiB is taken back by the next allocation of its class. */
#include "server/store/store_internal.h"

#include <sqlite3.h>

#include "lib/pool.h"

static void *mem_malloc(int n)
{
	return n > 0 ? pool_alloc((size_t)n) : NULL;
}

static void *mem_realloc(void *p, int n)
{
	return n > 0 ? pool_realloc(p, (size_t)n) : NULL; /* SQLite frees, never reallocs to 0 */
}

static int mem_size(void *p)
{
	return (int)pool_size(p);
}

static int mem_roundup(int n)
{
	return n > 0 ? (int)pool_roundup((size_t)n) : n;
}

static int mem_init(void *arg)
{
	(void)arg;
	return SQLITE_OK;
}

static void mem_shutdown(void *arg)
{
	(void)arg;
	pool_thread_release();
}

int store_mem_install(void)
{
	static const sqlite3_mem_methods methods = {
		mem_malloc, pool_free, mem_realloc, mem_size, mem_roundup, mem_init, mem_shutdown,
		NULL,
	};
	return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) == SQLITE_OK ? 0 : -1;
}
