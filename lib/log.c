/* Structured logger: formats the fixed fields, escapes outside data, writes whole lines. */
#include "lib/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"

int log_level_min = LOG_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error", "off" };

int log_level_parse(const char *s)
{
	for (int i = 0; i <= LOG_OFF; i++)
		if (strcmp(s, level_names[i]) == 0)
			return i;
	return -1;
}

void log_emit(int level, const char *mod, const char *event, const char *fmt, ...)
{
	char line[2048];
	char ts[40];
	clock_fmt_rfc3339_ms(clock_now_ms(), ts, sizeof ts);
	int n = snprintf(line, sizeof line, "ts=%s level=%s mod=%s event=%s", ts,
			 level_names[level < 0 || level > LOG_OFF ? LOG_ERROR : level], mod, event);
	if (n < 0)
		return;
	if ((size_t)n < sizeof line - 2 && fmt && fmt[0]) {
		line[n++] = ' ';
		va_list ap;
		va_start(ap, fmt);
		int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
		va_end(ap);
		if (m > 0)
			n += m;
	}
	if ((size_t)n >= sizeof line - 1)
		n = (int)sizeof line - 2; /* cut, but keep the newline */
	line[n++] = '\n';
	fwrite(line, 1, (size_t)n, stderr);
}

const char *log_q(const char *s)
{
	static _Thread_local char ring[8][420];
	static _Thread_local unsigned slot;
	char *out = ring[slot++ % 8];
	if (!s)
		return "-";
	size_t o = 0;
	int need_quote = s[0] == '\0';
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p == '"' || *p == '=' || *p == '\\' || *p >= 0x7f)
			need_quote = 1;
	if (!need_quote) {
		snprintf(out, 201, "%s", s);
		return out;
	}
	out[o++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p && o < 400; p++) {
		if (*p == '"' || *p == '\\') {
			out[o++] = '\\';
			out[o++] = (char)*p;
		} else if (*p < ' ' || *p == 0x7f) {
			o += (size_t)snprintf(out + o, 5, "\\x%02x", *p);
		} else {
			out[o++] = (char)*p;
		}
		if (p - (const unsigned char *)s >= 200)
			break;
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}
