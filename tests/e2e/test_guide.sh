#!/bin/sh
# The lab guide's commands, run: every ```sh block of docs/lab/lab-guide.en.md from "Set-up" on,
# against a private `make demo` (tools/demo.sh with its own runtime folder, port 0 and this
# build's binaries), one case per experiment ("## N."), each in a fresh `sh -e` that first runs
# the Set-up blocks (`. .runtime/env`, `ctl`), then the experiment's blocks in order; after each
# case the guide's clean-up block (fence `sh between`) runs, after clearing kubesim's faults and
# card health in case the experiment stopped half-way. Blocks whose fence says `sh skip` are not
# run. Every answer gwbctl receives in a case (lib/httpc.c's GWB_HTTPC_RECORD) is then held to
# the server's OpenAPI document (tests/e2e/gwb_openapi.py). One more case checks that the
# Chinese guide has the same blocks, command for command (comments aside), and that every
# experiment has a runnable block.
#
# Usage: test_guide [FILTER]   (cases with a word of "test_guide.NAME" starting with FILTER; words
# split at '.', '_', '-', as the C tests do). Prints one line per case and `N passed, N failed`
# last; exits 1 on a failure. A failed case keeps its folder (scripts, output, the stack's logs)
# and prints its path and the output's last lines.
# Environment: GWB_BIN (the binaries; default: the folder this is installed under),
# GWB_ROOT (the repository; set at install), GWB_GUIDE_CASE_SECONDS (each case's bound, 60),
# GWB_GUIDE_KEEP=1 (keep every case's folder, passed or not).
set -u
ROOT=${GWB_ROOT:-@GWB_ROOT@}
if [ -z "${GWB_BIN:-}" ]; then
	GWB_BIN=$(cd "$(dirname "$0")/../.." && pwd)
fi
filter=${1:-}
EN=$ROOT/docs/lab/lab-guide.en.md
ZH=$ROOT/docs/lab/lab-guide.zh.md
CASE_S=${GWB_GUIDE_CASE_SECONDS:-60}
# The experiments, by their number in the guide. No name has a word that a filter the guide
# names (race, recon_restart_recovery, recon_timeout_after_create) would select.
NAMES="0:exp0_first_task 1:exp1_idempotent 2:exp2_same_card 3:exp3_overlimit
4:exp4_capacity 5:exp5_cancel_reclaim 6:exp6_recovery 7:exp7_fragmentation
8:exp8_device_health 9:exp9_ls_be"

passed=0
failed=0

selected() {
	[ -z "$filter" ] && return 0
	awk -v f="$filter" -v s="test_guide.$1" 'BEGIN {
		n = length(f)
		for (i = 1; i + n - 1 <= length(s); i++)
			if (substr(s, i, n) == f && (i == 1 || index("._-", substr(s, i - 1, 1))))
				exit 0
		exit 1 }'
}

