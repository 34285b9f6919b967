#!/usr/bin/env bash
# The client-state store (client_state.memory_mb, docs/algorithms.md) at
# N LeNet-5 clients that each keep a state of the model's size: MOON's
# previous models, N = 10^4 by default (60,000 MNIST samples, 6 a client,
# every client training each round). Beside FedAvg (no state), MOON within
# budgets of memory: the process's peak resident memory, what the store put
# on disk, and the wall time of the run. MOON without a budget holds every
# state in memory and inline in each checkpoint; run it with -u (at 10^4
# clients it needs about 17 GB).
#
#   bench/client_state.sh [-n CLIENTS] [-r ROUNDS] [-b "MB MB ..."] [-u]
set -euo pipefail
cd "$(dirname "$0")/.."
fedprof=${FEDPROF_BIN:-build/fedprof}
[[ -x $fedprof ]] || make build >&2
clients=10000 rounds=2 budgets="256 64" unbounded=""
while getopts "n:r:b:u" flag; do
  case $flag in
    n) clients=$OPTARG ;; r) rounds=$OPTARG ;; b) budgets=$OPTARG ;; u) unbounded=1 ;;
    *) sed -n '2,12p' "$0" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-22s %14s %14s %10s\n' run "peak RSS (MB)" "on disk (MB)" "wall (s)"
one() {  # label, then settings
  local label=$1 dir=$out/$1
  shift
  /usr/bin/time -f "%M %e" -o "$out/time" "$fedprof" simulate --config configs/niid_bench.toml \
    --set clients.count="$clients" --set partition.kind=iid --set rounds="$rounds" --set train.epochs=1 \
    "$@" --out "$dir" >/dev/null
  read -r rss wall <"$out/time"
  params=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['model_parameters'])" "$dir/summary.json")
  local disk=0
  [[ -d $dir/client_state ]] && disk=$(du -sm "$dir/client_state" | cut -f1)
  printf '%-22s %14d %14d %10.1f\n' "$label" $((rss / 1024)) "$disk" "$wall"
  rm -rf "$dir"
}
one fedavg --set strategy.name=fedavg
for mb in $budgets; do one "moon, ${mb} MB" --set strategy.name=moon --set client_state.memory_mb="$mb"; done
[[ -n $unbounded ]] && one "moon, no budget" --set strategy.name=moon --set client_state.memory_mb=0
echo "$clients clients x $((params * 4 / 1024)) KiB of state each (the model's $params values); $rounds rounds"
