#!/bin/sh
# `make demo`: starts a private redis-server on a Unix socket, kubesim (the local Kubernetes API
# with DeviceShare, whose kubelet runs bin/gwb-worker) and gwb-server on this machine with a
# demo team, prints how to try the lab's first experiment, and keeps running until Ctrl-C.
# Everything lives under .runtime/ (database, Redis socket, kubeconfig, logs), or under
# GWB_DEMO_RUNTIME (a folder relative to the repository root, or absolute; the guide's test
# uses a private one), GWB_DEMO_BIN the folder of the binaries (default bin). GWB_DEMO_PORT picks gwb-server's port (default 8080; 0: any free port,
# the real URL is printed and written to the env file). GWB_DEMO_QUIET=1 prints only the
# first line and the env file's path (for scripts). GWB_DEMO_SIM_MONITOR=1 points gwb-server's
# usage collector at kubesim's simulated monitor (/sim/metrics/hami): usage then shows
# "simulated", the worker's ledger, never a GPU measurement.
set -eu
cd "$(dirname "$0")/.."
RT=${GWB_DEMO_RUNTIME:-.runtime}
# The binaries: bin/ by default (GWB_DEMO_BIN: another build's, e.g. build/check/bin).
B=${GWB_DEMO_BIN:-bin}
B=$(cd "$B" && pwd)
mkdir -p "$RT"
RT=$(cd "$RT" && pwd)
# Shown in messages relative to the repository root when it is inside it.
case $RT in "$(pwd)"/*) RT_SHOW=${RT#"$(pwd)"/} ;; *) RT_SHOW=$RT ;; esac
ADMIN=${GWB_ADMIN_TOKEN:-demo-admin-token}
TEAM_TOKEN=demo-alpha-token
PORT=${GWB_DEMO_PORT:-8080}

pids=""
cleanup() {
	for p in $pids ${server_pid:-}; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
# A signal stops everything and exits (without the exit the loop below would start the server
# again once cleanup stopped it).
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP

# A private Redis for the intent stream: Unix socket only (no TCP port), no persistence.
# Its socket path must be absolute and under 108 bytes.
REDIS_SOCK="$RT/redis.sock"
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

# kubesim: two 8 GiB cards on node colima-gwb; pod logs and annotation files under .runtime.
KS_PORT=${GWB_DEMO_KUBESIM_PORT:-0}
mkdir -p "$RT/kubesim"
# Its fault controls also answer on a Unix socket, which stays up while the API refuses.
KS_CTL="$RT/kubesim.sock"
rm -f "$KS_CTL"
"$B/kubesim" --listen "127.0.0.1:$KS_PORT" --worker "$B/gwb-worker" \
	--state-dir "$RT/kubesim" --control-socket "$KS_CTL" >"$RT/kubesim.log" 2>&1 &
pids="$pids $!"
ks_url=""
for _ in $(seq 1 100); do
	ks_url=$(sed -n 's/^kubesim listening on //p' "$RT/kubesim.log" | head -n 1)
	[ -n "$ks_url" ] && break
	sleep 0.1
done
if [ -z "$ks_url" ]; then
	echo "kubesim did not start; its log:" >&2
	cat "$RT/kubesim.log" >&2
	exit 1
fi
KUBECONFIG_FILE="$RT/kubeconfig"
cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
current-context: kubesim
contexts:
- name: kubesim
  context: {cluster: kubesim, user: demo, namespace: gpu-workbench}
clusters:
- name: kubesim
  cluster: {server: "$ks_url"}
users:
- name: demo
  user: {}
KC

# BE tasks become Koordinator batch pods through the lab's ClusterColocationProfile.
if command -v kubectl >/dev/null 2>&1; then
	KUBECONFIG="$KUBECONFIG_FILE" kubectl apply -f deploy/kubesim/colocation-profile.yaml \
		>"$RT/kubectl-apply.log" 2>&1 ||
		echo "note: kubectl apply of the colocation profile failed (see $RT/kubectl-apply.log)"
fi

# gwb-server is supervised like a Deployment would: killed (even with -9), it is started again
# on the same port, database and queue, which is the lab's restart-recovery experiment.
server_pid=""
start_server() {
	if [ "${GWB_DEMO_SIM_MONITOR:-0}" = 1 ]; then
		GWB_USAGE_URL="$ks_url/sim/metrics/hami"
		GWB_USAGE_PERIOD_SECONDS=${GWB_USAGE_PERIOD_SECONDS:-5}
		export GWB_USAGE_URL GWB_USAGE_PERIOD_SECONDS
	fi
	GWB_ADMIN_TOKEN=$ADMIN GWB_DB=$RT/gwb.db GWB_LISTEN=127.0.0.1:$PORT \
		GWB_REDIS="unix://$REDIS_SOCK" GWB_KUBE_SERVER="$ks_url" \
		"$B/gwb-server" >>"$RT/gwb-server.log" 2>&1 &
	server_pid=$!
	echo "$server_pid" >"$RT/gwb-server.pid"
}
: >"$RT/gwb-server.log"
start_server
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
# A restart (kill -9) comes back on the port the first start got, also when it was 0.
PORT=${url##*:}
curl -sS -o /dev/null -X PUT "$url/v1/teams/alpha" -H "Authorization: Bearer $ADMIN" \
	-H 'Content-Type: application/json' \
	-d "{\"gpu_memory_mib\": 10240, \"gpu_core_percent\": 400, \"token\": \"$TEAM_TOKEN\"}"

# Everything a shell needs to follow the lab guide, in one file: `. .runtime/env`.
cat >"$RT/env.tmp" <<ENV
export GWB_URL=$url
export GWB_TOKEN=$TEAM_TOKEN
export GWB_ADMIN_TOKEN=$ADMIN
export GWB_REDIS=unix://$REDIS_SOCK
export KUBECONFIG=$KUBECONFIG_FILE
export KUBESIM_CTL=$KS_CTL
export GWB_SERVER_PIDFILE=$RT/gwb-server.pid
ENV
mv "$RT/env.tmp" "$RT/env"

if [ "${GWB_DEMO_QUIET:-}" = 1 ]; then
	echo "gwb-server is running at $url"
	echo "env: $RT/env"
else
cat <<MSG
gwb-server is running at $url (log: $RT_SHOW/gwb-server.log, database: $RT_SHOW/gwb.db)
  (port from GWB_DEMO_PORT, default 8080; admin token: $ADMIN, from GWB_ADMIN_TOKEN)
kubesim (the local Kubernetes API, node colima-gwb with two 8 GiB cards) at $ks_url
  (log: $RT_SHOW/kubesim.log; kubeconfig: $KUBECONFIG_FILE; fault controls:
   curl --unix-socket $KS_CTL http://kubesim/_kubesim/faults)
Redis (intent stream gwb:intents) listens on unix://$REDIS_SOCK (log: $RT_SHOW/redis.log).
Team "alpha" has a quota of 10240 MiB and 400% core; its token is $TEAM_TOKEN.
In another shell, '. $RT_SHOW/env' sets GWB_URL, GWB_TOKEN, GWB_ADMIN_TOKEN, GWB_REDIS, KUBECONFIG,
KUBESIM_CTL and GWB_SERVER_PIDFILE for the lab guide's commands.
The workbench page: open $url/ in a browser and paste $TEAM_TOKEN (or the admin token $ADMIN).

The lab's first experiment (docs/lab/lab-guide.zh.md, lab-guide.en.md), in another shell:
  . $RT_SHOW/env
  ID=\$(bin/gwbctl submit --team alpha --mem 1024 --core 25 --duration 60 --name demo -o name)
  bin/gwbctl wait \$ID --state running
  bin/gwbctl teams alpha          # the reservation grew by 1024 MiB / 25%
  bin/gwbctl get \$ID -o json     # state, the allocation annotation, usage "unknown"
  bin/gwbctl devices              # what the scheduler did, card by card
  kubectl -n gpu-workbench get pods -l gwb.io/task=\$ID -o yaml   # schedulerName, device-allocated
  bin/gwbctl intents              # the intent stream as the reconciler sees it
  bin/gwbctl cancel \$ID
The same over HTTP: curl -s \$GWB_URL/v1/tasks/\$ID -H "Authorization: Bearer \$GWB_TOKEN"

gwb-server restarts by itself when it dies: try 'kill -9 \$(cat \$GWB_SERVER_PIDFILE)' with a task
running (the file holds the current server's PID).
Press Ctrl-C to stop.
MSG
fi
while sleep 1; do
	if ! kill -0 "$server_pid" 2>/dev/null; then
		echo "gwb-server exited; starting it again (log: $RT_SHOW/gwb-server.log)"
		start_server
	fi
done
