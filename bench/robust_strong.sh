#!/usr/bin/env bash
# The strong attacks against the robust rules: the second table of
# docs/robustness.md.
#
# The setup of bench/robust.sh (MNIST: 30,000 training images, 10% held out as
# the server's reference set D_V, 5,000 test images; LeNet-5; 50 clients,
# non-IID with a 60% dominant class; 10 clients a round; partial aggregation;
# 20 rounds of one local epoch, lr 0.05), 30% attackers (attack.share = 0.3):
#   attacks:     none; sign_flip (λ = 4); label_flip; and, colluding with the
#                round's honest updates, alie (z_max), ipm (ε = 0.5), min_max,
#                min_sum (attack.*)
#   aggregators: average, median, trimmed_mean (β = 0.3), multi_krum (f and m
#                from the round), bulyan (f from the round: 1 of 10),
#                centered_clipping (τ the median distance, one iteration),
#                fltrust (100 root samples from D_V, one local epoch)
# with uniform selection. SEEDS seeds (default 3), DATA (default mnist; or
# fashion-mnist), two runs at a time. Prints final and best accuracy, mean ±
# sample sd over the seeds. A folder holding a finished comparison is not
# run again. Usage: [SEEDS=3] [DATA=mnist] bench/robust_strong.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
data=${DATA:-mnist}
out=${1:-runs/robust-strong-$data}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env="FEDPROF_BIN SEEDS DATA"
. bench/provenance.sh
[[ -x $fedprof ]] || make build

rules=uniform+average,uniform+median,uniform+trimmed_mean,uniform+multi_krum,uniform+bulyan
rules+=,uniform+centered_clipping,uniform+fltrust
common=(--set data.name="$data" --set data.train_limit=30000 --set data.test_limit=5000
        --set data.holdout_share=0.1 --set clients.count=50 --set strategy.fraction=0.2
        --set strategy.aggregation=partial --set rounds=20 --set train.epochs=1 --set train.lr=0.05
        --set robust.trim_share=0.3 --set report.progress=false)

mkdir -p "$out"
start=$SECONDS
attack() {  # attack NAME --set ...
  local name=$1
  shift
  [[ -f $out/$name/comparison.csv ]] && return
  echo "== $name: $*"
  "$fedprof" compare "${common[@]}" "$@" --strategies "$rules" --seeds "$seeds" --jobs 2 \
    --out "$out/$name" >"$out/$name.log" 2>&1 || { tail -5 "$out/$name.log"; exit 1; }
}
attack none --set attack.share=0
attack sign_flip --set attack.share=0.3 --set attack.kind=sign_flip --set attack.scale=4
attack label_flip --set attack.share=0.3 --set attack.kind=label_flip
attack alie --set attack.share=0.3 --set attack.kind=alie
attack ipm --set attack.share=0.3 --set attack.kind=ipm --set attack.scale=0.5
attack min_max --set attack.share=0.3 --set attack.kind=min_max
attack min_sum --set attack.share=0.3 --set attack.kind=min_sum
echo "wall time: $((SECONDS - start)) s"

. bench/robust_table.sh
attacks="none,sign_flip,label_flip,alie,ipm,min_max,min_sum"
dirs=(none sign_flip label_flip alie ipm min_max min_sum)
table final_accuracy "Final accuracy (round 20, $data, 30% attackers)" "$attacks" "${dirs[@]}"
table best_accuracy "Best accuracy (any round, $data, 30% attackers)" "$attacks" "${dirs[@]}"
