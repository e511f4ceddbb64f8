/* libFuzzer driver: the HTTP body parser (UTF-8 check, strict JSON) and the submission field
 * readers behind it. jx_parse must give what json_loadb gives (its flat reading included):
 * the same value, or a refusal for both; jx_flat_read may take only what jx_parse takes, and
 * must then give each field jx_member's value. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/jsonx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jx_parse_err pe;
	json_t *v = jx_parse((const char *)data, size, &pe);
	json_error_t je;
	json_t *want = jx_utf8_valid((const char *)data, size, NULL)
			       ? json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je)
			       : NULL;
	if ((v == NULL) != (want == NULL) || (v && !json_equal(v, want)))
		abort();
	json_decref(want);
	static const char *const qos[] = { "LS", "BE", NULL };
	static const char *const keys[] = { "team", "gpu_memory_mib", NULL };
	char *copy = gwb_malloc(size + 1);
	memcpy(copy, data, size);
	struct jx_val flat[2];
	if (jx_flat_read(copy, size, keys, flat) == 0) {
		if (!json_is_object(v))
			abort();
		for (int k = 0; k < 2; k++) {
			struct jx_val m = jx_member(v, keys[k]);
			if (m.kind != flat[k].kind || (m.kind == JX_INTEGER && m.i != flat[k].i) ||
			    (m.kind == JX_STRING && (m.n != flat[k].n || memcmp(m.s, flat[k].s, m.n))))
				abort();
		}
	} else if (memcmp(copy, data, size) != 0) {
		abort();
	}
	gwb_free(copy);
	if (!v)
		return 0;
	struct jx_err e;
	int64_t i;
	const char *s;
	jx_only_keys(v, keys, &e);
	jx_int(v, "gpu_memory_mib", 1, 0, 1, 1048576, &i, &e);
	jx_str(v, "team", 1, NULL, 1, 63, &s, &e);
	jx_enum(v, "qos", 0, qos, "LS", &s, &e);
	gwb_free(jx_dump(v));
	json_decref(v);
	return 0;
}
