#!/usr/bin/env bash
# What pinning the CPU kernels costs: OpenBLAS picks its kernels by CPU, so
# the same run gives other bits on another kind of CPU. The default
# experiment (FedAvg, ROUNDS rounds, evaluation only at the end) with the
# kernels the CPU picks, with OpenBLAS and LibTorch pinned to AVX2
# (OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2, which any x86-64 CPU
# with AVX2 runs), and pinned to the baseline (Prescott, default), REPS
# times in turn. Prints each setting's median training wall time (the last
# round's wall_s), its ratio to the CPU's own kernels, and the final
# model's hash, which is the same for every rep of a setting.
#
#   bench/blas_pinning.sh [ROUNDS] [REPS]     (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
reps=${2:-3}
cli=build/fedprof
. bench/provenance.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run=(--config configs/default.toml --set rounds="$rounds" --set eval.every=1000 --set strategy.name=fedavg
     --set threads=2 --set report.progress=false)
settings=("" "OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2" "OPENBLAS_CORETYPE=Prescott ATEN_CPU_CAPABILITY=default")
declare -A walls hashes
for ((rep = 1; rep <= reps; rep++)); do
  for i in "${!settings[@]}"; do
    out="$work/$i-$rep"
    # shellcheck disable=SC2086 # the setting is VAR=VALUE words for env
    env ${settings[$i]} "$cli" simulate "${run[@]}" --out "$out" >/dev/null
    walls[$i]+="$(tail -1 "$out/metrics.csv" | awk -F, '{print $NF}') "
    hashes[$i]+="$(sed -n 's/.*"final_model_sha256": "\([0-9a-f]*\)".*/\1/p' "$out/summary.json" | cut -c1-16) "
  done
done
median() { tr ' ' '\n' <<<"$1" | sed '/^$/d' | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
base=$(median "${walls[0]}")
provenance
echo "OpenBLAS on this CPU: $(OPENBLAS_VERBOSE=2 "$cli" --version 2>&1 | sed -n 's/^Core: //p' | head -1)"
echo
echo "| pinned | median wall s | vs none | final model (each rep) |"
echo "|---|---|---|---|"
for i in "${!settings[@]}"; do
  m=$(median "${walls[$i]}")
  label=${settings[$i]:-none (the CPU picks)}
  printf '| %s | %.2f | %.2f | %s |\n' "$label" "$m" "$(echo "$m / $base" | bc -l)" \
    "$(tr ' ' '\n' <<<"${hashes[$i]}" | sed '/^$/d' | sort -u | paste -sd, -)"
done
