#!/usr/bin/env bash
# bench/niid_bench.sh at a smoke size: four partitions and every algorithm
# run, FedProx at two μ, and the table prints a row each.
#   tests/niid_bench_test.sh BUILD_DIR
set -euo pipefail
build=$1
here=$(cd "$(dirname "$0")/.." && pwd)
output=$(FEDPROF_BIN="$build/fedprof" FEDPROX_MUS="0.01 0.1" bash "$here/bench/niid_bench.sh" \
  -p dir0.5,c2,quantity,noise -a fedavg,fedprox,scaffold,fednova,feddyn -s 1 -r 1 -e 1 \
  -- --set data.train_limit=400 --set data.test_limit=100 --set partition.min_size=5)
echo "$output"
rows=$(grep -c '^| .* | [0-9.]* ± [0-9.]* | .* | [0-9]* |$' <<<"$output" || true)
if [[ $rows -ne 20 ]]; then
  echo "niid_bench_test: $rows table rows, expected 4 partitions x 5 algorithms" >&2
  exit 1
fi
grep -q '| #C = 2 | fedprox (μ = 0\.[0-9]*) |' <<<"$output" || { echo "niid_bench_test: no tuned FedProx row" >&2; exit 1; }
