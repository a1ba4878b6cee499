#!/usr/bin/env bash
# Runs every native fuzz target in the module for a short time each.
# Usage: scripts/fuzz.sh [duration]   (default 10s per target)
set -euo pipefail
fuzztime=${1:-10s}
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u | while read -r dir; do
  for target in $(grep -h '^func Fuzz' "$dir"/*_test.go | sed 's/^func \(Fuzz[A-Za-z0-9_]*\).*/\1/'); do
    echo "== $dir $target ($fuzztime)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$dir"
  done
done
