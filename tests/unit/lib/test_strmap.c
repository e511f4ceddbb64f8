/* Unit tests of lib/strmap.c: keys found after many inserts (through every growth), replaced,
 * removed, and copied rather than borrowed. */
#include <stdio.h>

#include "lib/strmap.h"
#include "tests/harness/t.h"

TEST(strmap_finds_every_key_through_growth)
{
	struct strmap *m = strmap_new();
	static int vals[5000];
	char key[32];
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof key, "t%d", i);
		CHECK(strmap_put(m, key, &vals[i]) == NULL);
	}
	CHECK_INT((int)strmap_count(m), 5000);
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof key, "t%d", i);
		CHECKF(strmap_get(m, key) == &vals[i], "key %s", key);
	}
	CHECK(strmap_get(m, "t5000") == NULL);
	CHECK(strmap_get(m, "") == NULL);
	strmap_free(m);
}

TEST(strmap_put_replaces_and_del_removes)
{
	struct strmap *m = strmap_new();
	int a = 1, b = 2;
	CHECK(strmap_put(m, "x", &a) == NULL);
	CHECK(strmap_put(m, "x", &b) == &a);
	CHECK_INT((int)strmap_count(m), 1);
	CHECK(strmap_get(m, "x") == &b);
	CHECK(strmap_del(m, "x") == &b);
	CHECK(strmap_del(m, "x") == NULL);
	CHECK(strmap_get(m, "x") == NULL);
	CHECK_INT((int)strmap_count(m), 0);
	strmap_free(m);
	strmap_free(NULL);
}

TEST(strmap_keeps_its_own_copy_of_keys)
{
	struct strmap *m = strmap_new();
	int a = 1;
	char key[8] = "abc";
	strmap_put(m, key, &a);
	key[0] = 'z';
	CHECK(strmap_get(m, "abc") == &a);
	CHECK(strmap_get(m, "zbc") == NULL);
	strmap_free(m);
}

TEST(strmap_deletes_in_the_middle_of_chains)
{
	/* Many keys in few buckets at first: deletes unlink from the middle of chains. */
	struct strmap *m = strmap_new();
	static int vals[300];
	char key[32];
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof key, "%d", i);
		strmap_put(m, key, &vals[i]);
	}
	for (int i = 0; i < 300; i += 2) {
		snprintf(key, sizeof key, "%d", i);
		CHECK(strmap_del(m, key) == &vals[i]);
	}
	for (int i = 0; i < 300; i++) {
		snprintf(key, sizeof key, "%d", i);
		CHECK(strmap_get(m, key) == (i % 2 ? &vals[i] : NULL));
	}
	CHECK_INT((int)strmap_count(m), 150);
	strmap_free(m);
}
