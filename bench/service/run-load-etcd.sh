#!/usr/bin/env bash
# The load figures of bench/service/run-load.sh with the state in a 3-member etcd cluster
# (Debian's etcd-server) on loopback, started here and stopped on exit.
#   bench/service/run-load-etcd.sh [BINARY] [DURATION_S] [CONNECTIONS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/release/toposched}
dir=$(mktemp -d /var/tmp/toposched-load-etcd-XXXXXX)
coproc ETCD { exec "$here/../../scripts/etcd-test-cluster" --members 3 --until-stdin-eof; }
trap 'exec {ETCD[1]}>&-; wait "$ETCD_PID" 2>/dev/null || true; rm -rf "$dir"' EXIT
endpoints=
while read -r -t 120 line <&"${ETCD[0]}"; do
  case $line in ETCD_ENDPOINTS=*) endpoints=${line#ETCD_ENDPOINTS=}; break ;; esac
done
[ -n "$endpoints" ] || { echo "etcd did not start"; exit 1; }
echo "etcd members: $endpoints"
STORE="etcd://$endpoints/toposched-load" "$here/run-load.sh" "$bin" "$dir" "${2:-20}" "${3:-16}"
