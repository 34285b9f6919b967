#!/usr/bin/env bash
# The strong attacks against the robust rules and their compositions: the
# second part of docs/robustness.md.
#
# MNIST or Fashion-MNIST (DATA): the first 30,000 training images, 10% held
# out as the server's reference set D_V, 5,000 test images; LeNet-5;
# CLIENTS clients (default 100), non-IID with a 60% dominant class; 10
# clients a round; partial aggregation; 20 rounds of one local epoch, lr 0.05;
# uniform selection. For each attacker share in SHARES (default 0.3):
#   attacks (ATTACKS): sign_flip (λ = 4); label_flip; backdoor (a 4 × 4
#     trigger on 30% of an attacker's images, target class 0, λ = 1); and,
#     colluding with the round's honest updates, alie (z_max), ipm (ε = 0.5),
#     min_max, min_sum and tailored (optimised against the rule in use, the
#     std perturbation; tailored_unit and tailored_sign, not run by default,
#     with the others) (attack.*)
#   compositions (COMPOSITIONS, ';'-separated LABEL=AGGREGATOR[,KEY=VALUE...]),
#     by default the rules alone (average, median, trimmed_mean with β = 0.3,
#     multi_krum and bulyan with f from the round, centered_clipping with τ
#     the median distance, fltrust with 100 root samples, flame, zeno), the
#     server alone on its 100 root samples (root), and the compositions of
#     docs/robustness.md, those with the fallback validating on the other
#     2,900 samples of D_V
# and every composition without attackers. SEEDS seeds (default 3), two runs
# at a time. Prints final and best accuracy and the backdoor's success rate
# at round 20, mean ± sample sd over the seeds: a table per share (a row per
# composition, a column per attack), the backdoor's table, and for the
# compositions with robust.fallback the share of rounds whose step was the
# server's own. A folder holding a finished comparison is not run again.
# Usage: [SEEDS=3] [DATA=mnist] [CLIENTS=100] [SHARES="0.1 0.3"] [ATTACKS="alie ipm"]
#        [COMPOSITIONS="median=median;nnm+cc=centered_clipping,robust.pre_aggregation=nnm"]
#        bench/robust_strong.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds=${SEEDS:-3}
data=${DATA:-mnist}
clients=${CLIENTS:-100}
shares=${SHARES:-0.3}
attacks=${ATTACKS:-sign_flip label_flip backdoor alie ipm min_max min_sum tailored}
out=${1:-runs/robust-strong-$data-$clients}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env="FEDPROF_BIN SEEDS DATA CLIENTS SHARES ATTACKS COMPOSITIONS"
. bench/provenance.sh
[[ -x $fedprof ]] || make build

default="average=average;median=median;trimmed_mean=trimmed_mean;multi_krum=multi_krum;bulyan=bulyan"
default+=";centered_clipping=centered_clipping;fltrust=fltrust;flame=flame;zeno=zeno;root=root"
default+=";fltrust-dv-median=fltrust,robust.root_size=0,robust.fltrust_scale=median"
default+=";nnm+cc-last=centered_clipping,robust.pre_aggregation=nnm,robust.cc_start=last"
default+=";fltrust+fallback=fltrust,robust.fallback=root"
default+=";fltrust-median+fallback=fltrust,robust.fltrust_scale=median,robust.fallback=root"
default+=";centered_clipping+fallback=centered_clipping,robust.fallback=root"
IFS=';' read -r -a compositions <<<"${COMPOSITIONS:-$default}"
fraction=$(awk -v n="$clients" 'BEGIN { print 10 / n }')
common=(--set data.name="$data" --set data.train_limit=30000 --set data.test_limit=5000
        --set data.holdout_share=0.1 --set clients.count="$clients" --set strategy.fraction="$fraction"
        --set strategy.aggregation=partial --set rounds=20 --set train.epochs=1 --set train.lr=0.05
        --set robust.trim_share=0.3 --set report.progress=false)
declare -A attack_sets=(
  [sign_flip]="attack.kind=sign_flip attack.scale=4" [label_flip]="attack.kind=label_flip"
  [backdoor]="attack.kind=backdoor attack.scale=1" [alie]="attack.kind=alie"
  [ipm]="attack.kind=ipm attack.scale=0.5" [min_max]="attack.kind=min_max"
  [min_sum]="attack.kind=min_sum" [tailored]="attack.kind=tailored"
  [tailored_unit]="attack.kind=tailored attack.perturbation=unit"
  [tailored_sign]="attack.kind=tailored attack.perturbation=sign")

