/* Label and field selectors (kube-api.md §8 item 4): the query-string grammars
 * (`a=b,c!=d,e in (x,y),!f`, `metadata.name=x`) and the LabelSelector object
 * ({matchLabels, matchExpressions}) used by Jobs and ClusterColocationProfiles. */
#ifndef KUBESIM_SELECTOR_H
#define KUBESIM_SELECTOR_H

#include <jansson.h>
#include <stddef.h>

#include "tools/kubesim/res.h"

struct selector;

/* Parses a labelSelector query value. Returns 0 with *out (caller frees with selector_free;
 * NULL for an empty selector), or GWB_EINVAL with a message in err. */
int selector_parse_labels(const char *s, struct selector **out, char *err, size_t errlen);
/* Parses a fieldSelector query value for resource r. Unsupported fields give GWB_EINVAL with
 * "field label not supported: <f>" in err. */
int selector_parse_fields(const struct res_def *r, const char *s, struct selector **out,
			  char *err, size_t errlen);
/* Returns 1 when obj matches (a NULL selector matches everything). */
int selector_match(const struct selector *sel, const json_t *obj);
/* The first equality requirement of a label selector (`k=v`, `k==v`, or `k in (v)` with one
 * value), which every match must satisfy, so a list can start from the label index. Returns 1
 * with *key and *value borrowed from sel; 0 when there is none (or sel is NULL or a field
 * selector). */
int selector_eq_term(const struct selector *sel, const char **key, const char **value);
/* Frees a selector. Accepts NULL. */
void selector_free(struct selector *sel);

/* Matches a LabelSelector document against a labels object. A NULL or empty selector matches
 * everything. Returns 1 on match, 0 otherwise (also for malformed selectors). */
int selector_match_doc(const json_t *ls, const json_t *labels);

#endif
