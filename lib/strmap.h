/* A map from NUL-terminated strings to pointers: a chained hash table that doubles as it
 * fills, for in-memory indexes keyed by an id (the reconciler's operations by task id). It
 * copies its keys and borrows its values; iteration order is unspecified. */
#ifndef GWB_STRMAP_H
#define GWB_STRMAP_H

#include <stddef.h>
#include <stdint.h>

struct strmap;

/* The hash the map files a key under (64-bit FNV-1a), for other tables keyed by a string. */
uint64_t strmap_hash(const char *s);

/* Creates an empty map. Returns it (free with strmap_free). */
struct strmap *strmap_new(void);
/* Frees the map and its copies of the keys, not the values. Accepts NULL. */
void strmap_free(struct strmap *m);

/* The value stored under key, or NULL when there is none. */
void *strmap_get(const struct strmap *m, const char *key);
/* Stores value (not NULL) under key, replacing any value there; the map keeps a copy of key.
 * Returns the value replaced, or NULL when key was new. */
void *strmap_put(struct strmap *m, const char *key, void *value);
/* Removes key. Returns its value, or NULL when there was none. */
void *strmap_del(struct strmap *m, const char *key);
/* Number of keys. */
size_t strmap_count(const struct strmap *m);

#endif
