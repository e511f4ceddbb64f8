/* gwb-load's summary: one JSON document built from the run (what --json prints), its checks
 * and verdict, and the same document rendered as text for people. */
#ifndef GWB_LOAD_REPORT_H
#define GWB_LOAD_REPORT_H

#include <jansson.h>
#include <stdio.h>

#include "tools/gwb-load/load.h"

/* The summary (new reference, caller decrefs): run, send, operations, tasks, replays, quota,
 * drain (null without --drain), dead_letters, checks (each name, ok, skipped, detail) and
 * passed (every check that was not skipped is ok). */
json_t *report_build(const struct load *l);

/* Prints summary (as report_build made it) as text on f. */
void report_print_text(const json_t *summary, FILE *f);

#endif
