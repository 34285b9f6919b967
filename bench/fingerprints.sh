#!/usr/bin/env bash
# Fingerprints of a few short runs, one line each: what must stay
# bit-identical when the code is restructured without meaning to change a
# number. Run it before and after, and compare (diff) the two outputs.
#
#   bench/fingerprints.sh [OUT_DIR] > before.txt
#
# Each line: the run, the SHA-256 of its final model (summary.json's
# final_model_sha256; '-' for FbFTL, which keeps no global model) and the
# SHA-256 of its per-round numbers (metrics.csv without the measured
# wall-clock columns; FbFTL: schemes.csv without them). The runs: FedAvg,
# FedProf and FedProx on the default experiment, FedProf with Paillier matching,
# FedBN with the batch-norm CNN, FedProf over 2 ranks (launch), FedAvg over
# a loopback deployment of 3 client processes, and an FbFTL run of every
# scheme from a pretrained source model. About 3 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/fingerprints}
fedprof=${FEDPROF_BIN:-build/fedprof}
[[ -x $fedprof ]] || make build >&2
rm -rf "$out"
mkdir -p "$out"

short=(--config configs/default.toml --set rounds=3 --set data.train_limit=6000
       --set data.test_limit=1000 --set clients.count=20 --set report.progress=false)
small=(--set data.train_limit=3000 --set data.test_limit=500 --set clients.count=5
       --set strategy.fraction=0.6 --set rounds=2 --set partition.kind=iid --set train.epochs=1
       --set data.holdout_share=0.1 --set report.progress=false)

# CSV text without the columns whose name says they are measured wall time.
numbers() {
  awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) keep[i] = ($i !~ /wall|_s_measured|seconds/) }
           { line = ""; for (i = 1; i <= NF; i++) if (keep[i]) line = line $i ","; print line }' "$1" |
    sha256sum | cut -c1-64
}
model() { sed -n 's/.*"final_model_sha256": "\([0-9a-f]*\)".*/\1/p' "$1/summary.json"; }
line() { printf '%-26s %s %s\n' "$1" "$(model "$2")" "$(numbers "$2/metrics.csv")"; }

"$fedprof" simulate "${short[@]}" --set strategy.name=fedavg --out "$out/fedavg" >/dev/null
line fedavg "$out/fedavg"
"$fedprof" simulate "${short[@]}" --set strategy.name=fedprof --out "$out/fedprof" >/dev/null
line fedprof "$out/fedprof"
"$fedprof" simulate "${short[@]}" --set strategy.name=fedprof --set fedprof.secure_matching=paillier \
  --set model.profile_layer=conv2 --set rounds=2 --out "$out/paillier" >/dev/null
line fedprof-paillier "$out/paillier"
"$fedprof" simulate "${short[@]}" --set strategy.name=fedprox --out "$out/fedprox" >/dev/null
line fedprox "$out/fedprox"
"$fedprof" simulate "${short[@]}" --set strategy.name=fedbn --set model.name=cnn --set rounds=2 \
  --out "$out/fedbn" >/dev/null
line fedbn-cnn "$out/fedbn"
"$fedprof" launch --nproc 2 -- simulate "${short[@]}" --set strategy.name=fedprof --set threads=1 \
  --set rounds=2 --out "$out/launch" >/dev/null
line launch-2-ranks-fedprof "$out/launch"

# A loopback deployment: a server and 3 client processes, plaintext (loopback only).
"$fedprof" server --listen 127.0.0.1:0 --insecure "${small[@]}" --set clients.count=3 \
  --set strategy.fraction=1 --out "$out/deploy" >"$out/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  address=$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$out/server.log")
  [[ -n $address ]] && break
  sleep 0.2
done
[[ -n $address ]] || { cat "$out/server.log" >&2; exit 1; }
for k in 0 1 2; do
  "$fedprof" client --server "$address" --insecure --id "$k" "${small[@]}" --set clients.count=3 \
    --set strategy.fraction=1 >"$out/client-$k.log" 2>&1 &
done
wait "$server"
trap - EXIT
# The deployment's times are measured: its per-round numbers are the
# learning columns alone.
cut -d, -f1-9 "$out/deploy/metrics.csv" >"$out/deploy/learning.csv"
printf '%-26s %s %s\n' deploy-3-clients-fedavg "$(model "$out/deploy")" \
  "$(sha256sum <"$out/deploy/learning.csv" | cut -c1-64)"

"$fedprof" pretrain --config configs/pretrain_fmnist.toml --set data.train_limit=2000 \
  --set pretrain.epochs=1 --out "$out/source.pt" >/dev/null
"$fedprof" fbftl --config configs/fbftl_mnist.toml --set transfer.source_model="$out/source.pt" \
  --set transfer.clients=40 --set transfer.epochs=2 --set transfer.head_epochs=4 \
  --set data.test_limit=500 --out "$out/fbftl" >/dev/null
printf '%-26s %s %s\n' fbftl-all-schemes - "$(numbers "$out/fbftl/schemes.csv")"
