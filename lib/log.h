/* Structured logging: one `ts= level= mod= event= key=value...` line per event on stderr.
 * The level is checked before the arguments are evaluated. */
#ifndef GWB_LOG_H
#define GWB_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

extern int log_level_min;

/* Parses "debug", "info", "warn", "error", "off". Returns the level, or -1 when unknown. */
int log_level_parse(const char *s);

/* Emits one line. fmt holds the `key=value` pairs after the fixed fields; every value that
 * comes from outside must pass through log_q(). */
void log_emit(int level, const char *mod, const char *event, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Returns s quoted and escaped for a log value ("a b" -> "\"a b\"", control bytes as \xNN),
 * cut at 200 bytes. The result lives in a small per-thread ring of buffers: use it within the
 * same log call, never keep it. NULL prints as -. */
const char *log_q(const char *s);

#define LOG_AT(lvl, mod, event, ...)                                      \
	do {                                                              \
		if ((lvl) >= log_level_min)                               \
			log_emit((lvl), (mod), (event), __VA_ARGS__);     \
	} while (0)
#define log_debug(mod, event, ...) LOG_AT(LOG_DEBUG, mod, event, __VA_ARGS__)
#define log_info(mod, event, ...) LOG_AT(LOG_INFO, mod, event, __VA_ARGS__)
#define log_warn(mod, event, ...) LOG_AT(LOG_WARN, mod, event, __VA_ARGS__)
#define log_error(mod, event, ...) LOG_AT(LOG_ERROR, mod, event, __VA_ARGS__)

#endif
