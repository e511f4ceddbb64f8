/* Unit tests of lib/addr.c: every accepted form with what it parses to, every refusal with the
 * words of its reason, and the forms a caller did not allow. */
#include <stdio.h>
#include <string.h>

#include "lib/addr.h"
#include "lib/err.h"
#include "tests/harness/t.h"

#define ALL (ADDR_F_HOSTPORT | ADDR_F_REDIS | ADDR_F_UNIX | ADDR_F_HTTP)

struct ok_case {
	const char *in;
	unsigned allow;
	enum addr_kind kind;
	const char *host;
	int port, db, v6;
	const char *path;
	const char *formatted;
};

TEST(addr_accepts_every_form)
{
	static const struct ok_case cases[] = {
		{ "127.0.0.1:8080", ALL, ADDR_HOSTPORT, "127.0.0.1", 8080, 0, 0, "",
		  "127.0.0.1:8080" },
		{ "localhost:1", ALL, ADDR_HOSTPORT, "localhost", 1, 0, 0, "", "localhost:1" },
		{ "[::1]:65535", ALL, ADDR_HOSTPORT, "::1", 65535, 0, 1, "", "[::1]:65535" },
		{ "127.0.0.1:0", ADDR_F_HOSTPORT | ADDR_F_PORT0, ADDR_HOSTPORT, "127.0.0.1", 0, 0, 0,
		  "", "127.0.0.1:0" },
		{ "redis://localhost/0", ALL, ADDR_REDIS, "localhost", 6379, 0, 0, "",
		  "redis://localhost:6379/0" },
		{ "redis://cache", ALL, ADDR_REDIS, "cache", 6379, 0, 0, "",
		  "redis://cache:6379/0" },
		{ "redis://cache/", ALL, ADDR_REDIS, "cache", 6379, 0, 0, "",
		  "redis://cache:6379/0" },
		{ "redis://127.0.0.1:6380/3", ALL, ADDR_REDIS, "127.0.0.1", 6380, 3, 0, "",
		  "redis://127.0.0.1:6380/3" },
		{ "redis://[::1]:7000/15", ALL, ADDR_REDIS, "::1", 7000, 15, 1, "",
		  "redis://[::1]:7000/15" },
		{ "redis://[fe80::1]", ALL, ADDR_REDIS, "fe80::1", 6379, 0, 1, "",
		  "redis://[fe80::1]:6379/0" },
		{ "unix:///tmp/r.sock", ALL, ADDR_UNIX, "", 0, 0, 0, "/tmp/r.sock",
		  "unix:///tmp/r.sock" },
		{ "http://127.0.0.1:8080", ALL, ADDR_HTTP, "127.0.0.1", 8080, 0, 0, "",
		  "http://127.0.0.1:8080" },
		{ "http://gwb.example", ALL, ADDR_HTTP, "gwb.example", 80, 0, 0, "",
		  "http://gwb.example:80" },
		{ "https://kube.example/", ALL, ADDR_HTTPS, "kube.example", 443, 0, 0, "/",
		  "https://kube.example:443/" },
		{ "https://[2001:db8::2]:6443/prefix/api", ALL, ADDR_HTTPS, "2001:db8::2", 6443, 0,
		  1, "/prefix/api", "https://[2001:db8::2]:6443/prefix/api" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const struct ok_case *c = &cases[i];
		struct addr a;
		char why[200], buf[1400];
		CHECKF(addr_parse(c->in, c->allow, &a, why, sizeof why) == 0, "%s: %s", c->in,
		       why);
		CHECKF(a.kind == c->kind, "%s: kind %d", c->in, (int)a.kind);
		CHECK_STR(a.host, c->host);
		CHECK_INT(a.port, c->port);
		CHECK_INT(a.db, c->db);
		CHECK_INT(a.is_v6, c->v6);
		CHECK_STR(a.path, c->path);
		CHECK_STR(addr_format(&a, buf, sizeof buf), c->formatted);
		/* What addr_format writes parses back to the same address. */
		struct addr b;
		CHECKF(addr_parse(buf, c->allow, &b, why, sizeof why) == 0, "%s: %s", buf, why);
		CHECKF(memcmp(&a, &b, sizeof a) == 0, "%s does not round-trip", c->in);
	}
}

struct bad_case {
	const char *in;
	unsigned allow;
	const char *reason; /* words the refusal must contain */
};

TEST(addr_refuses_with_the_reason)
{
	char long_path[200] = "unix:///";
	memset(long_path + 8, 'p', 110);
	char long_host[300] = "redis://";
	memset(long_host + 8, 'h', 270);
	static const struct bad_case fixed[] = {
		{ "", ALL, "empty" },
		{ "127.0.0.1", ADDR_F_HOSTPORT, "port is missing" },
		{ "127.0.0.1:", ADDR_F_HOSTPORT, "port must be a number from 1" },
		{ "127.0.0.1:0", ADDR_F_HOSTPORT, "port must be a number from 1" },
		{ "127.0.0.1:65536", ADDR_F_HOSTPORT | ADDR_F_PORT0, "from 0 to 65535" },
		{ "127.0.0.1:99999", ADDR_F_HOSTPORT | ADDR_F_PORT0, "from 0 to 65535" },
		{ "127.0.0.1:80x", ADDR_F_HOSTPORT, "port must be a number" },
		{ "127.0.0.1:-1", ADDR_F_HOSTPORT, "port must be a number" },
		{ ":8080", ADDR_F_HOSTPORT, "host is missing" },
		{ "::1:8080", ADDR_F_HOSTPORT, "IPv6 address needs brackets" },
		{ "[::1:8080", ADDR_F_HOSTPORT, "without ']'" },
		{ "[::1]8080", ADDR_F_HOSTPORT, "expected ':port' after ']'" },
		{ "[localhost]:80", ADDR_F_HOSTPORT, "not an IPv6 address" },
		{ "[1234]:80", ADDR_F_HOSTPORT, "brackets are for IPv6" },
		{ "a b:80", ADDR_F_HOSTPORT, "spaces" },
		{ "host/x:80", ADDR_F_HOSTPORT, "expected host:port" },
		{ "ho$t:80", ADDR_F_HOSTPORT, "cannot be part of a host name" },
		{ "redis://:6379", ADDR_F_REDIS, "host is missing" },
		{ "redis://h:0/1", ADDR_F_REDIS, "port must be a number from 1" },
		{ "redis://h:1/16", ADDR_F_REDIS, "database number must be from 0 to 15" },
		{ "redis://h/x", ADDR_F_REDIS, "database number" },
		{ "redis://h/1/2", ADDR_F_REDIS, "database number" },
		{ "redis://user:pw@h:6379", ADDR_F_REDIS, "user:password@" },
		{ "redis://h?db=1", ADDR_F_REDIS, "query" },
		{ "unix://relative", ADDR_F_UNIX, "absolute path" },
		{ "unix://", ADDR_F_UNIX, "absolute path" },
		{ "http://", ADDR_F_HTTP, "host is missing" },
		{ "http://h:0", ADDR_F_HTTP, "port must be" },
		{ "http://h/a#frag", ADDR_F_HTTP, "fragment" },
		{ "ftp://h", ALL, "scheme 'ftp://' is not accepted" },
		{ "http://nope", ADDR_F_REDIS | ADDR_F_UNIX,
		  "expected redis://host[:port][/N] or unix:///path" },
		{ "redis://h", ADDR_F_HTTP, "not accepted here" },
		{ "unix:///tmp/s", ADDR_F_HOSTPORT, "not accepted here" },
		{ "localhost:6379", ADDR_F_REDIS | ADDR_F_UNIX, "no scheme" },
		{ "127.0.0.1:8080", ADDR_F_HTTP, "no scheme" },
		{ "HTTP://h", ADDR_F_HTTP, "not accepted" },
	};
	struct bad_case cases[sizeof fixed / sizeof fixed[0] + 2];
	memcpy(cases, fixed, sizeof fixed);
	size_t n = sizeof fixed / sizeof fixed[0];
	cases[n++] = (struct bad_case){ long_path, ADDR_F_UNIX, "shorter than 108 bytes" };
	cases[n++] = (struct bad_case){ long_host, ADDR_F_REDIS, "host is longer than 255" };
	for (size_t i = 0; i < n; i++) {
		struct addr a;
		char why[200] = "untouched";
		CHECKF(addr_parse(cases[i].in, cases[i].allow, &a, why, sizeof why) == GWB_EINVAL,
		       "'%s' was accepted", cases[i].in);
		CHECKF(strstr(why, cases[i].reason) != NULL, "'%s': reason '%s', expected '%s'",
		       cases[i].in, why, cases[i].reason);
	}
	/* NULL is refused like the empty string; a short reason buffer is cut, not overrun. */
	struct addr a;
	char small[8];
	CHECK(addr_parse(NULL, ALL, &a, small, sizeof small) == GWB_EINVAL);
	CHECK_INT(strlen(small), 7);
}

TEST(addr_socket_path_limit_is_sun_path)
{
	char s[200] = "unix://";
	memset(s + 7, 'p', 107);
	s[7] = '/';
	struct addr a;
	char why[200];
	CHECKF(addr_parse(s, ADDR_F_UNIX, &a, why, sizeof why) == 0, "%s", why);
	CHECK_INT(strlen(a.path), 107);
	s[7 + 107] = 'p';
	CHECK(addr_parse(s, ADDR_F_UNIX, &a, why, sizeof why) == GWB_EINVAL);
}
