#!/usr/bin/env bash
# The strong attacks against the robust rules: the second part of
# docs/robustness.md.
#
# MNIST or Fashion-MNIST (DATA): the first 30,000 training images, 10% held
# out as the server's reference set D_V, 5,000 test images; LeNet-5;
# CLIENTS clients (default 100), non-IID with a 60% dominant class; 10
# clients a round; partial aggregation; 20 rounds of one local epoch, lr 0.05.
# For each attacker share in SHARES (default 0.3):
#   attacks:     sign_flip (λ = 4); label_flip; backdoor (a 4 × 4 trigger on
#                30% of an attacker's images, target class 0, λ = 1); and,
#                colluding with the round's honest updates, alie (z_max),
#                ipm (ε = 0.5), min_max, min_sum (attack.*)
#   aggregators: STRATEGIES, by default average, median, trimmed_mean
#                (β = 0.3), multi_krum (f and m from the round), bulyan (f
#                from the round), centered_clipping (τ the median distance,
#                one iteration), fltrust (100 root samples from D_V, one
#                local epoch), with uniform selection
# and the same aggregators without attackers. SEEDS seeds (default 3), two
# runs at a time. Prints final and best accuracy and the backdoor's success
# rate at round 20, mean ± sample sd over the seeds, a table per share. A
# folder holding a finished comparison is not run again.
# Usage: [SEEDS=3] [DATA=mnist] [CLIENTS=100] [SHARES="0.1 0.3"] [STRATEGIES=a,b]
#        bench/robust_strong.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
data=${DATA:-mnist}
clients=${CLIENTS:-100}
shares=${SHARES:-0.3}
out=${1:-runs/robust-strong-$data-$clients}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env="FEDPROF_BIN SEEDS DATA CLIENTS SHARES STRATEGIES"
. bench/provenance.sh
[[ -x $fedprof ]] || make build

rules=uniform+average,uniform+median,uniform+trimmed_mean,uniform+multi_krum,uniform+bulyan
rules+=,uniform+centered_clipping,uniform+fltrust
rules=${STRATEGIES:-$rules}
fraction=$(awk -v n="$clients" 'BEGIN { print 10 / n }')
common=(--set data.name="$data" --set data.train_limit=30000 --set data.test_limit=5000
        --set data.holdout_share=0.1 --set clients.count="$clients" --set strategy.fraction="$fraction"
        --set strategy.aggregation=partial --set rounds=20 --set train.epochs=1 --set train.lr=0.05
        --set robust.trim_share=0.3 --set report.progress=false)

mkdir -p "$out"
start=$SECONDS
attack() {  # attack DIR --set ...
  local name=$1
  shift
  [[ -f $out/$name/comparison.csv ]] && return
  echo "== $name: $*"
  "$fedprof" compare "${common[@]}" "$@" --strategies "$rules" --seeds "$seeds" --jobs 2 \
    --overwrite --out "$out/$name" >"$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; exit 1; }
}
attack none --set attack.share=0
for s in $shares; do
  attack "sign_flip-$s" --set attack.share="$s" --set attack.kind=sign_flip --set attack.scale=4
  attack "label_flip-$s" --set attack.share="$s" --set attack.kind=label_flip
  attack "backdoor-$s" --set attack.share="$s" --set attack.kind=backdoor --set attack.scale=1
  attack "alie-$s" --set attack.share="$s" --set attack.kind=alie
  attack "ipm-$s" --set attack.share="$s" --set attack.kind=ipm --set attack.scale=0.5
  attack "min_max-$s" --set attack.share="$s" --set attack.kind=min_max
  attack "min_sum-$s" --set attack.share="$s" --set attack.kind=min_sum
done
echo "wall time: $((SECONDS - start)) s"

. bench/robust_table.sh
attacks="none,sign_flip,label_flip,backdoor,alie,ipm,min_max,min_sum"
for s in $shares; do
  dirs=(none)
  for a in sign_flip label_flip backdoor alie ipm min_max min_sum; do dirs+=("$a-$s"); done
  pct=$(awk -v s="$s" 'BEGIN { print s * 100 }')
  table final_accuracy "Final accuracy (round 20, $data, $clients clients, $pct% attackers)" "$attacks" "${dirs[@]}"
  table best_accuracy "Best accuracy (any round, $data, $clients clients, $pct% attackers)" "$attacks" \
    "${dirs[@]}"
done
backdoors=() names=""
for s in $shares; do
  backdoors+=("backdoor-$s")
  names+="${names:+,}$(awk -v s="$s" 'BEGIN { print s * 100 }')% attackers"
done
table final_backdoor_success "The backdoor's success rate at round 20 ($data, $clients clients)" "$names" \
  "${backdoors[@]}"
