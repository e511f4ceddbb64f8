/* libFuzzer driver: the Prometheus text parser. Every sample it hands out is within its
 * bounds, and written again through lib/prom.c it parses back to the same name and labels. */
#include <event2/buffer.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/alloc.h"
#include "lib/prom.h"
#include "lib/promparse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const struct promp_sample *a, const struct promp_sample *b)
{
	if (strcmp(a->name, b->name) || a->nlabels != b->nlabels)
		return 0;
	for (int i = 0; i < a->nlabels; i++)
		if (strcmp(a->labels[i].name, b->labels[i].name) ||
		    strcmp(a->labels[i].value, b->labels[i].value))
			return 0;
	return isnan(a->value) == isnan(b->value);
}

static int check(const struct promp_sample *s, void *arg)
{
	(void)arg;
	if (!s->name[0] || s->nlabels < 0 || s->nlabels > PROMP_LABELS_MAX ||
	    strlen(s->name) >= PROMP_NAME_MAX)
		abort();
	struct prom_label l[PROMP_LABELS_MAX];
	for (int i = 0; i < s->nlabels; i++) {
		l[i].name = s->labels[i].name;
		l[i].value = s->labels[i].value;
	}
	struct evbuffer *b = evbuffer_new();
	prom_sample_real(b, s->name, l, s->nlabels, s->value);
	size_t n = evbuffer_get_length(b);
	char *text = gwb_malloc(n);
	evbuffer_remove(b, text, n);
	evbuffer_free(b);
	struct promp_sample back;
	/* A value written with six decimals may read back as another number, never as none;
	 * the line without its newline. */
	if (n < 1 || promp_parse_line(text, n - 1, &back) != 0 || !same(s, &back))
		abort();
	gwb_free(text);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct promp_stats st;
	promp_parse((const char *)data, size, 10000, check, NULL, &st);
	if (st.samples + st.bad_lines > st.lines)
		abort();
	return 0;
}
