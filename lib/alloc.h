/* The one allocation wrapper: every heap allocation of the project goes through here, so
 * live bytes can be reported on /metrics and tests can make the Nth fallible allocation fail. */
#ifndef GWB_ALLOC_H
#define GWB_ALLOC_H

#include <stddef.h>

/* Allocate n bytes. Never returns NULL: on exhaustion it prints a message and aborts,
 * since a control plane that limps on after OOM corrupts more than it saves. */
void *gwb_malloc(size_t n);
void *gwb_calloc(size_t count, size_t size);
void *gwb_realloc(void *p, size_t n);
char *gwb_strdup(const char *s);
/* Copies at most n bytes of s and NUL-terminates. */
char *gwb_strndup(const char *s, size_t n);
/* Accepts NULL. */
void gwb_free(void *p);

/* Fallible allocation for sizes that come from outside (a body, a payload): returns NULL on
 * exhaustion, or when the test hook below says so. The caller must handle NULL. */
void *gwb_try_malloc(size_t n);

/* Bytes currently allocated through this wrapper (including jansson's, see gwb_alloc_init). */
size_t gwb_alloc_bytes(void);

/* Test hook: the nth call to gwb_try_malloc from now on (1 = the next) returns NULL.
 * 0 turns the hook off. */
void gwb_alloc_fail_nth(long nth);

/* Routes jansson's allocations through this wrapper. Call once at start-up. */
void gwb_alloc_init(void);

#endif
