#!/usr/bin/env bash
# Robust aggregation against model poisoning: the table in docs/robustness.md.
#
# Runs: MNIST (the first 30,000 training images, 10% of them held out as
# FedProf's reference set; 5,000 test images), LeNet-5, 50 clients, non-IID
# (each client's dominant class is 60% of its data), 10 clients per round,
# partial aggregation, 20 rounds of 1 local epoch (SGD, lr 0.05, momentum
# 0.9, batch 32), seeds 1-3.
#   aggregators: average, median, trimmed_mean (robust.trim_share = 0.3),
#                krum and multi_krum (robust.byzantine = 3: 10 > 2·3 + 2;
#                multi_krum averages n − f = 7)
#   selectors:   uniform and fedprof
#   attackers:   none; sign_flip (λ = 4) by 10% and 30% of the clients;
#                scale (λ = 10) by 30% (attack.*)
# then the 30% attacks again with the norm bound robust.max_update_norm = 0.5
# (clip; honest updates measure about 0.2 ||θ|| here, scale attackers 2) for
# average and median.
# 144 runs, two at a time (fedprof compare --jobs 2): about 16 minutes on 2
# cores. Prints the final and the best accuracy, mean ± sample sd over the
# seeds, per strategy and attack. A folder that already holds a finished
# comparison is not run again. Usage: bench/robust.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/robust}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env=FEDPROF_BIN
. bench/provenance.sh
[[ -x $fedprof ]] || make build

all=uniform+average,uniform+median,uniform+trimmed_mean,uniform+krum,uniform+multi_krum
all+=,fedprof+average,fedprof+median,fedprof+trimmed_mean,fedprof+krum,fedprof+multi_krum
bounded=uniform+average,uniform+median,fedprof+average,fedprof+median
common=(--set data.name=mnist --set data.train_limit=30000 --set data.test_limit=5000
        --set data.holdout_share=0.1 --set clients.count=50 --set strategy.fraction=0.2
        --set strategy.aggregation=partial --set rounds=20 --set train.epochs=1 --set train.lr=0.05
        --set robust.trim_share=0.3 --set robust.byzantine=3 --set report.progress=false)

mkdir -p "$out"
start=$SECONDS
attack() {  # attack NAME STRATEGIES --set ...
  local name=$1 strategies=$2
  shift 2
  [[ -f $out/$name/comparison.csv ]] && return
  echo "== $name: $*"
  "$fedprof" compare "${common[@]}" "$@" --strategies "$strategies" --seeds 3 --jobs 2 \
    --overwrite --out "$out/$name" >"$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; exit 1; }
}
flip=(--set attack.kind=sign_flip --set attack.scale=4)
scale=(--set attack.kind=scale --set attack.scale=10)
clip=(--set robust.max_update_norm=0.5 --set robust.norm_action=clip)
attack none "$all" --set attack.share=0
attack flip10 "$all" --set attack.share=0.1 "${flip[@]}"
attack flip30 "$all" --set attack.share=0.3 "${flip[@]}"
attack scale30 "$all" --set attack.share=0.3 "${scale[@]}"
attack flip30-clip "$bounded" --set attack.share=0.3 "${flip[@]}" "${clip[@]}"
attack scale30-clip "$bounded" --set attack.share=0.3 "${scale[@]}" "${clip[@]}"
echo "wall time: $((SECONDS - start)) s"

. bench/robust_table.sh
attacks="none,sign_flip 10%,sign_flip 30%,scale 30%"
table final_accuracy "Final accuracy (round 20)" "$attacks" none flip10 flip30 scale30
table best_accuracy "Best accuracy (any round)" "$attacks" none flip10 flip30 scale30
bounds="sign_flip 30%,sign_flip 30% + clip 0.5,scale 30%,scale 30% + clip 0.5"
table final_accuracy "Final accuracy with the norm bound" "$bounds" \
  flip30 flip30-clip scale30 scale30-clip
