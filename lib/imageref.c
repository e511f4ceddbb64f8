/* The Docker reference grammar, read left to right: domain (when the first component looks
 * like one), path components, tag, digest. */
#include "lib/imageref.h"

#include <string.h>

static int lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int alnum(char c)
{
	return lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static int fail(const char **why, const char *rule)
{
	if (why)
		*why = rule;
	return 0;
}

/* A domain [s, e): components of [A-Za-z0-9] with inner '-', joined by '.', then an optional
 * ":port" of digits. */
static int domain_valid(const char *s, const char *e)
{
	const char *colon = memchr(s, ':', (size_t)(e - s));
	const char *host_end = colon ? colon : e;
	if (colon) {
		if (colon + 1 == e)
			return 0;
		for (const char *p = colon + 1; p < e; p++)
			if (*p < '0' || *p > '9')
				return 0;
	}
	const char *p = s;
	while (p < host_end) {
		const char *dot = memchr(p, '.', (size_t)(host_end - p));
		const char *ce = dot ? dot : host_end;
		if (ce == p || !alnum(*p) || !alnum(ce[-1]))
			return 0;
		for (const char *q = p; q < ce; q++)
			if (!alnum(*q) && *q != '-')
				return 0;
		if (!dot)
			break;
		p = dot + 1;
		if (p == host_end)
			return 0;
	}
	return host_end > s;
}

/* A path component [s, e): alnum runs joined by '.', '_', "__" or one or more '-'. */
static int component_valid(const char *s, const char *e)
{
	if (s == e || !lower_alnum(*s) || !lower_alnum(e[-1]))
		return 0;
	for (const char *p = s; p < e;) {
		if (lower_alnum(*p)) {
			p++;
			continue;
		}
		const char *q = p;
		if (*p == '-') {
			while (q < e && *q == '-')
				q++;
		} else if (*p == '_') {
			q += (q + 1 < e && q[1] == '_') ? 2 : 1;
		} else if (*p == '.') {
			q++;
		} else {
			return 0;
		}
		if (q >= e || !lower_alnum(*q))
			return 0;
		p = q;
	}
	return 1;
}

static int tag_valid(const char *s, size_t n)
{
	if (n < 1 || n > IMAGEREF_TAG_MAX || !(alnum(*s) || *s == '_'))
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
			return 0;
	return 1;
}

static int digest_valid(const char *s)
{
	static const char algo[] = "sha256:";
	if (strncmp(s, algo, sizeof algo - 1) != 0)
		return 0;
	s += sizeof algo - 1;
	size_t n = strlen(s);
	if (n != 64)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

int imageref_valid(const char *s, const char **why)
{
	if (!s || !*s)
		return fail(why, "must not be empty");
	const char *at = strchr(s, '@');
	if (at && !digest_valid(at + 1))
		return fail(why, "a digest must be @sha256: and 64 lowercase hex digits");
	const char *end = at ? at : s + strlen(s);
	/* The tag's ':' is the last one after the last '/' (a domain's port comes before; a
	 * lone "host:5000" is a name with a tag, as Docker reads it). */
	const char *colon = NULL;
	for (const char *p = s; p < end; p++) {
		if (*p == '/')
			colon = NULL;
		else if (*p == ':')
			colon = p;
	}
	const char *name_end = colon ? colon : end;
	if (colon && !tag_valid(colon + 1, (size_t)(end - colon - 1)))
		return fail(why, "a tag must be 1 to 128 of [A-Za-z0-9_.-], not starting with '.' "
				 "or '-'");
	if (name_end - s > IMAGEREF_NAME_MAX)
		return fail(why, "the name (registry and path) must be at most 255 bytes");
	const char *p = s;
	const char *first = memchr(s, '/', (size_t)(name_end - s));
	if (first) {
		size_t n = (size_t)(first - s);
		int is_domain = memchr(s, '.', n) || memchr(s, ':', n) ||
				(n == 9 && strncmp(s, "localhost", 9) == 0);
		for (size_t i = 0; i < n && !is_domain; i++)
			is_domain = s[i] >= 'A' && s[i] <= 'Z';
		if (is_domain) {
			if (!domain_valid(s, first))
				return fail(why, "the registry must be a host name with an "
						 "optional :port");
			p = first + 1;
		}
	}
	while (p <= name_end) {
		const char *e = memchr(p, '/', (size_t)(name_end - p));
		if (!e)
			e = name_end;
		if (!component_valid(p, e))
			return fail(why, "each path component must be lowercase letters and "
					 "digits, joined by '.', '_', '__' or '-'");
		p = e + 1;
	}
	return 1;
}

static int boundary(char c)
{
	return c == '/' || c == ':' || c == '@';
}

int imageref_has_prefix(const char *ref, const char *prefix)
{
	size_t n = strlen(prefix);
	if (n == 0 || strncmp(ref, prefix, n) != 0)
		return 0;
	return boundary(prefix[n - 1]) || ref[n] == '\0' || boundary(ref[n]);
}

int imageref_prefix_valid(const char *prefix)
{
	size_t n = strlen(prefix);
	if (n < 1 || n > IMAGEREF_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = prefix[i];
		if (!alnum(c) && !strchr("._-/:@", c))
			return 0;
	}
	return 1;
}
