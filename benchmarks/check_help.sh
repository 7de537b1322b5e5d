#!/usr/bin/env bash
# Checks ucclzip-bench's help (a ctest): `--help`, `help` and no arguments list the subcommands;
# each subcommand's --help lists flags (and fails on a listed flag that is not defined); an
# unknown subcommand is named, with the list, and exits 2.
#   check_help.sh path/to/ucclzip-bench
set -euo pipefail
bench=$1
list=$("$bench" --help)
[[ $("$bench" help) == "$list" && $("$bench") == "$list" ]] || { echo "help, --help and no arguments differ"; exit 1; }
subcommands=$(awk '/^subcommands:/ {on = 1; next} on && NF {print $1}' <<<"$list")
[[ -n $subcommands ]] || { echo "--help lists no subcommands:"; echo "$list"; exit 1; }
for sub in $subcommands; do
  help=$("$bench" "$sub" --help) || { echo "$sub --help failed"; exit 1; }
  flags=$(grep -c '^  -' <<<"$help" || true)
  ((flags > 0)) || { echo "$sub --help lists no flags:"; echo "$help"; exit 1; }
  [[ $("$bench" help "$sub") == "$help" ]] || { echo "help $sub differs from $sub --help"; exit 1; }
  echo "$sub: $flags flags"
done
set +e
unknown=$("$bench" no-such-benchmark 2>&1)
rc=$?
set -e
((rc == 2)) || { echo "an unknown subcommand exited $rc, not 2"; exit 1; }
grep -q "unknown subcommand 'no-such-benchmark'" <<<"$unknown" || { echo "$unknown"; exit 1; }
grep -q "^subcommands:" <<<"$unknown" || { echo "no list after an unknown subcommand"; exit 1; }
