#!/usr/bin/env bash
# A million clients in one process (LeNet-5, Fashion-MNIST, partition.kind =
# sampled: ~20 samples a client drawn from its seed, C = 0.001 so 1,000 train
# a round, 3 rounds): set-up time, time of FedProf's initial report pass
# (every client profiles its data once: the one O(N) step of the
# algorithm), mean round time and peak memory, for FedAvg and FedProf.
#
# Then the report pass alone (1 round), side by side: each client profiled
# alone (fedprof.profile_group = 1, as a deployed client), the default (the
# clean and blurred clients' rows taken from one pass per 128 samples of the
# training set as it is and blurred, the salt-and-pepper clients of each
# group of 64 ids profiled in shared passes), and the default under `launch`
# with 1 and 2 ranks of 1 thread each. With FEDPROF_BEFORE=BIN the first
# row is run by BIN, another build (e.g. the commit before a change).
#
#   bench/scale.sh [CLIENTS] [ROUNDS]        (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-1000000}
rounds=${2:-3}
before=${FEDPROF_BEFORE:-}
provenance_env=FEDPROF_BEFORE
. bench/provenance.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common="--set clients.count=$clients --set partition.kind=sampled --set partition.size_mean=20
        --set partition.size_sd=5 --set strategy.fraction=$(awk -v n="$clients" 'BEGIN{print 1000/n}')
        --set train.epochs=1 --set strategy.aggregation=partial
        --set data.holdout_share=0.1 --set quality.blurred=0.25 --set quality.salt_pepper=0.25"

reports() {  # the report pass's seconds in a run's output
  grep -o 'reports of [0-9]* clients under model version 0 in [0-9.]*' "$1" | awk '{print $NF}' || true
}

provenance
echo "| strategy | clients | set-up s | report pass s | mean round s | peak RSS MB |"
echo "|---|---|---|---|---|---|"
for strategy in fedavg fedprof; do
  out="$work/$strategy"
  build/fedprof simulate $common --set rounds=$rounds --set strategy.name=$strategy --out "$out" \
    >"$work/$strategy.log" 2>&1 || { cat "$work/$strategy.log"; exit 1; }
  setup=$(grep -o 'set up in [0-9.]*' "$work/$strategy.log" | awk '{print $4}')
  round=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i} NR>1{w[NR-1]=$c}
                   END{n=NR-1; printf "%.2f", (w[n]-w[1])/(n-1)}' "$out/metrics.csv")
  rss=$(grep -o '"peak_rss_mb": [0-9.]*' "$out/summary.json" | awk '{printf "%.0f", $2}')
  pass=$(reports "$work/$strategy.log")
  echo "| $strategy | $clients | $setup | ${pass:--} | $round | $rss |"
done

echo
provenance
echo "| FedProf report pass of $clients clients | processes x threads | s | speed-up |"
echo "|---|---|---|---|"
first=
row() {  # label, processes x threads, command...
  local label=$1 shape=$2
  shift 2
  "$@" >"$work/row.log" 2>&1 || { cat "$work/row.log"; exit 1; }
  local s
  s=$(reports "$work/row.log")
  first=${first:-$s}
  echo "| $label | $shape | $s | $(awk -v a="$first" -v b="$s" 'BEGIN{printf "%.2f", a/b}') |"
}
one="$common --set rounds=1 --set strategy.name=fedprof"
if [[ -n "$before" ]]; then
  row "each client alone, $before" "1 x 2" "$before" simulate $one --set threads=2 --out "$work/b"
fi
row "each client alone (profile_group 1)" "1 x 2" \
  build/fedprof simulate $one --set threads=2 --set fedprof.profile_group=1 --out "$work/r1"
row "shared tables, groups of 64 (default)" "1 x 2" \
  build/fedprof simulate $one --set threads=2 --out "$work/r2"
row "default, launch" "1 x 1" \
  build/fedprof launch --nproc 1 -- simulate $one --set threads=1 --out "$work/r3"
row "default, launch" "2 x 1" \
  build/fedprof launch --nproc 2 -- simulate $one --set threads=1 --out "$work/r4"
