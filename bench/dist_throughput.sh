#!/usr/bin/env bash
# Distributed simulation on one machine: training throughput of one process
# training two clients at a time (threads = 2) against two ranks training one
# each (fedprof launch --nproc 2, threads = 1), on the same rounds of the
# default experiment (Fashion-MNIST, LeNet-5, 10 of 100 clients of 540
# samples per round, 2 local epochs), and the bytes each rank sends per
# round. Also the terms of the throughput model in docs/scale.md: one
# thread's rate, and what evaluating every round adds.
#
# Samples per second are counted over rounds 2 .. ROUNDS-1 (round 1 warms up;
# evaluation runs in the last round only, unless asked every round). Runs
# alternate and the best of REPS is kept, as the machine is shared. Every run
# must give the same metrics.
#
#   bench/dist_throughput.sh [ROUNDS [REPS]]      (from the repository root)
#   BIN=build/fedprof CONFIG=configs/default.toml bench/dist_throughput.sh 12 3
set -euo pipefail
cd "$(dirname "$0")/.."
provenance_env="BIN CONFIG"
. bench/provenance.sh
BIN=${BIN:-build/fedprof}
CONFIG=${CONFIG:-configs/default.toml}
ROUNDS=${1:-12}
REPS=${2:-3}
[ "$ROUNDS" -ge 3 ] || { echo "ROUNDS must be at least 3" >&2; exit 1; }
OUT=$(mktemp -d /tmp/fedprof-dist-bench.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
COMMON=(--config "$CONFIG" --set rounds="$ROUNDS")
NO_EVAL=(--set eval.every=1000000)

# Samples trained per round in run directory $1: clients per round x mean
# client size x epochs (clients.csv, config.toml).
samples_per_round() {
  local dir=$1 epochs fraction
  epochs=$(awk -F' = ' '/^\[train\]/{s=1} s && $1=="epochs"{print $2; exit}' "$dir/config.toml")
  fraction=$(awk -F' = ' '/^\[strategy\]/{s=1} s && $1=="fraction"{print $2; exit}' "$dir/config.toml")
  awk -F, -v E="$epochs" -v C="$fraction" '
    FNR > 1 { size += $2; n++ } END { printf "%.0f", int(n * C + 0.5) * (size / n) * E }' \
    "$dir/clients.csv"
}

# Samples per second over rounds 2 .. ROUNDS-1 of run directory $1.
rate() {
  awk -F, -v R="$ROUNDS" -v S="$(samples_per_round "$1")" '
    FNR > 1 && $1 == 1 { w1 = $NF }
    FNR > 1 && $1 == R - 1 { w2 = $NF }
    END { printf "%.0f", (R - 2) * S / (w2 - w1) }' "$1/metrics.csv"
}

declare -A best
keep() { if [ "${best[$1]:-0}" -lt "$2" ]; then best[$1]=$2; fi; }
same() {
  cmp -s <(cut -d, -f1-15 "$1/metrics.csv") <(cut -d, -f1-15 "$2/metrics.csv") ||
    { echo "metrics of $1 and $2 differ" >&2; exit 1; }
}

for rep in $(seq "$REPS"); do
  d=$OUT/$rep
  "$BIN" simulate "${COMMON[@]}" "${NO_EVAL[@]}" --set threads=1 --set report.progress=false \
    --out "$d/one-1" >/dev/null
  "$BIN" simulate "${COMMON[@]}" "${NO_EVAL[@]}" --set threads=2 --set report.progress=false \
    --out "$d/one-2" >/dev/null
  "$BIN" launch --nproc 2 -- simulate "${COMMON[@]}" "${NO_EVAL[@]}" --set threads=1 \
    --out "$d/two-1" >"$d/two-1.log"
  "$BIN" simulate "${COMMON[@]}" --set eval.every=1 --set threads=2 --set report.progress=false \
    --out "$d/one-2-eval" >/dev/null
  same "$d/one-1" "$d/one-2"
  same "$d/one-1" "$d/two-1"
  one1=$(rate "$d/one-1") one2=$(rate "$d/one-2") two1=$(rate "$d/two-1") eval2=$(rate "$d/one-2-eval")
  echo "rep $rep: samples/s: 1 process x 1 thread $one1, 1 process x 2 threads $one2," \
    "2 ranks x 1 thread $two1; 1 process x 2 threads evaluating every round $eval2"
  keep one1 "$one1"
  keep one2 "$one2"
  keep two1 "$two1"
  keep eval2 "$eval2"
  traffic=$(grep '^distributed:' "$d/two-1.log")
done
S=$(samples_per_round "$OUT/1/one-1")
params=$(awk -F': ' '/"model_parameters"/{gsub(",", "", $2); print $2}' "$OUT/1/one-1/summary.json")
echo
provenance
echo "| setup | samples/s (best of $REPS) |"
echo "|---|---|"
echo "| 1 process x 1 thread | ${best[one1]} |"
echo "| 1 process x 2 threads | ${best[one2]} |"
echo "| 2 ranks x 1 thread | ${best[two1]} |"
echo
awk -v a="${best[two1]}" -v b="${best[one2]}" -v c="${best[one1]}" -v S="$S" \
  -v e="${best[eval2]}" 'BEGIN {
    printf "2 ranks x 1 thread / 1 process x 2 threads: %.3f\n", a / b
    printf "samples per round: %d; one thread: %.1f ms per round of training\n", S, 1000 * S / c
    printf "evaluation every round adds %.1f ms per round (2 threads)\n", 1000 * (S / e - S / b)
  }'
echo "model: $params float32 values = $((params * 4)) bytes"
echo "$traffic"
