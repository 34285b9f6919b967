#!/usr/bin/env bash
# Reproduces the baseline comparison in docs/baselines.md, 3 seeds each:
#  - partial aggregation (FedAvg-RP, FedProx, FedAdam, AFL, clustered
#    sampling, FedProf) in the papers' EMNIST-style setup, on MNIST and
#    Fashion-MNIST (configs/emnist_style_*.toml);
#  - full aggregation (FedAvg, CFCFM, FedProf) on the 100-client setups
#    (configs/default.toml and configs/mnist_prelim.toml);
#  - FedProf's selector with FedAdam's aggregator (fedprof+fedadam) against
#    FedAdam and FedProf in the EMNIST-style setup.
# About 2 hours on 2 cores. Usage: bench/baselines_evidence.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/baselines}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env=FEDPROF_BIN
. bench/provenance.sh
[[ -n ${FEDPROF_BIN:-} ]] || make build
# Each table (printed, and in comparison.md) says which commit and command made it.
compare() {  # compare SETUP STRATEGIES
  provenance
  "$fedprof" compare --config "configs/$1.toml" --strategies "$2" --seeds 3 \
    --set report.progress=false --overwrite --out "$out/$1"
  provenance_stamp "$out/$1/comparison.md"
}
for setup in emnist_style_mnist emnist_style_fmnist; do
  compare "$setup" fedavg-rp,fedprox,fedadam,afl,clustered,fedprof
done
for setup in mnist_prelim default; do
  compare "$setup" fedavg,cfcfm,fedprof
done
# FedProf's selection with FedAdam's aggregation against each of its parts.
for setup in emnist_style_mnist emnist_style_fmnist; do
  provenance
  "$fedprof" compare --config "configs/$setup.toml" --strategies fedadam,fedprof,fedprof+fedadam \
    --seeds 3 --jobs 2 --set report.progress=false --overwrite --out "$out/composition_$setup"
  provenance_stamp "$out/composition_$setup/comparison.md"
done
