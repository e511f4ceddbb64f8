/* SQLite's memory, in size classes kept on free lists.
 *
 * Debian's SQLite is built without its lookaside allocator (SQLITE_OMIT_LOOKASIDE), so every
 * cursor, record and statement-journal buffer of every statement is a malloc and a free:
 * about 30 of each per submission, a tenth of what a submission's SQL costs. Here a freed
 * block of up to 4 KiB goes onto a free list of its size class, and the next allocation of
 * that class takes it back: two pointer moves instead of glibc's bins. Bigger blocks, and
 * blocks beyond a class's bound, go to malloc and free as before.
 *
 * The lists belong to the thread that freed the block (thread-local, so no lock), and are
 * given back to malloc when that thread exits. Under AddressSanitizer a listed block is
 * poisoned, so that a use after free is still found. */
#include "server/store_internal.h"

#include <pthread.h>
#include <sqlite3.h>
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

/* The header in front of each block: its usable size, and its next block while listed. 16
 * bytes keep the block aligned as malloc's are (SQLite needs 8). */
struct hdr {
	uint64_t size;
	struct hdr *next;
};

#define MIN_SHIFT 5 /* the smallest class: 32 bytes */
#define NCLASS 8    /* 32, 64, ..., 4096 */
#define MAX_CLASS_SIZE ((uint64_t)1 << (MIN_SHIFT + NCLASS - 1))
/* A class keeps at most this many bytes listed: 2048 blocks of 32 bytes, 16 of 4 KiB. */
#define LIST_BYTES (64 * 1024)

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

/* The class of a block of n bytes (1 <= n <= MAX_CLASS_SIZE): the smallest that holds it. */
static int class_of(uint64_t n)
{
	if (n <= class_size(0))
		return 0;
	return 64 - __builtin_clzll(n - 1) - MIN_SHIFT;
}

static void *raw(uint64_t size)
{
	struct hdr *h = malloc(sizeof *h + size); /* banned-ok: an allocator of SQLite's own */
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
			l->head[c] = h->next;
			free(h); /* banned-ok: an allocator of SQLite's own */
		}
		l->count[c] = 0;
	}
}

static void make_exit_key(void)
{
	pthread_key_create(&exit_key, lists_drain);
}

static void *mem_malloc(int n)
{
	if (n <= 0)
		return NULL;
	if ((uint64_t)n > MAX_CLASS_SIZE)
		return raw((uint64_t)n);
	int c = class_of((uint64_t)n);
	struct hdr *h = lists.head[c];
	if (!h)
		return raw(class_size(c));
	lists.head[c] = h->next;
	lists.count[c]--;
	UNPOISON(h + 1, h->size);
	return h + 1;
}

static void mem_free(void *p)
{
	if (!p)
		return;
	struct hdr *h = (struct hdr *)p - 1;
	if (h->size > MAX_CLASS_SIZE) {
		free(h); /* banned-ok: an allocator of SQLite's own */
		return;
	}
	int c = class_of(h->size);
	if (lists.count[c] >= LIST_BYTES / h->size) {
		free(h); /* banned-ok: an allocator of SQLite's own */
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

static int mem_size(void *p)
{
	return p ? (int)((struct hdr *)p - 1)->size : 0;
}

static int mem_roundup(int n)
{
	if (n <= 0)
		return n;
	if ((uint64_t)n > MAX_CLASS_SIZE)
		return (n + 7) & ~7;
	return (int)class_size(class_of((uint64_t)n));
}

static void *mem_realloc(void *p, int n)
{
	if (!p)
		return mem_malloc(n);
	if (n <= 0)
		return NULL;
	struct hdr *h = (struct hdr *)p - 1;
	uint64_t want = (uint64_t)mem_roundup(n);
	if (want == h->size)
		return p;
	if (h->size > MAX_CLASS_SIZE && want > MAX_CLASS_SIZE) {
		struct hdr *g = realloc(h, sizeof *h + want); /* banned-ok: SQLite's allocator */
		if (!g)
			return NULL;
		g->size = want;
		return g + 1;
	}
	void *q = mem_malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, h->size < want ? h->size : want);
	mem_free(p);
	return q;
}

static int mem_init(void *arg)
{
	(void)arg;
	return SQLITE_OK;
}

static void mem_shutdown(void *arg)
{
	(void)arg;
	lists_drain(&lists);
}

int store_mem_install(void)
{
	static const sqlite3_mem_methods methods = {
		mem_malloc, mem_free, mem_realloc, mem_size, mem_roundup, mem_init, mem_shutdown,
		NULL,
	};
	return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) == SQLITE_OK ? 0 : -1;
}
