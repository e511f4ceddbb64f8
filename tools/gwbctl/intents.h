/* gwbctl intents: the intent stream (or its dead letters) as the reconciler sees it, read from
 * Redis directly. */
#ifndef GWB_GWBCTL_INTENTS_H
#define GWB_GWBCTL_INTENTS_H

/* Prints the last count entries of <prefix>:intents (or <prefix>:intents:dead when dead) as
 * JSON on stdout: the stream length, its groups, and per entry the fields, the pending state
 * (new, pending, acknowledged), consumer, deliveries, idle time and the decoded body. redis is
 * a redis:// or unix:// URL. Returns 0, or 1 after a message on stderr (no Redis set, not
 * reachable, or a command failed). */
int intents_show(const char *redis, const char *prefix, long count, int dead);

#endif
