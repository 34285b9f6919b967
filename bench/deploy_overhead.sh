#!/usr/bin/env bash
# Per-round overhead of a localhost deployment (fedprof server + N client
# processes over gRPC with mutual TLS) against fedprof simulate on the same
# run, for LeNet-5 and ResNet-18; then the model transfer time and throughput
# to 2 and 10 clients (build/deploy_bench).
#
# A run's round time is the median wall time of its rounds 2..R-1 (round 1
# includes start-up, and round R is evaluated even when the others are not).
# Each configuration runs simulate and the deployment in turn REPS times, and
# the table gives the median of each; the overhead column is the ratio of the
# two medians, and the range that of the REPS paired ratios.
#
#   bench/deploy_overhead.sh [ROUNDS] [REPS]     (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-6}
reps=${2:-3}
cli=build/fedprof
. bench/provenance.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
scripts/make-certs.sh "$work/certs" 10 >/dev/null

# Every client selected each round; each trains the default experiment's
# share (540 samples of LeNet-5 for 2 epochs) or 60 samples of ResNet-18.
common="--set strategy.fraction=1 --set data.holdout_share=0.1 --set partition.kind=iid
        --set rounds=$rounds --set report.progress=false"

median() { sort -g | awk '{v[NR]=$1} END{printf "%.4f", NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

round_time() {  # median wall time of rounds 2..R-1 from a metrics.csv
  awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i; next}
           {w[NR-1]=$c} END{for(r=2;r<NR-1;r++) print w[r]-w[r-1]}' "$1" | median
}

deploy() {  # clients, settings, output directory
  local clients=$1 settings=$2 out=$3
  $cli server $settings --listen 127.0.0.1:0 --tls-dir "$work/certs" --out "$out" \
      >"$out.log" 2>&1 &
  local server=$! address=""
  for _ in $(seq 600); do
    address=$(grep -o 'listening on [0-9.:]*' "$out.log" | cut -d' ' -f3 || true)
    [ -n "$address" ] && break
    sleep 0.1
  done
  for k in $(seq 0 $((clients - 1))); do
    $cli client --server "$address" --id "$k" $settings --tls-dir "$work/certs" \
        >"$out-client-$k.log" 2>&1 &
  done
  wait "$server"
  wait
}

run_pair() {  # label, clients, settings, [settings for simulate only]
  local label=$1 clients=$2 settings="$common --set clients.count=$2 $3" sim_only=${4:-}
  local tag=${label//[^A-Za-z0-9]/} sims=() deps=() ratios=()
  for rep in $(seq "$reps"); do
    $cli simulate $settings $sim_only --out "$work/sim-$tag-$rep" >/dev/null
    deploy "$clients" "$settings" "$work/dep-$tag-$rep"
    sims+=("$(round_time "$work/sim-$tag-$rep/metrics.csv")")
    deps+=("$(round_time "$work/dep-$tag-$rep/metrics.csv")")
    ratios+=("$(awk -v s="${sims[-1]}" -v d="${deps[-1]}" 'BEGIN{printf "%.4f", d/s}')")
  done
  local sim dep lo hi
  sim=$(printf '%s\n' "${sims[@]}" | median)
  dep=$(printf '%s\n' "${deps[@]}" | median)
  lo=$(printf '%s\n' "${ratios[@]}" | sort -g | head -1)
  hi=$(printf '%s\n' "${ratios[@]}" | sort -g | tail -1)
  awk -v l="$label" -v s="$sim" -v d="$dep" -v lo="$lo" -v hi="$hi" \
      'BEGIN{printf "| %s | %.3f | %.3f | %+.1f%% | %+.1f%% .. %+.1f%% |\n",
             l, s, d, 100*(d/s-1), 100*(lo-1), 100*(hi-1)}'
}

provenance
echo "Per-round wall time, median of rounds 2..$((rounds - 1)) and of $reps runs each, mutual TLS;"
echo "K clients a round, each deployed client its own process (on this machine's $(nproc) cores),"
echo "simulate on $(nproc) threads:"
echo
echo "| run | simulate s/round | deployment s/round | overhead | range over the $reps pairs |"
echo "|---|---|---|---|---|"
lenet="--set model.name=lenet5 --set train.epochs=2"
resnet="--set model.name=resnet18 --set train.epochs=1 --set data.test_limit=1000"
# Training rounds: evaluation (the same work in both) only every 1000 rounds.
for k in 2 10; do
  run_pair "LeNet-5, K = $k" $k "$lenet --set data.train_limit=$((600 * k)) --set eval.every=1000"
done
# Ten processes on two cores against ten threads on two cores: what sharing
# the cores costs processes beyond what it costs threads.
run_pair "LeNet-5, K = 10, simulate on 10 threads" 10 \
  "$lenet --set data.train_limit=6000 --set eval.every=1000" "--set threads=10"
# The default experiment's round: K = 10, the 10,000 test images evaluated each round.
run_pair "LeNet-5, K = 10, evaluated" 10 "$lenet --set data.train_limit=6000"
for k in 2 10; do
  run_pair "ResNet-18, K = $k" $k "$resnet --set data.train_limit=$((67 * k)) --set eval.every=1000"
done
echo
provenance
build/deploy_bench --clients 2 --rounds 50
echo
provenance
build/deploy_bench --clients 10 --rounds 10
