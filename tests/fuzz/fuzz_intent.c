/* libFuzzer driver: the intent body decoder (msgpack from the Redis stream). A decoded intent
 * must encode and decode back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "queue/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct q_intent in, back;
	char err[160], buf[Q_BODY_MAX];
	size_t len;
	if (q_intent_decode((const char *)data, size, &in, err, sizeof err) != 0)
		return 0;
	if (q_intent_encode(&in, buf, sizeof buf, &len) != 0 ||
	    q_intent_decode(buf, len, &back, err, sizeof err) != 0 ||
	    memcmp(&in, &back, sizeof in) != 0)
		abort();
	return 0;
}
