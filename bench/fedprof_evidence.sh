#!/usr/bin/env bash
# Reproduces the FedProf evidence in docs/results.md: FedAvg and FedProf, each
# with full and partial aggregation, 3 seeds, on Fashion-MNIST (the default
# experiment) and on the paper's preliminary MNIST setup. About an hour on
# 2 cores. Usage: bench/fedprof_evidence.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/evidence}
. bench/provenance.sh
make build
# Each table (printed, and in comparison.md) says which commit and command made it.
for setup in default mnist_prelim; do
  provenance
  build/fedprof compare --config "configs/$setup.toml" \
    --strategies fedavg,fedprof,fedavg:partial,fedprof:partial --seeds 3 \
    --set report.progress=false --overwrite --out "$out/$setup"
  provenance_stamp "$out/$setup/comparison.md"
done
