/* YAML read into jansson values with libyaml: scalars become strings (YAML's types are not
 * guessed), mappings objects, sequences arrays. Used for kubeconfig files and manifests. */
#ifndef GWB_YAMLX_H
#define GWB_YAMLX_H

#include <jansson.h>
#include <stddef.h>

/* Files bigger than this are refused: a kubeconfig or a manifest is small. */
#define YAMLX_MAX_BYTES (4 << 20)

/* Loads every document of the YAML file at path into a new JSON array (caller owns it), or
 * returns NULL with "path[:line]: reason" in err. */
json_t *yamlx_load_file(const char *path, char *err, size_t errlen);

#endif
