/* The one address parser of every binary: host:port, [v6]:port, redis://, unix:// and
 * http(s):// URLs, each refused with a sentence that says what was expected. Callers say which
 * forms they accept, so the server, gwbctl and kubesim give the same answer for one string. */
#ifndef GWB_ADDR_H
#define GWB_ADDR_H

#include <stddef.h>

enum addr_kind {
	ADDR_HOSTPORT, /* host:port or [v6]:port */
	ADDR_REDIS,    /* redis://host[:port][/N] */
	ADDR_UNIX,     /* unix:///absolute/path */
	ADDR_HTTP,     /* http://host[:port][/path] */
	ADDR_HTTPS,    /* https://host[:port][/path] */
};

/* Which forms a caller accepts (an OR of these). */
#define ADDR_F_HOSTPORT (1u << 0)
#define ADDR_F_REDIS (1u << 1)
#define ADDR_F_UNIX (1u << 2)
#define ADDR_F_HTTP (1u << 3) /* http:// and https:// */
#define ADDR_F_PORT0 (1u << 4) /* host:port may have port 0 (a listener picks one) */

/* sun_path holds 108 bytes with its NUL. */
#define ADDR_UNIX_PATH_MAX 108
/* Redis' default configuration has databases 0 to 15. */
#define ADDR_REDIS_DB_MAX 15
#define ADDR_REDIS_PORT 6379

struct addr {
	enum addr_kind kind;
	char host[256];  /* a name, IPv4, or IPv6 without its brackets; "" for unix:// */
	int is_v6;       /* host was written in brackets */
	int port;        /* the one written, or the scheme's default (6379, 80, 443) */
	int db;          /* redis:// only; 0 when not written */
	char path[1024]; /* unix://: the socket path; http(s)://: the path ("" when none) */
};

/* Parses s as one of the forms in allow (ADDR_F_*). Returns 0 with *a filled, or GWB_EINVAL
 * with a sentence in why (NUL-terminated, cut to whylen) that names what is wrong and the forms
 * allowed. Refused everywhere: empty strings, spaces and control bytes, user:password@,
 * ?query and #fragment, an unbracketed IPv6 address, ports outside 1..65535 (0 only with
 * ADDR_F_PORT0 on host:port), Redis databases outside 0..15, relative socket paths and socket
 * paths of 108 bytes or more. a is written even on failure (its contents then mean nothing). */
int addr_parse(const char *s, unsigned allow, struct addr *a, char *why, size_t whylen);

/* Writes the address back as text (host:port with brackets for IPv6, or the URL with its
 * scheme, explicit port and db). Returns buf. */
char *addr_format(const struct addr *a, char *buf, size_t len);

#endif
