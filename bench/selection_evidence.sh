#!/usr/bin/env bash
# Selection under real heterogeneity (docs/baselines.md, "Clients that come
# and go"): FedAvg, Oort, FedProf and FedProf + FedAdam in synchronous rounds,
# and the FedBuff forms of FedAvg, Oort and FedProf (fedbuff.concurrency =
# 2K, fedbuff.buffer = K: a step per K results, as many results as a round),
# 3 seeds each, with the papers' heterogeneous speeds and bandwidths (the
# cost.* defaults) and about half the clients online at a time
# (availability.kind = on_off, online and offline periods of ONLINE_S
# virtual seconds on average, default 300). Prints, per setup, the
# comparison (best accuracy, rounds, virtual time and energy to the target)
# and the selections by data kind and by speed quintile.
#
#   bench/selection_evidence.sh [OUT_DIR]     SETUPS="default emnist_style_fmnist" by default
# About 35 minutes for `default` and 90 for `emnist_style_fmnist` on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/selection}
setups=${SETUPS:-default emnist_style_fmnist}
online_s=${ONLINE_S:-300}
fedprof=${FEDPROF_BIN:-build/fedprof}
provenance_env=FEDPROF_BIN
. bench/provenance.sh
[[ -n ${FEDPROF_BIN:-} ]] || make build
strategies=fedavg,oort,fedprof,fedprof+fedadam,uniform+fedbuff,oort+fedbuff,fedprof+fedbuff

for setup in $setups; do
  k=$(awk -F' = ' '/^count/{n=$2} /^fraction/{c=$2} END{printf "%d", n*c + 0.5}' "configs/$setup.toml")
  provenance
  echo "## $setup: K = $k, half the clients online (periods of ${online_s} s)"
  "$fedprof" compare --config "configs/$setup.toml" --strategies "$strategies" --seeds 3 --jobs 2 \
    --set availability.kind=on_off --set availability.online_mean_s="$online_s" \
    --set availability.offline_mean_s="$online_s" --set fedbuff.concurrency=$((2 * k)) \
    --set fedbuff.buffer="$k" --set report.progress=false --overwrite --out "$out/$setup" >/dev/null
  provenance_stamp "$out/$setup/comparison.md"
  cat "$out/$setup/comparison.md"
  # Selections by data kind and by the clients' speed quintile (clients.csv:
  # speed_ghz and times_selected), summed over the seeds; and the mean
  # staleness of the asynchronous runs' results.
  /usr/bin/python3 - "$out/$setup" <<'EOF'
import csv, glob, os, sys
root = sys.argv[1]
rows = []
for strategy in sorted(os.listdir(root)):
    runs = sorted(glob.glob(os.path.join(root, strategy, "seed-*", "clients.csv")))
    if not runs:
        continue
    kinds, quintiles, stale = {}, [0] * 5, []
    for path in runs:
        with open(path) as f:
            clients = list(csv.DictReader(f))
        by_speed = sorted(clients, key=lambda c: float(c["speed_ghz"]))
        for rank, c in enumerate(by_speed):
            quintiles[rank * 5 // len(by_speed)] += int(c["times_selected"])
            kinds[c["data_kind"]] = kinds.get(c["data_kind"], 0) + int(c["times_selected"])
        with open(os.path.join(os.path.dirname(path), "metrics.csv")) as f:
            for m in csv.DictReader(f):
                if "staleness" in m:
                    stale.append(float(m["staleness"]))
    total = sum(quintiles) or 1
    rows.append((strategy, kinds, quintiles, total, sum(stale) / len(stale) if stale else None))
names = sorted({k for _, kinds, _, _, _ in rows for k in kinds})
print()
print("| strategy | " + " | ".join(names) + " | speed quintiles, slowest first | mean staleness |")
print("|---|" + "---|" * len(names) + "---|---|")
for strategy, kinds, quintiles, total, stale in rows:
    shares = " | ".join("%.1f%%" % (100.0 * kinds.get(n, 0) / total) for n in names)
    speed = " / ".join("%.0f%%" % (100.0 * q / total) for q in quintiles)
    print("| %s | %s | %s | %s |" % (strategy, shares, speed, "—" if stale is None else "%.2f" % stale))
print()
EOF
done
