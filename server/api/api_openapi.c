/* GET /v1/openapi.json: the API's OpenAPI document, from the bytes built into the binary
 * (server/api/openapi_doc.h). No token is needed: the document holds no data. */
#include "server/api/api.h"
#include "server/api/openapi_doc.h"

void api_openapi(struct req *r)
{
	http_reply_json_text(r, 200, openapi_json, openapi_json_len); /* HEAD: http_send */
}
