/* Kubernetes resource quantities ("1Gi", "1024Mi", "500m", "1e3"): parsing into whole base
 * units and printing in the canonical forms the API server and Koordinator emit. */
#ifndef GWB_QUANTITY_H
#define GWB_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

/* Longest text quantity_parse accepts, and a buffer size that fits any formatted int64. */
#define QUANTITY_MAX_LEN 64
#define QUANTITY_BUF     32

/* Parses a quantity: an optional '+', digits with an optional fraction ("1.5", "1.", ".5"), then
 * at most one suffix: binary (Ki Mi Gi Ti Pi Ei), decimal (n u m k M G T P E) or an exponent
 * (e3, E-2). The value is rounded up to a whole unit, as Kubernetes' Value() does ("500m" -> 1,
 * "1.5Gi" -> 1610612736). Returns 0 and *out, or GWB_EINVAL for anything malformed, a '-'
 * sign, more than 38 digits, text longer than QUANTITY_MAX_LEN, or a value above INT64_MAX. */
int quantity_parse(const char *s, int64_t *out);

/* The same syntax and errors, in thousandths of a unit rounded up, as Kubernetes' MilliValue()
 * ("500m" -> 500, "1" -> 1000, "0.1m" -> 1, "1Ki" -> 1024000): for CPU quantities. */
int quantity_parse_milli(const char *s, int64_t *out);

/* Writes v (>= 0) in canonical BinarySI form, as Kubernetes prints a BinarySI quantity: the
 * largest binary suffix that divides v exactly ("1Gi", "1536Mi", "1500"); values below 1024
 * print in DecimalSI form like Kubernetes does ("100", "0", and 1000 as "1k"). A negative v
 * prints as '-' and the form of its magnitude. len should be QUANTITY_BUF. Returns buf. */
char *quantity_format_binary(int64_t v, char *buf, size_t len);

/* Writes v in canonical DecimalSI form, as Kubernetes prints a DecimalSI quantity: the
 * largest decimal suffix whose power of 1000 divides v ("25", "100", "1500", and 1000 as
 * "1k", 2000000 as "2M"). len should be QUANTITY_BUF. Returns buf. */
char *quantity_format_decimal(int64_t v, char *buf, size_t len);
/* Writes v thousandths (>= 0, a CPU amount in millicores) as Kubernetes prints it: whole
 * units in DecimalSI form when v divides by 1000 ("2", "1k"), else with the milli suffix
 * ("500m", "1500m"). len should be QUANTITY_BUF. Returns buf. */
char *quantity_format_milli(int64_t v, char *buf, size_t len);

#endif
