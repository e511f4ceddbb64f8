/* The downward-API file format the kubelet writes for metadata.annotations and
 * metadata.labels: one `key="value"` line per entry, sorted by key, the value quoted as Go's
 * strconv.Quote does, lines joined by '\n' with no final newline. This module owns reading one
 * value out of such a file and writing one. */
#ifndef GWB_PODINFO_H
#define GWB_PODINFO_H

#include <stddef.h>

/* Finds key in text[0..len) and unquotes its value. Every line is checked, so one malformed
 * line anywhere makes the whole file malformed; empty lines and a final newline are tolerated.
 * Returns 0 with *value_out (gwb_malloc'd, NUL-terminated; the caller frees it with gwb_free),
 * GWB_ENOTFOUND when no line has the key, or GWB_EINVAL when a line is not `key="quoted"`, the
 * quoting is not valid Go syntax, the value holds a NUL byte, or the key appears twice. On
 * error *value_out is NULL. */
int podinfo_get(const char *text, size_t len, const char *key, char **value_out);

/* Formats n entries as the kubelet does: sorted by key (bytewise), values quoted like Go's
 * strconv.Quote (\" \\ \n \t \xNN for other control bytes and invalid UTF-8, \u escapes for
 * non-printable runes; printable UTF-8 kept as is). Returns a gwb_malloc'd string the caller
 * frees with gwb_free; "" when n is 0. Never NULL. */
char *podinfo_format(const char *const *keys, const char *const *values, size_t n);

#endif
