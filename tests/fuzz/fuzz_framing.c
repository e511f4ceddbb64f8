/* libFuzzer driver: HTTP/1.1 request framing. The first byte picks a piece size; the same
 * bytes fed at once and in pieces must give the same events and the same refusal, and every
 * call must consume something until a refusal. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/framing.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feeds p in pieces of step bytes (0: at once); writes up to cap events, returns how many. */
static size_t run(const char *p, size_t n, size_t step, struct framing *f, char *events,
		  size_t cap)
{
	framing_init(f, 512, 256);
	size_t ne = 0;
	for (size_t at = 0; at < n;) {
		size_t piece = step && n - at > step ? step : n - at;
		for (size_t done = 0; done < piece;) {
			enum framing_event ev;
			size_t k = framing_feed(f, p + at + done, piece - done, &ev);
			if (ev != FRAMING_NONE && ne < cap)
				events[ne++] = (char)('0' + ev);
			if (ev == FRAMING_REFUSED)
				return ne;
			if (k == 0)
				abort(); /* no progress without a refusal */
			done += k;
		}
		at += piece;
	}
	return ne;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = 1 + data[0] % 13;
	const char *p = (const char *)data + 1;
	size_t n = size - 1;
	static char a[8192], b[8192];
	struct framing fa, fb;
	size_t na = run(p, n, 0, &fa, a, sizeof a);
	size_t nb = run(p, n, step, &fb, b, sizeof b);
	if (na != nb || memcmp(a, b, na) != 0)
		abort();
	const struct framing_refusal *ra = framing_refusal(&fa), *rb = framing_refusal(&fb);
	if (ra->status != rb->status || (ra->code && strcmp(ra->code, rb->code) != 0))
		abort();
	return 0;
}
