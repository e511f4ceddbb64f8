/* Unit tests of lib/dnslabel.c: the RFC 1123 label rule (characters, edges, length bound), the
 * looser edge-hyphen form the tools use, and a length that is not the string's. */
#include <string.h>

#include "lib/dnslabel.h"
#include "tests/harness/t.h"

static int strict(const char *s)
{
	return dnslabel_valid(s, strlen(s), DNSLABEL_MAX, 0);
}

static int loose(const char *s, size_t max)
{
	return dnslabel_valid(s, strlen(s), max, DNSLABEL_EDGE_HYPHEN);
}

TEST(dnslabel_accepts_lowercase_digits_and_inner_hyphens)
{
	static const char *const ok[] = { "a", "0", "alpha", "team-1", "a-b-c", "9lives", "a--b",
					  "x9" };
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		CHECKF(strict(ok[i]), "%s refused", ok[i]);
		CHECKF(dnslabel_is(ok[i]), "%s refused by dnslabel_is", ok[i]);
		CHECKF(loose(ok[i], 64), "%s refused with edge hyphens", ok[i]);
	}
}

TEST(dnslabel_refuses_other_characters_and_the_empty_label)
{
	static const char *const bad[] = { "", "Alpha", "team_1", "a.b", "a b", "a/b",
					   "\xc3\xa4", "a\n", "%41", "A", "-", "a:b" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECKF(!strict(bad[i]), "'%s' accepted", bad[i]);
		CHECKF(!dnslabel_is(bad[i]), "'%s' accepted by dnslabel_is", bad[i]);
		if (strcmp(bad[i], "-") != 0)
			CHECKF(!loose(bad[i], 64), "'%s' accepted with edge hyphens", bad[i]);
	}
}

TEST(dnslabel_hyphen_at_an_edge_only_with_the_flag)
{
	static const char *const edge[] = { "-a", "a-", "-a-", "-", "--" };
	for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
		CHECKF(!strict(edge[i]), "%s accepted", edge[i]);
		CHECKF(loose(edge[i], 63), "%s refused with edge hyphens", edge[i]);
	}
}

TEST(dnslabel_length_bound_is_inclusive)
{
	char s[70];
	memset(s, 'a', sizeof s);
	s[63] = '\0';
	CHECK(strict(s));
	CHECK(dnslabel_is(s));
	s[63] = 'a';
	s[64] = '\0';
	CHECK(!strict(s));
	CHECK(!dnslabel_is(s));
	CHECK(!loose(s, 63));
	CHECK(loose(s, 64)); /* gwbctl's path segments: up to 64 */
	s[64] = 'a';
	s[65] = '\0';
	CHECK(!loose(s, 64));
}

TEST(dnslabel_reads_only_the_n_bytes_given)
{
	const char *list = "alpha,Beta,-x";
	CHECK(dnslabel_valid(list, 5, DNSLABEL_MAX, 0));       /* "alpha" */
	CHECK(!dnslabel_valid(list, 6, DNSLABEL_MAX, 0));      /* "alpha," */
	CHECK(!dnslabel_valid(list + 6, 4, DNSLABEL_MAX, 0));  /* "Beta" */
	CHECK(!dnslabel_valid(list + 11, 2, DNSLABEL_MAX, 0)); /* "-x" */
	CHECK(dnslabel_valid(list + 11, 2, DNSLABEL_MAX, DNSLABEL_EDGE_HYPHEN));
	CHECK(!dnslabel_valid(list, 0, DNSLABEL_MAX, DNSLABEL_EDGE_HYPHEN));
}
