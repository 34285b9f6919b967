#!/usr/bin/env bash
# Per-round overhead of a localhost deployment (fedprof server + N client
# processes over gRPC with mutual TLS) against fedprof simulate on the same
# run, for LeNet-5 and ResNet-18; then the model transfer throughput to 10
# clients (build/deploy_bench). Each run's round time is the mean wall time
# of rounds 2..R (round 1 includes start-up).
#
#   bench/deploy_overhead.sh [ROUNDS]      (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-6}
cli=build/fedprof
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
scripts/make-certs.sh "$work/certs" 10 >/dev/null

# The default experiment's round (10 clients of ~540 samples, 2 epochs),
# with every client selected so the deployment runs 10 processes.
common="--set clients.count=10 --set strategy.fraction=1 --set data.train_limit=6000
        --set data.holdout_share=0.1 --set rounds=$rounds --set report.progress=false"

mean_round() {  # mean wall time of rounds 2..R from a metrics.csv
  awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i} NR==2{first=$c}
           NR>2{last=$c; n++} END{printf "%.3f", (last-first)/n}' "$1"
}

run_pair() {  # label, extra settings
  local label=$1 extra=$2
  $cli simulate $common $extra --out "$work/sim-$label" >/dev/null
  $cli server $common $extra --listen 127.0.0.1:0 --tls-dir "$work/certs" \
      --out "$work/dep-$label" >"$work/server-$label.log" 2>&1 &
  local server=$!
  local address=""
  for _ in $(seq 600); do
    address=$(grep -o 'listening on [0-9.:]*' "$work/server-$label.log" | cut -d' ' -f3 || true)
    [ -n "$address" ] && break
    sleep 0.1
  done
  for k in $(seq 0 9); do
    $cli client --server "$address" --id "$k" $common $extra --tls-dir "$work/certs" \
        >"$work/client-$label-$k.log" 2>&1 &
  done
  wait "$server"
  wait
  local sim dep
  sim=$(mean_round "$work/sim-$label/metrics.csv")
  dep=$(mean_round "$work/dep-$label/metrics.csv")
  awk -v l="$label" -v s="$sim" -v d="$dep" \
      'BEGIN{printf "| %s | %.3f | %.3f | %+.1f%% |\n", l, s, d, 100*(d/s-1)}'
}

echo "Per-round wall time, mean of rounds 2..$rounds (10 clients, mutual TLS):"
echo
echo "| model | simulate s/round | deployment s/round | overhead |"
echo "|---|---|---|---|"
run_pair lenet5 "--set model.name=lenet5 --set train.epochs=2"
run_pair resnet18 "--set model.name=resnet18 --set data.train_limit=600 --set train.epochs=1"
echo
build/deploy_bench --clients 10 --rounds 5
