/* Unit tests of lib/quantity: Kubernetes quantity parsing (exact, rounding up) and the
 * canonical BinarySI / DecimalSI printers. */
#include <stdint.h>

#include "lib/err.h"
#include "lib/quantity.h"
#include "tests/harness/t.h"

static int64_t parsed(const char *s)
{
	int64_t v = -12345;
	int rc = quantity_parse(s, &v);
	CHECKF(rc == 0, "quantity_parse(\"%s\") failed with %d", s, rc);
	return v;
}

static void check_bad(const char *s)
{
	int64_t v = 7;
	int rc = quantity_parse(s, &v);
	CHECKF(rc == GWB_EINVAL, "quantity_parse(\"%s\") gave %d (value %lld), expected EINVAL", s,
	       rc, (long long)v);
}

TEST(quantity_parses_memory_forms)
{
	CHECK_INT(parsed("1Gi"), 1073741824LL);
	CHECK_INT(parsed("1024Mi"), 1073741824LL);
	CHECK_INT(parsed("8589934592"), 8589934592LL);
	CHECK_INT(parsed("80Gi"), 85899345920LL);
	CHECK_INT(parsed("11520Mi"), 11520LL * 1048576);
	CHECK_INT(parsed("1.5Gi"), 1610612736LL);
	CHECK_INT(parsed("1Ki"), 1024);
	CHECK_INT(parsed("1Ti"), 1099511627776LL);
	CHECK_INT(parsed("1Pi"), 1125899906842624LL);
	CHECK_INT(parsed("7Ei"), 7LL << 60);
	CHECK_INT(parsed("+2Ki"), 2048);
	CHECK_INT(parsed("0.5Ki"), 512);
	CHECK_INT(parsed(".5Ki"), 512);
	CHECK_INT(parsed("0.1Ki"), 103); /* 102.4 rounds up */
}

TEST(quantity_parses_decimal_forms)
{
	CHECK_INT(parsed("100"), 100);
	CHECK_INT(parsed("0"), 0);
	CHECK_INT(parsed("1k"), 1000);
	CHECK_INT(parsed("1M"), 1000000);
	CHECK_INT(parsed("1G"), 1000000000);
	CHECK_INT(parsed("2T"), 2000000000000LL);
	CHECK_INT(parsed("1P"), 1000000000000000LL);
	CHECK_INT(parsed("1E"), 1000000000000000000LL);
	CHECK_INT(parsed("1e3"), 1000);
	CHECK_INT(parsed("1E3"), 1000);
	CHECK_INT(parsed("1e+3"), 1000);
	CHECK_INT(parsed("15e-1"), 2);
	CHECK_INT(parsed("1."), 1);
	CHECK_INT(parsed("007"), 7);
	CHECK_INT(parsed("25"), 25);
}

TEST(quantity_rounds_fractions_up_like_value)
{
	CHECK_INT(parsed("500m"), 1);
	CHECK_INT(parsed("1000m"), 1);
	CHECK_INT(parsed("1001m"), 2);
	CHECK_INT(parsed("1500m"), 2);
	CHECK_INT(parsed("0m"), 0);
	CHECK_INT(parsed("1n"), 1);
	CHECK_INT(parsed("1u"), 1);
	CHECK_INT(parsed("0.000"), 0);
	CHECK_INT(parsed("2.0"), 2);
	CHECK_INT(parsed("1e-50"), 1);
	CHECK_INT(parsed("0e-50"), 0);
}

TEST(quantity_limits)
{
	CHECK_INT(parsed("9223372036854775807"), INT64_MAX);
	check_bad("9223372036854775808");
	check_bad("8Ei");
	check_bad("10E");
	check_bad("1e19");
	check_bad("1e99999999999");
	CHECK_INT(parsed("0e99999"), 0);
	check_bad("123456789012345678901234567890123456789"); /* 39 digits */
}

TEST(quantity_rejects_malformed)
{
	const char *bad[] = {"",    "-1",   "-1Gi",  "Gi",  "1K",   "1ki", "1GB",    "1 Gi", " 1",
	                     "1 ",  ".",    "1.2.3", "1e",  "1e+",  "e3",  "1Gi ",   "1iB",  "0x10",
	                     "1,5", "1Gii", "1mi",   "++1", "1e3k", "abc", "1.5.Gi", "1Mi1", NULL};
	for (int i = 0; bad[i]; i++)
		check_bad(bad[i]);
	int64_t v;
	CHECK_INT(quantity_parse(NULL, &v), GWB_EINVAL);
	char longs[80];
	memset(longs, '1', sizeof longs - 1);
	longs[sizeof longs - 1] = '\0';
	check_bad(longs);
}

