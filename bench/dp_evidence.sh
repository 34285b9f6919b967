#!/usr/bin/env bash
# User-level DP: accuracy against epsilon (docs/privacy.md, "User-level
# differential privacy").
#
# The default experiment's data (DATA, by default Fashion-MNIST: 65%
# low-quality clients, a 60% dominant class) over CLIENTS clients (default
# 1000), q = 0.1 (K = N/10 expected a round), ROUNDS rounds (default 30) of
# 5 local epochs at lr 0.05, the test set (5,000 images) every 5 rounds, DP-FedAvg with adaptive clipping (C = 1 at
# round 1, the median as target) for each strategy of STRATEGIES (default
# "fedavg fedprof") and each epsilon of EPSILONS (default "1 2 4 8 inf") at
# delta = 1/N: the noise multiplier is the smallest that keeps epsilon
# within it after ROUNDS rounds at the strategy's rate (FedAvg q, FedProf
# its cap 2q: `fedprof privacy dp --epsilon`); inf = clipping, no noise.
# FedProf runs with dp.clear_profiles = true (and secagg.clear_profiles
# under distributed DP): its selections equal Paillier matching's
# (tests/cli_test.cc), at a fraction of the cost. SEEDS seeds
# (default 3), two runs at a time. Prints the noise multipliers and the
# final and best accuracy, mean ± sample sd, a row per strategy. A folder
# holding a finished comparison is not run again.
# MODE=distributed runs distributed DP instead (SecAgg+, each client's
# share of discrete Gaussian noise, fixed clipping at C = 1, its own
# ledger: `fedprof privacy dp --config ... --epsilon`), with CORRUPT
# (default 0.02) of the fleet assumed to collude with the server: each
# client's noise is for the honest clients a sum may hold at the fewest;
# CLIPPING=fixed runs central DP with fixed clipping at C = 1, its like for
# like.
# Usage: [SEEDS=3] [DATA=fashion-mnist] [CLIENTS=1000] [ROUNDS=30] [EPSILONS="1 8"]
#        [STRATEGIES="fedavg"] [MODE=central|distributed] [CLIPPING=adaptive|fixed]
#        [CORRUPT=0.02] bench/dp_evidence.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
data=${DATA:-fashion-mnist}
clients=${CLIENTS:-1000}
rounds=${ROUNDS:-30}
epsilons=${EPSILONS:-1 2 4 8 inf}
strategies=${STRATEGIES:-fedavg fedprof}
mode=${MODE:-central}
clipping=${CLIPPING:-adaptive}
[[ $mode == distributed ]] && clipping=fixed
model_values=61706  # LeNet-5 on 28 x 28 images: the distributed encoding's size
out=${1:-runs/dp-evidence-$data-$clients}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env="FEDPROF_BIN SEEDS DATA CLIENTS ROUNDS EPSILONS STRATEGIES MODE CLIPPING CORRUPT"
. bench/provenance.sh
[[ -x $fedprof ]] || make build

q=0.1
delta=$(awk -v n="$clients" 'BEGIN { printf "%.10g", 1 / n }')
common=(--config configs/default.toml --set data.name="$data" --set data.test_limit=5000
        --set clients.count="$clients" --set strategy.fraction=$q --set rounds="$rounds"
        --set train.epochs=5 --set train.lr=0.05 --set eval.every=5 --set strategy.aggregation=partial
        --set dp.mode="$mode" --set dp.clipping="$clipping" --set dp.clip_norm=1 --set report.progress=false)
[[ $mode == distributed ]] && common+=(--set secagg.protocol=secagg+ --set secagg.corrupt="${CORRUPT:-0.02}")
suffix=""
[[ $mode != central || $clipping != adaptive ]] && suffix="-$mode-$clipping"

noise_for() {  # noise_for EPSILON STRATEGY: the run's own ledger, its rate included
  [[ $1 == inf ]] && { echo 0; return; }
  "$fedprof" privacy dp "${common[@]}" --set strategy.name="$2" --set dp.delta="$delta" --epsilon "$1" \
    --model-values $model_values | sed -n 's/^noise multiplier = \([0-9.]*\):.*/\1/p'
}

mkdir -p "$out"
start=$SECONDS
declare -A noise
for s in $strategies; do
  rate=$q extra=()
  if [[ $s == fedprof ]]; then
    rate=$(awk -v q=$q 'BEGIN { print 2 * q }')
    extra=(--set dp.clear_profiles=true)
    # Under secure aggregation the profiles' clear channel must be accepted there too.
    [[ $mode == distributed ]] && extra+=(--set secagg.clear_profiles=true)
  fi
  for e in $epsilons; do
    z=$(noise_for "$e" "$s")
    noise[$s,$e]=$z
    dir=$out/$s$suffix-eps$e
    [[ -f $dir/comparison.csv ]] && continue
    echo "== $s, epsilon $e: noise multiplier $z"
    "$fedprof" compare "${common[@]}" "${extra[@]}" --set dp.noise_multiplier="$z" --strategies "$s" \
      --seeds "$seeds" --jobs 2 --overwrite --out "$dir" >"$dir.log" 2>&1 || { tail -5 "$dir.log"; exit 1; }
  done
done
echo "wall time: $((SECONDS - start)) s"

# One comparison.csv per epsilon, a row per strategy, for robust_table.sh.
dirs=() names=""
for e in $epsilons; do
  mkdir -p "$out/eps$e$suffix"
  first=1
  for s in $strategies; do
    if ((first)); then cat "$out/$s$suffix-eps$e/comparison.csv"; first=0
    else tail -n +2 "$out/$s$suffix-eps$e/comparison.csv"; fi
  done >"$out/eps$e$suffix/comparison.csv"
  dirs+=("eps$e$suffix")
  names+="${names:+,}ε = $e"
done
echo
echo "Noise multipliers (dp.mode = $mode, $clipping clipping, delta = $delta, $rounds rounds)"
echo
printf '| strategy | rate |'; for e in $epsilons; do printf ' ε = %s |' "$e"; done; echo
printf '|---|---|'; for e in $epsilons; do printf -- '---|'; done; echo
for s in $strategies; do
  rate=$q; [[ $s == fedprof ]] && rate=$(awk -v q=$q 'BEGIN { print 2 * q }')
  printf '| %s | %s |' "$s" "$rate"; for e in $epsilons; do printf ' %s |' "${noise[$s,$e]}"; done; echo
done
. bench/robust_table.sh
table final_accuracy "Final accuracy (round $rounds, $data, $clients clients)" "$names" "${dirs[@]}"
table best_accuracy "Best accuracy (any round, $data, $clients clients)" "$names" "${dirs[@]}"
