#!/usr/bin/env bash
# Runs the gateway benchmarks of issue 3 and writes
# bench/results/gateway-YYYY-MM-DD.md:
#   1. decision latency: the actors/fleet Pick benchmarks (actor path and
#      direct, 8/64/256 replicas) and TestPickNeverLate;
#   2. gateway overhead: bench/gwload, open loop at 2,000 req/s, straight to
#      three `inferrail sim --zero-latency` processes, through nginx
#      (scripts/nginx-proxy.sh) and through `inferrail serve`, 3 rounds;
#      a round during which other processes took the CPUs runs again, up to
#      3 more rounds.
# Everything runs on loopback and stops by itself. It takes about two and a
# half minutes on two cores, four and a half at most; every step has a
# timeout. Exits non-zero when a target is missed or a request failed; the
# results file is written either way (but not when interrupted).
# Run it on an otherwise idle machine: the report warns when it was not.
# Usage: scripts/bench-gateway.sh path/to/inferrail [gwload flags...]
set -euo pipefail
bin=${1:?usage: bench-gateway.sh path/to/inferrail [gwload flags...]}
shift
cmdline="scripts/bench-gateway.sh $bin${*:+ $*}"
bin=$(realpath "$bin")
cd "$(dirname "$0")/.."
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# Debian's nginx is the baseline. This runs as root in CI and dev containers.
# Its packaged service is not started (nor needed): nginx-proxy.sh runs its
# own instance in the foreground.
if ! command -v nginx >/dev/null; then
  apt-get install -y nginx || { apt-get update && apt-get install -y nginx; }
fi

want=65536
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ]; then
  ulimit -Hn "$want" 2>/dev/null || want=$hard
fi
ulimit -n "$want"

tmp=$(mktemp -d)
child=""
# signal_tree PID SIG: the process and everything it started, children first.
signal_tree() {
  local c
  for c in $(pgrep -P "$1"); do signal_tree "$c" "$2"; done
  kill "-$2" "$1" 2>/dev/null || true
}
cleanup() {
  # gwload stops its simulators, nginx and the gateway on SIGTERM, and they
  # die with it (PR_SET_PDEATHSIG) even if it is killed outright; go test's
  # test binary is signalled directly.
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
    signal_tree "$child" TERM
    for _ in $(seq 50); do kill -0 "$child" 2>/dev/null || break; sleep 0.2; done
    signal_tree "$child" KILL
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# run CMD...: runs CMD in the background and waits, so that a signal to this
# script is handled at once rather than after CMD ends.
run() {
  "$@" &
  child=$!
  local status=0
  wait "$child" || status=$?
  child=""
  return "$status"
}

go build -o "$tmp/gwload" ./bench/gwload

# Decision latency first, on a machine that nothing else loads.
pick_cmd="go test -run '^\$' -bench 'Pick' -benchmem -timeout 90s ./actors/fleet/"
echo "bench-gateway: $pick_cmd" >&2
run go test -run '^$' -bench 'Pick' -benchmem -timeout 90s ./actors/fleet/ >"$tmp/pick.txt" 2>&1 ||
  echo "bench-gateway: the Pick benchmarks failed (see the results file)" >&2
cat "$tmp/pick.txt" >&2
late_cmd="go test -count=1 -run '^TestPickNeverLate\$' -v -timeout 30s ./actors/fleet/"
echo "bench-gateway: $late_cmd" >&2
run go test -count=1 -run '^TestPickNeverLate$' -v -timeout 30s ./actors/fleet/ >"$tmp/late.txt" 2>&1 ||
  echo "bench-gateway: TestPickNeverLate failed (see the results file)" >&2
tail -3 "$tmp/late.txt" >&2

mkdir -p bench/results
out=bench/results/gateway-$(date -u +%F).md
# TMPDIR: gwload's own temp dir (nginx's files, the gateway's config) goes
# under $tmp, so the trap removes it even if gwload was killed.
status=0
TMPDIR="$tmp" run "$tmp/gwload" --bin "$bin" --nginx-script scripts/nginx-proxy.sh --timeout 4m \
  --pick-bench "$tmp/pick.txt" --pick-command "$pick_cmd" \
  --never-late "$tmp/late.txt" --never-late-command "$late_cmd" \
  --loadavg-before "$load_before" --out "$out" --command "$cmdline" "$@" || status=$?
exit "$status"
