/* Time helpers. */
#include "lib/clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/err.h"

int64_t clock_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Writes v as n decimal digits (zero-padded) at p. */
static void digits(char *p, int v, int n)
{
	for (int i = n - 1; i >= 0; i--) {
		p[i] = (char)('0' + v % 10);
		v /= 10;
	}
}

char *clock_fmt_rfc3339_ms(int64_t ms, char *buf, size_t len)
{
	time_t sec = (time_t)(ms / 1000);
	struct tm tm;
	gmtime_r(&sec, &tm);
	int year = tm.tm_year + 1900, milli = (int)(ms % 1000);
	if (len < 25 || year < 0 || year > 9999 || milli < 0) {
		snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", year, tm.tm_mon + 1,
			 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, milli);
		return buf;
	}
	/* What the format above writes, digit by digit: one is written for every time a task
	 * view shows, and a format parsed each time cost more than the rest of the view. */
	digits(buf, year, 4);
	buf[4] = '-';
	digits(buf + 5, tm.tm_mon + 1, 2);
	buf[7] = '-';
	digits(buf + 8, tm.tm_mday, 2);
	buf[10] = 'T';
	digits(buf + 11, tm.tm_hour, 2);
	buf[13] = ':';
	digits(buf + 14, tm.tm_min, 2);
	buf[16] = ':';
	digits(buf + 17, tm.tm_sec, 2);
	buf[19] = '.';
	digits(buf + 20, milli, 3);
	buf[23] = 'Z';
	buf[24] = '\0';
	return buf;
}

char *clock_fmt_rfc3339(int64_t ms, char *buf, size_t len)
{
	/* The millisecond form with its ".mmm" dropped: one formatter for both. */
	char full[64];
	clock_fmt_rfc3339_ms(ms, full, sizeof full);
	char *dot = strrchr(full, '.');
	if (dot) {
		dot[0] = 'Z';
		dot[1] = '\0';
	}
	snprintf(buf, len, "%s", full);
	return buf;
}

int clock_parse_rfc3339(const char *s, int64_t *ms)
{
	struct tm tm;
	memset(&tm, 0, sizeof tm);
	const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!p)
		return GWB_EINVAL;
	int64_t frac = 0;
	if (*p == '.') {
		int digits = 0;
		for (p++; *p >= '0' && *p <= '9'; p++, digits++)
			if (digits < 3)
				frac = frac * 10 + (*p - '0');
		if (digits == 0)
			return GWB_EINVAL;
		for (; digits < 3; digits++)
			frac *= 10;
	}
	if (strcmp(p, "Z") != 0)
		return GWB_EINVAL;
	*ms = (int64_t)timegm(&tm) * 1000 + frac;
	return 0;
}
