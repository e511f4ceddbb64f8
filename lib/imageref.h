/* Container image references by the Docker reference grammar (distribution/reference):
 * [domain[:port]/]path[:tag][@sha256:digest], so a submission's image is checked before a Job
 * carries it, and a team's allowed prefixes are matched at component boundaries. */
#ifndef GWB_IMAGEREF_H
#define GWB_IMAGEREF_H

#include <stddef.h>

/* Bounds of the grammar: a name (domain and path) of at most 255 bytes, a tag of 128. */
#define IMAGEREF_NAME_MAX 255
#define IMAGEREF_TAG_MAX 128
/* The longest reference: name, ':' tag, '@sha256:' and 64 hex digits. */
#define IMAGEREF_MAX (IMAGEREF_NAME_MAX + 1 + IMAGEREF_TAG_MAX + 8 + 64)

/* 1 when s is a reference: an optional domain (a first component holding '.' or ':', or
 * "localhost"; DNS-like parts, an optional numeric port), path components of lowercase
 * letters and digits joined by '.', '_', "__" or runs of '-', then an optional tag
 * ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127}) and an optional sha256 digest (64 lowercase hex).
 * Otherwise 0 and, when why is not NULL, the rule it broke (a static text). */
int imageref_valid(const char *s, const char **why);

/* 1 when reference ref starts with prefix at a component boundary: the prefix ends with '/',
 * ':' or '@', or ref's next byte is one of those or its end ("reg.io/team" covers
 * "reg.io/team/app:1" and "reg.io/team:2", not "reg.io/team2"). An empty prefix matches
 * nothing. */
int imageref_has_prefix(const char *ref, const char *prefix);

/* 1 when prefix may be an allowed-images prefix: 1..IMAGEREF_MAX bytes of the characters a
 * reference holds (letters, digits, '.', '_', '-', '/', ':', '@'). */
int imageref_prefix_valid(const char *prefix);

#endif
