#!/usr/bin/env bash
# The fleet benchmark (docs/deploy-bench.md): one `fedprof server` with mutual
# TLS on loopback and N connected clients, run as swarms of `fedprof client
# --ids A-B --fit none` (FLEET_SWARM clients a process), for each N of SIZES.
# For each N it prints
#   idle   the server's RSS, threads and CPU over IDLE_S s while all N are
#          connected and idle (heartbeats every 2 s and task requests only);
#   round  rounds that hand a LeNet-5 task to ROUND_CLIENTS of them: the
#          round's wall time and results accepted per second (median of 3);
#   storm  the server killed (-9) and resumed on the same port: seconds until
#          all N are registered again, and the registrations it refused.
# FEDPROF_BEFORE=BIN measures BIN's server the same way at BEFORE_SIZES, side
# by side in the same run (the swarm is this build's in both). FLEET_CERTS=DIR
# keeps the certificates there (made once, reused by later runs).
#   bench/fleet.sh [BUILD_DIR]     SIZES="1000 5000 10000" by default
set -euo pipefail
build=${1:-build}
sizes=${SIZES:-1000 5000 10000}
before=${FEDPROF_BEFORE:-}
before_sizes=${BEFORE_SIZES:-1000}
idle_s=${IDLE_S:-20}
round_clients=${ROUND_CLIENTS:-1000}
swarm=${FLEET_SWARM:-2000}
cli=$(realpath "$build/fedprof")
py=/usr/bin/python3
work=$(mktemp -d /tmp/fedprof-fleet.XXXXXX)
pids=()
cleanup() {
  stop_all
  [[ -n ${FLEET_KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT

largest=$(printf '%s\n' $sizes $before_sizes | sort -n | tail -1)
certs=${FLEET_CERTS:-$work/certs}
if [[ ! -f $certs/client-$largest.crt ]]; then
  start=$(date +%s.%N)
  bash "$(dirname "$0")/../scripts/make-certs.sh" "$certs" $((largest + 1)) > /dev/null
  printf 'certificates for %d clients: %.1f s\n' $((largest + 1)) "$(echo "$(date +%s.%N) - $start" | bc)"
fi

metric_timeout_s=5
. "$(dirname "$0")/metric.sh"

# Waits until the monitor at $1 counts $2 connected clients; prints seconds.
wait_connected() {
  local t0 now
  t0=$(date +%s.%N)
  while (( $(metric "$1" fedprof_clients_connected) < $2 )); do
    now=$(date +%s.%N)
    (( $(echo "$now - $t0 > 900" | bc) )) && { echo "only $(metric "$1" fedprof_clients_connected) of $2 connected after 900 s" >&2; return 1; }
    sleep 0.5
  done
  echo "$(date +%s.%N) - $t0" | bc
}

# CPU seconds (user + system) of process $1.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
rss_mb() { awk '/VmRSS/ {print $2 / 1024}' "/proc/$1/status"; }
threads() { awk '/Threads/ {print $2}' "/proc/$1/status"; }

stop_all() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}

free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Runs one fleet of $2 clients against the server binary $1; $3 names it.
fleet() {
  local server_bin=$1 n=$2 name=$3 all=$(($2 + 1))
  local port monitor dir="$work/$name-$n" server
  port=$(free_port)
  monitor=127.0.0.1:$(free_port)
  mkdir -p "$dir"
  local run=(--set clients.count=$all --set data.train_limit=$((all * 6 > 60000 ? 60000 : all * 6))
    --set partition.kind=iid --set strategy.fraction=$(echo "scale=6; $round_clients / $all" | bc) --set rounds=1000
    --set train.epochs=1 --set deploy.min_clients=$all --set deploy.start_timeout_s=3600
    --set deploy.min_results=1 --set report.progress=false)
  local serve=(server --listen 127.0.0.1:$port --tls-dir "$certs" --monitor "$monitor")
  "$server_bin" "${serve[@]}" "${run[@]}" --out "$dir/out" > "$dir/server.log" 2>&1 &
  server=$!
  pids+=($server)
  sleep 1
  # Clients 0 .. n-1 connect; client n, the last the server waits for, comes later.
  for ((a = 0; a < n; a += swarm)); do
    local b=$((a + swarm - 1 < n - 1 ? a + swarm - 1 : n - 1))
    "$cli" client --server 127.0.0.1:$port --ids $a-$b --fit none --give-up-after 3600 --tls-dir "$certs" \
      "${run[@]}" > "$dir/swarm-$a.log" 2>&1 &
    pids+=($!)
  done
  local joined
  joined=$(wait_connected "$monitor" "$n") || { tail -5 "$dir/server.log" >&2; return 1; }
  sleep 5  # past the registrations
  local c0 c1
  c0=$(cpu_s $server)
  sleep "$idle_s"
  c1=$(cpu_s $server)
  local rss thr
  rss=$(rss_mb $server)
  thr=$(threads $server)
  printf '%-7s %6d idle: RSS %7.1f MB (%.3f MB per client), %5d threads, CPU %5.1f%% of a core (%.4f%% per client); all connected in %.1f s\n' \
    "$name" "$n" "$rss" "$(echo "$rss / $n" | bc -l)" "$thr" \
    "$(echo "100 * ($c1 - $c0) / $idle_s" | bc -l)" "$(echo "100 * ($c1 - $c0) / $idle_s / $n" | bc -l)" "$joined"
  if [[ $name == before ]]; then
    stop_all
    return 0
  fi

  "$cli" client --server 127.0.0.1:$port --id $n --fit none --give-up-after 3600 --tls-dir "$certs" "${run[@]}" \
    > "$dir/last.log" 2>&1 &
  pids+=($!)
  while [[ ! -f "$dir/out/metrics.csv" ]] || (( $(wc -l < "$dir/out/metrics.csv") < 5 )); do
    kill -0 $server 2>/dev/null || { tail -5 "$dir/server.log" >&2; return 1; }
    sleep 0.2
  done
  # Rounds 2 to 4 (round 1 includes the start): wall time, results accepted.
  $py - "$dir/out/metrics.csv" "$n" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))[:4]
times = [float(b["wall_s"]) - float(a["wall_s"]) for a, b in zip(rows, rows[1:])]
returned = [int(r["returned"]) for r in rows[1:]]
t = statistics.median(times)
print("%-7s %6s round: %d tasks, %.2f s a round (median of %d), %d results back, %.0f results/s"
      % ("after", sys.argv[2], int(rows[1]["selected"]), t, len(times), statistics.median(returned),
         statistics.median(returned) / t))
EOF

  # The storm: kill -9 the server, resume it on the same port.
  kill -9 $server
  wait $server 2>/dev/null || true
  local t0
  t0=$(date +%s.%N)
  "$server_bin" "${serve[@]}" --resume "$dir/out" > "$dir/resumed.log" 2>&1 &
  server=$!
  pids+=($server)
  local back
  back=$(wait_connected "$monitor" "$all") || { tail -5 "$dir/resumed.log" >&2; return 1; }
  # Refused registrations, and those the server could not read because
  # their clients gave up before they arrived whole (not refusals).
  # (A client's repeats within 10 s are logged as one count.)
  local refused unreadable
  read -r refused unreadable < <(awk '
    /refused: Register: no readable request/ { u++; next }
    /refused: Register/ { r++; next }
    /more refusals \(Register unreadable\)/ { for (i = 1; i <= NF; i++) if ($i == "more") u += $(i - 1); next }
    /more refusals \(Register / { for (i = 1; i <= NF; i++) if ($i == "more") r += $(i - 1) }
    END { print r + 0, u + 0 }' "$dir/resumed.log")
  printf '%-7s %6d storm: %d clients registered again %.1f s after the restart (%.1f s after the server answered); %d registrations refused, %d abandoned before they arrived\n' \
    "$name" "$n" "$all" "$(echo "$(date +%s.%N) - $t0" | bc)" "$back" "$refused" "$unreadable"
  stop_all
}

if [[ -n $before ]]; then
  for n in $before_sizes; do fleet "$(realpath "$before")" "$n" before; done
fi
for n in $sizes; do fleet "$cli" "$n" after; done
