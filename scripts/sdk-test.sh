#!/usr/bin/env bash
# Runs the official openai npm SDK against a freshly started `inferrail sim`.
# Usage: scripts/sdk-test.sh path/to/inferrail
set -euo pipefail
bin=${1:?usage: sdk-test.sh path/to/inferrail}
here=$(cd "$(dirname "$0")" && pwd)
if ! [ -d "$here/sdk/node_modules/openai" ]; then
  (cd "$here/sdk" && npm ci --no-audit --no-fund)
fi
log=$(mktemp)
"$bin" sim --port 0 --enable-prompt-tokens-details --served-model-name sim-8b --served-model-name inferrail/sim-8b >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://[0-9.:]*' "$log" | head -1 || true)
  [ -n "$url" ] && break
  kill -0 $pid 2>/dev/null || { cat "$log"; exit 1; }
  sleep 0.05
done
[ -n "$url" ] || { echo "simulator did not start"; cat "$log"; exit 1; }
BASE_URL="$url" MODEL=sim-8b node --test --test-reporter=spec "$here/sdk/sim.test.mjs"
