/* The lab's reports: report.md and report.zh.md, one section per experiment with what
 * happened (prediction beside observation), where its evidence is, and the answer to the lab
 * guide's check question for it. */
#ifndef GWB_LAB_REPORT_H
#define GWB_LAB_REPORT_H

#include <jansson.h>

/* Writes dir/report.md and dir/report.zh.md from the run's index and its records (borrowed).
 * Returns 0, or -1 when a file cannot be written (a message on stderr). */
int report_write(const char *dir, json_t *index, json_t *records);

#endif
