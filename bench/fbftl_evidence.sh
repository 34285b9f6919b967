#!/usr/bin/env bash
# Reproduces the FbFTL evidence in docs/fbftl.md:
#  - Table III: FL, FTL_f, FTL_c, SFL and FbFTL on MNIST, from a Fashion-MNIST
#    source (configs/fbftl_mnist.toml) and from a source trained on MNIST
#    samples the clients do not hold (configs/fbftl_mnist_holdout.toml), and
#    on Fashion-MNIST from a source trained on Fashion-MNIST samples the
#    clients do not hold (configs/fbftl_fmnist_holdout.toml);
#  and with the Fashion-MNIST source on MNIST:
#  - Table V: FL, FTL_f, FTL_c and FbFTL under q-bit quantisation x top-r
#    sparsification, with the paper's min-max quantiser and, for q = 2, the
#    symmetric one;
#  - accuracy against block loss (no retransmission) and against the share
#    of samples used (Fig. 8);
#  - accuracy against epsilon for K_u = 8 and K_u = 64 (Fig. 12).
# Each sweep's rows are collected into a CSV under OUT_DIR.
# About two hours on 2 cores. Usage: bench/fbftl_evidence.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/fbftl}
fedprof=${FEDPROF_BIN:-build/fedprof}
[[ -n ${FEDPROF_BIN:-} ]] || make build
mkdir -p "$out"
source_model=$out/fmnist_source.pt
[[ -f $source_model ]] || "$fedprof" pretrain --config configs/pretrain_fmnist.toml --out "$source_model"
[[ -f $out/mnist_source.pt ]] ||
  "$fedprof" pretrain --config configs/pretrain_mnist_holdout.toml --out "$out/mnist_source.pt"
[[ -f $out/fmnist_holdout_source.pt ]] ||
  "$fedprof" pretrain --config configs/pretrain_fmnist_holdout.toml --out "$out/fmnist_holdout_source.pt"

fbftl() {  # fbftl NAME --set ...: one run with the Fashion-MNIST source, unless done
  local name=$1; shift
  [[ -f $out/$name/schemes.csv ]] && return
  mkdir -p "$(dirname "$out/$name")"
  "$fedprof" fbftl --config configs/fbftl_mnist.toml --set transfer.source_model="$source_model" \
    "$@" --out "$out/$name" > "$out/$name.log"
}
rm -f "$out"/{table5,loss,share,dp}.csv  # rebuilt below from the runs' folders
collect() {  # collect CSV HEADER_PREFIX NAME VALUES: append NAME's schemes.csv rows
  local csv=$1 header=$2 name=$3 values=$4
  [[ -f $csv ]] || { printf '%s,' "$header"; head -1 "$out/$name/schemes.csv"; } > "$csv"
  tail -n +2 "$out/$name/schemes.csv" | sed "s/^/$values,/" >> "$csv"
}

[[ -f $out/table3/schemes.csv ]] || fbftl table3
[[ -f $out/table3_same_domain/schemes.csv ]] ||
  "$fedprof" fbftl --config configs/fbftl_mnist_holdout.toml \
    --set transfer.source_model="$out/mnist_source.pt" --out "$out/table3_same_domain" \
    > "$out/table3_same_domain.log"
[[ -f $out/table3_fmnist/schemes.csv ]] ||
  "$fedprof" fbftl --config configs/fbftl_fmnist_holdout.toml \
    --set transfer.source_model="$out/fmnist_holdout_source.pt" --out "$out/table3_fmnist" \
    > "$out/table3_fmnist.log"

# FTL_c for 40 epochs against FbFTL, on all 10,000 test images: when FTL_c
# reaches FbFTL's accuracy.
[[ -f $out/ftlc40_mnist/schemes.csv ]] ||
  "$fedprof" fbftl --config configs/fbftl_mnist_holdout.toml --set data.test_limit=0 \
    --set transfer.source_model="$out/mnist_source.pt" --set transfer.schemes=FTL_c,FbFTL \
    --set transfer.epochs=40 --out "$out/ftlc40_mnist" > "$out/ftlc40_mnist.log"
[[ -f $out/ftlc40_fmnist/schemes.csv ]] ||
  "$fedprof" fbftl --config configs/fbftl_fmnist_holdout.toml \
    --set transfer.source_model="$out/fmnist_holdout_source.pt" --set transfer.schemes=FTL_c,FbFTL \
    --set transfer.epochs=40 --out "$out/ftlc40_fmnist" > "$out/ftlc40_fmnist.log"

