package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// llmdConfigs are llm-d's configs as the sched package keeps them,
// unchanged: the architecture document's example and the Helm default.
const llmdConfigs = "../../model/sched/testdata/"

// countingProxy forwards to an engine and counts the inference requests
// (POSTs under /v1/) that reach it, so that a test can tell that none did.
type countingProxy struct {
	srv   *httptest.Server
	posts atomic.Int64
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/") {
			p.posts.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// labelledGateway is a gateway config in front of sims through counting
// proxies, the replicas labelled as labels says.
func labelledGateway(t *testing.T, sims []*sim.Server, opts sim.Options, labels []map[string]string) (*config.Config, []*countingProxy) {
	t.Helper()
	cfg := gatewayConfig(sims, opts)
	var proxies []*countingProxy
	for i, s := range sims {
		p := newCountingProxy(t, s.URL())
		proxies = append(proxies, p)
		cfg.Replicas[i].URL, cfg.Replicas[i].Labels = p.srv.URL, labels[i]
	}
	return cfg, proxies
}

// parsed returns cfg as Parse reads it back from its YAML, so that the
// scheduling profiles go through the config's decoding as a file's do.
func parsed(t *testing.T, cfg *config.Config) *config.Config {
	t.Helper()
	y, err := cfg.YAML()
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Parse(y, nil)
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return c
}

// complete sends a completion and returns the status, the replica and
// policy headers and the body.
func complete(t *testing.T, addr, prompt string) (status int, replica, policy string, body []byte) {
	t.Helper()
	return completeWith(t, addr, prompt, nil)
}

// completeWith is complete with request headers.
func completeWith(t *testing.T, addr, prompt string, headers map[string]string) (status int, replica, policy string, body []byte) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"model": "sim", "max_tokens": 2, "prompt": prompt})
	req, err := http.NewRequest("POST", "http://"+addr+"/v1/completions", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", "", nil
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Inferrail-Replica"), resp.Header.Get("X-Inferrail-Policy"), body
}

