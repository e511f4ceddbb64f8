/* Address parsing shared by every binary: one grammar per form, one refusal sentence per
 * mistake. */
#include "lib/addr.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lib/err.h"

static int refuse(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t len, const char *fmt, ...)
{
	if (len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(why, len, fmt, ap);
		va_end(ap);
	}
	return GWB_EINVAL;
}

/* The forms of allow, as the end of a refusal sentence. */
static void forms(unsigned allow, char *buf, size_t len)
{
	static const struct {
		unsigned flag;
		const char *text;
	} f[] = {
		{ ADDR_F_HOSTPORT, "host:port" },
		{ ADDR_F_REDIS, "redis://host[:port][/N]" },
		{ ADDR_F_UNIX, "unix:///path" },
		{ ADDR_F_HTTP, "http(s)://host[:port][/path]" },
	};
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < sizeof f / sizeof f[0] && used < len; i++)
		if (allow & f[i].flag)
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? " or " : "",
						 f[i].text);
}

/* Reads a decimal number of at most 5 digits from s[0..n). Returns it, or -1. */
static long digits(const char *s, size_t n)
{
	if (n == 0 || n > 5)
		return -1;
	long v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

static int host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

static int v6_char(char c)
{
	return (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || (c >= '0' && c <= '9') ||
	       c == ':' || c == '.';
}

/* Parses the authority s[0..n): host, [v6], optionally :port. need_port says a port must be
 * written; def_port is used otherwise. min_port is 0 or 1. */
static int authority(const char *s, size_t n, int need_port, int def_port, int min_port,
		     struct addr *a, char *why, size_t len)
{
	const char *host = s, *port = NULL;
	size_t hl;
	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);
		if (!close)
			return refuse(why, len, "'[' without ']' around the IPv6 address");
		host = s + 1;
		hl = (size_t)(close - host);
		size_t rest = n - (size_t)(close + 1 - s);
		if (rest && close[1] != ':')
			return refuse(why, len, "expected ':port' after ']'");
		if (rest)
			port = close + 2;
		for (size_t i = 0; i < hl; i++)
			if (!v6_char(host[i]))
				return refuse(why, len, "'%.*s' is not an IPv6 address", (int)hl,
					      host);
		if (!memchr(host, ':', hl))
			return refuse(why, len, "brackets are for IPv6 addresses only");
		a->is_v6 = 1;
	} else {
		const char *colon = memchr(s, ':', n);
		if (colon && memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)))
			return refuse(why, len, "an IPv6 address needs brackets: [addr]:port");
		hl = colon ? (size_t)(colon - s) : n;
		if (colon)
			port = colon + 1;
		for (size_t i = 0; i < hl; i++)
			if (!host_char(host[i]))
				return refuse(why, len, "'%c' cannot be part of a host name", host[i]);
	}
	if (hl == 0)
		return refuse(why, len, "the host is missing");
	if (hl >= sizeof a->host)
		return refuse(why, len, "the host is longer than %zu bytes", sizeof a->host - 1);
	memcpy(a->host, host, hl);
	a->host[hl] = '\0';
	if (!port) {
		if (need_port)
			return refuse(why, len, "the port is missing (host:port)");
		a->port = def_port;
		return 0;
	}
	long p = digits(port, n - (size_t)(port - s));
	if (p < min_port || p > 65535)
		return refuse(why, len, "the port must be a number from %d to 65535", min_port);
	a->port = (int)p;
	return 0;
}

static int parse_unix(const char *p, struct addr *a, char *why, size_t len)
{
	a->kind = ADDR_UNIX;
	if (p[0] != '/')
		return refuse(why, len, "unix:// needs an absolute path: unix:///path/to/socket");
	size_t n = strlen(p);
	if (n >= ADDR_UNIX_PATH_MAX)
		return refuse(why, len, "the socket path must be shorter than %d bytes",
			      ADDR_UNIX_PATH_MAX);
	memcpy(a->path, p, n + 1);
	return 0;
}

