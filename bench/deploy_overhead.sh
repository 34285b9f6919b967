#!/usr/bin/env bash
# Per-round overhead of a localhost deployment (fedprof server + N client
# processes over gRPC with mutual TLS) against fedprof simulate on the same
# run, for LeNet-5 and ResNet-18; then the model transfer throughput to 10
# clients (build/deploy_bench). Each run's round time is the mean wall time
# of rounds 2..R-1: round 1 includes start-up, and round R is evaluated even
# when the others are not (eval.every).
#
#   bench/deploy_overhead.sh [ROUNDS]      (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
cli=build/fedprof
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
scripts/make-certs.sh "$work/certs" 10 >/dev/null

# Every client selected each round; each trains the default experiment's
# share (540 samples of LeNet-5 for 2 epochs) or 60 samples of ResNet-18.
common="--set strategy.fraction=1 --set data.holdout_share=0.1 --set partition.kind=iid
        --set rounds=$rounds --set report.progress=false"

mean_round() {  # mean wall time of rounds 2..R-1 from a metrics.csv
  awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i} {w[NR]=$c}
           END{printf "%.3f", (w[NR-1]-w[2])/(NR-3)}' "$1"
}

run_pair() {  # label, clients, extra settings
  local label=$1 clients=$2 extra="$common --set clients.count=$2 $3"
  local tag=${label//[ ,=]/}
  $cli simulate $extra --out "$work/sim-$tag" >/dev/null
  $cli server $extra --listen 127.0.0.1:0 --tls-dir "$work/certs" \
      --out "$work/dep-$tag" >"$work/server-$tag.log" 2>&1 &
  local server=$!
  local address=""
  for _ in $(seq 600); do
    address=$(grep -o 'listening on [0-9.:]*' "$work/server-$tag.log" | cut -d' ' -f3 || true)
    [ -n "$address" ] && break
    sleep 0.1
  done
  for k in $(seq 0 $((clients - 1))); do
    $cli client --server "$address" --id "$k" $extra --tls-dir "$work/certs" \
        >"$work/client-$tag-$k.log" 2>&1 &
  done
  wait "$server"
  wait
  local sim dep
  sim=$(mean_round "$work/sim-$tag/metrics.csv")
  dep=$(mean_round "$work/dep-$tag/metrics.csv")
  awk -v l="$label" -v s="$sim" -v d="$dep" \
      'BEGIN{printf "| %s | %.3f | %.3f | %+.1f%% |\n", l, s, d, 100*(d/s-1)}'
}

echo "Per-round wall time, mean of rounds 2..$((rounds - 1)), mutual TLS; K clients a round, each"
echo "deployed client its own process (on this machine's $(nproc) cores), simulate on $(nproc) threads:"
echo
echo "| run | simulate s/round | deployment s/round | overhead |"
echo "|---|---|---|---|"
lenet="--set model.name=lenet5 --set train.epochs=2"
resnet="--set model.name=resnet18 --set train.epochs=1 --set data.test_limit=1000"
# Training rounds: evaluation (the same work in both) only every 1000 rounds.
for k in 2 10; do
  run_pair "lenet5, K=$k" $k "$lenet --set data.train_limit=$((600 * k)) --set eval.every=1000"
done
# The default experiment's round: K = 10, the 10,000 test images evaluated each round.
run_pair "lenet5, K=10, evaluated" 10 "$lenet --set data.train_limit=6000"
for k in 2 10; do
  run_pair "resnet18, K=$k" $k "$resnet --set data.train_limit=$((67 * k)) --set eval.every=1000"
done
echo
build/deploy_bench --clients 10 --rounds 5
