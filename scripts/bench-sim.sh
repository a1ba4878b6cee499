#!/usr/bin/env bash
# Runs the simulator load benchmarks (bench/simload) against a freshly started
# `inferrail sim` per benchmark, prints a Markdown table and writes
# bench/results/sim-YYYY-MM-DD.md. Exits non-zero when any bound is missed.
# Takes about three minutes on two cores.
# Usage: scripts/bench-sim.sh path/to/inferrail [simload flags...] [benchmark...]
set -euo pipefail
bin=${1:?usage: bench-sim.sh path/to/inferrail [simload flags...] [benchmark...]}
shift
cmdline="scripts/bench-sim.sh $bin${*:+ $*}"
bin=$(realpath "$bin")
cd "$(dirname "$0")/.."

# wrk drives benchmark 4. This runs as root in CI and dev containers.
if ! command -v wrk >/dev/null; then
  apt-get install -y wrk || { apt-get update && apt-get install -y wrk; }
fi

# 2,000 concurrent streams need 2,000 client sockets plus the simulator's
# 2,000, each process under its own limit; ask for plenty.
want=65536
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
  ulimit -Hn "$want" 2>/dev/null || want=$hard
fi
ulimit -n "$want"
echo "bench-sim: fd limit $(ulimit -n)" >&2

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/simload" ./bench/simload

mkdir -p bench/results
out=bench/results/sim-$(date -u +%F).md
"$tmp/simload" --bin "$bin" --out "$out" --command "$cmdline" "$@"
