#!/usr/bin/env bash
# The network tests repeated under load: a busy loop on every core at the
# tests' own priority, and each test of the CTest labels deploy and e2e
# (or those matching REGEX) run N times, one at a time. Prints, per test,
# how many runs passed and the slowest run's seconds; exits 1 if any run
# failed, keeping each failed run's output under OUT_DIR.
#
#   bench/soak.sh [-n N] [-R REGEX] [-o OUT_DIR]     # N = 20
#
# A test that passes alone but not here waits on something that a slow
# machine delays past a bound (docs/reliability.md#under-load).
set -euo pipefail
cd "$(dirname "$0")/.."
n=20 regex="" out=""
while getopts "n:R:o:" flag; do
  case $flag in
    n) n=$OPTARG ;;
    R) regex=$OPTARG ;;
    o) out=$OPTARG ;;
    *) sed -n '2,10p' "$0" >&2; exit 2 ;;
  esac
done
[[ $n =~ ^[1-9][0-9]*$ ]] || { echo "soak.sh: -n $n: a count of 1 or more" >&2; exit 2; }
[[ -x build/fedprof_tests ]] || make build >&2
out=${out:-$(mktemp -d /tmp/fedprof-soak.XXXXXX)}
mkdir -p "$out"

mapfile -t tests < <(cd build && ctest -N -L 'deploy|e2e' ${regex:+-R "$regex"} |
                     sed -n 's/^ *Test *#[0-9]*: //p')
(( ${#tests[@]} > 0 )) || { echo "soak.sh: no test of labels deploy|e2e matches '${regex}'" >&2; exit 2; }

hogs=()
stop_hogs() { (( ${#hogs[@]} == 0 )) || kill "${hogs[@]}" 2>/dev/null || true; }
trap stop_hogs EXIT
for ((core = 0; core < $(nproc); core++)); do
  bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "soak: ${#tests[@]} tests x $n, with ${#hogs[@]} busy loops; failed runs' output in $out" >&2

declare -A passed slowest
failed=0
for ((rep = 1; rep <= n; rep++)); do
  for t in "${tests[@]}"; do
    exact="^$(printf '%s' "$t" | sed 's/[][\.*^$+?(){}|]/\\&/g')\$"
    start=$(date +%s.%N)
    if (cd build && OMP_NUM_THREADS=1 ctest -R "$exact" --output-on-failure > "$out/last.log" 2>&1); then
      passed[$t]=$(( ${passed[$t]:-0} + 1 ))
    else
      failed=$((failed + 1))
      cp "$out/last.log" "$out/failed-$rep-$(printf '%s' "$t" | tr -c 'A-Za-z0-9._-' '_').log"
      echo "soak: run $rep of $t failed" >&2
    fi
    took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    slowest[$t]=$(awk -v a="${slowest[$t]:-0}" -v b="$took" 'BEGIN { print (b > a ? b : a) }')
  done
done
stop_hogs
hogs=()

printf '%-82s %7s %10s\n' test passed slowest_s
for t in "${tests[@]}"; do
  printf '%-82s %3d/%-3d %10.1f\n' "$t" "${passed[$t]:-0}" "$n" "${slowest[$t]}"
done
exit $(( failed > 0 ))
