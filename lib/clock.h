/* Time helpers: wall clock and monotonic milliseconds, RFC 3339 formatting. */
#ifndef GWB_CLOCK_H
#define GWB_CLOCK_H

#include <stddef.h>
#include <stdint.h>

/* Milliseconds since the Unix epoch (wall clock). */
int64_t clock_now_ms(void);
/* Milliseconds of a monotonic clock, for time-outs and intervals. */
int64_t clock_mono_ms(void);
/* Microseconds of the same clock, for durations. */
int64_t clock_mono_us(void);
/* Writes "2026-11-30T04:42:43.123Z" into buf. Returns buf. */
char *clock_fmt_rfc3339_ms(int64_t ms, char *buf, size_t len);
/* Writes "2026-11-30T04:42:43Z" (second precision, as Kubernetes metadata uses). Returns buf. */
char *clock_fmt_rfc3339(int64_t ms, char *buf, size_t len);
/* Parses an RFC 3339 UTC time ("...Z", optional fraction). Returns 0 and *ms, or GWB_EINVAL. */
int clock_parse_rfc3339(const char *s, int64_t *ms);

#endif
