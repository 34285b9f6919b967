#!/usr/bin/env bash
# A million clients in one process (LeNet-5, Fashion-MNIST, partition.kind =
# sampled: ~20 samples a client drawn from its seed, C = 0.001 so 1,000 train
# a round, 3 rounds): set-up time, time of FedProf's initial report pass
# (every client profiles its data once: the one O(N) step of the
# algorithm), mean round time and peak memory, for FedAvg and FedProf.
#
#   bench/scale.sh [CLIENTS] [ROUNDS]        (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-1000000}
rounds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common="--set clients.count=$clients --set partition.kind=sampled --set partition.size_mean=20
        --set partition.size_sd=5 --set strategy.fraction=$(awk -v n="$clients" 'BEGIN{print 1000/n}')
        --set rounds=$rounds --set train.epochs=1 --set strategy.aggregation=partial
        --set data.holdout_share=0.1 --set quality.blurred=0.25 --set quality.salt_pepper=0.25"

echo "| strategy | clients | set-up s | report pass s | mean round s | peak RSS MB |"
echo "|---|---|---|---|---|---|"
for strategy in fedavg fedprof; do
  out="$work/$strategy"
  build/fedprof simulate $common --set strategy.name=$strategy --out "$out" >"$work/$strategy.log" 2>&1 || { cat "$work/$strategy.log"; exit 1; }
  setup=$(grep -o 'set up in [0-9.]*' "$work/$strategy.log" | awk '{print $4}')
  reports=$(grep -o 'reports of [0-9]* clients under model version 0 in [0-9.]*' "$work/$strategy.log" |
            awk '{print $NF}' || true)
  round=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i} NR>1{w[NR-1]=$c}
                   END{n=NR-1; printf "%.2f", (w[n]-w[1])/(n-1)}' "$out/metrics.csv")
  rss=$(grep -o '"peak_rss_mb": [0-9.]*' "$out/summary.json" | awk '{printf "%.0f", $2}')
  echo "| $strategy | $clients | $setup | ${reports:--} | $round | $rss |"
done
