#!/usr/bin/env bash
# Load figures of `toposched serve` (docs/performance.md): 100,000 GPUs at ~90% occupancy,
# a place+release mix with wrk, then read-only endpoints. Release build, loopback.
#   bench/service/run-load.sh [BINARY] [STORE_DIR] [DURATION_S] [CONNECTIONS]
# STORE=etcd://H:P,H:P,H:P/prefix runs it against etcd instead of SQLite in STORE_DIR
# (bench/service/run-load-etcd.sh starts a 3-member etcd cluster on loopback for that).
# SERVE_ARGS adds serve options, e.g. SERVE_ARGS='--event-log-keep 1000'.
set -euo pipefail
bin=${1:-build/release/toposched}
dir=${2:-$(mktemp -d /var/tmp/toposched-load-XXXXXX)}
duration=${3:-20}
conns=${4:-16}
here=$(cd "$(dirname "$0")" && pwd)
rm -f "$dir/state.db" "$dir/state.db-wal" "$dir/state.db-shm"
store=${STORE:-sqlite:$dir/state.db}
# shellcheck disable=SC2086  # SERVE_ARGS is a list of words
"$bin" serve --cluster 'preset:dgx-h100?nodes=12500' --store "$store" --listen 127.0.0.1:0 ${SERVE_ARGS:-} \
    2> "$dir/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=
for _ in $(seq 600); do
  port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$dir/serve.log" | grep -o '[0-9]*$' || true)
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "serve did not start"; cat "$dir/serve.log"; exit 1; }
echo "store: $store ($(df --output=fstype "$dir" | tail -1) under $dir); port $port"
python3 "$here/prefill.py" "$port" 0.9
echo "== place+release mix: wrk -t2 -c$conns -d${duration}s"
wrk -t2 -c"$conns" -d"${duration}s" --latency -s "$here/place_release.lua" "http://127.0.0.1:$port"
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^toposched_(store_commit_batch_size|store_commit_seconds|decision_seconds)_(sum|count)|^toposched_gpus_free|^toposched_place_attempts_total'
job=$(curl -s "http://127.0.0.1:$port/v1/jobs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["job"])')
for path in "/v1/jobs/$job" "/v1/path?a=dgx-h100-00001:0&b=dgx-h100-12500:7" /healthz; do
  echo "== read-only: GET $path: wrk -t2 -c$conns -d10s"
  wrk -t2 -c"$conns" -d10s --latency "http://127.0.0.1:$port$path"
done
