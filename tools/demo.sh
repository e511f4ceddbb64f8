#!/bin/sh
# `make demo`: starts a private redis-server on a Unix socket and gwb-server on this machine with
# a demo team, prints how to try it, and keeps running until Ctrl-C. Everything lives under
# .runtime/ (database, Redis socket, logs).
set -eu
cd "$(dirname "$0")/.."
RT=.runtime
mkdir -p "$RT"
ADMIN=${GWB_ADMIN_TOKEN:-demo-admin-token}
TEAM_TOKEN=demo-alpha-token
PORT=${GWB_DEMO_PORT:-8080}

pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

# A private Redis for the intent stream: Unix socket only (no TCP port), no persistence.
# Its socket path must be absolute and under 108 bytes.
REDIS_SOCK="$(pwd)/$RT/redis.sock"
if ! command -v redis-server >/dev/null 2>&1; then
	echo "redis-server is missing: run 'make deps' as root first" >&2
	exit 1
fi
rm -f "$REDIS_SOCK"
redis-server --port 0 --unixsocket "$REDIS_SOCK" --unixsocketperm 700 --save "" \
	--appendonly no --dir "$RT" >"$RT/redis.log" 2>&1 &
pids="$pids $!"
for _ in $(seq 1 100); do
	[ -S "$REDIS_SOCK" ] && break
	sleep 0.1
done
if [ ! -S "$REDIS_SOCK" ]; then
	echo "redis-server did not start; its log:" >&2
	cat "$RT/redis.log" >&2
	exit 1
fi

GWB_ADMIN_TOKEN=$ADMIN GWB_DB=$RT/gwb.db GWB_LISTEN=127.0.0.1:$PORT \
	GWB_REDIS="unix://$REDIS_SOCK" bin/gwb-server >"$RT/gwb-server.log" 2>&1 &
pids="$pids $!"
url=""
for _ in $(seq 1 100); do
	url=$(sed -n 's/^gwb-server listening on //p' "$RT/gwb-server.log" | head -n 1)
	[ -n "$url" ] && break
	sleep 0.1
done
if [ -z "$url" ]; then
	echo "gwb-server did not start; its log:" >&2
	cat "$RT/gwb-server.log" >&2
	exit 1
fi
curl -sS -o /dev/null -X PUT "$url/v1/teams/alpha" -H "Authorization: Bearer $ADMIN" \
	-H 'Content-Type: application/json' \
	-d "{\"gpu_memory_mib\": 10240, \"gpu_core_percent\": 400, \"token\": \"$TEAM_TOKEN\"}"

cat <<MSG
gwb-server is running at $url (log: $RT/gwb-server.log, database: $RT/gwb.db)
Redis (intent stream gwb:intents) listens on unix://$REDIS_SOCK (log: $RT/redis.log).
Team "alpha" has a quota of 10240 MiB and 400% core; its token is $TEAM_TOKEN.

Submit the lab's first task (1024 MiB, 25% of one card, 60 s):
  curl -i -X POST $url/v1/tasks -H 'Authorization: Bearer $TEAM_TOKEN' \\
       -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' \\
       -d '{"team": "alpha", "name": "demo", "gpu_memory_mib": 1024, "gpu_core_percent": 25}'
Watch the team's reservation grow:
  curl -s $url/v1/teams/alpha -H 'Authorization: Bearer $TEAM_TOKEN'
Repeat the submission with the same Idempotency-Key: 200 and the same task.

The same with gwbctl, and the queue as the reconciler sees it:
  export GWB_URL=$url GWB_TOKEN=$TEAM_TOKEN GWB_REDIS=unix://$REDIS_SOCK
  bin/gwbctl submit --team alpha --mem 1024 --core 25 --name demo
  bin/gwbctl list
  bin/gwbctl intents            # stream entries, pending state, decoded bodies
  bin/gwbctl cancel TASK_ID
  redis-cli -s $REDIS_SOCK XRANGE gwb:intents - +

Press Ctrl-C to stop.
MSG
wait
