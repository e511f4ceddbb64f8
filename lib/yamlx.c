/* YAML to jansson through libyaml's document loader. */
#include "lib/yamlx.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "lib/alloc.h"

/* Deeper nesting than this is not a kubeconfig or a manifest, and must not exhaust the stack. */
#define YAMLX_MAX_DEPTH 64

static json_t *node_json(yaml_document_t *doc, yaml_node_t *n, int depth)
{
	if (!n || depth > YAMLX_MAX_DEPTH)
		return json_null();
	switch (n->type) {
	case YAML_SCALAR_NODE: {
		json_t *s = json_stringn((const char *)n->data.scalar.value, n->data.scalar.length);
		return s ? s : json_null(); /* not UTF-8: libyaml checks, but be safe */
	}
	case YAML_SEQUENCE_NODE: {
		json_t *a = json_array();
		for (yaml_node_item_t *i = n->data.sequence.items.start;
		     i < n->data.sequence.items.top; i++)
			json_array_append_new(
				a, node_json(doc, yaml_document_get_node(doc, *i), depth + 1));
		return a;
	}
	case YAML_MAPPING_NODE: {
		json_t *o = json_object();
		for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
		     p < n->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(doc, p->key);
			if (!k || k->type != YAML_SCALAR_NODE)
				continue;
			json_object_set_new(
				o, (const char *)k->data.scalar.value,
				node_json(doc, yaml_document_get_node(doc, p->value), depth + 1));
		}
		return o;
	}
	default:
		return json_null();
	}
}

static char *read_file(const char *path, size_t *len, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	size_t cap = 4096, n = 0;
	char *buf = gwb_malloc(cap);
	for (;;) {
		if (n + 1 == cap) {
			if (cap >= YAMLX_MAX_BYTES) {
				snprintf(err, errlen, "%s: larger than %d bytes", path,
					 YAMLX_MAX_BYTES);
				gwb_free(buf);
				fclose(f);
				return NULL;
			}
			cap *= 2;
			buf = gwb_realloc(buf, cap);
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);
		if (got == 0)
			break;
		n += got;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

json_t *yamlx_load_file(const char *path, char *err, size_t errlen)
{
	size_t len;
	char *text = read_file(path, &len, err, errlen);
	if (!text)
		return NULL;
	yaml_parser_t p;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	json_t *docs = json_array();
	for (;;) {
		yaml_document_t doc;
		if (!yaml_parser_load(&p, &doc)) {
			snprintf(err, errlen, "%s:%zu: %s", path, p.problem_mark.line + 1,
				 p.problem ? p.problem : "invalid YAML");
			json_decref(docs);
			docs = NULL;
			break;
		}
		yaml_node_t *root = yaml_document_get_root_node(&doc);
		if (!root) { /* the end of the stream */
			yaml_document_delete(&doc);
			break;
		}
		json_array_append_new(docs, node_json(&doc, root, 0));
		yaml_document_delete(&doc);
	}
	yaml_parser_delete(&p);
	gwb_free(text);
	return docs;
}
