/* Server-side printing (kube-api.md §6.4): `meta.k8s.io` Table answers with the columns
 * kubectl users expect for pods, jobs, nodes, events and namespaces (Name and Age for the
 * rest), ages formatted like apimachinery's HumanDuration, and one-row Tables for watches. */
#ifndef KUBESIM_TABLE_H
#define KUBESIM_TABLE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "tools/kubesim/res.h"

enum table_include { TABLE_INCLUDE_NONE, TABLE_INCLUDE_METADATA, TABLE_INCLUDE_OBJECT };

/* Returns the Table apiVersion ("meta.k8s.io/v1" or ".../v1beta1", static) when the Accept
 * header asks for a Table, else NULL. */
const char *table_accept(const char *accept);
/* Parses includeObject (None|Metadata|Object; default Metadata). */
enum table_include table_include_parse(const char *s);
/* A Table of n objects (borrowed). api_version from table_accept; rv the list's
 * resourceVersion; with_columns 0 omits columnDefinitions (later watch events). Caller owns
 * the result. */
json_t *table_build(const struct res_def *r, json_t *const *objs, size_t n,
		    const char *api_version, const char *rv, enum table_include inc,
		    int with_columns);
/* apimachinery's HumanDuration of a number of seconds ("45s", "3m10s", "5h3m", "12d"). */
char *table_human_duration(int64_t seconds, char *buf, size_t len);
/* Age of the RFC 3339 timestamp at path of obj ("<unknown>" when absent). */
char *table_age(const json_t *obj, const char *path, char *buf, size_t len);

#endif
