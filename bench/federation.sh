#!/usr/bin/env bash
# A federation's costs on loopback (docs/federation.md#measured), side by side
# with today's one-run deployment in the same run:
#   start  seconds from asking for a run to its first round: `federation
#          submit` to nodes already connected, against starting `fedprof
#          server` and NODES `fedprof client` processes (REPEAT times each,
#          median);
#   idle   a node waiting between runs against a `fedprof client` waiting
#          for its server's round: RSS and CPU over IDLE_S s (each process
#          alone, after a run: its model, data and threads as they stay).
#   bench/federation.sh [BUILD_DIR]      NODES=3 REPEAT=3 IDLE_S=20
set -euo pipefail
build=${1:-build}
nodes=${NODES:-3}
repeat=${REPEAT:-3}
idle_s=${IDLE_S:-20}
cli=$(realpath "$build/fedprof")
work=$(mktemp -d /tmp/fedprof-federation.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1
OPERATORS=alice bash "$(dirname "$0")/../scripts/make-certs.sh" "$work/certs" "$nodes" > /dev/null
run="--set data.train_limit=1000 --set data.test_limit=500 --set clients.count=$nodes --set strategy.fraction=1
     --set rounds=2 --set partition.kind=iid --set train.epochs=1 --set report.progress=false"

now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# Seconds until `file` holds a line matching `pattern`.
wait_for() {
  local file=$1 pattern=$2 deadline=$(( $(date +%s) + 300 ))
  until grep -qE "$pattern" "$file" 2>/dev/null; do
    (( $(date +%s) < deadline )) || { echo "federation.sh: timed out waiting for '$pattern' in $file" >&2; exit 1; }
    sleep 0.05
  done
}
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
idle() {  # pid: "RSS MB, CPU % of a core" over idle_s
  local pid=$1 before after
  before=$(cpu_ticks "$pid")
  sleep "$idle_s"
  after=$(cpu_ticks "$pid")
  printf '%.1f MB RSS, %.2f%% of a core' "$(echo "$(rss_kb "$pid") / 1024" | bc -l)" \
    "$(echo "($after - $before) * 100 / $(getconf CLK_TCK) / $idle_s" | bc -l)"
}

# --- today's: a server and its clients started for the run
for ((i = 0; i < repeat; i++)); do
  out=$work/server-$i
  start=$(now)
  "$cli" server --listen 127.0.0.1:0 --tls-dir "$work/certs" --out "$out" $run > "$out.log" 2>&1 &
  server=$!
  pids+=("$server")
  wait_for "$out.log" "listening on 127.0.0.1:[0-9]+"
  address=$(grep -oE "listening on 127.0.0.1:[0-9]+" "$out.log" | head -1 | cut -d' ' -f3)
  for ((k = 0; k < nodes; k++)); do
    "$cli" client --server "$address" --id "$k" --tls-dir "$work/certs" $run > "$out.client-$k.log" 2>&1 &
    pids+=($!)
  done
  wait_for "$out/metrics.csv" "^1,"
  echo "$(now) - $start" | bc >> "$work/start-server"
  wait "$server"
done
# A client waiting for its server's round: a server that waits for one client more.
out=$work/server-idle
"$cli" server --listen 127.0.0.1:0 --tls-dir "$work/certs" --out "$out" $run --set deploy.start_timeout_s=600 > "$out.log" 2>&1 &
pids+=($!)
wait_for "$out.log" "listening on 127.0.0.1:[0-9]+"
address=$(grep -oE "listening on 127.0.0.1:[0-9]+" "$out.log" | head -1 | cut -d' ' -f3)
"$cli" client --server "$address" --id 0 --tls-dir "$work/certs" $run > "$out.client.log" 2>&1 &
client=$!
pids+=("$client")
sleep 5
client_idle=$(idle "$client")
{ kill -9 "$client" "${pids[-2]}"; wait "$client" "${pids[-2]}"; } 2>/dev/null || true

# --- a federation: its nodes connected once, runs submitted to it
"$cli" federation serve --state "$work/state" --listen 127.0.0.1:0 --tls-dir "$work/certs" --admin alice > "$work/federation.log" 2>&1 &
pids+=($!)
wait_for "$work/federation.log" "listening on 127.0.0.1:[0-9]+"
fed=$(grep -oE "listening on 127.0.0.1:[0-9]+" "$work/federation.log" | head -1 | cut -d' ' -f3)
op="--server $fed --tls-dir $work/certs"
certs=()
for ((k = 0; k < nodes; k++)); do certs+=("$work/certs/client-$k.crt"); done
"$cli" federation enrol "${certs[@]}" $op > /dev/null
node_pids=()
for ((k = 0; k < nodes; k++)); do
  "$cli" node --server "$fed" --id "$k" --tls-dir "$work/certs" > "$work/node-$k.log" 2>&1 &
  node_pids+=($!)
  pids+=($!)
done
connected() { "$cli" federation nodes $op --format json | grep -o '"connected": *true' | wc -l; }
deadline=$(( $(date +%s) + 120 ))
until (( $(connected) >= nodes )); do
  (( $(date +%s) < deadline )) || { echo "federation.sh: the nodes did not connect" >&2; exit 1; }
  sleep 0.1
done
sleep 1
for ((i = 1; i <= repeat; i++)); do
  start=$(now)
  "$cli" federation submit $run $op > /dev/null
  wait_for "$work/state/runs/$i/out/metrics.csv" "^1,"
  echo "$(now) - $start" | bc >> "$work/start-federation"
  "$cli" federation wait "$i" --timeout 300 $op > /dev/null
done
sleep 3
node_idle=$(idle "${node_pids[0]}")

printf 'start: fedprof server + %d clients %.2f s, federation submit to %d connected nodes %.2f s (median of %d)\n' \
  "$nodes" "$(median < "$work/start-server")" "$nodes" "$(median < "$work/start-federation")" "$repeat"
printf 'idle over %d s: fedprof client %s; fedprof node between runs %s\n' "$idle_s" "$client_idle" "$node_idle"
