/* The API's OpenAPI document (docs/openapi.yaml), built into the binary as JSON: the Makefile
 * converts it (tools/openapi-json.py) into a generated C file. The server serves it at
 * GET /v1/openapi.json; the test harness validates answers against the same bytes. */
#ifndef GWB_OPENAPI_DOC_H
#define GWB_OPENAPI_DOC_H

#include <stddef.h>

/* The document's JSON text (compact, keys sorted), NUL-terminated; openapi_json_len bytes
 * without the NUL. Static: never freed. */
extern const char openapi_json[];
extern const size_t openapi_json_len;

#endif
