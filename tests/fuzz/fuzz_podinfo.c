/* libFuzzer driver: the downward-API annotations file reader. */
#include <stdint.h>

#include "lib/alloc.h"
#include "lib/podinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *v = NULL;
	if (podinfo_get((const char *)data, size, "scheduling.koordinator.sh/device-allocated",
			&v) == 0)
		gwb_free(v);
	return 0;
}
