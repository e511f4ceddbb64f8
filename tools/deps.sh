#!/bin/sh
# Installs the Debian packages gpu-workbench builds and tests with. Idempotent: when every
# package is present it changes nothing. Needs root (or sudo) only when something is missing.
# The browser tests (tests/e2e/test_page.py) use Debian's chromium, chromium-driver and
# python3-selenium; fonts-wqy-microhei lets their screenshots show the page's Chinese.
# python3-yaml converts docs/openapi.yaml at build time; the API's contract tests
# (tests/e2e/test_openapi.py) use python3-jsonschema and python3-hypothesis.
set -eu

PKGS="build-essential pkg-config valgrind libevent-dev libhiredis-dev libcurl4-openssl-dev
libmsgpack-dev libsqlite3-dev libjansson-dev libyaml-dev libssl-dev redis-server redis-tools
sqlite3 curl
chromium chromium-driver python3-selenium fonts-wqy-microhei
python3-yaml python3-jsonschema python3-hypothesis"

missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -z "$missing" ]; then
	echo "deps: all packages present"
	exit 0
fi
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
# A fresh machine's package lists may be stale: update before installing.
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
