/* The string map of lib/strmap.h: separate chaining over a power-of-two bucket array, FNV-1a
 * hashes kept beside each key so that growing never hashes again. */
#include "lib/strmap.h"

#include <stdint.h>
#include <string.h>

#include "lib/alloc.h"

/* Buckets at creation; the array doubles when the keys outnumber the buckets, so a chain
 * averages at most one entry. */
#define STRMAP_MIN_BUCKETS 64

struct strmap_entry {
	uint64_t hash;
	void *value;
	struct strmap_entry *next;
	char key[]; /* NUL-terminated copy */
};

struct strmap {
	struct strmap_entry **buckets;
	size_t nbuckets; /* a power of two */
	size_t count;
};

uint64_t strmap_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a 64-bit offset basis and prime */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

struct strmap *strmap_new(void)
{
	struct strmap *m = gwb_calloc(1, sizeof *m);
	m->nbuckets = STRMAP_MIN_BUCKETS;
	m->buckets = gwb_calloc(m->nbuckets, sizeof *m->buckets);
	return m;
}

void strmap_free(struct strmap *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct strmap_entry *e = m->buckets[i];
		while (e) {
			struct strmap_entry *next = e->next;
			gwb_free(e);
			e = next;
		}
	}
	gwb_free(m->buckets);
	gwb_free(m);
}

static struct strmap_entry **find(const struct strmap *m, const char *key, uint64_t h)
{
	struct strmap_entry **pp = &m->buckets[h & (m->nbuckets - 1)];
	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->hash == h && strcmp((*pp)->key, key) == 0)
			break;
	return pp;
}

static void grow(struct strmap *m)
{
	if (m->nbuckets > SIZE_MAX / 2 / sizeof *m->buckets)
		return; /* longer chains rather than an overflowing size */
	size_t n = m->nbuckets * 2;
	struct strmap_entry **b = gwb_calloc(n, sizeof *b);
	for (size_t i = 0; i < m->nbuckets; i++) {
		struct strmap_entry *e = m->buckets[i];
		while (e) {
			struct strmap_entry *next = e->next;
			e->next = b[e->hash & (n - 1)];
			b[e->hash & (n - 1)] = e;
			e = next;
		}
	}
	gwb_free(m->buckets);
	m->buckets = b;
	m->nbuckets = n;
}

void *strmap_get(const struct strmap *m, const char *key)
{
	struct strmap_entry *e = *find(m, key, strmap_hash(key));
	return e ? e->value : NULL;
}

void *strmap_put(struct strmap *m, const char *key, void *value)
{
	uint64_t h = strmap_hash(key);
	struct strmap_entry **pp = find(m, key, h);
	if (*pp) {
		void *old = (*pp)->value;
		(*pp)->value = value;
		return old;
	}
	size_t len = strlen(key);
	struct strmap_entry *e = gwb_malloc(sizeof *e + len + 1);
	e->hash = h;
	e->value = value;
	memcpy(e->key, key, len + 1);
	e->next = *pp;
	*pp = e;
	if (++m->count > m->nbuckets)
		grow(m);
	return NULL;
}

void *strmap_del(struct strmap *m, const char *key)
{
	struct strmap_entry **pp = find(m, key, strmap_hash(key));
	struct strmap_entry *e = *pp;
	if (!e)
		return NULL;
	void *value = e->value;
	*pp = e->next;
	gwb_free(e);
	m->count--;
	return value;
}

size_t strmap_count(const struct strmap *m)
{
	return m->count;
}
