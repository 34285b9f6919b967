#!/usr/bin/env bash
# What --monitor adds to a round of the default experiment (configs/default.toml,
# FedProf, cut to ROUNDS rounds): the same run with and without the monitor,
# interleaved REPS times (alternating which goes first), the monitored one scraped as an operator would
# (/metrics and the dashboard's /dashboard.json, each once a second: harder
# than Prometheus' usual 15 s and the dashboard's 2 s).
#
# A run's round times are the wall-time steps of its rounds 2..R-1 in
# metrics.csv (round 1 includes start-up, round R writes the plots). Prints
# the median round time of each variant over all reps, their ratio, and the
# median of the REPS paired ratios.
#
#   bench/monitor_overhead.sh [ROUNDS] [REPS]     (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
reps=${2:-5}
cli=build/fedprof
. bench/provenance.sh
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
settings="--config configs/default.toml --set strategy.name=fedprof --set rounds=$rounds
          --set report.progress=false"

median() { sort -g | awk '{v[NR]=$1} END{printf "%.4f", NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

round_times() {  # the wall-time steps of rounds 2..R-1 of a metrics.csv
  awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i; next}
           {w[NR-1]=$c} END{for(r=2;r<NR-1;r++) print w[r]-w[r-1]}' "$1"
}

monitored() {  # output directory
  local out=$1
  $cli simulate $settings --out "$out" --monitor 127.0.0.1:0 >"$out.log" 2>&1 &
  local run=$! address=""
  for _ in $(seq 600); do
    address=$(grep -o 'monitor: http://[0-9.:]*' "$out.log" | cut -d/ -f3 || true)
    [ -n "$address" ] && break
    sleep 0.1
  done
  # One scraper process for the whole run, as Prometheus and a browser are:
  # a curl started per request costs ~30 ms of CPU, more than the monitor.
  /usr/bin/python3 - "$address" "$run" <<'PY' &
import os, sys, time, urllib.request
address, run = sys.argv[1], int(sys.argv[2])
while True:
    try:
        os.kill(run, 0)
    except OSError:
        break
    for path in ("/metrics", "/dashboard.json"):
        try:
            urllib.request.urlopen(f"http://{address}{path}", timeout=5).read()
        except OSError:
            pass
    time.sleep(1)
PY
  local scraper=$!
  wait "$run"
  wait "$scraper"
}

: >"$work/plain.txt"
: >"$work/monitored.txt"
ratios=()
for rep in $(seq "$reps"); do
  # Alternate which variant goes first, so neither always runs on a warmer machine.
  if (( rep % 2 )); then
    $cli simulate $settings --out "$work/plain-$rep" >"$work/plain-$rep.log" 2>&1
    monitored "$work/mon-$rep"
  else
    monitored "$work/mon-$rep"
    $cli simulate $settings --out "$work/plain-$rep" >"$work/plain-$rep.log" 2>&1
  fi
  round_times "$work/plain-$rep/metrics.csv" >>"$work/plain.txt"
  round_times "$work/mon-$rep/metrics.csv" >>"$work/monitored.txt"
  p=$(round_times "$work/plain-$rep/metrics.csv" | median)
  m=$(round_times "$work/mon-$rep/metrics.csv" | median)
  ratios+=("$(awk -v m="$m" -v p="$p" 'BEGIN{printf "%.4f", m/p}')")
  echo "rep $rep: without $p s, with --monitor $m s per round"
done
plain=$(median <"$work/plain.txt")
mon=$(median <"$work/monitored.txt")
echo
provenance
echo "| variant | median round time (s) | rounds measured |"
echo "|---|---|---|"
echo "| without --monitor | $plain | $(wc -l <"$work/plain.txt") |"
echo "| with --monitor, scraped every second | $mon | $(wc -l <"$work/monitored.txt") |"
echo
awk -v m="$mon" -v p="$plain" 'BEGIN{printf "ratio of medians: %.4f (%+.2f%%)\n", m/p, 100*(m/p-1)}'
echo "median of the $reps paired ratios: $(printf '%s\n' "${ratios[@]}" | median)"
