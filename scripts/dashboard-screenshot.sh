#!/usr/bin/env bash
# Regenerates docs/img/dashboard.png: a FedProf simulation of the default
# experiment's scenario (30 clients, blurred, noisy and irrelevant data) runs
# with --monitor on loopback; once it reaches round $AT_ROUND, Debian's
# headless Chromium loads the dashboard and saves what it renders.
#   usage: scripts/dashboard-screenshot.sh [BUILD_DIR] [OUT_PNG]
set -euo pipefail
build=$(realpath "${1:-build}")
out=${2:-docs/img/dashboard.png}
at_round=${AT_ROUND:-60}
work=$(mktemp -d)
sim=
cleanup() {
  [[ -n "$sim" ]] && kill "$sim" 2>/dev/null && wait "$sim" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

root=$(pwd)
# Run from the scratch directory so the page names the run runs/fedprof-30-clients.
(cd "$work" && exec "$build/fedprof" simulate --config "$root/configs/default.toml" --set strategy.name=fedprof \
  --set data.train_limit=6000 --set clients.count=30 --set strategy.fraction=0.3 \
  --set rounds=1000 --set report.progress=false --out runs/fedprof-30-clients \
  --monitor 127.0.0.1:0 > "$work/sim.log" 2>&1) &
sim=$!

address=
for _ in $(seq 600); do
  address=$(sed -n 's|^monitor: http://\([0-9.:]*\)/.*|\1|p' "$work/sim.log")
  [[ -n "$address" ]] && break
  kill -0 "$sim" 2>/dev/null || { cat "$work/sim.log" >&2; exit 1; }
  sleep 0.1
done
[[ -n "$address" ]] || { echo "no monitor address in the simulation's output" >&2; exit 1; }

# Python rather than curl: install-deps.sh installs the one, not the other.
round() { /usr/bin/python3 -c 'import json,sys,urllib.request
print(json.load(urllib.request.urlopen(sys.argv[1], timeout=2)).get("round", 0))' \
  "http://$address/status" 2>/dev/null || echo 0; }
for _ in $(seq 600); do
  (( $(round) >= at_round )) && break
  kill -0 "$sim" 2>/dev/null || { cat "$work/sim.log" >&2; exit 1; }
  sleep 0.5
done

# The page polls on load; a 3 s virtual-time budget lets its first answer render.
timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
  --disable-quic --disable-background-networking --disable-component-update --disable-sync \
  --user-data-dir="$work/profile" --window-size=1400,1420 --virtual-time-budget=3000 \
  --screenshot="$out" "http://$address/" > "$work/chromium.log" 2>&1 ||
  { cat "$work/chromium.log" >&2; exit 1; }
echo "$out: the dashboard at round $(round)"
