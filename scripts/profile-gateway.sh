#!/usr/bin/env bash
# Profiles `inferrail serve` under open-loop load on loopback (issue 16,
# "A profile first"). For each policy (least_request; cost_model with
# builtin:sim tokenization) it starts three `inferrail sim --zero-latency`
# processes and the gateway, drives it with `inferrail bench run` at --rate,
# and takes a CPU profile and a delta allocation profile from the gateway
# process, then renders them (SVG call graphs, -top text, flame graphs).
#
# The gateway has no pprof endpoint, and this script changes no gateway
# code: it builds the binary with `go build -overlay`, adding one file to
# package main that serves net/http/pprof on $PPROF_ADDR when that variable
# is set. The committed tree is untouched; only the profiled binary differs.
# Usage: scripts/profile-gateway.sh OUTDIR [rate] [seconds]
set -euo pipefail
out=${1:?usage: profile-gateway.sh OUTDIR [rate] [seconds]}
rate=${2:-2000}
secs=${3:-20}
# Short prompts and one output token per request, close to the committed
# gateway benchmark (a dozen-word prompt, max_tokens 1).
load_set=${LOAD_SET:-output_tokens = [1, 1]
system_tokens = [8, 8]
question_tokens = [8, 8]}
cd "$(dirname "$0")/.."
# go tool pprof -svg needs Graphviz's dot; without it every SVG came out
# empty and the script stopped there, saying nothing.
if ! command -v dot >/dev/null; then
  echo "installing graphviz (Debian package) for go tool pprof -svg" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends graphviz >/dev/null ||
    { apt-get update >/dev/null && apt-get install -y --no-install-recommends graphviz >/dev/null; }
fi
mkdir -p "$out"
out=$(realpath "$out")
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 0.5
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$tmp/zz_pprof.go" <<'GO'
package main

import (
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	if addr := os.Getenv("PPROF_ADDR"); addr != "" {
		go http.ListenAndServe(addr, nil)
	}
}
GO
printf '{"Replace":{"%s/cmd/inferrail/zz_pprof.go":"%s/zz_pprof.go"}}\n' "$PWD" "$tmp" >"$tmp/overlay.json"
go build -overlay "$tmp/overlay.json" -o "$tmp/inferrail" ./cmd/inferrail
bin=$tmp/inferrail
model=inferrail/sim-8b

for i in 0 1 2; do
  "$bin" sim --zero-latency --served-model-name "$model" --port $((18101 + i)) >"$tmp/sim-$i.log" 2>&1 &
  pids+=($!)
done

profile() { # profile POLICY TOKENIZER_LINE
  local policy=$1 tok=$2 cfg=$tmp/$1.yaml gw
  {
    printf 'server:\n  listen: 127.0.0.1:18180\n  admin_listen: 127.0.0.1:18181\n'
    printf 'models:\n  - name: %s\n    aliases: [sim]\n%s' "$model" "$tok"
    printf 'replicas:\n'
    for i in 0 1 2; do
      printf '  - id: sim-%d\n    url: http://127.0.0.1:%d\n    models: [%s]\n' "$i" $((18101 + i)) "$model"
    done
    printf 'routing:\n  default_policy: %s\n' "$policy"
  } >"$cfg"
  cp "$cfg" "$out/$policy.yaml"
  PPROF_ADDR=127.0.0.1:18190 "$bin" serve --config "$cfg" >"$tmp/gw-$policy.log" 2>&1 &
  gw=$!
  pids+=("$gw")
  for _ in $(seq 100); do curl -fs http://127.0.0.1:18180/health >/dev/null && break; sleep 0.1; done
  # Load: warm-up 5 s, then the profile window, then 3 s of slack.
  "$bin" bench run --url http://127.0.0.1:18180 --model "$model" --workload W1 --rate "$rate" \
    --duration $((secs + 8))s --warmup 5s --set "$load_set" --out "$out/$policy-load.json" >"$out/$policy-load.txt" 2>&1 &
  local load=$!
  pids+=("$load")
  sleep 5
  local before after
  before=$(grep -E '^inferrail_requests_total' <(curl -fs http://127.0.0.1:18181/metrics) | awk '{s+=$2} END {print s+0}')
  local t0=$(cut -d' ' -f14,15 /proc/$gw/stat)
  curl -fs -o "$out/$policy-cpu.pprof" "http://127.0.0.1:18190/debug/pprof/profile?seconds=$secs" &
  local c1=$!
  curl -fs -o "$out/$policy-allocs.pprof" "http://127.0.0.1:18190/debug/pprof/allocs?seconds=$secs" &
  local c2=$!
  wait "$c1" "$c2"
  sleep 0.2
  local t1=$(cut -d' ' -f14,15 /proc/$gw/stat)
  after=$(grep -E '^inferrail_requests_total' <(curl -fs http://127.0.0.1:18181/metrics) | awk '{s+=$2} END {print s+0}')
  wait "$load" || true
  echo "$policy: requests in window $((after - before)); gateway CPU ticks $t0 -> $t1" | tee "$out/$policy-window.txt"
  kill -TERM "$gw"; wait "$gw" || true
}

profile least_request ''
profile cost_model '    tokenizer: builtin:sim
'

for f in "$out"/*-cpu.pprof "$out"/*-allocs.pprof; do
  b=${f%.pprof}
  go tool pprof -svg "$bin" "$f" >"$b.svg"
  case $f in
  *allocs*) go tool pprof -sample_index=alloc_objects -top -cum "$bin" "$f" >"$b-top.txt" 2>/dev/null
    go tool pprof -sample_index=alloc_objects -top "$bin" "$f" >"$b-flat.txt" 2>/dev/null
    go tool pprof -sample_index=alloc_objects -svg "$bin" "$f" >"$b.svg"
    go tool pprof -sample_index=alloc_objects -traces "$bin" "$f" >"$tmp/traces.txt" 2>/dev/null ;;
  *) go tool pprof -top -cum "$bin" "$f" >"$b-top.txt" 2>/dev/null
    go tool pprof -top "$bin" "$f" >"$b-flat.txt" 2>/dev/null
    go tool pprof -traces "$bin" "$f" >"$tmp/traces.txt" 2>/dev/null ;;
  esac
  python3 scripts/flamegraph.py "$(basename "$b")" <"$tmp/traces.txt" >"$b-flame.svg"
done
