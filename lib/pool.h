/* Free lists of size classes for short-lived blocks of up to 4 KiB: a block freed goes onto
 * the list of its class, and the next allocation of that class takes it back, two pointer
 * moves instead of the C library's bins. The lists are per thread (no lock), bounded, and
 * given back to the C library when the thread exits. Bigger blocks are the C library's.
 *
 * For allocators that hand many such blocks out at once and take them back together: SQLite
 * (Debian builds it without its own lookaside lists), libevent, whose buffers and headers of
 * a whole batch of deferred requests are live at the same time, and lib/alloc.h (jansson's
 * values of each body among them; it counts its bytes itself). glibc keeps only 7 freed
 * blocks of a size at hand (tcache), so a batch of 64 falls through to its slower bins and
 * to consolidating them. */
#ifndef GWB_POOL_H
#define GWB_POOL_H

#include <stddef.h>

/* n bytes (n may be 0), aligned as malloc's; NULL only when the C library has none. */
void *pool_alloc(size_t n);
/* Like realloc: NULL p allocates, n 0 frees (and returns NULL); the contents are kept up to
 * the smaller size; NULL when no memory (p is then untouched). */
void *pool_realloc(void *p, size_t n);
/* Accepts NULL. p must come from pool_alloc or pool_realloc (of any thread). */
void pool_free(void *p);
/* The usable size of p: what was asked, rounded up to its class. */
size_t pool_size(const void *p);
/* What pool_size would be for a block of n bytes. */
size_t pool_roundup(size_t n);
/* Gives the calling thread's listed blocks back to the C library now. */
void pool_thread_release(void);
/* How many blocks the calling thread has listed, and their bytes. */
void pool_thread_listed(size_t *blocks, size_t *bytes);

#endif
