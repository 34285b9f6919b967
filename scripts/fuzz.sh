#!/usr/bin/env bash
# Runs every libFuzzer target of a FEDPROF_FUZZ build for a fixed time each,
# starting from its seed corpus fuzz/corpus/<target>, and fails if any of
# them finds a crash, a sanitizer report, a leak, a timeout or an
# out-of-memory. Usage: scripts/fuzz.sh BUILD_DIR SECONDS [TARGET...]
# New inputs that grow coverage go to BUILD_DIR/fuzz/<target>/corpus (not
# the repository); findings to BUILD_DIR/fuzz/<target>/artifacts; the
# figures of each run (executions, coverage, features, corpus) to
# BUILD_DIR/fuzz/summary.md.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
seconds=$2
shift 2
targets=("$@")
if ((${#targets[@]} == 0)); then
  # Every target the build has: CMakeLists.txt's list, as the build wrote it.
  [ -f "$build/fuzz_targets.txt" ] || { echo "fuzz: $build/fuzz_targets.txt is missing: configure with -DFEDPROF_FUZZ=ON" >&2; exit 1; }
  mapfile -t targets <"$build/fuzz_targets.txt"
fi

# Every finding aborts the run with a report; LeakSanitizer runs in each.
export ASAN_OPTIONS="${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:suppressions=$here/scripts/sanitizers/ubsan.supp}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$here/scripts/sanitizers/lsan.supp:print_suppressions=0}"
export OMP_NUM_THREADS=1

summary="$build/fuzz/summary.md"
mkdir -p "$build/fuzz"
{
  echo "| target | seconds | executions | exec/s | cov | ft | corpus | result |"
  echo "|---|---|---|---|---|---|---|---|"
} >"$summary"

failed=()
for t in "${targets[@]}"; do
  bin="$build/$t"
  work="$build/fuzz/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  # CIFAR-10 records are 3073 bytes: room for two of them and a separator.
  max_len=()
  [ "$t" = fuzz_cifar ] && max_len=(-max_len=16384)
  echo "== $t: ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "${max_len[@]}" -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "$here/fuzz/corpus/$t" >"$work/log.txt" 2>&1
  rc=$?
  # The last status line: "#N DONE cov: C ft: F corp: K/..." (or the last
  # pulse when the run stopped early).
  last=$(grep -E '^#[0-9]+' "$work/log.txt" | tail -n 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log.txt")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log.txt")
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  if ((rc == 0)); then
    result=ok
  else
    result="FAILED (exit $rc)"
    failed+=("$t")
    grep -E 'ERROR: |FUZZ_CHECK|SUMMARY: |Test unit written' "$work/log.txt" | head -n 5
  fi
  echo "$t: ${execs:-?} executions, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}: $result"
  echo "| $t | $seconds | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | $result |" >>"$summary"
done

echo
cat "$summary"
if ((${#failed[@]})); then
  echo "fuzz: findings in ${failed[*]}; logs and inputs under $build/fuzz/<target>/" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no findings"
