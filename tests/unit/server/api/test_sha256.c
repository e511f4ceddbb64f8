/* server/api/http.c's SHA-256, which every token is stored and looked up by: the standard's
 * vectors, through the kept digest context again and again (a change of the digest would
 * lock every team out of a database made before it). */
#include <stdio.h>
#include <string.h>

#include "server/api/http.h"
#include "tests/harness/t.h"

static void hex(const unsigned char *h, char out[65])
{
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

TEST(http_sha256_gives_the_standard_digests)
{
	static char million[1000000];
	memset(million, 'a', sizeof million);
	static const struct {
		const char *in;
		size_t n;
		const char *want;
	} v[] = {
		{ "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" },
		{ "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" },
		{ "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
		  "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1" },
		{ million, sizeof million,
		  "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0" },
	};
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
			unsigned char h[32];
			char got[65];
			http_sha256(v[i].in, v[i].n, h);
			hex(h, got);
			CHECKF(strcmp(got, v[i].want) == 0, "vector %zu, round %d: %s", i, round, got);
		}
}
