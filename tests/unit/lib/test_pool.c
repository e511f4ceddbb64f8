/* Unit tests of lib/pool.c: the sizes of the classes, a freed block taken back by the next
 * allocation of its class, a realloc that keeps what the block held whichever classes it
 * moves between, each class's bound on what it keeps, and a thread's listed blocks given
 * back when it exits (AddressSanitizer's leak check would see them otherwise). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "lib/pool.h"
#include "tests/harness/t.h"

TEST(pool_classes_sizes_and_reuse)
{
	static const struct {
		size_t ask, got;
	} sizes[] = { { 0, 32 },      { 1, 32 },       { 32, 32 },        { 33, 64 },
		      { 200, 256 },   { 1024, 1024 },  { 4096, 4096 },    { 4097, 4097 },
		      { 100000, 100000 } };
	for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
		void *p = pool_alloc(sizes[i].ask);
		CHECK(p != NULL);
		CHECK_INT((long long)pool_size(p), (long long)sizes[i].got);
		CHECK_INT((long long)pool_roundup(sizes[i].ask), (long long)sizes[i].got);
		CHECK_INT((long long)((uintptr_t)p % 16), 0);
		memset(p, 0x5a, sizes[i].got); /* all of it is the caller's */
		pool_free(p);
	}
	/* The last block freed of a class is the next one given out. */
	void *a = pool_alloc(100), *b = pool_alloc(100);
	CHECK(a != b);
	pool_free(a);
	CHECK(pool_alloc(120) == a);
	pool_free(b);
	pool_free(a);
	CHECK(pool_alloc(90) == a);
	CHECK(pool_alloc(90) == b);
	pool_free(a);
	pool_free(b);
	pool_free(NULL);
}

TEST(pool_realloc_keeps_contents)
{
	char *p = pool_realloc(NULL, 40);
	memcpy(p, "0123456789", 11);
	CHECK(pool_realloc(p, 60) == p); /* the same class: the same block */
	p = pool_realloc(p, 3000);       /* to a bigger class */
	CHECK_STR(p, "0123456789");
	CHECK_INT((long long)pool_size(p), 4096);
	memset(p + 10, 'x', 3000 - 10); /* over the NUL too */
	p = pool_realloc(p, 20000);     /* beyond the classes */
	CHECK_INT((long long)pool_size(p), 20000);
	CHECK_INT(p[3000 - 1], 'x');
	p[3000 - 1] = 'y';
	p = pool_realloc(p, 50000); /* from big to bigger */
	CHECK(memcmp(p, "0123456789xx", 12) == 0);
	CHECK_INT(p[3000 - 2], 'x');
	CHECK_INT(p[3000 - 1], 'y');
	p = pool_realloc(p, 16); /* back down into the smallest class */
	CHECK_INT((long long)pool_size(p), 32);
	CHECK(memcmp(p, "0123456789xxxxxx", 16) == 0);
	CHECK(pool_realloc(p, 0) == NULL); /* freed */
}

TEST(pool_classes_keep_what_their_bound_allows)
{
	pool_thread_release();
	size_t blocks, bytes;
	pool_thread_listed(&blocks, &bytes);
	CHECK_INT((long long)blocks, 0);
	static void *p[5000];
	/* 4096 blocks of 32 bytes at most, and 256 KiB of 1 KiB blocks (256 of them). */
	for (int i = 0; i < 5000; i++)
		p[i] = pool_alloc(24);
	for (int i = 0; i < 5000; i++)
		pool_free(p[i]);
	pool_thread_listed(&blocks, &bytes);
	CHECK_INT((long long)blocks, 4096);
	CHECK_INT((long long)bytes, 4096 * 32);
	for (int i = 0; i < 1000; i++)
		p[i] = pool_alloc(1000);
	for (int i = 0; i < 1000; i++)
		pool_free(p[i]);
	pool_thread_listed(&blocks, &bytes);
	CHECK_INT((long long)blocks, 4096 + 256);
	CHECK_INT((long long)bytes, 4096 * 32 + 256 * 1024);
	/* Blocks beyond the classes are never kept. */
	pool_free(pool_alloc(5000));
	pool_thread_listed(&blocks, &bytes);
	CHECK_INT((long long)blocks, 4096 + 256);
	pool_thread_release();
	pool_thread_listed(&blocks, &bytes);
	CHECK_INT((long long)blocks, 0);
}

/* Allocates and frees blocks of many classes; a block freed here that another thread
 * allocated is listed here. */
static void *churn(void *arg)
{
	void **from_main = arg;
	void *p[500];
	for (int i = 0; i < 500; i++)
		p[i] = pool_alloc(16 + (size_t)i * 8);
	for (int i = 0; i < 500; i++)
		pool_free(p[i]);
	if (from_main)
		pool_free(*from_main);
	size_t blocks, bytes;
	pool_thread_listed(&blocks, &bytes);
	return (void *)blocks;
}

TEST(pool_threads_list_their_own_and_give_them_back_at_exit)
{
	pool_thread_release();
	void *mine = pool_alloc(64);
	pthread_t t[2];
	CHECK_INT(pthread_create(&t[0], NULL, churn, &mine), 0);
	CHECK_INT(pthread_create(&t[1], NULL, churn, NULL), 0);
	void *listed[2];
	for (int i = 0; i < 2; i++)
		CHECK_INT(pthread_join(t[i], &listed[i]), 0);
	/* Each thread listed what it freed (the first one block more), and nothing of it is
	 * here: this thread's lists are still empty. */
	CHECK((size_t)listed[0] == (size_t)listed[1] + 1);
	CHECK((size_t)listed[1] > 0);
	size_t blocks, bytes;
	pool_thread_listed(&blocks, &bytes);
	CHECK_INT((long long)blocks, 0);
}
