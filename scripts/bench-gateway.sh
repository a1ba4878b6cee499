#!/usr/bin/env bash
# Runs the gateway benchmarks of issues 3 and 16 and writes
# bench/results/gateway-YYYY-MM-DD.md:
#   1. decision latency: the actors/fleet Pick benchmarks (actor path and
#      direct, 8/64/256 replicas), TestPickNeverLate and the cost_model
#      decision benchmarks (CostModelActor, CostModelDirect: an 8,000-token
#      prompt, 8/64/256 replicas, with and without the shortlist; not
#      CostModelActorLogged, which the issue's table does not ask for);
#   2. gateway overhead: bench/gwload, open loop at 2,000 req/s, straight to
#      three `inferrail sim --zero-latency` processes, through nginx
#      (scripts/nginx-proxy.sh), through bench/fastproxy (a minimal fasthttp
#      proxy) and through `inferrail serve` with least_request and with
#      cost_model (tokenizer builtin:sim), 3 rounds; a round during which
#      other processes took the CPUs runs again while time allows;
#   3. most requests per second: wrk, closed loop, against each proxy in
#      turn, 3 rounds.
# Everything runs on loopback and stops by itself. It takes about six
# minutes on two cores, seven at most; every step has a timeout. Exits non-zero when a target is missed or a request failed; the
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

# Debian's nginx is the baseline, and Debian's wrk the closed-loop client.
# This runs as root in CI and dev containers. nginx's packaged service is
# not started (nor needed): nginx-proxy.sh runs its own instance in the
# foreground.
for pkg in nginx wrk; do
  if ! command -v "$pkg" >/dev/null; then
    apt-get install -y "$pkg" || { apt-get update && apt-get install -y "$pkg"; }
  fi
done

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
go build -o "$tmp/fastproxy" ./bench/fastproxy

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
cost_cmd="go test -run '^\$' -bench 'CostModel(Actor|Direct)\$' -benchtime 3000x -count 3 -benchmem -timeout 180s ./actors/fleet/"
echo "bench-gateway: $cost_cmd" >&2
run go test -run '^$' -bench 'CostModel(Actor|Direct)$' -benchtime 3000x -count 3 -benchmem -timeout 180s ./actors/fleet/ >"$tmp/cost.txt" 2>&1 ||
  echo "bench-gateway: the cost_model benchmarks failed (see the results file)" >&2
grep -E '^Benchmark|^(ok|FAIL)' "$tmp/cost.txt" >&2 || true

mkdir -p bench/results
# BENCH_OUT names another results file, for a second run on one day.
out=${BENCH_OUT:-bench/results/gateway-$(date -u +%F).md}
# TMPDIR: gwload's own temp dir (nginx's files, the gateway's config) goes
# under $tmp, so the trap removes it even if gwload was killed.
status=0
TMPDIR="$tmp" run "$tmp/gwload" --bin "$bin" --fastproxy "$tmp/fastproxy" --nginx-script scripts/nginx-proxy.sh \
  --timeout 5m30s \
  --pick-bench "$tmp/pick.txt" --pick-command "$pick_cmd" \
  --never-late "$tmp/late.txt" --never-late-command "$late_cmd" \
  --cost-bench "$tmp/cost.txt" --cost-command "$cost_cmd" \
  --loadavg-before "$load_before" --out "$out" --command "$cmdline" "$@" || status=$?
exit "$status"
