#!/usr/bin/env bash
# Secure aggregation over loopback: `fedprof server` with mutual TLS and K
# clients (one process, `--ids 0-(K-1)`) run ROUNDS rounds of LeNet-5 with
# every client selected, under SecAgg and SecAgg+, and the same in process
# (`fedprof simulate`). For each session it prints what the server measured:
# the bytes each client sent in the session, the server's own time in the
# protocol and the session's wall time (in a deployment from the round's
# last result to the sum; the clients share the server's 2 cores). Each
# run's final model is checked against the plaintext simulation's.
#
#   bench/secagg_loopback.sh [K ...]     (default 10 50 100; needs `make build`;
#                                         FEDPROF=path runs another binary)
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10 50 100)
rounds=2
cli=${FEDPROF:-build/fedprof}
provenance_env=FEDPROF
. bench/provenance.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
max=0
for k in "${sizes[@]}"; do [ "$k" -gt "$max" ] && max=$k; done
scripts/make-certs.sh "$work/certs" "$max" >/dev/null

hash_of() { grep -o '"final_model_sha256": "[0-9a-f]*"' "$1/summary.json" | cut -d'"' -f4; }

# The session lines of a log: MB per client, server s, wall s (one line per round).
sessions() {
  grep -o 'secagg+\? of [0-9]* clients.*' "$1" |
    sed -E 's/.*: ([0-9]+) models in the sum, ([0-9.]+) MB sent per client, server ([0-9.]+) s of ([0-9.]+) s/\1 \2 \3 \4/'
}

provenance
echo "| where | protocol | K | k | t | models in the sum | client sent MB | server s | session wall s | final model = plaintext |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for k in "${sizes[@]}"; do
  settings="--set clients.count=$k --set strategy.fraction=1 --set rounds=$rounds --set data.train_limit=$((k * 60))
            --set data.holdout_share=0.1 --set partition.kind=iid --set train.epochs=1
            --set deploy.round_timeout_s=600"
  $cli simulate $settings --set report.progress=false --out "$work/plain-$k" >/dev/null
  plain=$(hash_of "$work/plain-$k")
  for protocol in secagg secagg+; do
    tag="$protocol-$k"
    $cli simulate $settings --set secagg.protocol=$protocol --out "$work/sim-$tag" >"$work/sim-$tag.log" 2>&1
    $cli server $settings --set secagg.protocol=$protocol --listen 127.0.0.1:0 --tls-dir "$work/certs" \
        --out "$work/dep-$tag" >"$work/dep-$tag.log" 2>&1 &
    server=$!
    address=""
    for _ in $(seq 600); do
      address=$(grep -o 'listening on [0-9.:]*' "$work/dep-$tag.log" | cut -d' ' -f3 || true)
      [ -n "$address" ] && break
      sleep 0.1
    done
    $cli client --server "$address" --ids "0-$((k - 1))" $settings --set report.progress=false \
        --tls-dir "$work/certs" >"$work/clients-$tag.log" 2>&1 &
    wait "$server"
    wait
    for where in sim dep; do
      same=$([ "$(hash_of "$work/$where-$tag")" = "$plain" ] && echo yes || echo NO)
      params=$(grep -o '(k = [0-9]*, t = [0-9]*)' "$work/$where-$tag.log" | head -1 |
               sed -E 's/\(k = ([0-9]+), t = ([0-9]+)\)/\1 | \2/')
      label=$([ $where = sim ] && echo "in process" || echo "loopback, mutual TLS")
      # The last round's session (the first pays for connections warming up).
      sessions "$work/$where-$tag.log" | tail -1 | while read -r n mb server_s wall_s; do
        echo "| $label | $protocol | $k | $params | $n | $mb | $server_s | $wall_s | $same |"
      done
    done
  done
done
