# Sourced, with no arguments (so that "$@" is still the script's), by the bench
# scripts that print Markdown tables, after their cd to the repository root:
#
#   provenance_env="VAR ..."   # optional: the environment variables it reads
#   . bench/provenance.sh
#   provenance                 # above each table: commit <sha> · <command line>
#   provenance_stamp FILE      # the same line atop a Markdown file the run wrote
#
# so that a table pasted into the docs says which commit and command made it.
# The commit is the checkout's when the script started, "+dirty" when tracked
# files differed from it; the command line is the one to run from the root.
provenance_command=""
for provenance_var in ${provenance_env:-}; do
  [[ -z ${!provenance_var+set} ]] ||
    provenance_command+="$provenance_var=$(printf '%q' "${!provenance_var}") "
done
provenance_command+="bench/$(basename "$0")"
(($# == 0)) || provenance_command+=$(printf ' %q' "$@")
provenance_commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
[[ -z $(git status --porcelain --untracked-files=no 2>/dev/null) ]] || provenance_commit+="+dirty"
provenance() {
  printf 'commit %s · %s\n\n' "$provenance_commit" "$provenance_command"
}
provenance_stamp() {
  { provenance; cat "$1"; } >"$1.stamped" && mv "$1.stamped" "$1"
}