mkdir -p "$out"
start=$SECONDS
percent() { awk -v s="$1" 'BEGIN { print s * 100 }'; }  # percent SHARE: 0.3 -> 30
run() {  # run COMPOSITION_ENTRY ATTACK SHARE
  local label=${1%%=*} spec=${1#*=} attack=$2 share=$3
  local dir=$out/$label/$attack-$share
  [[ $attack == none ]] && dir=$out/$label/none
  [[ -f $dir/comparison.csv ]] && return
  local sets=() kv
  IFS=',' read -r -a parts <<<"$spec"
  for kv in "${parts[@]:1}"; do sets+=(--set "$kv"); done
  if [[ $attack == none ]]; then
    sets+=(--set attack.share=0)
  else
    sets+=(--set attack.share="$share")
    for kv in ${attack_sets[$attack]}; do sets+=(--set "$kv"); done
  fi
  mkdir -p "$out/$label"
  echo "== $label / $attack $share"
  "$fedprof" compare "${common[@]}" "${sets[@]}" --strategies "uniform+${parts[0]}" --seeds "$seeds" \
    --jobs 2 --overwrite --out "$dir" >"$dir.log" 2>&1 || { tail -5 "$dir.log"; exit 1; }
}
for c in "${compositions[@]}"; do
  run "$c" none 0
  for s in $shares; do
    for a in $attacks; do run "$c" "$a" "$s"; done
  done
done
echo "wall time: $((SECONDS - start)) s"

# A row per composition, a column per attack: mean ± sd of a comparison.csv
# column (a row per seed of the composition's one strategy).
table() {  # table COLUMN TITLE SHARE
  local col=$1 title=$2 share=$3
  echo
  echo "$title (mean ± sd over $seeds seeds)"
  echo
  provenance
  local head="| composition | none |" rule="|---|---|" a c
  for a in $attacks; do head+=" $a |"; rule+="---|"; done
  echo "$head"
  echo "$rule"
  for c in "${compositions[@]}"; do
    local label=${c%%=*} line
    line="| $label |$(cell "$out/$label/none" "$col")"
    for a in $attacks; do line+=$(cell "$out/$label/$a-$share" "$col"); done
    echo "$line"
  done
}
cell() {  # cell DIR COLUMN: " mean ± sd |" over the seeds' rows of DIR/comparison.csv
  [[ -f $1/comparison.csv ]] || { echo -n " — |"; return; }
  awk -F, -v col="$2" '
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    c { k++; s += $c; ss += $c * $c }
    END {
      if (!k) { printf " — |"; exit }
      m = s / k; v = k > 1 ? (ss - k * m * m) / (k - 1) : 0
      printf " %.4f ± %.4f |", m, (v > 0 ? sqrt(v) : 0)
    }' "$1/comparison.csv"
}
for s in $shares; do
  pct=$(percent "$s")
  table final_accuracy "Final accuracy (round 20, $data, $clients clients, $pct% attackers)" "$s"
  table best_accuracy "Best accuracy (any round, $data, $clients clients, $pct% attackers)" "$s"
done
if [[ " $attacks " == *" backdoor "* ]]; then
  echo
  echo "The backdoor's success rate at round 20 ($data, $clients clients; mean ± sd over $seeds seeds)"
  echo
  provenance
  head="| composition |" rule="|---|"
  for s in $shares; do head+=" $(percent "$s")% |"; rule+="---|"; done
  echo "$head"
  echo "$rule"
  for c in "${compositions[@]}"; do
    label=${c%%=*} line="| ${c%%=*} |"
    for s in $shares; do line+=$(cell "$out/$label/backdoor-$s" final_backdoor_success); done
    echo "$line"
  done
fi

# The share of rounds whose step was the server's own (metrics.csv's
# fallback column), mean ± sd over the seeds, for the compositions with it.
fallback_cell() {  # fallback_cell DIR: " mean ± sd |" over DIR/*/seed-*/metrics.csv
  local f per_seed=()
  for f in "$1"/*/seed-*/metrics.csv; do
    [[ -f $f ]] && per_seed+=("$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "fallback") c = i; next }
                                       c { k++; s += $c } END { if (k) print s / k }' "$f")")
  done
  printf '%s\n' "${per_seed[@]}" | awk 'NF { k++; s += $1; ss += $1 * $1 }
    END { if (!k) { printf " — |"; exit }
          m = s / k; v = k > 1 ? (ss - k * m * m) / (k - 1) : 0
          printf " %.2f ± %.2f |", m, (v > 0 ? sqrt(v) : 0) }'
}
for s in $shares; do
  fallbacks=()
  for c in "${compositions[@]}"; do [[ $c == *robust.fallback=root* ]] && fallbacks+=("$c"); done
  ((${#fallbacks[@]})) || break
  pct=$(percent "$s")
  echo
  echo "Rounds whose step was the server's own ($data, $clients clients, $pct% attackers;" \
    "share of the 20, mean ± sd over $seeds seeds)"
  echo
  provenance
  head="| composition | none |" rule="|---|---|"
  for a in $attacks; do head+=" $a |"; rule+="---|"; done
  echo "$head"
  echo "$rule"
  for c in "${fallbacks[@]}"; do
    label=${c%%=*} line="| ${c%%=*} |$(fallback_cell "$out/$label/none")"
    for a in $attacks; do line+=$(fallback_cell "$out/$label/$a-$s"); done
    echo "$line"
  done
done

# The best composition per attacker share: of the compositions with every
# attack run at that share, the one whose worst attack ends highest (final
# accuracy, mean over the seeds), against FedAvg's no-attack run (the
# average composition's) when there is one: the goal is its own no-attack run
# within 2 points of FedAvg's, every attack within 5, the backdoor under 10%.
mean_of() {  # mean_of DIR COLUMN: the mean over the seeds, or nothing
  [[ -f $1/comparison.csv ]] || return 0
  awk -F, -v col="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
                       c { k++; s += $c } END { if (k) printf "%.4f", s / k }' "$1/comparison.csv"
}
fedavg=$(mean_of "$out/average/none" final_accuracy)
echo
echo "The best composition per attacker share ($data, $clients clients; by its worst attack's final" \
  "accuracy, mean over $seeds seeds; FedAvg without attackers: ${fedavg:-not run})"
echo
provenance
echo "| attackers | composition | none | worst attack | backdoor success | goal |"
echo "|---|---|---|---|---|---|"
for s in $shares; do
  best="" best_worst=-1 best_line=""
  for c in "${compositions[@]}"; do
    label=${c%%=*} worst="" worst_attack=""
    none=$(mean_of "$out/$label/none" final_accuracy)
    [[ -n $none ]] || continue
    for a in $attacks; do
      v=$(mean_of "$out/$label/$a-$s" final_accuracy)
      [[ -n $v ]] || { worst=""; break; }
      if [[ -z $worst ]] || awk -v x="$v" -v y="$worst" 'BEGIN { exit !(x < y) }'; then
        worst=$v worst_attack=$a
      fi
    done
    [[ -n $worst ]] || continue
    awk -v x="$worst" -v y="$best_worst" 'BEGIN { exit !(x > y) }' || continue
    backdoor=$(mean_of "$out/$label/backdoor-$s" final_backdoor_success)
    goal="—"
    if [[ -n $fedavg ]]; then
      goal=$(awk -v f="$fedavg" -v n="$none" -v w="$worst" -v b="${backdoor:--1}" 'BEGIN {
        miss = ""
        if (n < f - 0.02) miss = miss sprintf(" no attack %.1f under FedAvg;", (f - n) * 100)
        if (w < f - 0.05) miss = miss sprintf(" worst attack %.1f past the 5;", (f - 0.05 - w) * 100)
        if (b >= 0.10) miss = miss sprintf(" backdoor %.1f%%;", b * 100)
        if (miss == "" && b < 0) print "met by the attacks run (no backdoor)"
        else print miss == "" ? "met" : "missed:" miss }')
    fi
    best=$label best_worst=$worst
    best_line="| $(percent "$s")% | $label | $none | $worst_attack $worst |"
    best_line+=" ${backdoor:-—} | $goal |"
  done
  [[ -n $best ]] && echo "$best_line"
done
