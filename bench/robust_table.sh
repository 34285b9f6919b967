# Sourced by bench/robust.sh and bench/dp_evidence.sh after they set $out
# and source bench/provenance.sh.
# A row per strategy, a column per attack: mean ± sd of a comparison.csv column.
table() {  # table COLUMN TITLE HEADINGS(comma-separated) DIR...
  local col=$1 title=$2 names=$3
  shift 3
  echo
  echo "$title (mean ± sd over ${seeds:-3} seeds)"
  echo
  provenance
  local files=()
  for d in "$@"; do files+=("$out/$d/comparison.csv"); done
  awk -F, -v col="$col" -v names="$names" '
    FNR == 1 { file++; for (i = 1; i <= NF; i++) if ($i == col) c = i; next }
    {
      if (!($1 in seen)) { seen[$1] = 1; order[++rows] = $1 }
      n[$1, file]++; s[$1, file] += $c; ss[$1, file] += $c * $c
    }
    END {
      split(names, head, ",")
      line = "| strategy |"; rule = "|---|"
      for (f = 1; f <= file; f++) { line = line " " head[f] " |"; rule = rule "---|" }
      print line; print rule
      for (r = 1; r <= rows; r++) {
        line = "| " order[r] " |"
        for (f = 1; f <= file; f++) {
          k = n[order[r], f]
          if (!k) { line = line " — |"; continue }
          m = s[order[r], f] / k
          v = k > 1 ? (ss[order[r], f] - k * m * m) / (k - 1) : 0
          line = line sprintf(" %.4f ± %.4f |", m, v > 0 ? sqrt(v) : 0)
        }
        print line
      }
    }' "${files[@]}"
}
