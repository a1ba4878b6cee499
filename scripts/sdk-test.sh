#!/usr/bin/env bash
# Runs the official openai npm SDK (chat, completions, the Responses API and
# embeddings)
# and the Anthropic SDK against a freshly started `inferrail sim`,
# then through `inferrail launch` (a gateway in front of three simulators),
# then through a launch serving https with an API key, its certificates made
# at start by the binary (--tls-dir) and trusted through NODE_EXTRA_CA_CERTS,
# and last through inferrail epp behind a proxy that plays Envoy (a Go test).
# Usage: scripts/sdk-test.sh path/to/inferrail
set -euo pipefail
bin=${1:?usage: sdk-test.sh path/to/inferrail}
here=$(cd "$(dirname "$0")" && pwd)
if ! [ -d "$here/sdk/node_modules/openai" ] || ! [ -d "$here/sdk/node_modules/@anthropic-ai/sdk" ]; then
  (cd "$here/sdk" && npm ci --no-audit --no-fund)
fi
pids=()
logs=()
tlsdir=$(mktemp -d)
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -f "${logs[@]}"
  rm -rf "$tlsdir"
}
trap cleanup EXIT

# start LOG CMD...: runs CMD in the background, waits for its first URL.
start() {
  local log=$1; shift
  "$@" >"$log" 2>&1 &
  pids+=($!)
  logs+=("$log")
  for _ in $(seq 200); do
    if grep -q 'https\?://[0-9.:]*' "$log"; then return 0; fi
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$log"; exit 1; }
    sleep 0.05
  done
  echo "did not start:"; cat "$log"; exit 1
}

simlog=$(mktemp)
start "$simlog" "$bin" sim --port 0 --enable-prompt-tokens-details \
  --served-model-name sim-8b --served-model-name inferrail/sim-8b
sim_url=$(grep -o 'http://[0-9.:]*' "$simlog" | head -1)
echo "== openai SDK against inferrail sim ($sim_url)"
BASE_URL="$sim_url" TOKENIZE_URL="$sim_url" MODEL=sim-8b RESPONSE_MODEL=sim-8b \
  MODELS='["sim-8b","inferrail/sim-8b"]' STREAMS=200 \
  node --test --test-reporter=spec "$here/sdk/sdk.test.mjs"
echo "== Anthropic SDK against inferrail sim ($sim_url)"
BASE_URL="$sim_url" MODEL=sim-8b node --test --test-reporter=spec "$here/sdk/anthropic.test.mjs"
echo "== openai SDK's Responses API against inferrail sim ($sim_url)"
BASE_URL="$sim_url" MODEL=sim-8b node --test --test-reporter=spec "$here/sdk/responses.test.mjs"
echo "== openai SDK's embeddings against inferrail sim ($sim_url)"
BASE_URL="$sim_url" MODEL=sim-8b node --test --test-reporter=spec "$here/sdk/embeddings.test.mjs"

gwlog=$(mktemp)
start "$gwlog" "$bin" launch --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --replicas 3 --enable-prompt-tokens-details
gw_url=$(grep -o 'gateway on http://[0-9.:]*' "$gwlog" | grep -o 'http://.*')
one_sim=$(grep -o '  sim-0  http://[0-9.:]*' "$gwlog" | grep -o 'http://.*')
echo "== openai SDK through inferrail launch ($gw_url)"
BASE_URL="$gw_url" TOKENIZE_URL="$one_sim" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b GATEWAY=1 \
  MODELS='["inferrail/sim-8b","sim"]' STREAMS=1000 \
  node --test --test-reporter=spec "$here/sdk/sdk.test.mjs"
echo "== Anthropic SDK through inferrail launch ($gw_url)"
BASE_URL="$gw_url" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b ENGINE_URL="$one_sim" GATEWAY=1 \
  node --test --test-reporter=spec "$here/sdk/anthropic.test.mjs"
echo "== openai SDK's Responses API through inferrail launch ($gw_url)"
BASE_URL="$gw_url" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b GATEWAY=1 \
  node --test --test-reporter=spec "$here/sdk/responses.test.mjs"
echo "== openai SDK's embeddings through inferrail launch ($gw_url)"
BASE_URL="$gw_url" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b GATEWAY=1 \
  node --test --test-reporter=spec "$here/sdk/embeddings.test.mjs"

tlslog=$(mktemp)
key="sk-sdk-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
start "$tlslog" "$bin" launch --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 --replicas 2 --enable-prompt-tokens-details \
  --tls-dir "$tlsdir" --api-key "$key"
tls_url=$(grep -o 'gateway on https://[0-9.:]*' "$tlslog" | grep -o 'https://.*')
tls_sim=$(grep -o '  sim-0  http://[0-9.:]*' "$tlslog" | grep -o 'http://.*')
echo "== openai SDK over https with an API key ($tls_url, CA $tlsdir/ca.pem)"
NODE_EXTRA_CA_CERTS="$tlsdir/ca.pem" API_KEY="$key" BASE_URL="$tls_url" TOKENIZE_URL="$tls_sim" MODEL=sim \
  RESPONSE_MODEL=inferrail/sim-8b GATEWAY=1 MODELS='["inferrail/sim-8b","sim"]' STREAMS=200 \
  node --test --test-reporter=spec "$here/sdk/sdk.test.mjs"
echo "== Anthropic SDK over https with an API key (x-api-key)"
NODE_EXTRA_CA_CERTS="$tlsdir/ca.pem" API_KEY="$key" BASE_URL="$tls_url" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b \
  ENGINE_URL="$tls_sim" GATEWAY=1 node --test --test-reporter=spec "$here/sdk/anthropic.test.mjs"
echo "== openai SDK's Responses API over https with an API key"
NODE_EXTRA_CA_CERTS="$tlsdir/ca.pem" API_KEY="$key" BASE_URL="$tls_url" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b \
  GATEWAY=1 node --test --test-reporter=spec "$here/sdk/responses.test.mjs"
echo "== openai SDK's embeddings over https with an API key"
NODE_EXTRA_CA_CERTS="$tlsdir/ca.pem" API_KEY="$key" BASE_URL="$tls_url" MODEL=sim RESPONSE_MODEL=inferrail/sim-8b \
  GATEWAY=1 node --test --test-reporter=spec "$here/sdk/embeddings.test.mjs"
if grep -q "$key" "$tlslog"; then echo "the API key shows in the gateway's output"; exit 1; fi

# EPP mode: the same SDK through a proxy that plays Envoy (test code only)
# in front of inferrail epp, against a gateway on the same traffic.
echo "== openai SDK through inferrail epp behind an Envoy-playing proxy, against inferrail serve"
(cd "$here/.." && INFERRAIL_SDK=1 go test -count=1 -run '^TestEPPMatchesStandalone$' -v ./cmd/inferrail/ | grep -E '^(=== RUN|--- |    epp_sdk|ok|FAIL|PASS)')
