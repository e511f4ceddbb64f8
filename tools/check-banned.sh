#!/bin/sh
# Fails when project C code calls a banned function: unbounded string functions, atoi-style
# parsing without error reporting, raw malloc/free outside the allocation wrapper, and in
# gwb-server evhttp_connection_set_closecb outside the connection guard.
# A line may opt out with a trailing `/* banned-ok: reason */`.
set -u
cd "$(dirname "$0")/.." || exit 2
pattern='\b(sprintf|vsprintf|strcpy|strcat|atoi|atol|atoll|gets|strtok|malloc|calloc|realloc|free|strdup|strndup)[[:space:]]*\('
files=$(find lib server config queue worker tools tests -name '*.[ch]' 2>/dev/null)
[ -n "$files" ] || exit 0
bad=$(grep -nE "$pattern" $files | grep -v 'banned-ok' |
	grep -vE '^[^:]+:[0-9]+:[[:space:]]*(\*|//|/\*)' |
	grep -vE '(gwb|json|sqlite3|curl|redis|evbuffer|event|msgpack|yaml|OPENSSL|CRYPTO|h|jx|str|t)_[a-z_]*(malloc|calloc|realloc|free|strdup|strndup)[[:space:]]*\(' || true)
# The pattern above also matches the tail of longer names (freeaddrinfo is fine, x_free( is
# fine); keep only calls of the bare banned names.
bad=$(printf '%s\n' "$bad" | grep -E '(^|[^A-Za-z0-9_])(sprintf|vsprintf|strcpy|strcat|atoi|atol|atoll|gets|strtok|malloc|calloc|realloc|free|strdup|strndup)[[:space:]]*\(' || true)
if [ -n "$bad" ]; then
	echo "banned functions (use snprintf, strtol with checks, gwb_malloc/gwb_free...):"
	printf '%s\n' "$bad"
	exit 1
fi
# gwb-server's connection guard keeps each connection's close callback: the server's other
# code sets its own through conn_set_closecb (kubesim has no guard).
own=$(grep -nE '\bevhttp_connection_set_closecb[[:space:]]*\(' $(find server -name '*.[ch]') |
	grep -v '^server/api/conn\.c:' | grep -v 'banned-ok' || true)
if [ -n "$own" ]; then
	echo "evhttp_connection_set_closecb outside server/api/conn.c (use conn_set_closecb):"
	printf '%s\n' "$own"
	exit 1
fi
echo "lint: no banned functions"
