#!/usr/bin/env bash
# The fleet page (GET /admin/) in a real browser: Debian's headless
# Chromium (installed when missing) loads it from `inferrail launch` (3
# simulators, KV events) while traffic flows, lets its script run, and the
# test checks the DOM it built: a row for every replica /admin/replicas
# lists, a row for a decision /admin/decisions holds, with its explain
# view, each model; and that the page logged nothing to the console (no
# errors). Screenshots at a desktop and a phone size go to OUT_DIR (given:
# docs/ refreshes the committed ones), else to a temporary directory.
# Usage: scripts/fleet-page-test.sh path/to/inferrail [OUT_DIR]
set -euo pipefail
bin=${1:?usage: fleet-page-test.sh path/to/inferrail [OUT_DIR]}
. "$(dirname "$0")/testlib.sh"
need_debs chromium -- chromium
out=${2:-$work}
admin=$(free_port)
launch "$bin" "$admin" --replicas 3 --port 0 --kv-events

# Traffic over a few prefixes, spread over longer than the page's
# sampling interval (one decision per quarter second), before it loads;
# every other request carries an SLO (x-llm-d-slo-ttft-ms), which the
# page's SLO attainment counts.
python3 - "$gw" 40 <<'PY'
import json, sys, time, urllib.request
gw, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    body = {"model": "inferrail/sim-8b", "max_tokens": 3,
            "messages": [{"role": "system", "content": "You answer questions about topic %d. " % (i % 6) * 10},
                         {"role": "user", "content": "question %d" % i}]}
    hdr = {"content-type": "application/json"}
    if i % 2:
        hdr["x-llm-d-slo-ttft-ms"] = "5000"
    req = urllib.request.Request(gw + "/v1/chat/completions", json.dumps(body).encode(), hdr)
    urllib.request.urlopen(req).read()
    time.sleep(0.03)
PY

chrome=(chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --hide-scrollbars)
page="http://127.0.0.1:$admin/admin/"
timeout 90 "${chrome[@]}" --user-data-dir="$work/dom" --enable-logging=stderr --v=0 --virtual-time-budget=5000 --window-size=1440,1100 --dump-dom "$page" \
  >"$work/dom.html" 2>"$work/chrome.log"
timeout 90 "${chrome[@]}" --user-data-dir="$work/desk" --virtual-time-budget=5000 --window-size=1440,1100 --screenshot="$out/fleet-page.png" "$page" 2>/dev/null
timeout 90 "${chrome[@]}" --user-data-dir="$work/phone" --virtual-time-budget=5000 --window-size=390,844 --screenshot="$out/fleet-page-phone.png" "$page" 2>/dev/null
curl -sf "http://127.0.0.1:$admin/admin/replicas" >"$work/replicas.json"
curl -sf "http://127.0.0.1:$admin/admin/decisions" >"$work/decisions.json"
curl -sf "http://127.0.0.1:$admin/admin/models" >"$work/models.json"

python3 - "$work" "$out" <<'PY'
import html.parser, json, sys
work, out = sys.argv[1:]
class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.replicas, self.requests, self.models, self.explains, self.slo = set(), set(), set(), 0, 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "data-replica" in a: self.replicas.add(a["data-replica"])
        if "data-request" in a: self.requests.add(a["data-request"])
        if "data-model" in a: self.models.add(a["data-model"])
        if a.get("data-testid") == "explain": self.explains += 1
        if "data-slo-requests" in a: self.slo += int(a["data-slo-requests"])
p = Page()
p.feed(open(work + "/dom.html").read())
failed = []
replicas = {r["id"] for r in json.load(open(work + "/replicas.json"))["replicas"]}
decisions = {d["request_id"] for d in json.load(open(work + "/decisions.json"))["decisions"]}
mj = json.load(open(work + "/models.json"))["models"]
models = {m["name"] for m in mj}
slo = sum(m["slo"]["requests"] for m in mj)
if len(replicas) != 3 or p.replicas != replicas:
    failed.append("replicas shown %s, the fleet has %s" % (sorted(p.replicas), sorted(replicas)))
if not p.requests or not p.requests & decisions:
    failed.append("decisions shown %s, /admin/decisions holds %d" % (sorted(p.requests), len(decisions)))
if p.explains < 1:
    failed.append("no explain view of a decision")
if p.models != models:
    failed.append("models shown %s, configured %s" % (sorted(p.models), sorted(models)))
if slo < 1 or p.slo != slo:
    failed.append("SLO requests shown %d, /admin/models counts %d" % (p.slo, slo))
console = [l for l in open(work + "/chrome.log") if ":CONSOLE" in l]
if console:
    failed.append("console output: " + "".join(console))
for name in ("fleet-page.png", "fleet-page-phone.png"):
    b = open(out + "/" + name, "rb").read()
    if not b.startswith(b"\x89PNG") or len(b) < 10000:
        failed.append("%s is not a screenshot (%d bytes)" % (name, len(b)))
for f in failed:
    print("FAIL " + f)
print("fleet page: %d replicas, %d decisions shown, %d explain views, %d models, %d requests with an SLO; %d failed" %
      (len(p.replicas), len(p.requests), p.explains, len(p.models), p.slo, len(failed)))
sys.exit(1 if failed else 0)
PY
