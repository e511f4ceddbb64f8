/* The worker's log: one JSON object per line on stdout, `ts` and `event` first, then the
 * event's fields in the order they were added. Built with jansson, never by hand. */
#ifndef GWB_WORKER_WLOG_H
#define GWB_WORKER_WLOG_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

/* Formats one line (without the newline) for time ts_ms: {"ts":"<RFC 3339 ms>","event":event,
 * ...fields}. Steals the reference to fields (may be NULL); keys "ts" and "event" in fields are
 * dropped. Returns a gwb_malloc'd string the caller frees with gwb_free. Never NULL. */
char *wlog_format(int64_t ts_ms, const char *event, json_t *fields);

/* Writes the line for now to the log stream and flushes it, so a line is never half-written
 * when the process ends. Steals fields. Not async-signal-safe: never call from a handler. */
void wlog_emit(const char *event, json_t *fields);

/* A new JSON string of s for outside text (paths, environment values, driver messages): bytes
 * that are not valid UTF-8 become '?', since jansson refuses such strings outright. NULL gives
 * a JSON null. Never NULL. */
json_t *wlog_str(const char *s);

/* Redirects the log stream (stdout by default); for tests. */
void wlog_set_stream(FILE *f);

#endif
