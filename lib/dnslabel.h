/* The DNS label rule of RFC 1123 as Kubernetes names use it (lowercase letters, digits and
 * '-', starting and ending with a letter or digit, a bounded length): the one check behind
 * team names, namespaces and the path segments the tools send. */
#ifndef GWB_DNSLABEL_H
#define GWB_DNSLABEL_H

#include <stddef.h>

/* The RFC 1123 bound on a label's length. */
#define DNSLABEL_MAX 63

/* Flags of dnslabel_valid. */
enum {
	/* Also accept '-' as the first or last byte (the tools' looser pre-check, which leaves
	 * the final word to the server). */
	DNSLABEL_EDGE_HYPHEN = 1u << 0,
};

/* 1 when the n bytes at s are 1..max of a-z, 0-9 and '-', not starting or ending with '-'
 * unless flags has DNSLABEL_EDGE_HYPHEN; 0 otherwise. s need not be NUL-terminated. */
int dnslabel_valid(const char *s, size_t n, size_t max, unsigned flags);

/* dnslabel_valid on the NUL-terminated s with the RFC 1123 bound and no flags. */
int dnslabel_is(const char *s);

#endif
