#!/usr/bin/env bash
# What simulated availability costs at scale: FedAvg over N clients (default
# a million; LeNet-5, Fashion-MNIST, partition.kind = sampled with ~20
# samples a client, 1,000 trained a round, 1 epoch, ROUNDS rounds, default 5),
# without availability, with on_off periods (half online, periods of 10
# virtual minutes) and with on_off plus over-commitment 1.3, side by side:
# the mean number of clients online, mean round wall time, peak RSS, and the
# RSS per client over the run without availability.
#
#   bench/availability_scale.sh [CLIENTS] [ROUNDS]     (needs `make build`)
set -euo pipefail
cd "$(dirname "$0")/.."
clients=${1:-1000000}
rounds=${2:-5}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env=FEDPROF_BIN
. bench/provenance.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common=(--set clients.count="$clients" --set partition.kind=sampled --set partition.size_mean=20
        --set partition.size_sd=5 --set strategy.fraction="$(awk -v n="$clients" 'BEGIN{print 1000/n}')"
        --set train.epochs=1 --set strategy.aggregation=partial --set rounds="$rounds"
        --set eval.every=1000)

provenance
echo "| availability | clients | mean online | mean round s | peak RSS MB | RSS over none, bytes/client |"
echo "|---|---|---|---|---|---|"
base_rss=
run() {  # label, options...
  local label=$1
  shift
  local out="$work/$label"
  "$fedprof" simulate "${common[@]}" "$@" --out "$out" >"$work/$label.log" 2>&1 ||
    { cat "$work/$label.log"; exit 1; }
  local round rss online extra
  round=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="wall_s") c=i} NR>1{w[NR-1]=$c}
                   END{n=NR-1; printf "%.2f", (w[n]-w[1])/(n-1)}' "$out/metrics.csv")
  online=$(awk -F, 'NR==1{for(i=1;i<=NF;i++) if($i=="online") c=i} NR>1 && c{s+=$c; n++}
                    END{if (n) printf "%.0f", s/n; else print "all"}' "$out/metrics.csv")
  rss=$(grep -o '"peak_rss_mb": [0-9.]*' "$out/summary.json" | awk '{printf "%.1f", $2}')
  if [[ -z $base_rss ]]; then base_rss=$rss; extra="—"; else
    extra=$(awk -v a="$rss" -v b="$base_rss" -v n="$clients" 'BEGIN{printf "%.0f", (a-b)*1048576/n}')
  fi
  echo "| $label | $clients | $online | $round | $rss | $extra |"
}
run none
run on_off --set availability.kind=on_off --set availability.online_mean_s=600 \
  --set availability.offline_mean_s=600
run "on_off + overcommit 1.3" --set availability.kind=on_off --set availability.online_mean_s=600 \
  --set availability.offline_mean_s=600 --set availability.overcommit=1.3
