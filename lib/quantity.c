/* Kubernetes quantities: an exact parser (digits kept as one 128-bit integer plus powers of
 * ten and two, so "1.5Gi" is exact) and the canonical printers. */
#include "lib/quantity.h"

#include <stdio.h>
#include <string.h>

#include "lib/err.h"

typedef unsigned __int128 u128;

/* 38 digits always fit: 10^38 < 2^127. */
#define MAX_DIGITS 38

struct qnum {
	u128 digits; /* every digit of the number, fraction included */
	int frac;    /* how many of them follow the point */
	int pow10;   /* the suffix's power of ten (decimal and exponent forms) */
	int pow2;    /* the suffix's power of two (binary forms) */
};

static u128 pow10_u128(int n)
{
	u128 r = 1;
	while (n-- > 0)
		r *= 10;
	return r;
}

/* Reads the digits and the optional fraction. Returns the position after them, or NULL. */
static const char *parse_number(const char *p, struct qnum *q)
{
	int ndig = 0, seen_point = 0, any = 0;
	for (;; p++) {
		if (*p == '.' && !seen_point) {
			seen_point = 1;
			continue;
		}
		if (*p < '0' || *p > '9')
			break;
		if (++ndig > MAX_DIGITS)
			return NULL;
		q->digits = q->digits * 10 + (u128)(*p - '0');
		q->frac += seen_point;
		any = 1;
	}
	return any ? p : NULL;
}

/* Reads an exponent "[+-]digits" up to the end of the text. Returns 0, or GWB_EINVAL. */
static int parse_exponent(const char *p, int *out)
{
	int neg = 0, v = 0;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	if (!*p)
		return GWB_EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return GWB_EINVAL;
		/* Any exponent past 1000 already over- or underflows every int64. */
		if (v < 100000)
			v = v * 10 + (*p - '0');
	}
	*out = neg ? -v : v;
	return 0;
}

static int parse_suffix(const char *p, struct qnum *q)
{
	static const struct {
		const char *s;
		int p10, p2;
	} tab[] = {
	    {"", 0, 0},    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30},
	    {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}, {"n", -9, 0},
	    {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
	    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
	};
	for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
		if (strcmp(p, tab[i].s) == 0) {
			q->pow10 = tab[i].p10;
			q->pow2 = tab[i].p2;
			return 0;
		}
	}
	if (p[0] == 'e' || p[0] == 'E')
		return parse_exponent(p + 1, &q->pow10);
	return GWB_EINVAL;
}

/* ceil(n * 2^p2 / 10^k) for k <= MAX_DIGITS, failing above INT64_MAX. Doubling the quotient and
 * the remainder separately keeps every step inside 128 bits. */
static int scale_binary(u128 n, int p2, int k, int64_t *out)
{
	u128 d = pow10_u128(k), quot = n / d, rem = n % d;
	if (quot > INT64_MAX)
		return GWB_EINVAL;
	for (int i = 0; i < p2; i++) {
		quot *= 2;
		rem *= 2;
		if (rem >= d) {
			rem -= d;
			quot++;
		}
		if (quot > INT64_MAX)
			return GWB_EINVAL;
	}
	if (rem)
		quot++;
	if (quot > INT64_MAX)
		return GWB_EINVAL;
	*out = (int64_t)quot;
	return 0;
}

/* ceil(n * 10^e), failing above INT64_MAX. */
static int scale_decimal(u128 n, int e, int64_t *out)
{
	if (n == 0) {
		*out = 0;
		return 0;
	}
	if (e >= 0) {
		for (int i = 0; i < e; i++) {
			n *= 10;
			if (n > INT64_MAX)
				return GWB_EINVAL;
		}
	} else if (-e > MAX_DIGITS) {
		n = 1; /* n < 10^38 <= 10^-e: a non-zero fraction of one unit */
	} else {
		u128 d = pow10_u128(-e);
		n = n / d + (n % d != 0);
	}
	if (n > INT64_MAX)
		return GWB_EINVAL;
	*out = (int64_t)n;
	return 0;
}

/* Parses s into ceil(value * 10^extra): extra is 0 for whole units, 3 for thousandths. */
static int parse_scaled(const char *s, int extra, int64_t *out)
{
	struct qnum q = {0};
	if (!s || strnlen(s, QUANTITY_MAX_LEN + 1) > QUANTITY_MAX_LEN)
		return GWB_EINVAL;
	const char *p = s;
	if (*p == '+')
		p++;
	p = parse_number(p, &q);
	if (!p || parse_suffix(p, &q) != 0)
		return GWB_EINVAL;
	/* Trailing fraction zeros carry no value; dropping them keeps the divisor small. */
	while (q.frac > 0 && q.digits % 10 == 0) {
		q.digits /= 10;
		q.frac--;
	}
	if (!q.pow2)
		return scale_decimal(q.digits, q.pow10 - q.frac + extra, out);
	/* Binary forms: fold the extra power of ten into the fraction first. */
	int k = q.frac - extra;
	for (; k < 0; k++) {
		if (q.digits > INT64_MAX)
			return GWB_EINVAL; /* already beyond any result */
		q.digits *= 10;
	}
	return scale_binary(q.digits, q.pow2, k, out);
}

int quantity_parse(const char *s, int64_t *out)
{
	return parse_scaled(s, 0, out);
}

int quantity_parse_milli(const char *s, int64_t *out)
{
	return parse_scaled(s, 3, out);
}

/* Splits a negative value into its sign and magnitude (INT64_MIN included). */
static uint64_t magnitude(int64_t v, const char **sign)
{
	*sign = v < 0 ? "-" : "";
	return v < 0 ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
}

char *quantity_format_decimal(int64_t v, char *buf, size_t len)
{
	static const char *const suffix[] = {"", "k", "M", "G", "T", "P", "E"};
	const char *sign;
	uint64_t m = magnitude(v, &sign);
	int i = 0;
	while (m != 0 && m % 1000 == 0 && i < 6) {
		m /= 1000;
		i++;
	}
	snprintf(buf, len, "%s%llu%s", sign, (unsigned long long)m, suffix[i]);
	return buf;
}

char *quantity_format_milli(int64_t v, char *buf, size_t len)
{
	if (v % 1000 == 0)
		return quantity_format_decimal(v / 1000, buf, len);
	snprintf(buf, len, "%lldm", (long long)v);
	return buf;
}

char *quantity_format_binary(int64_t v, char *buf, size_t len)
{
	static const char *const suffix[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	const char *sign;
	uint64_t m = magnitude(v, &sign);
	/* Kubernetes prints a BinarySI value of magnitude below 1024 in DecimalSI form. */
	if (m < 1024)
		return quantity_format_decimal(v, buf, len);
	int i = 0;
	while (m % 1024 == 0 && i < 6) {
		m /= 1024;
		i++;
	}
	snprintf(buf, len, "%s%llu%s", sign, (unsigned long long)m, suffix[i]);
	return buf;
}
