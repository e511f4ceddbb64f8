/* Unit tests of lib/imageref.c: the Docker reference grammar (domains, ports, path
 * components, tags, digests, bounds) and the allowed-prefix match at component boundaries. */
#include <stdio.h>
#include <string.h>

#include "lib/imageref.h"
#include "tests/harness/t.h"

#define DIGEST "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

TEST(imageref_accepts_references_of_every_form)
{
	static const char *const ok[] = {
		"busybox", "busybox:1.36", "library/python:3.12-slim", "docker.io/library/python",
		"registry.example.com/team-a/train:v2", "localhost/app", "localhost:5000/app:dev",
		"reg.io:443/a/b/c", "ghcr.io/org/my_app__x", "a.b-c/d", "Reg.IO/app",
		"app@" DIGEST, "reg.io/app:1@" DIGEST, "a---b", "host:5000",
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		const char *why = NULL;
		CHECKF(imageref_valid(ok[i], &why), "%s refused: %s", ok[i], why ? why : "");
	}
}

TEST(imageref_refuses_what_the_grammar_does_not_allow)
{
	static const char *const bad[] = {
		"", "Busybox", "busy box", "app:", "app:-x", "app:.x", "/app", "app/",
		"reg.io//app", "reg.io/", "-reg.io/app", "reg-.io/app", "reg.io:/app",
		"reg.io:5x/app", "app@sha256:abc", "app@md5:" "0123456789abcdef0123456789abcdef",
		"app@" "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
		"a..b", "a._b", "a_", "app:1:2", "app\n", "app;rm", "reg.io/App",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		const char *why = NULL;
		CHECKF(!imageref_valid(bad[i], &why), "'%s' accepted", bad[i]);
		CHECKF(why && why[0], "'%s' refused without a rule", bad[i]);
	}
}

TEST(imageref_bounds_the_name_and_the_tag)
{
	char name[300], ref[400];
	memset(name, 'a', 255);
	name[255] = '\0';
	CHECK(imageref_valid(name, NULL));
	memset(name, 'a', 256);
	name[256] = '\0';
	CHECK(!imageref_valid(name, NULL));
	char tag[200];
	memset(tag, 't', 128);
	tag[128] = '\0';
	snprintf(ref, sizeof ref, "app:%s", tag);
	CHECK(imageref_valid(ref, NULL));
	strcat(ref, "t");
	CHECK(!imageref_valid(ref, NULL));
}

TEST(imageref_prefix_matches_at_component_boundaries)
{
	CHECK(imageref_has_prefix("reg.io/team/app:1", "reg.io/team"));
	CHECK(imageref_has_prefix("reg.io/team/app:1", "reg.io/team/"));
	CHECK(imageref_has_prefix("reg.io/team:2", "reg.io/team"));
	CHECK(imageref_has_prefix("reg.io/team", "reg.io/team"));
	CHECK(imageref_has_prefix("reg.io/team@" DIGEST, "reg.io/team"));
	CHECK(imageref_has_prefix("busybox:1.36", "busybox:"));
	CHECK(!imageref_has_prefix("reg.io/team2/app", "reg.io/team"));
	CHECK(!imageref_has_prefix("reg.io/tea", "reg.io/team"));
	CHECK(!imageref_has_prefix("other.io/team/app", "reg.io/team"));
	CHECK(!imageref_has_prefix("reg.io/team/app", ""));
}

TEST(imageref_prefix_characters)
{
	CHECK(imageref_prefix_valid("reg.io/team/"));
	CHECK(imageref_prefix_valid("localhost:5000/a@"));
	CHECK(!imageref_prefix_valid(""));
	CHECK(!imageref_prefix_valid("reg io"));
	CHECK(!imageref_prefix_valid("reg.io/*"));
	char big[IMAGEREF_MAX + 2];
	memset(big, 'a', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	CHECK(!imageref_prefix_valid(big));
}
