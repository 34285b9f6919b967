#!/usr/bin/env bash
# What each client algorithm costs a round against FedAvg's, on the
# NIID-Bench setting (configs/niid_bench.toml: 10 clients, LeNet-5, batch
# 64) with 1 local epoch: the wall time of a round (the mean over ROUNDS,
# best of REPEATS, the algorithms interleaved so that the machine's noise
# falls on all alike) and its ratio to FedAvg's; then the cost model's
# virtual seconds of a round (docs/cost-model.md), in which SCAFFOLD's c and
# Δc_i travel beside the model. MOON's wall figure includes its two extra
# forward passes a batch.
#
#   bench/algorithm_cost.sh [ROUNDS] [REPEATS]     (defaults 3 and 2)
set -euo pipefail
cd "$(dirname "$0")/.."
fedprof=${FEDPROF_BIN:-build/fedprof}
[[ -x $fedprof ]] || make build >&2
rounds=${1:-3} repeats=${2:-2}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
algorithms=(fedavg fedprox scaffold fednova feddyn moon)
declare -A best virtual
for r in $(seq "$repeats"); do
  for a in "${algorithms[@]}"; do
    sets=(--set strategy.name="$a")
    [[ $a == fedprox ]] && sets=(--set strategy.name=fedavg --set train.proximal_mu=0.01)
    "$fedprof" simulate --config configs/niid_bench.toml --set rounds="$rounds" --set train.epochs=1 \
      "${sets[@]}" --out "$out/$a-$r" >/dev/null
    s=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['wall_s'] / $rounds)" \
      "$out/$a-$r/summary.json")
    virtual[$a]=$(awk -F, -v rounds="$rounds" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "virtual_time_s") c = i }
                   END { print $c / rounds }' "$out/$a-$r/metrics.csv")
    if [[ -z ${best[$a]:-} ]] || awk -v a="$s" -v b="${best[$a]}" 'BEGIN { exit !(a < b) }'; then best[$a]=$s; fi
  done
done
printf '%-10s %14s %12s %18s %12s\n' algorithm "s / round" "vs FedAvg" "virtual s / round" "vs FedAvg"
for a in "${algorithms[@]}"; do
  awk -v a="$a" -v s="${best[$a]}" -v f="${best[fedavg]}" -v v="${virtual[$a]}" -v g="${virtual[fedavg]}" \
    'BEGIN { printf "%-10s %14.2f %11.2fx %18.2f %11.2fx\n", a, s, s / f, v, v / g }'
done
