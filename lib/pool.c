/* Free lists of size classes (see pool.h). Each block has a 16-byte header in front: its
 * usable size, and its next block while it is listed; 16 bytes keep the block aligned as
 * malloc's are. Under AddressSanitizer a listed block is poisoned, so that a use after free
 * is still found. */
#include "lib/pool.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

struct hdr {
	uint64_t size;
	struct hdr *next;
};

#define MIN_SHIFT 5 /* the smallest class: 32 bytes */
#define NCLASS 8    /* 32, 64, ..., 4096 */
#define MAX_CLASS_SIZE ((uint64_t)1 << (MIN_SHIFT + NCLASS - 1))
/* A class keeps at most 4096 blocks listed, and at most 256 KiB: a batch of 64 requests
 * frees some twenty blocks of 32 bytes per request at once (its headers, SQLite's cursors
 * and records). 1.9 MiB per thread at most. */
#define LIST_BLOCKS 4096
#define LIST_BYTES (256 * 1024)

struct lists {
	struct hdr *head[NCLASS];
	unsigned count[NCLASS];
	int registered; /* the thread's exit gives them back */
};

static __thread struct lists lists;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static uint64_t class_size(int c)
{
	return (uint64_t)1 << (MIN_SHIFT + c);
}

/* The class of a block of n bytes (n <= MAX_CLASS_SIZE): the smallest that holds it. */
static int class_of(uint64_t n)
{
	if (n <= class_size(0))
		return 0;
	return 64 - __builtin_clzll(n - 1) - MIN_SHIFT;
}

static unsigned class_keeps(int c)
{
	uint64_t by_bytes = LIST_BYTES / class_size(c);
	return by_bytes < LIST_BLOCKS ? (unsigned)by_bytes : LIST_BLOCKS;
}

static void *raw(uint64_t size)
{
	struct hdr *h = malloc(sizeof *h + size); /* banned-ok: the pool's own blocks */
	if (!h)
		return NULL;
	h->size = size;
	return h + 1;
}

static void lists_drain(void *arg)
{
	struct lists *l = arg;
	for (int c = 0; c < NCLASS; c++) {
		while (l->head[c]) {
			struct hdr *h = l->head[c];
			UNPOISON(h + 1, h->size);
			l->head[c] = h->next;
			free(h); /* banned-ok: the pool's own blocks */
		}
		l->count[c] = 0;
	}
}

static void make_exit_key(void)
{
	pthread_key_create(&exit_key, lists_drain);
}

void *pool_alloc(size_t n)
{
	if (n > MAX_CLASS_SIZE)
		return n > SIZE_MAX - sizeof(struct hdr) ? NULL : raw(n);
	int c = class_of(n);
	struct hdr *h = lists.head[c];
	if (!h)
		return raw(class_size(c));
	lists.head[c] = h->next;
	lists.count[c]--;
	UNPOISON(h + 1, h->size);
	return h + 1;
}

void pool_free(void *p)
{
	if (!p)
		return;
	struct hdr *h = (struct hdr *)p - 1;
	if (h->size > MAX_CLASS_SIZE) {
		free(h); /* banned-ok: the pool's own blocks */
		return;
	}
	int c = class_of(h->size);
	if (lists.count[c] >= class_keeps(c)) {
		free(h); /* banned-ok: the pool's own blocks */
		return;
	}
	if (!lists.registered) {
		pthread_once(&exit_once, make_exit_key);
		pthread_setspecific(exit_key, &lists);
		lists.registered = 1;
	}
	POISON(p, h->size);
	h->next = lists.head[c];
	lists.head[c] = h;
	lists.count[c]++;
}

size_t pool_size(const void *p)
{
	return p ? (size_t)((const struct hdr *)p - 1)->size : 0;
}

size_t pool_roundup(size_t n)
{
	return n > MAX_CLASS_SIZE ? n : (size_t)class_size(class_of(n));
}

void *pool_realloc(void *p, size_t n)
{
	if (!p)
		return pool_alloc(n);
	if (n == 0) {
		pool_free(p);
		return NULL;
	}
	struct hdr *h = (struct hdr *)p - 1;
	uint64_t want = pool_roundup(n);
	if (want == h->size)
		return p;
	if (h->size > MAX_CLASS_SIZE && want > MAX_CLASS_SIZE) {
		if (want > SIZE_MAX - sizeof *h)
			return NULL;
		struct hdr *g = realloc(h, sizeof *h + want); /* banned-ok: the pool's own */
		if (!g)
			return NULL;
		g->size = want;
		return g + 1;
	}
	void *q = pool_alloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, h->size < want ? h->size : want);
	pool_free(p);
	return q;
}

void pool_thread_release(void)
{
	lists_drain(&lists);
}

void pool_thread_listed(size_t *blocks, size_t *bytes)
{
	*blocks = 0;
	*bytes = 0;
	for (int c = 0; c < NCLASS; c++) {
		*blocks += lists.count[c];
		*bytes += (size_t)(lists.count[c] * class_size(c));
	}
}
