#!/bin/sh
# `make fuzz`: builds every libFuzzer driver in tests/fuzz/ with clang (ASan + UBSan) and runs
# each for FUZZ_SECONDS (default 20) from its seed corpus in tests/fuzz/corpus/<name>/. New
# inputs go to build/fuzz/corpus/<name>/ (the seeds are never modified); a crash stops the run
# with the input saved under build/fuzz/.
set -eu
cd "$(dirname "$0")/.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
B=build/fuzz
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined"
make --no-print-directory CC=clang BUILD=$B BIN=$B/bin SAN=address,undefined \
	CFLAGS="-O1 -g -fsanitize=fuzzer-no-link -Wno-unknown-warning-option" \
	$B/liblib.a $B/libconfig.a $B/libqueue.a >/dev/null
mkdir -p "$B/bin"
LIBS=$(pkg-config --libs libevent hiredis libcurl msgpack sqlite3 jansson yaml-0.1 libcrypto)
for src in tests/fuzz/fuzz_*.c; do
	name=$(basename "$src" .c)
	short=${name#fuzz_}
	clang -O1 -g -D_GNU_SOURCE -I. -fsanitize=fuzzer $SAN -o "$B/bin/$name" "$src" \
		$B/libqueue.a $B/libconfig.a $B/liblib.a $LIBS -lm
	mkdir -p "$B/corpus/$short"
	echo "== $name: $SECONDS_EACH s from tests/fuzz/corpus/$short"
	"$B/bin/$name" -max_total_time="$SECONDS_EACH" -max_len=8192 -print_final_stats=1 \
		-artifact_prefix="$B/$name-" "$B/corpus/$short" "tests/fuzz/corpus/$short" 2>&1 |
		grep -E "^(stat::number_of_executed_units|stat::new_units_added|==[0-9]+==ERROR|SUMMARY)" ||
		true
	# A crash leaves an artifact; make it fail the run.
	if ls "$B/$name-"* >/dev/null 2>&1; then
		echo "$name: crash input saved as $(ls "$B/$name-"* | head -n 1)" >&2
		exit 1
	fi
done
