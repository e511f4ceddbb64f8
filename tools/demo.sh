#!/bin/sh
# `make demo`: starts a private redis-server on a Unix socket, kubesim (the local Kubernetes API
# with DeviceShare, whose kubelet runs bin/gwb-worker) and gwb-server on this machine with a
# demo team, prints how to try the lab's first experiment, and keeps running until Ctrl-C.
# Everything lives under .runtime/ (database, Redis socket, kubeconfig, logs).
set -eu
cd "$(dirname "$0")/.."
RT=.runtime
mkdir -p "$RT"
ADMIN=${GWB_ADMIN_TOKEN:-demo-admin-token}
TEAM_TOKEN=demo-alpha-token
PORT=${GWB_DEMO_PORT:-8080}

pids=""
cleanup() {
	for p in $pids ${server_pid:-}; do kill "$p" 2>/dev/null || true; done
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

# kubesim: two 8 GiB cards on node colima-gwb; pod logs and annotation files under .runtime.
KS_PORT=${GWB_DEMO_KUBESIM_PORT:-0}
mkdir -p "$RT/kubesim"
# Its fault controls also answer on a Unix socket, which stays up while the API refuses.
KS_CTL="$(pwd)/$RT/kubesim.sock"
rm -f "$KS_CTL"
bin/kubesim --listen "127.0.0.1:$KS_PORT" --worker "$(pwd)/bin/gwb-worker" \
	--state-dir "$(pwd)/$RT/kubesim" --control-socket "$KS_CTL" >"$RT/kubesim.log" 2>&1 &
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
KUBECONFIG_FILE="$(pwd)/$RT/kubeconfig"
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
	GWB_ADMIN_TOKEN=$ADMIN GWB_DB=$RT/gwb.db GWB_LISTEN=127.0.0.1:$PORT \
		GWB_REDIS="unix://$REDIS_SOCK" GWB_KUBE_SERVER="$ks_url" \
		bin/gwb-server >>"$RT/gwb-server.log" 2>&1 &
	server_pid=$!
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
curl -sS -o /dev/null -X PUT "$url/v1/teams/alpha" -H "Authorization: Bearer $ADMIN" \
	-H 'Content-Type: application/json' \
	-d "{\"gpu_memory_mib\": 10240, \"gpu_core_percent\": 400, \"token\": \"$TEAM_TOKEN\"}"

# Everything a shell needs to follow the lab guide, in one file: `. .runtime/env`.
cat >"$RT/env" <<ENV
export GWB_URL=$url
export GWB_TOKEN=$TEAM_TOKEN
export GWB_ADMIN_TOKEN=$ADMIN
export GWB_REDIS=unix://$REDIS_SOCK
export KUBECONFIG=$KUBECONFIG_FILE
export KUBESIM_CTL=$KS_CTL
ENV

cat <<MSG
gwb-server is running at $url (log: $RT/gwb-server.log, database: $RT/gwb.db)
  (port from GWB_DEMO_PORT, default 8080; admin token: $ADMIN, from GWB_ADMIN_TOKEN)
kubesim (the local Kubernetes API, node colima-gwb with two 8 GiB cards) at $ks_url
  (log: $RT/kubesim.log; kubeconfig: $KUBECONFIG_FILE; fault controls:
   curl --unix-socket $KS_CTL http://kubesim/_kubesim/faults)
Redis (intent stream gwb:intents) listens on unix://$REDIS_SOCK (log: $RT/redis.log).
Team "alpha" has a quota of 10240 MiB and 400% core; its token is $TEAM_TOKEN.
In another shell, '. $RT/env' sets GWB_URL, GWB_TOKEN, GWB_ADMIN_TOKEN, GWB_REDIS, KUBECONFIG
and KUBESIM_CTL for the lab guide's commands.
The workbench page: open $url/ in a browser and paste $TEAM_TOKEN (or the admin token $ADMIN).

The lab's first experiment: submit 1024 MiB / 25% of one card for 60 s,
  curl -i -X POST $url/v1/tasks -H 'Authorization: Bearer $TEAM_TOKEN' \\
       -H 'Content-Type: application/json' -H 'Idempotency-Key: demo-1' \\
       -d '{"team": "alpha", "name": "demo", "gpu_memory_mib": 1024, "gpu_core_percent": 25}'
watch the team's reservation grow,
  curl -s $url/v1/teams/alpha -H 'Authorization: Bearer $TEAM_TOKEN'
then open the task (state, the allocation annotation, usage "unknown"),
  curl -s $url/v1/tasks/TASK_ID -H 'Authorization: Bearer $TEAM_TOKEN'
and look at what the scheduler did:
  export KUBECONFIG=$KUBECONFIG_FILE
  kubectl get devices colima-gwb -o yaml
  kubectl -n gpu-workbench get pods -o yaml     # schedulerName, device-allocated
  curl -s $url/v1/devices -H 'Authorization: Bearer $TEAM_TOKEN'
Repeat the submission with the same Idempotency-Key: 200 and the same task.

The same with gwbctl, and the queue as the reconciler sees it:
  export GWB_URL=$url GWB_TOKEN=$TEAM_TOKEN GWB_REDIS=unix://$REDIS_SOCK
  bin/gwbctl submit --team alpha --mem 1024 --core 25 --name demo
  bin/gwbctl list
  bin/gwbctl intents            # stream entries, pending state, decoded bodies
  bin/gwbctl cancel TASK_ID
  redis-cli -s $REDIS_SOCK XRANGE gwb:intents - +

gwb-server restarts by itself when it dies: try 'kill -9 $server_pid' with a task running.
Press Ctrl-C to stop.
MSG
while sleep 1; do
	if ! kill -0 "$server_pid" 2>/dev/null; then
		echo "gwb-server exited; starting it again (log: $RT/gwb-server.log)"
		start_server
	fi
done