# The sweeps use half the clients (U = 250, U C = 8) and 5 epochs,
# unless a run sets its own.
sweep() {
  local name=$1; shift
  fbftl "$name" --set transfer.clients=250 --set transfer.fraction=0.032 --set transfer.epochs=5 "$@"
}

for q in 32 8 2 2s; do  # 2s: q = 2 with the symmetric quantiser
  quantizer=minmax
  [[ $q == *s ]] && quantizer=symmetric
  for r in 1 0.1 0.01 0.001; do
    for schemes in FL,FTL_f FTL_c,FbFTL; do
      sweep "table5/$schemes/q$q-r$r" --set transfer.schemes=$schemes --set transfer.bits=${q%s} \
        --set transfer.keep_ratio=$r --set transfer.quantizer=$quantizer
      collect "$out/table5.csv" "bits,quantizer,keep_ratio" "table5/$schemes/q$q-r$r" \
        "${q%s},$quantizer,$r"
    done
  done
done

for blr in 0 0.2 0.4 0.6 0.8 0.9; do
  sweep "loss/blr$blr" --set transfer.schemes=FbFTL --set transfer.block_loss=$blr
  collect "$out/loss.csv" "block_loss" "loss/blr$blr" "$blr"
done

for share in 1 0.3 0.1 0.03 0.01; do
  sweep "share/s$share" --set transfer.schemes=FbFTL --set transfer.sample_share=$share
  collect "$out/share.csv" "sample_share" "share/s$share" "$share"
done

for k in 8 64; do
  for form in paper clipped; do
    for sigma in 0.5 1 2 4; do
      sweep "dp/k$k-$form-s$sigma" --set transfer.schemes=FbFTL \
        --set transfer.clients=$((2000 / k)) --set transfer.samples_per_client=$k \
        --set transfer.dp_noise=$sigma --set transfer.dp_form=$form --set transfer.dp_clip=10
      collect "$out/dp.csv" "samples_per_client,dp_form,noise" "dp/k$k-$form-s$sigma" "$k,$form,$sigma"
    done
  done
done

# plot PNG TITLE XLABEL: gnuplot with the common settings, then the commands
# on stdin (log-scale x, CSV input).
plot() {
  { cat <<EOF
set terminal pngcairo size 960,540 font "sans,10" noenhanced
set output "$1"
set title "$2"
set xlabel "$3"; set ylabel "test accuracy"; set key bottom right; set grid
set logscale x; set format x "1e%T"; set datafile separator ","
EOF
    cat; } | gnuplot
}

# Accuracy against uplink for the Table III runs.
for run in table3 table3_same_domain table3_fmnist; do
  plot "$out/$run.png" "$run: test accuracy against uplink bytes, after each epoch" \
    "uplink bytes" <<EOF
plot for [s in "FL FTL_f FTL_c SFL FbFTL"] "$out/$run/curves.csv" \
  using (stringcolumn(1) eq s ? \$3 : NaN):(stringcolumn(1) eq s ? \$4 : NaN) \
  with linespoints lw 2 pt 7 ps 0.5 title s
EOF
done

# FTL_c's accuracy against its uplink in multiples of FbFTL's, with FbFTL's
# accuracy as a line: where FTL_c stands when it has sent 10^4 times more.
for run in ftlc40_mnist ftlc40_fmnist; do
  fbftl_bytes=$(awk -F, '$1 == "FbFTL" { print $6 }' "$out/$run/schemes.csv")
  fbftl_accuracy=$(awk -F, '$1 == "FbFTL" { print $14 }' "$out/$run/schemes.csv")
  plot "$out/$run.png" \
    "$run: FTL_c's test accuracy against its uplink / FbFTL's uplink ($fbftl_bytes bytes)" \
    "FTL_c uplink / FbFTL uplink" <<EOF
set arrow from 1e4, graph 0 to 1e4, graph 1 nohead dt 2
plot "$out/$run/curves.csv" using (stringcolumn(1) eq "FTL_c" ? \$3 / $fbftl_bytes : NaN):4 \
       with linespoints lw 2 pt 7 ps 0.5 title "FTL_c, after each epoch", \
     $fbftl_accuracy with lines lw 2 dt 3 title "FbFTL's accuracy"
EOF
done
