/* Allocation wrapper: a size header in front of every block keeps the live-byte count exact.
 * The blocks come from lib/pool.h: the requests of a batch allocate and free many small ones
 * together (jansson's values of each body, among them). Under AddressSanitizer the pool
 * class's bytes past the n asked for are poisoned, so an overrun is still found. */
#include "lib/alloc.h"

#include <jansson.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/pool.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* The bytes of base's pool block after the header and the n bytes asked for. */
#define SLACK_AT(base, n) ((unsigned char *)(base) + HDR + (n))
#define SLACK_LEN(base, n) (pool_size(base) - HDR - (n))
#define POISON_SLACK(base, n) ASAN_POISON_MEMORY_REGION(SLACK_AT(base, n), SLACK_LEN(base, n))
#define UNPOISON_SLACK(base, n) \
	ASAN_UNPOISON_MEMORY_REGION(SLACK_AT(base, n), SLACK_LEN(base, n))
#else
#define POISON_SLACK(base, n) ((void)(base), (void)(n))
#define UNPOISON_SLACK(base, n) ((void)(base), (void)(n))
#endif

/* 16 bytes keep the user pointer aligned for any type malloc would align for. */
#define HDR 16

static atomic_size_t live_bytes;
static atomic_long fail_countdown;

static void *raw_alloc(size_t n, int may_fail)
{
	if (n > SIZE_MAX - HDR) {
		if (may_fail)
			return NULL;
		fprintf(stderr, "gwb: allocation of %zu bytes overflows\n", n);
		abort();
	}
	unsigned char *p = pool_alloc(n + HDR);
	if (!p) {
		if (may_fail)
			return NULL;
		fprintf(stderr, "gwb: out of memory allocating %zu bytes\n", n);
		abort();
	}
	memcpy(p, &n, sizeof n);
	POISON_SLACK(p, n);
	atomic_fetch_add(&live_bytes, n);
	return p + HDR;
}

void *gwb_malloc(size_t n)
{
	return raw_alloc(n, 0);
}

void *gwb_try_malloc(size_t n)
{
	long c = atomic_load(&fail_countdown);
	if (c > 0 && atomic_fetch_sub(&fail_countdown, 1) == 1)
		return NULL;
	return raw_alloc(n, 1);
}

void *gwb_calloc(size_t count, size_t size)
{
	if (size && count > SIZE_MAX / size) {
		fprintf(stderr, "gwb: %zu elements of %zu bytes overflow\n", count, size);
		abort();
	}
	void *p = raw_alloc(count * size, 0);
	memset(p, 0, count * size);
	return p;
}

void gwb_free(void *p)
{
	if (!p)
		return;
	unsigned char *base = (unsigned char *)p - HDR;
	size_t n;
	memcpy(&n, base, sizeof n);
	atomic_fetch_sub(&live_bytes, n);
	UNPOISON_SLACK(base, n);
	pool_free(base);
}

void *gwb_realloc(void *p, size_t n)
{
	if (!p)
		return gwb_malloc(n);
	unsigned char *base = (unsigned char *)p - HDR;
	size_t old;
	memcpy(&old, base, sizeof old);
	if (n > SIZE_MAX - HDR) {
		fprintf(stderr, "gwb: realloc to %zu bytes overflows\n", n);
		abort();
	}
	UNPOISON_SLACK(base, old);
	unsigned char *nb = pool_realloc(base, n + HDR);
	if (!nb) {
		fprintf(stderr, "gwb: out of memory reallocating to %zu bytes\n", n);
		abort();
	}
	memcpy(nb, &n, sizeof n);
	POISON_SLACK(nb, n);
	atomic_fetch_sub(&live_bytes, old);
	atomic_fetch_add(&live_bytes, n);
	return nb + HDR;
}

char *gwb_strdup(const char *s)
{
	return gwb_strndup(s, strlen(s));
}

char *gwb_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = gwb_malloc(len + 1);
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

size_t gwb_alloc_bytes(void)
{
	return atomic_load(&live_bytes);
}

void gwb_alloc_fail_nth(long nth)
{
	atomic_store(&fail_countdown, nth);
}

void gwb_alloc_init(void)
{
	json_set_alloc_funcs(gwb_malloc, gwb_free);
}
