#!/usr/bin/env bash
# Real scrapers against the gateway: installs Debian's prometheus and
# victoria-metrics when missing, starts both on loopback scraping the
# admin port of `inferrail launch`, sends traffic, and reads the series back
# through each one's query API, histogram_quantile included.
# Usage: scripts/scrapers-test.sh path/to/inferrail
set -euo pipefail
bin=${1:?usage: scrapers-test.sh path/to/inferrail}
. "$(dirname "$0")/testlib.sh"
need_debs prometheus victoria-metrics -- prometheus victoria-metrics

admin=$(free_port); prom=$(free_port); vm=$(free_port)
launch "$bin" "$admin" --replicas 2

cat >"$work/scrape.yml" <<YML
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: inferrail
    static_configs:
      - targets: ["127.0.0.1:$admin"]
YML
prometheus --config.file="$work/scrape.yml" --storage.tsdb.path="$work/prom" \
  --web.listen-address="127.0.0.1:$prom" >"$work/prom.log" 2>&1 &
pids+=($!)
victoria-metrics -promscrape.config="$work/scrape.yml" -storageDataPath="$work/vm" \
  -httpListenAddr="127.0.0.1:$vm" >"$work/vm.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$prom/-/ready"
wait_http "http://127.0.0.1:$vm/health"

for i in $(seq 40); do
  stream=$([ $((i % 2)) = 0 ] && echo true || echo false)
  curl -sf -o /dev/null "$gw/v1/chat/completions" -H 'content-type: application/json' \
    -d "{\"model\":\"sim\",\"messages\":[{\"role\":\"user\",\"content\":\"hi $i\"}],\"max_tokens\":4,\"stream\":$stream}"
done
curl -s -o /dev/null "$gw/v1/chat/completions" -H 'content-type: application/json' -d '{"model":"nope"}' || true

passed=0; failed=0
# check NAME URL QUERY JQ-LIKE-PY: polls a query API until the Python
# expression on the result vector holds (scrapes are every second).
check() {
  local name=$1 base=$2 query=$3 cond=$4
  for _ in $(seq 60); do
    if curl -sf "$base/api/v1/query" --data-urlencode "query=$query" | python3 -c "
import json, sys
r = json.load(sys.stdin)['data']['result']
v = [float(x['value'][1]) for x in r]
sys.exit(0 if ($cond) else 1)" 2>/dev/null; then
      echo "ok   $name: $query"; passed=$((passed + 1)); return
    fi
    sleep 0.5
  done
  echo "FAIL $name: $query"; failed=$((failed + 1))
}
for srv in "prometheus http://127.0.0.1:$prom" "victoria-metrics http://127.0.0.1:$vm"; do
  set -- $srv
  check "$1" "$2" 'sum(inferrail_requests_total{status="2xx"})' 'v and v[0] == 40'
  check "$1" "$2" 'count(inferrail_replica_healthy == 1)' 'v and v[0] == 2'
  check "$1" "$2" 'sum(inferrail_request_errors_total{reason="unknown_model"})' 'v and v[0] == 1'
  check "$1" "$2" 'histogram_quantile(0.99, sum by (le) (inferrail_request_duration_seconds_bucket))' 'v and 0 < v[0] < 5'
  check "$1" "$2" 'sum(inferrail_ttft_seconds_count)' 'v and v[0] == 20'
done
echo "scrapers: $passed passed, $failed failed"
[ "$failed" = 0 ]