report() { # name rc ms folder
	if [ "$2" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok   test_guide.$1 ($3 ms)"
	else
		failed=$((failed + 1))
		echo "FAIL test_guide.$1 ($3 ms)"
		if [ -f "$4/out" ]; then
			# The step that failed (sh -x traces each command with "+ "), what gwbctl said,
			# and the output's end.
			last=$(grep '^+ ' "$4/out" | tail -n 1)
			[ -n "$last" ] && echo "    failed at: ${last#+ }"
			grep -E '^gwbctl: |^case timed out|^the clean-up' "$4/out" | tail -n 5 | sed 's/^/    /'
			tail -n 12 "$4/out" | sed 's/^/    | /'
		fi
		echo "    kept: $4"
	fi
}

now_ms() { date +%s%3N; }

# Every ```sh block of file $1 as "=== INFO" followed by its lines, comments and blank lines
# dropped: the commands, for comparing the two languages.
commands_of() {
	awk '/^```sh/ { inb = 1; print "=== " substr($0, 4); next }
	     /^```/ { inb = 0; next }
	     inb { print }' "$1" |
		sed -e 's/^#.*$//' -e 's/[[:space:]][[:space:]]*#[[:space:]].*$//' -e 's/[[:space:]]*$//' |
		grep -v '^$'
}

# Splits the English guide into $1/setup.sh, $1/between.sh and $1/expN.sh (the runnable
# blocks of each part, in order), and $1/skipped (one line per skipped block).
split_guide() {
	awk -v d="$1" '
		/^## / { part = ""
			 if ($0 ~ /^## Set-up/) part = "setup"
			 else if (match($0, /^## [0-9]+\./)) part = "exp" substr($0, 4, RLENGTH - 4)
			 next }
		/^```sh/ { info = substr($0, 6); inb = 1
			   out = ""
			   if (part == "") { skip = 1 }
			   else if (info ~ /(^| )skip/) { skip = 1; print part ": " $0 >> (d "/skipped") }
			   else if (info ~ /(^| )between/) { skip = 0; out = d "/between.sh" }
			   else { skip = 0; out = d "/" part ".sh" }
			   if (out != "") print "# ---- " part " " $0 >> out
			   next }
		/^```/ && inb { inb = 0; next }
		inb && !skip && out != "" { print >> out }' "$EN"
}

tmp=$(mktemp -d /tmp/gwbguide.XXXXXX)
demo_pid=""
stop_stack() {
	if [ -n "$demo_pid" ]; then
		kill "$demo_pid" 2>/dev/null
		wait "$demo_pid" 2>/dev/null
		demo_pid=""
	fi
}
trap 'stop_stack' EXIT
trap 'stop_stack; exit 1' INT TERM HUP PIPE

# ---- the two languages' blocks ----
name=blocks_match_in_both_languages
if selected "$name"; then
	t0=$(now_ms)
	d=$tmp/$name
	mkdir -p "$d"
	rc=0
	{
		commands_of "$EN" >"$d/en" && commands_of "$ZH" >"$d/zh" || rc=1
		if ! diff -u "$d/en" "$d/zh"; then
			echo "the Chinese guide's blocks differ from the English ones (- en, + zh)"
			rc=1
		fi
		mkdir -p "$d/split"
		split_guide "$d/split"
		for n in 0 1 2 3 4 5 6 7 8 9; do
			if [ ! -s "$d/split/exp$n.sh" ]; then
				echo "experiment $n has no runnable block"
				rc=1
			fi
		done
		for f in setup between; do
			[ -s "$d/split/$f.sh" ] || { echo "no $f block"; rc=1; }
		done
		echo "skipped blocks (marked sh skip):"
		cat "$d/split/skipped" 2>/dev/null
	} >"$d/out" 2>&1
	report "$name" "$rc" $(($(now_ms) - t0)) "$d"
	[ "$rc" -eq 0 ] && rm -rf "$d"
fi

# ---- the experiments ----
chosen=""
for e in $NAMES; do
	if selected "${e#*:}"; then chosen="$chosen $e"; fi
done
if [ -n "$chosen" ]; then
	split=$tmp/split
	mkdir -p "$split"
	split_guide "$split"
	rt=$tmp/rt
	work=$tmp/work
	mkdir -p "$rt" "$work"
	ln -s "$GWB_BIN" "$work/bin"
	ln -s "$rt" "$work/.runtime"
	GWB_DEMO_RUNTIME=$rt GWB_DEMO_PORT=0 GWB_DEMO_QUIET=1 GWB_DEMO_BIN=$GWB_BIN \
		GWB_ADMIN_TOKEN=guide-admin-token "$ROOT/tools/demo.sh" >"$rt/demo.out" 2>&1 &
	demo_pid=$!
	i=0
	while [ ! -s "$rt/env" ] && [ $i -lt 300 ] && kill -0 "$demo_pid" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	if [ ! -s "$rt/env" ]; then
		echo "FAIL test_guide: the private make demo did not start; its output:"
		sed 's/^/    /' "$rt/demo.out"
		echo "    kept: $tmp"
		echo "0 passed, 1 failed"
		exit 1
	fi
	# What the test adds before the guide's clean-up: no fault, every card healthy.
	cat >"$tmp/reset.sh" <<'EOF'
ctl faults -X DELETE >/dev/null
for m in 0 1; do
	ctl actions/device-health -X POST -d "{\"node\": \"colima-gwb\", \"minor\": $m, \"healthy\": true}" >/dev/null
done
EOF
	for e in $chosen; do
		n=${e%%:*}
		name=${e#*:}
		d=$tmp/$name
		mkdir -p "$d"
		{
			echo "set -e"
			cat "$split/setup.sh" "$split/exp$n.sh"
		} >"$d/case.sh"
		{
			echo "set -e"
			cat "$split/setup.sh" "$tmp/reset.sh" "$split/between.sh"
		} >"$d/between.sh"
		t0=$(now_ms)
		(cd "$work" && GWB_HTTPC_RECORD=$d/answers.jsonl timeout -k 5 "$CASE_S" \
			sh -x "$d/case.sh") >"$d/out" 2>&1
		rc=$?
		[ $rc -eq 124 ] && echo "case timed out after $CASE_S s" >>"$d/out"
		# Every answer gwbctl received in the case, held to the server's own document.
		if [ $rc -eq 0 ] && [ -s "$d/answers.jsonl" ]; then
			url=$(. "$rt/env" && echo "$GWB_URL")
			/usr/bin/python3 "$ROOT/tests/e2e/gwb_openapi.py" "$url" "$d/answers.jsonl" \
				>>"$d/out" 2>&1 || rc=1
		fi
		(cd "$work" && timeout -k 5 60 sh -x "$d/between.sh") >"$d/between.out" 2>&1
		brc=$?
		if [ $brc -ne 0 ]; then
			{
				echo "the clean-up after it failed (exit $brc):"
				tail -n 15 "$d/between.out"
			} >>"$d/out"
			rc=1
		fi
		if [ $rc -ne 0 ]; then
			cp "$rt"/*.log "$d/" 2>/dev/null
		fi
		report "$name" "$rc" $(($(now_ms) - t0)) "$d"
		[ "$rc" -eq 0 ] && [ "${GWB_GUIDE_KEEP:-}" != 1 ] && rm -rf "$d"
	done
	stop_stack
fi

if [ "$failed" -eq 0 ] && [ "${GWB_GUIDE_KEEP:-}" != 1 ]; then
	rm -rf "$tmp"
elif [ "${GWB_GUIDE_KEEP:-}" = 1 ]; then
	echo "kept: $tmp"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