// readYAML reads a YAML file into plain values.
func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// llm-d's configs load unchanged and route: the architecture example as
// routing.scheduler's file (its decode-filter keeps the prefill replica
// out), and the Helm default inline as a routing.schedulers entry a model
// names; every request is answered 200 by a replica the profile allows,
// and /admin/explain shows each of its plugins' effect on each replica.
func TestLLMDConfigsRoute(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	roles := []map[string]string{{"llm-d.ai/role": "decode"}, {"llm-d.ai/role": "prefill"}, nil}

	// The architecture example, by its path.
	cfg, proxies := labelledGateway(t, sims, opts, roles)
	cfg.Routing.Scheduler = llmdConfigs + "architecture-example.yaml"
	addr, _ := startGateway(t, parsed(t, cfg))
	for i := range 30 {
		status, rep, pol, body := complete(t, addr, strings.Repeat("doc"+strconv.Itoa(i%3)+" ", 100))
		if status != 200 || pol != config.SchedulerName || rep == "sim-1" {
			t.Fatalf("architecture example: %d by %s (%s): %s", status, rep, pol, body)
		}
	}
	if n := proxies[1].posts.Load(); n != 0 {
		t.Fatalf("decode-filter let %d requests reach the prefill replica", n)
	}

	// The Helm default, inline, named by the model.
	cfg, _ = labelledGateway(t, sims, opts, roles)
	cfg.Routing.Schedulers = map[string]any{"helm": readYAML(t, llmdConfigs+"helm-default.yaml")}
	cfg.Models[0].Policy = "helm"
	addr, admin := startGateway(t, parsed(t, cfg))
	served := map[string]bool{}
	for i := range 30 {
		status, rep, pol, body := complete(t, addr, strings.Repeat("helm"+strconv.Itoa(i%5)+" ", 100))
		if status != 200 || pol != "helm" {
			t.Fatalf("helm default: %d by %s (%s): %s", status, rep, pol, body)
		}
		served[rep] = true
	}
	resp, err := http.Post("http://"+admin+"/admin/explain/v1/completions", "application/json",
		strings.NewReader(`{"model":"sim","max_tokens":2,"prompt":"`+strings.Repeat("helm1 ", 100)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ex struct {
		Policy   string  `json:"policy"`
		Winner   *string `json:"winner"`
		Profiles []struct {
			Profile  string  `json:"profile"`
			Picker   string  `json:"picker"`
			Winner   *string `json:"winner"`
			Replicas []struct {
				Replica string  `json:"replica"`
				Filter  *string `json:"filtered_by"`
				Scores  []struct {
					Scorer           string
					Raw              float64
					Weight, Weighted float64
				} `json:"scores"`
				Total  float64 `json:"total"`
				Picked bool    `json:"picked"`
			} `json:"replicas"`
		} `json:"profiles"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ex); err != nil {
		t.Fatal(err)
	}
	if ex.Policy != "helm" || len(ex.Profiles) != 1 || ex.Winner == nil || ex.Profiles[0].Winner == nil ||
		*ex.Profiles[0].Winner != *ex.Winner || ex.Profiles[0].Picker != "max-score-picker" || len(ex.Profiles[0].Replicas) != 3 {
		t.Fatalf("explanation %+v", ex)
	}
	for _, r := range ex.Profiles[0].Replicas {
		var names []string
		sum := 0.0
		for _, s := range r.Scores {
			names = append(names, s.Scorer)
			sum += s.Weighted
		}
		if !slices.Equal(names, []string{"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"}) ||
			r.Scores[2].Weight != 3 || sum-r.Total > 1e-9 || r.Total-sum > 1e-9 || r.Picked != (r.Replica == *ex.Winner) {
			t.Fatalf("replica %+v", r)
		}
	}
	t.Logf("helm default served by %v", served)
}

// selector is a label selector of llm-d's label-selector-filter, and the
// test's own reading of what it matches (Kubernetes' rules).
type selector struct {
	labels map[string]string
	exprs  []expr
}

type expr struct {
	key, op string
	values  []string
}

func (s selector) matches(l map[string]string) bool {
	for k, v := range s.labels {
		if got, ok := l[k]; !ok || got != v {
			return false
		}
	}
	for _, e := range s.exprs {
		v, ok := l[e.key]
		switch e.op {
		case "In":
			if !ok || !slices.Contains(e.values, v) {
				return false
			}
		case "NotIn":
			if ok && slices.Contains(e.values, v) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		}
	}
	return true
}

// document is the selector as a profile's plugins.
func (s selector) document() map[string]any {
	params := map[string]any{}
	if len(s.labels) > 0 {
		m := map[string]any{}
		for k, v := range s.labels {
			m[k] = v
		}
		params["matchLabels"] = m
	}
	var exprs []any
	for _, e := range s.exprs {
		x := map[string]any{"key": e.key, "operator": e.op}
		if len(e.values) > 0 {
			vs := make([]any, len(e.values))
			for i, v := range e.values {
				vs[i] = v
			}
			x["values"] = vs
		}
		exprs = append(exprs, x)
	}
	if exprs != nil {
		params["matchExpressions"] = exprs
	}
	return map[string]any{"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig", "plugins": []any{
		map[string]any{"type": "label-selector-filter", "parameters": params},
		map[string]any{"type": "active-request-scorer"},
	}}
}

// randomLabels draws a replica's labels from a small vocabulary, so that
// selectors match some replicas, all or none.
func randomLabels(rng *rand.Rand) map[string]string {
	l := map[string]string{}
	for _, k := range []string{"zone", "tier", "llm-d.ai/role"} {
		if rng.IntN(3) > 0 {
			l[k] = []string{"a", "b", "c"}[rng.IntN(3)]
		}
	}
	return l
}

func randomSelector(rng *rand.Rand) selector {
	s := selector{labels: map[string]string{}}
	keys := []string{"zone", "tier", "llm-d.ai/role"}
	for range rng.IntN(3) {
		s.labels[keys[rng.IntN(3)]] = []string{"a", "b", "c"}[rng.IntN(3)]
	}
	for range rng.IntN(3) {
		e := expr{key: keys[rng.IntN(3)], op: []string{"In", "NotIn", "Exists", "DoesNotExist"}[rng.IntN(4)]}
		if e.op == "In" || e.op == "NotIn" {
			for range 1 + rng.IntN(2) {
				e.values = append(e.values, []string{"a", "b", "c"}[rng.IntN(3)])
			}
		}
		s.exprs = append(s.exprs, e)
	}
	return s
}

// A profile whose filters leave nothing answers 503 in the OpenAI error
// shape, naming the profile and the filter, and sends nothing to any
// engine; one that leaves some routes only to those. Random label
// selectors against random replica labels, each round a gateway of its
// own; the test decides which replicas match by Kubernetes' rules.
func TestFilteredOutAnswers503(t *testing.T) {
	sims, opts := zeroLatencySims(t, 4)
	rng := rand.New(rand.NewPCG(13, 1))
	var refused, routed int
	for round := 0; round < 24 || refused == 0 || routed == 0; round++ {
		if round > 200 {
			t.Fatalf("%d rounds: %d refused, %d routed", round, refused, routed)
		}
		labels := make([]map[string]string, len(sims))
		for i := range labels {
			labels[i] = randomLabels(rng)
		}
		sel := randomSelector(rng)
		var match []string
		for i, l := range labels {
			if sel.matches(l) {
				match = append(match, "sim-"+strconv.Itoa(i))
			}
		}
		cfg, proxies := labelledGateway(t, sims, opts, labels)
		cfg.Routing.Scheduler = sel.document()
		addr, _, stop := startGatewayStoppable(t, parsed(t, cfg))
		sent := func() (n int64) {
			for _, p := range proxies {
				n += p.posts.Load()
			}
			return n
		}
		for k := range 3 {
			before := sent()
			status, rep, _, body := complete(t, addr, fmt.Sprintf("round %d request %d", round, k))
			if len(match) == 0 {
				var e struct {
					Error *struct {
						Message string `json:"message"`
						Type    string `json:"type"`
						Param   any    `json:"param"`
						Code    any    `json:"code"`
					} `json:"error"`
				}
				if status != 503 || json.Unmarshal(body, &e) != nil || e.Error == nil || e.Error.Type != "ServiceUnavailableError" ||
					!strings.Contains(e.Error.Message, "set every replica aside (profile default, filter label-selector-filter)") {
					t.Fatalf("round %d: selector %+v matches none of %v; answered %d: %s", round, sel, labels, status, body)
				}
				if n := sent() - before; n != 0 {
					t.Fatalf("round %d: a refused request sent %d requests to engines", round, n)
				}
				refused++
				continue
			}
			if status != 200 || !slices.Contains(match, rep) {
				t.Fatalf("round %d: selector %+v matches %v of %v; answered %d by %s: %s", round, sel, match, labels, status, rep, body)
			}
			routed++
		}
		stop()
	}
	t.Logf("%d refused, %d routed", refused, routed)
}

// inferrail check decodes the scheduling profiles: llm-d's configs pass,
// with their warnings printed (the old apiVersion is deprecated), and a
// plugin type Inferrail does not implement fails with its key path and the
// types it does.
func TestCheckSchedulers(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.yaml")
	if err := os.WriteFile(old, []byte("apiVersion: inference.networking.x-k8s.io/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: queue-scorer}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(routing string) string {
		path := filepath.Join(dir, "gw.yaml")
		cfg := "models: [{name: m}]\nreplicas: [{id: a, url: \"http://127.0.0.1:8001\", models: [m], labels: {llm-d.ai/role: decode}}]\nrouting:\n" + routing
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	arch, _ := filepath.Abs(llmdConfigs + "architecture-example.yaml")
	var out, errb bytes.Buffer
	path := write("  scheduler: " + arch + "\n  schedulers: {old: " + old + "}\n  shadow: [old]\n")
	if err := runCheck(t.Context(), []string{"--config", path}, &out, &errb); err != nil {
		t.Fatalf("check: %v\n%s", err, errb.String())
	}
	if got := out.String(); !strings.Contains(got, "gw.yaml: ok") ||
		!strings.Contains(got, "warning: routing.schedulers.old.apiVersion: inference.networking.x-k8s.io/v1alpha1 is deprecated; use llm-d.ai/v1alpha1 (in "+old+")") {
		t.Fatalf("check output:\n%s", got)
	}
	out.Reset()
	path = write("  scheduler: {apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: decode-filter}, {type: lora-affinity-scorer}]}\n")
	err := runCheck(t.Context(), []string{"--config", path}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `routing.scheduler.plugins[1].type: plugin type "lora-affinity-scorer" is not implemented; Inferrail implements decode-filter,`) ||
		!strings.Contains(err.Error(), "max-score-picker") {
		t.Fatalf("check: %v", err)
	}
}

// A reload and PATCH /admin/config take scheduling profiles where they
// take policies: an edit of a profile's file is applied by the next
// reload (and refused whole while it does not decode, with its key path);
// a patch adds a profile and splits the traffic with it, and a profile
// that does not decode is refused whole.
func TestPatchAndReloadSchedulers(t *testing.T) {
	sims, opts := zeroLatencySims(t, 2)
	epp := filepath.Join(t.TempDir(), "epp.yaml")
	writeEPP := func(scorer string) {
		doc := "apiVersion: llm-d.ai/v1alpha1\nkind: EndpointPickerConfig\nplugins: [{type: " + scorer + "}]\n"
		if err := os.WriteFile(epp, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeEPP("queue-scorer")
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.Scheduler = epp
	g := serveConfigFile(t, cfg)
	patch := func(body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("PATCH", "http://"+g.admin+"/admin/config", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/merge-patch+json")
		return adminAnswer(t, req)
	}
	policies := func(n int) map[string]int {
		t.Helper()
		got := map[string]int{}
		for i := range n {
			status, _, pol, body := complete(t, g.addr, fmt.Sprint("prompt ", i))
			if status != 200 {
				t.Fatalf("%d: %s", status, body)
			}
			got[pol]++
		}
		return got
	}
	if got := policies(4); got[config.SchedulerName] != 4 {
		t.Fatalf("routed by %v, want the scheduler", got)
	}

	// An edit of the profile's file, then a reload: the profile is read
	// again, refused whole when it does not decode.
	writeEPP("lora-affinity-scorer")
	if code, out := reloadNow(t, g.admin); code != 422 || !strings.Contains(fmt.Sprint(out["error"]), `routing.scheduler.plugins[0].type: plugin type "lora-affinity-scorer" is not implemented`) {
		t.Fatalf("reload of a bad profile file: %d %v", code, out)
	}
	writeEPP("kv-cache-utilization-scorer")
	code, out := reloadNow(t, g.admin)
	if code != 200 || out["result"] != "applied" || !strings.Contains(fmt.Sprint(out["changed"]), "routing") {
		t.Fatalf("reload of the edited profile file: %d %v", code, out)
	}
	if got := policies(4); got[config.SchedulerName] != 4 {
		t.Fatalf("after the reload routed by %v", got)
	}

	code, out = patch(`{"routing":{"schedulers":{"helm":{"apiVersion":"llm-d.ai/v1alpha1","kind":"EndpointPickerConfig",` +
		`"plugins":[{"type":"queue-scorer"},{"type":"kv-cache-utilization-scorer"},{"type":"prefix-cache-scorer"}],` +
		`"schedulingProfiles":[{"name":"default","plugins":[{"pluginRef":"queue-scorer","weight":2},` +
		`{"pluginRef":"kv-cache-utilization-scorer","weight":2},{"pluginRef":"prefix-cache-scorer","weight":3}]}]}},` +
		`"split":{"helm":50,"scheduler":50}}}`)
	if code != 200 || out["result"] != "applied" {
		t.Fatalf("patch: %d %v", code, out)
	}
	if got := policies(40); got["helm"] == 0 || got[config.SchedulerName] == 0 || len(got) != 2 {
		t.Fatalf("the split routed %v", got)
	}
	code, out = patch(`{"routing":{"schedulers":{"helm":{"apiVersion":"llm-d.ai/v1alpha1","kind":"EndpointPickerConfig","plugins":[{"type":"queue-scorer","parameters":{"depth":1}}]}}}}`)
	if e, _ := out["error"].(string); code != 422 || !strings.Contains(e, "routing.schedulers.helm.plugins[0].parameters.depth: unknown key") {
		t.Fatalf("bad profile patched: %d %v", code, out)
	}

}
