#!/bin/sh
# Runs every test binary under $GWB_BIN/tests (unit first, then integration and end-to-end),
# passing the name filter on, and prints the totals last: `N passed, N failed`.
# Usage: GWB_BIN=/abs/bin tests/run.sh [FILTER]
set -u
filter=${1:-}
: "${GWB_BIN:?GWB_BIN must point at the bin folder}"
export GWB_BIN
passed=0
failed=0
broken=""
for layer in unit integration e2e; do
	[ -d "$GWB_BIN/tests/$layer" ] || continue
	for t in $(find "$GWB_BIN/tests/$layer" -type f -name 'test_*' -perm -u+x | sort); do
		name=$(basename "$t")
		out=$(mktemp)
		"$t" "$filter" >"$out" 2>&1
		rc=$?
		# A binary with no case matching the filter prints just its zero summary.
		grep -v '^0 passed, 0 failed$' "$out"
		last=$(tail -n 1 "$out")
		rm -f "$out"
		p=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
		f=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
		if [ -z "$p" ]; then
			echo "FAIL $name: exited $rc without a summary line"
			failed=$((failed + 1))
			broken="$broken $name"
			continue
		fi
		passed=$((passed + p))
		failed=$((failed + f))
		if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
			echo "FAIL $name: exited $rc"
			failed=$((failed + 1))
		fi
	done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
