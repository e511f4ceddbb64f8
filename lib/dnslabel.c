/* The DNS label check (see dnslabel.h). */
#include "lib/dnslabel.h"

#include <string.h>

int dnslabel_valid(const char *s, size_t n, size_t max, unsigned flags)
{
	if (n < 1 || n > max)
		return 0;
	if (!(flags & DNSLABEL_EDGE_HYPHEN) && (s[0] == '-' || s[n - 1] == '-'))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

int dnslabel_is(const char *s)
{
	return dnslabel_valid(s, strlen(s), DNSLABEL_MAX, 0);
}
