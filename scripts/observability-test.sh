#!/usr/bin/env bash
# The dashboard and the alert rules against a real Prometheus (Debian's,
# installed when missing): promtool checks deploy/prometheus/alerts.yaml and
# runs its unit tests; every PromQL expression of deploy/grafana/inferrail.json
# and of the rules is checked by promtool (as a generated rules file) and
# run against Prometheus scraping `inferrail launch` (3 simulators, KV
# events on, an A/B split) and the simulators, while traffic flows. Each
# dashboard expression must return data, and each metric the rules select
# must have series, except those of features this test leaves off (listed
# in OFF below); every metric name is on the gateway's /metrics page, on a
# simulator's (vLLM's names), or, for those features, in the gateway's
# source. Also checks that with KV events on, predictions are ≥ 99% exact.
# Usage: scripts/observability-test.sh path/to/inferrail
set -euo pipefail
bin=${1:?usage: observability-test.sh path/to/inferrail}
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/testlib.sh"
need_debs prometheus promtool -- prometheus
python3 -c 'import yaml' 2>/dev/null || need_debs -- python3-yaml

# Features left off here, and the metrics that need them: config reloads
# (launch runs without a config file) and shadow policies (none configured).
export OFF='inferrail_config_generation inferrail_config_reloads_total inferrail_shadow_decisions_total inferrail_shadow_estimated_ttft_seconds_total'

rules=$root/deploy/prometheus/alerts.yaml
dash=$root/deploy/grafana/inferrail.json
promtool check rules "$rules"
(cd "$(dirname "$rules")" && promtool test rules alerts_test.yaml)

# Every expression, the dashboard's with Grafana's variables given values,
# as a list (kind, title, expr) and as recording rules for promtool.
python3 - "$dash" "$rules" "$work" <<'PY'
import json, sys, yaml
dash, rules, work = sys.argv[1:]
exprs = []
def panels(ps):
    for p in ps:
        yield p
        yield from panels(p.get("panels", []))
for p in panels(json.load(open(dash))["panels"]):
    for t in p.get("targets", []):
        e = t["expr"].replace("$__rate_interval", "1m").replace("$model", ".*")
        exprs.append({"kind": "dashboard", "title": p["title"] + " / " + t["refId"], "expr": e})
for g in yaml.safe_load(open(rules))["groups"]:
    for r in g["rules"]:
        exprs.append({"kind": "rule", "title": r.get("alert") or r.get("record"), "expr": r["expr"].strip()})
json.dump(exprs, open(work + "/exprs.json", "w"))
yaml.safe_dump({"groups": [{"name": "every_expression", "rules": [
    {"record": "inferrail_check:expr_%d" % i, "expr": x["expr"]} for i, x in enumerate(exprs)]}]},
    open(work + "/exprs.rules.yaml", "w"))
print("%d expressions" % len(exprs))
PY
promtool check rules "$work/exprs.rules.yaml"

admin=$(free_port); prom=$(free_port)
launch "$bin" "$admin" --replicas 3 --port 0 --kv-events --split cost_model=75,round_robin=25
engines=$(curl -sf "http://127.0.0.1:$admin/admin/replicas" |
  python3 -c 'import json,sys; print(",".join("\"%s\"" % r["url"].split("//")[1] for r in json.load(sys.stdin)["replicas"]))')

cat >"$work/scrape.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: inferrail
    static_configs:
      - targets: ["127.0.0.1:$admin"]
  - job_name: vllm
    static_configs:
      - targets: [$engines]
YML
prometheus --config.file="$work/scrape.yml" --storage.tsdb.path="$work/prom" \
  --web.listen-address="127.0.0.1:$prom" >"$work/prom.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$prom/-/ready"

