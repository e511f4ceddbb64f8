/* libFuzzer driver: Kubernetes quantities. A parsed value must print and parse back equal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char s[128], buf[64];
	if (size >= sizeof s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	int64_t v, w;
	if (quantity_parse(s, &v) != 0)
		return 0;
	if (quantity_parse(quantity_format_binary(v, buf, sizeof buf), &w) != 0 || v != w)
		abort();
	if (quantity_parse(quantity_format_decimal(v, buf, sizeof buf), &w) != 0 || v != w)
		abort();
	return 0;
}
