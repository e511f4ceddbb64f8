#!/bin/sh
# `make valgrind`: the unit tests, then a short integration subset with gwb-server under
# valgrind (memcheck): any invalid access or definite/indirect leak fails the run. Forked test
# cases are followed by valgrind (fork keeps the tool); exec'd helpers (redis-server, kubesim)
# run natively. Prints `N passed, N failed` last, like tests/run.sh.
set -u
: "${GWB_BIN:?GWB_BIN must point at the bin folder}"
# --fair-sched=yes: valgrind's default lock between threads is a pipe, whose writes would count
# in /proc/self/io as the process's own (the store's VFS test counts its write calls).
VG="valgrind -q --fair-sched=yes --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --track-fds=no"
# The integration cases that go through every layer of the server without timing margins that
# a 20x slower server would miss.
SUBSET=${VALGRIND_SUBSET:-api_submit_then_get api_idempotency api_bad_input api_authorization api_list queue_submit_entry queue_cancel queue_poison}
passed=0
failed=0
tally() { # output file
	last=$(tail -n 1 "$1")
	p=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p')
	f=$(echo "$last" | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p')
	if [ -z "$p" ]; then
		echo "FAIL $2: no summary line"
		failed=$((failed + 1))
		return
	fi
	passed=$((passed + p))
	failed=$((failed + f))
}
out=$(mktemp)
for t in $(find "$GWB_BIN/tests/unit" -type f -name 'test_*' -perm -u+x | sort); do
	$VG "$t" >"$out" 2>&1
	grep -v '^0 passed, 0 failed$' "$out" | grep -v '^ok ' || true
	tally "$out" "$(basename "$t")"
done
for f in $SUBSET; do
	for t in "$GWB_BIN/tests/integration/test_api" "$GWB_BIN/tests/integration/test_queue"; do
		GWB_TEST_WRAP="$VG" "$t" "$f" >"$out" 2>&1
		grep -v '^0 passed, 0 failed$' "$out" || true
		tally "$out" "$(basename "$t") $f"
	done
done
rm -f "$out"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
