/* libFuzzer driver: the scheduling.koordinator.sh/device-allocated annotation codec. A parsed
 * annotation must encode and parse back to the same cards. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/devalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct devalloc a, b;
	char err[160];
	if (devalloc_parse((const char *)data, size, &a, err, sizeof err) != 0)
		return 0;
	char *enc = devalloc_format(&a);
	if (devalloc_parse(enc, strlen(enc), &b, err, sizeof err) != 0 || a.ncards != b.ncards)
		abort();
	for (int i = 0; i < a.ncards; i++)
		if (a.cards[i].minor != b.cards[i].minor || a.cards[i].core != b.cards[i].core ||
		    a.cards[i].mem_bytes != b.cards[i].mem_bytes)
			abort();
	json_decref(devalloc_to_json(&a));
	gwb_free(enc);
	return 0;
}
