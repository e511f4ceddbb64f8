/* The page's assets (server/web/), built into the binary: the Makefile turns each file into
 * bytes in a generated C file (tools/web-embed.sh), with its content type and an ETag that is
 * a hash of its content. */
#ifndef GWB_WEB_ASSETS_H
#define GWB_WEB_ASSETS_H

#include <stddef.h>

struct web_asset {
	const char *path;             /* "/index.html" */
	const char *type;             /* Content-Type */
	const unsigned char *data;
	size_t len;
	const char *etag;             /* quoted: "\"<hex>\"" */
};

/* Every asset, ended by an entry whose path is NULL. Static: never freed. */
extern const struct web_asset web_assets[];

#endif