static int parse_redis(const char *p, struct addr *a, char *why, size_t len)
{
	a->kind = ADDR_REDIS;
	const char *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : strlen(p);
	int rc = authority(p, n, 0, ADDR_REDIS_PORT, 1, a, why, len);
	if (rc)
		return rc;
	if (slash && slash[1]) {
		long db = digits(slash + 1, strlen(slash + 1));
		if (db < 0 || db > ADDR_REDIS_DB_MAX)
			return refuse(why, len, "the database number must be from 0 to %d",
				      ADDR_REDIS_DB_MAX);
		a->db = (int)db;
	}
	return 0;
}

static int parse_http(const char *p, int tls, struct addr *a, char *why, size_t len)
{
	a->kind = tls ? ADDR_HTTPS : ADDR_HTTP;
	const char *slash = strchr(p, '/');
	size_t n = slash ? (size_t)(slash - p) : strlen(p);
	int rc = authority(p, n, 0, tls ? 443 : 80, 1, a, why, len);
	if (rc)
		return rc;
	if (slash) {
		size_t pl = strlen(slash);
		if (pl >= sizeof a->path)
			return refuse(why, len, "the path is longer than %zu bytes",
				      sizeof a->path - 1);
		memcpy(a->path, slash, pl + 1);
	}
	return 0;
}

int addr_parse(const char *s, unsigned allow, struct addr *a, char *why, size_t whylen)
{
	char f[160];
	memset(a, 0, sizeof *a);
	if (whylen)
		why[0] = '\0';
	forms(allow, f, sizeof f);
	if (!s || !s[0])
		return refuse(why, whylen, "empty; expected %s", f);
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return refuse(why, whylen, "spaces and control characters are not allowed");
	if (strpbrk(s, "?#"))
		return refuse(why, whylen, "a query (?) or fragment (#) is not allowed");
	const char *scheme_end = strstr(s, "://");
	if (!scheme_end) {
		if (!(allow & ADDR_F_HOSTPORT))
			return refuse(why, whylen, "no scheme; expected %s", f);
		if (strchr(s, '/') || strchr(s, '@'))
			return refuse(why, whylen, "expected %s", f);
		a->kind = ADDR_HOSTPORT;
		return authority(s, strlen(s), 1, 0, allow & ADDR_F_PORT0 ? 0 : 1, a, why,
				 whylen);
	}
	const char *rest = scheme_end + 3;
	size_t sl = (size_t)(scheme_end - s);
	unsigned need = sl == 5 && !strncmp(s, "redis", 5)   ? ADDR_F_REDIS
			: sl == 4 && !strncmp(s, "unix", 4)  ? ADDR_F_UNIX
			: sl == 4 && !strncmp(s, "http", 4)  ? ADDR_F_HTTP
			: sl == 5 && !strncmp(s, "https", 5) ? ADDR_F_HTTP
							     : 0;
	if (!need || !(allow & need))
		return refuse(why, whylen, "the scheme '%.*s://' is not accepted here; expected %s",
			      (int)(sl > 16 ? 16 : sl), s, f);
	if (need == ADDR_F_UNIX)
		return parse_unix(rest, a, why, whylen);
	const char *at = strchr(rest, '@'), *slash = strchr(rest, '/');
	if (at && (!slash || at < slash))
		return refuse(why, whylen, "user:password@ in the address is not supported");
	if (need == ADDR_F_REDIS)
		return parse_redis(rest, a, why, whylen);
	return parse_http(rest, sl == 5, a, why, whylen);
}

char *addr_format(const struct addr *a, char *buf, size_t len)
{
	const char *lb = a->is_v6 ? "[" : "", *rb = a->is_v6 ? "]" : "";
	switch (a->kind) {
	case ADDR_HOSTPORT:
		snprintf(buf, len, "%s%s%s:%d", lb, a->host, rb, a->port);
		break;
	case ADDR_REDIS:
		snprintf(buf, len, "redis://%s%s%s:%d/%d", lb, a->host, rb, a->port, a->db);
		break;
	case ADDR_UNIX:
		snprintf(buf, len, "unix://%s", a->path);
		break;
	case ADDR_HTTP:
	case ADDR_HTTPS:
		snprintf(buf, len, "%s://%s%s%s:%d%s", a->kind == ADDR_HTTPS ? "https" : "http",
			 lb, a->host, rb, a->port, a->path);
		break;
	}
	return buf;
}