TEST(quantity_formats_binary_canonically)
{
	char b[QUANTITY_BUF];
	CHECK_STR(quantity_format_binary(1073741824LL, b, sizeof b), "1Gi");
	CHECK_STR(quantity_format_binary(1610612736LL, b, sizeof b), "1536Mi");
	CHECK_STR(quantity_format_binary(85899345920LL, b, sizeof b), "80Gi");
	CHECK_STR(quantity_format_binary(21474836480LL, b, sizeof b), "20Gi");
	CHECK_STR(quantity_format_binary(42949672960LL, b, sizeof b), "40Gi");
	CHECK_STR(quantity_format_binary(11520LL * 1048576, b, sizeof b), "11520Mi");
	CHECK_STR(quantity_format_binary(46068LL * 1048576, b, sizeof b), "46068Mi");
	CHECK_STR(quantity_format_binary(100, b, sizeof b), "100");
	CHECK_STR(quantity_format_binary(0, b, sizeof b), "0");
	CHECK_STR(quantity_format_binary(1023, b, sizeof b), "1023");
	CHECK_STR(quantity_format_binary(1024, b, sizeof b), "1Ki");
	CHECK_STR(quantity_format_binary(1500, b, sizeof b), "1500");
	CHECK_STR(quantity_format_binary(1000, b, sizeof b), "1k"); /* below 1024: DecimalSI */
	CHECK_STR(quantity_format_binary(1024000, b, sizeof b), "1000Ki");
	CHECK_STR(quantity_format_binary(1025LL * 1024 * 1024, b, sizeof b), "1025Mi");
	CHECK_STR(quantity_format_binary(1LL << 60, b, sizeof b), "1Ei");
	CHECK_STR(quantity_format_binary(INT64_MAX, b, sizeof b), "9223372036854775807");
	CHECK_STR(quantity_format_binary(-2048, b, sizeof b), "-2Ki");
}

TEST(quantity_formats_decimal_canonically)
{
	char b[QUANTITY_BUF];
	CHECK_STR(quantity_format_decimal(25, b, sizeof b), "25");
	CHECK_STR(quantity_format_decimal(100, b, sizeof b), "100");
	CHECK_STR(quantity_format_decimal(0, b, sizeof b), "0");
	CHECK_STR(quantity_format_decimal(1, b, sizeof b), "1");
	CHECK_STR(quantity_format_decimal(1000, b, sizeof b), "1k");
	CHECK_STR(quantity_format_decimal(1500, b, sizeof b), "1500");
	CHECK_STR(quantity_format_decimal(2000000, b, sizeof b), "2M");
	CHECK_STR(quantity_format_decimal(1073741824LL, b, sizeof b), "1073741824");
	CHECK_STR(quantity_format_decimal(1000000000000000000LL, b, sizeof b), "1E");
	CHECK_STR(quantity_format_decimal(INT64_MIN, b, sizeof b), "-9223372036854775808");
	CHECK_STR(quantity_format_decimal(-3000, b, sizeof b), "-3k");
}

TEST(quantity_formats_milli_as_cpu)
{
	char buf[QUANTITY_BUF];
	CHECK_STR(quantity_format_milli(500, buf, sizeof buf), "500m");
	CHECK_STR(quantity_format_milli(1500, buf, sizeof buf), "1500m");
	CHECK_STR(quantity_format_milli(2000, buf, sizeof buf), "2");
	CHECK_STR(quantity_format_milli(1000000, buf, sizeof buf), "1k");
	int64_t back = 0;
	CHECK_INT(quantity_parse_milli(quantity_format_milli(250, buf, sizeof buf), &back), 0);
	CHECK_INT(back, 250);
}

TEST(quantity_round_trips)
{
	const char *canon[] = {"1Gi", "1536Mi", "100", "0", "80Gi", "11520Mi", "3Ki", NULL};
	char b[QUANTITY_BUF];
	for (int i = 0; canon[i]; i++)
		CHECK_STR(quantity_format_binary(parsed(canon[i]), b, sizeof b), canon[i]);
	CHECK_STR(quantity_format_binary(parsed("1024Mi"), b, sizeof b), "1Gi");
	CHECK_STR(quantity_format_binary(parsed("1073741824"), b, sizeof b), "1Gi");
	CHECK_STR(quantity_format_decimal(parsed("1000"), b, sizeof b), "1k");
}

static int64_t milli(const char *s)
{
	int64_t v = -1;
	int rc = quantity_parse_milli(s, &v);
	CHECKF(rc == 0, "quantity_parse_milli(\"%s\") failed with %d", s, rc);
	return v;
}

TEST(quantity_parses_milli_values)
{
	CHECK_INT(milli("500m"), 500);
	CHECK_INT(milli("1"), 1000);
	CHECK_INT(milli("1.5"), 1500);
	CHECK_INT(milli("0.1m"), 1);
	CHECK_INT(milli("1k"), 1000000);
	CHECK_INT(milli("1Ki"), 1024000);
	CHECK_INT(milli("0.5Ki"), 512000);
	CHECK_INT(milli("1e-3"), 1);
	CHECK_INT(milli("0"), 0);
	int64_t v;
	CHECK_INT(quantity_parse_milli("9223372036854775807", &v), GWB_EINVAL);
	CHECK_INT(quantity_parse_milli("8Ei", &v), GWB_EINVAL);
	CHECK_INT(quantity_parse_milli("-1", &v), GWB_EINVAL);
	CHECK_INT(quantity_parse_milli("1K", &v), GWB_EINVAL);
}
