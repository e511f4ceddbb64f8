/* JSON-lines logging for the worker. */
#include "worker/wlog.h"

#include <string.h>

#include "lib/alloc.h"
#include "lib/clock.h"
#include "lib/jsonx.h"

static FILE *stream;

char *wlog_format(int64_t ts_ms, const char *event, json_t *fields)
{
	char ts[40];
	json_t *o = json_object();
	json_object_set_new(o, "ts", json_string(clock_fmt_rfc3339_ms(ts_ms, ts, sizeof ts)));
	json_object_set_new(o, "event", json_string(event));
	if (json_is_object(fields)) {
		const char *k;
		json_t *v;
		json_object_foreach (fields, k, v) {
			if (strcmp(k, "ts") != 0 && strcmp(k, "event") != 0)
				json_object_set(o, k, v);
		}
	}
	json_decref(fields);
	/* No JSON_SORT_KEYS: jansson keeps insertion order, so ts and event lead the line. Six
	 * significant digits are plenty for seconds and shares. */
	size_t flags = JSON_COMPACT | JSON_REAL_PRECISION(6);
	size_t n = json_dumpb(o, NULL, 0, flags);
	char *s = gwb_malloc(n + 1);
	if (json_dumpb(o, s, n, flags) != n)
		n = 0;
	s[n] = '\0';
	json_decref(o);
	return s;
}

json_t *wlog_str(const char *s)
{
	if (!s)
		return json_null();
	size_t len = strlen(s), bad;
	if (jx_utf8_valid(s, len, &bad))
		return json_stringn(s, len);
	char *copy = gwb_strdup(s);
	/* Replace one offending byte at a time; the check restarts after it. */
	while (!jx_utf8_valid(copy, len, &bad))
		copy[bad] = '?';
	json_t *v = json_stringn(copy, len);
	gwb_free(copy);
	return v;
}

void wlog_set_stream(FILE *f)
{
	stream = f;
}

void wlog_emit(const char *event, json_t *fields)
{
	FILE *f = stream ? stream : stdout;
	char *line = wlog_format(clock_now_ms(), event, fields);
	fputs(line, f);
	fputc('\n', f);
	fflush(f);
	gwb_free(line);
}