# Traffic: chats over a few shared prefixes, streamed (with usage) and not,
# plus one request for a model nobody serves.
python3 - "$gw" <<'PY'
import json, sys, urllib.request
gw = sys.argv[1]
for i in range(150):
    body = {"model": "inferrail/sim-8b", "max_tokens": 3,
            "messages": [{"role": "system", "content": "You answer questions about topic %d. " % (i % 5) * 12},
                         {"role": "user", "content": "question %d" % i}]}
    if i % 2:
        body["stream"], body["stream_options"] = True, {"include_usage": True}
    req = urllib.request.Request(gw + "/v1/chat/completions", json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        r.read()
try:
    urllib.request.urlopen(urllib.request.Request(gw + "/v1/chat/completions", b'{"model":"nope"}', {"content-type": "application/json"}))
except Exception:
    pass
PY
curl -sf "http://127.0.0.1:$admin/metrics" >"$work/gateway.metrics"
curl -sf "http://${engines%%,*}/metrics" | tr -d '"' >/dev/null || true
first=$(echo "$engines" | cut -d, -f1 | tr -d '"')
curl -sf "http://$first/metrics" >"$work/engine.metrics"

python3 - "http://127.0.0.1:$prom" "$work" "$root" <<'PY'
import json, os, re, subprocess, sys, time, urllib.parse, urllib.request
prom, work, root = sys.argv[1:]
off = set(os.environ["OFF"].split())
exprs = json.load(open(work + "/exprs.json"))
def names(path):
    return {l.split("{")[0].split(" ")[0] for l in open(path) if l.strip() and not l.startswith("#")}
gateway, engine = names(work + "/gateway.metrics"), names(work + "/engine.metrics")
metric = re.compile(r'\b(inferrail_[a-z_]+|vllm:[a-z_:]+)(\{[^}]*\})?')
def query(q):
    u = prom + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
    r = json.load(urllib.request.urlopen(u))
    if r["status"] != "success":
        raise RuntimeError(r)
    return r["data"]["result"]
failed = 0
def fail(msg):
    global failed
    failed += 1
    print("FAIL " + msg)
# Every metric name exists: on a page, or for a feature left off, in the source.
for x in exprs:
    for name, _ in metric.findall(x["expr"]):
        if name in off:
            src = subprocess.run(["grep", "-rlF", name, root + "/actors", root + "/cmd", root + "/transport", "--include=*.go"],
                                 capture_output=True, text=True).stdout
            if not src:
                fail("%s: %s is in no gateway source" % (x["title"], name))
        elif name not in gateway and name not in engine:
            fail("%s: %s is on neither the gateway's nor the engine's /metrics page" % (x["title"], name))
# Every expression runs; dashboard ones return data, and every selector
# of a rule has series, unless they need a feature left off.
deadline = time.time() + 90
for x in exprs:
    needs_off = any(n in off for n, _ in metric.findall(x["expr"]))
    probes = [x["expr"]] if x["kind"] == "dashboard" else ["count(%s%s)" % s for s in metric.findall(x["expr"])]
    for q in probes:
        while True:
            try:
                res = query(q)
            except Exception as e:
                fail("%s: %s: %s" % (x["title"], q, e))
                break
            if res or needs_off or time.time() > deadline:
                break
            time.sleep(1)
        if needs_off:
            print("off  %s (needs a feature left off)" % x["title"])
        elif res:
            print("ok   %s" % x["title"])
        else:
            fail("%s: no data: %s" % (x["title"], q))
# KV events on: the cache predictions are exact (≥ 99%).
q = 'sum(inferrail_prediction_total{result="exact"}) / sum(inferrail_prediction_total{result=~"exact|over|under"})'
res = query(q)
compared = query('sum(inferrail_prediction_total{result=~"exact|over|under"})')
if not res or float(res[0]["value"][1]) < 0.99 or float(compared[0]["value"][1]) < 50:
    fail("exactness with KV events: %s of %s compared" % (res, compared))
else:
    print("ok   exactness with KV events %.4f over %s predictions" % (float(res[0]["value"][1]), compared[0]["value"][1]))
print("observability: %d failed" % failed)
sys.exit(1 if failed else 0)
PY
