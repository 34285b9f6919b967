#!/usr/bin/env bash
# The idle fleet of bench/fleet.sh held by a federation, side by side with
# `fedprof server` in one run (docs/federation.md#measured). For each N of
# SIZES, with mutual TLS on loopback and clients in processes of FLEET_SWARM:
#   server      `fedprof server` with N `fedprof client --ids A-B --fit none`
#               connected and idle: its RSS and CPU over IDLE_S s;
#   federation  `fedprof federation serve` with N enrolled clients in
#               `fedprof node --ids A-B --fit none` processes, idle between
#               runs: its RSS and CPU, and the nodes' CPU, over IDLE_S s;
#   run         a 3-round run submitted to all N (ROUND_CLIENTS a round):
#               seconds from submission to its end, the federation's and its
#               run server's peak RSS, then the federation idle again.
# FLEET_CERTS=DIR keeps the certificates there (made once, reused); WAIT_S
# bounds each wait for the fleet to connect (900 s).
#   bench/federation_fleet.sh [BUILD_DIR]     SIZES="1000 10000" by default
set -euo pipefail
build=${1:-build}
sizes=${SIZES:-1000 10000}
idle_s=${IDLE_S:-20}
round_clients=${ROUND_CLIENTS:-1000}
swarm=${FLEET_SWARM:-2000}
cli=$(realpath "$build/fedprof")
py=/usr/bin/python3
work=$(mktemp -d /tmp/fedprof-federation-fleet.XXXXXX)
pids=()
stop_all() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
}
cleanup() {
  stop_all
  [[ -n ${FLEET_KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1

largest=$(printf '%s\n' $sizes | sort -n | tail -1)
certs=${FLEET_CERTS:-$work/certs}
if [[ ! -f $certs/client-$((largest - 1)).crt || ! -f $certs/operator-alice.crt ]]; then
  start=$(date +%s.%N)
  OPERATORS=alice bash "$(dirname "$0")/../scripts/make-certs.sh" "$certs" "$largest" > /dev/null
  printf 'certificates for %d clients: %.1f s\n' "$largest" "$(echo "$(date +%s.%N) - $start" | bc)"
fi

cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }
rss_mb() { awk '/VmRSS/ {print $2 / 1024}' "/proc/$1/status"; }
hwm_mb() { awk '/VmHWM/ {print $2 / 1024}' "/proc/$1/status"; }
cpu_of() { local t=0 p; for p in "$@"; do t=$(echo "$t + $(cpu_s "$p")" | bc -l); done; echo "$t"; }
free_port() { $py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
. "$(dirname "$0")/metric.sh"
# Waits until metric "${@:3}" of the monitor at $1 reaches $2, at most
# $WAIT_S s (900); prints seconds.
wait_metric() {
  local address=$1 target=$2 t0
  shift 2
  t0=$(date +%s.%N)
  until (( $(metric "$address" "$@") >= target )); do
    (( $(echo "$(date +%s.%N) - $t0 > ${WAIT_S:-900}" | bc) )) &&
      { echo "$* reached only $(metric "$address" "$@") of $target after ${WAIT_S:-900} s" >&2; return 1; }
    sleep 1
  done
  echo "$(date +%s.%N) - $t0" | bc
}
run_of() {  # the run's config flags for N clients
  local n=$1
  echo "--set clients.count=$n --set data.train_limit=$((n * 6 > 60000 ? 60000 : n * 6)) --set partition.kind=iid
        --set strategy.fraction=$(echo "scale=6; $round_clients / $n" | bc) --set train.epochs=1
        --set deploy.min_clients=$n --set deploy.start_timeout_s=3600 --set deploy.min_results=1
        --set report.progress=false"
}

# Starts $1 clients in processes of $swarm ids ("${@:3}" --ids A-B, each
# logged to $2-A.log); their pids in $fleet.
start_fleet() {
  local n=$1 log=$2 a b
  shift 2
  fleet=()
  for ((a = 0; a < n; a += swarm)); do
    b=$((a + swarm - 1 < n - 1 ? a + swarm - 1 : n - 1))
    "$@" --ids $a-$b > "$log-$a.log" 2>&1 &
    pids+=($!)
    fleet+=($!)
  done
}

# Process $1 and its fleet ($fleet) over idle_s: RSS, CPU, the fleet's CPU
# and its largest process's RSS.
idle() {
  local c0 s0 c1 s1
  c0=$(cpu_s "$1"); s0=$(cpu_of "${fleet[@]}")
  sleep "$idle_s"
  c1=$(cpu_s "$1"); s1=$(cpu_of "${fleet[@]}")
  printf 'RSS %7.1f MB, CPU %5.1f%% of a core; its clients %5.1f%%, RSS %.1f MB a process (largest)' \
    "$(rss_mb "$1")" "$(echo "100 * ($c1 - $c0) / $idle_s" | bc -l)" "$(echo "100 * ($s1 - $s0) / $idle_s" | bc -l)" \
    "$(for p in "${fleet[@]}"; do rss_mb "$p"; done | sort -n | tail -1)"
}

server_side() {
  local n=$1 dir="$work/server-$1" port monitor server
  mkdir -p "$dir"
  port=$(free_port)
  monitor=127.0.0.1:$(free_port)
  # One client more than connect: the server waits, its fleet idle.
  local run
  run="$(run_of $((n + 1))) --set rounds=3"
  "$cli" server --listen 127.0.0.1:$port --tls-dir "$certs" --monitor "$monitor" $run --out "$dir/out" \
    > "$dir/server.log" 2>&1 &
  server=$!
  pids+=($server)
  sleep 1
  start_fleet "$n" "$dir/swarm" "$cli" client --server 127.0.0.1:$port --fit none --give-up-after 3600 \
    --tls-dir "$certs" $run
  local joined
  joined=$(wait_metric "$monitor" "$n" fedprof_clients_connected) || { tail -3 "$dir/server.log" >&2; return 1; }
  sleep 5
  printf 'server     %6d idle: %s; all connected in %.1f s\n' "$n" "$(idle $server)" "$joined"
  stop_all
}

federation_side() {
  local n=$1 dir="$work/federation-$1" fed address op monitor
  mkdir -p "$dir"
  monitor=127.0.0.1:$(free_port)
  "$cli" federation serve --state "$dir/state" --listen 127.0.0.1:0 --tls-dir "$certs" --admin alice --monitor "$monitor" \
    > "$dir/federation.log" 2>&1 &
  fed=$!
  pids+=($fed)
  until grep -qE "listening on 127.0.0.1:[0-9]+" "$dir/federation.log"; do sleep 0.1; done
  address=$(grep -oE "listening on 127.0.0.1:[0-9]+" "$dir/federation.log" | head -1 | cut -d' ' -f3)
  op="--server $address --tls-dir $certs"
  local t0
  t0=$(date +%s.%N)
  # Clients 0 .. n-1 (a directory of more holds them all: no ls | head, which pipefail fails).
  (cd "$certs" && seq -f 'client-%.0f.crt' 0 $((n - 1)) | xargs "$cli" federation enrol $op > /dev/null)
  printf 'federation %6d enrolled in %.1f s\n' "$n" "$(echo "$(date +%s.%N) - $t0" | bc)"
  start_fleet "$n" "$dir/node" "$cli" node --server "$address" --fit none --tls-dir "$certs"
  local joined
  joined=$(wait_metric "$monitor" "$n" fedprof_federation_nodes state=connected) ||
    { tail -3 "$dir/federation.log" >&2; return 1; }
  sleep 5
  printf 'federation %6d idle: %s; all connected in %.1f s\n' "$n" "$(idle $fed)" "$joined"

  t0=$(date +%s.%N)
  "$cli" federation submit $(run_of "$n") --set rounds=3 $op > /dev/null
  local server_hwm=0
  until (( $(metric "$monitor" fedprof_federation_runs "state=finished|failed|stopped") > 0 )); do
    local child
    child=$(pgrep -P "$fed" -f "fedprof server" | head -1 || true)
    [[ -n $child ]] && server_hwm=$(hwm_mb "$child" 2>/dev/null || echo "$server_hwm")
    (( $(echo "$(date +%s.%N) - $t0 > 1800" | bc) )) && { echo "the run did not end in 1800 s" >&2; return 1; }
    sleep 1
  done
  local took state
  took=$(echo "$(date +%s.%N) - $t0" | bc)
  state=$("$cli" federation status 1 $op --format json | grep -oE '"state": "[a-z]+"')
  printf 'federation %6d run: %s, 3 rounds of %d in %.1f s from submission; peak RSS: federation %.1f MB, its run server %.1f MB\n' \
    "$n" "$state" "$round_clients" "$took" "$(hwm_mb $fed)" "$server_hwm"
  sleep 5
  printf 'federation %6d idle after the run: %s\n' "$n" "$(idle $fed)"
  stop_all
}

for n in $sizes; do
  server_side "$n"
  federation_side "$n"
done
