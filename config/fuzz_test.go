package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

// billionLaughs is the classic entity bomb, written with YAML aliases: nine
// levels of nine aliases would expand to 9^9 strings.
func billionLaughs() string {
	var b strings.Builder
	b.WriteString("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		fmt.Fprintf(&b, "%s: &%s [%s]\n", name, name, strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", "))
		prev = name
	}
	return b.String()
}

// hostile holds documents that must be refused quickly.
func hostile() map[string]string {
	big := "x: &x [" + strings.Repeat("1,", 60000) + "1]\n"
	return map[string]string{
		"billion laughs":           billionLaughs(),
		"billion laughs in kwargs": "models: [{name: m, chat_template_kwargs: {" + strings.ReplaceAll(strings.TrimSpace(billionLaughs()), "\n", ", ") + "}}]\n",
		"wide alias fan-out":       big + "y: [" + strings.Repeat("*x,", 100) + "*x]\n",
		"deep flow nesting":        "models: " + strings.Repeat("[", 9000) + strings.Repeat("]", 9000),
		"deep block nesting":       "models:\n" + deepBlock(5000),
		"self reference":           "a: &a [*a, *a]\n",
		"merge bomb":               "a: &a {x: 1}\n" + mergeChain(30),
		"huge mapping":             hugeMapping(),
		"too large":                "# " + strings.Repeat("lol ", MaxBytes/4) + "\n",
		"many documents":           strings.Repeat("a: 1\n---\n", 1000),
		"long line":                "models: [{name: \"" + strings.Repeat("m", MaxBytes-100) + "\"}]",
		"thousands of problems":    "models: [{name: m}]\nreplicas:\n" + strings.Repeat("  - {id: r, url: ftp://h, models: [x]}\n", 20000),
	}
}

func deepBlock(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(strings.Repeat(" ", i+1))
		b.WriteString("- \n")
	}
	return b.String()
}

func mergeChain(n int) string {
	var b strings.Builder
	prev := "a"
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("m%d", i)
		fmt.Fprintf(&b, "%s: &%s {<<: [*%s, *%s], k%d: 1}\n", name, name, prev, prev, i)
		prev = name
	}
	return b.String()
}

func hugeMapping() string {
	var b strings.Builder
	b.WriteString("routing:\n  split:\n")
	for i := 0; b.Len() < MaxBytes-100; i++ {
		fmt.Fprintf(&b, "    k%d: 1\n", i)
	}
	return b.String()
}

// TestHostileInputFailsFast checks that alias bombs, deep nesting, huge
// mappings and oversized input are refused, each within a bound that holds
// under the race detector on a small machine.
func TestHostileInputFailsFast(t *testing.T) {
	limit := 5 * time.Second
	if raceEnabled {
		limit *= 10
	}
	for name, doc := range hostile() {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := Parse([]byte(doc), nil)
			if took := time.Since(start); took > limit {
				t.Errorf("took %v", took)
			}
			if err == nil {
				t.Fatal("no error")
			}
			if n := len(err.Error()); n > 64<<10 {
				t.Errorf("error is %d bytes long", n)
			}
		})
	}
	// The same through the environment.
	start := time.Now()
	_, err := Parse([]byte(base), []string{"INFERRAIL_ROUTING__SHADOW=" + billionLaughs(), "INFERRAIL_SERVER__LISTEN=" + strings.Repeat("x", MaxBytes+1)})
	if err == nil || time.Since(start) > limit {
		t.Errorf("env bombs: %v after %v", err, time.Since(start))
	}
}

// FuzzParse checks that no document or environment entry panics or hangs
// Parse, and that whatever Parse accepts is valid and survives a round trip
// through YAML unchanged.
func FuzzParse(f *testing.F) {
	for _, doc := range []string{base, full, referenceExample, "", "{}", "models: []", billionLaughs(), "a: &a [*a]", "[[[[[[]]]]]]"} {
		f.Add([]byte(doc), "")
	}
	for _, path := range []string{"../deploy/inferrail.example.yaml", "../deploy/local.yaml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "INFERRAIL_SERVER__LISTEN=:1")
	}
	f.Add([]byte(base), "INFERRAIL_ROUTING__SPLIT={kv_aware: 40, cost_model: 60}")
	f.Add([]byte(base), "INFERRAIL_MODELS=[{name: m, chat_template_kwargs: {x: [1, 2.5, null]}}]")
	f.Add([]byte(base), "INFERRAIL_HEALTH__INTERVAL=5")
	f.Add([]byte(base+"rate_limits: {default: {requests_per_second: 2}, tenants: [{tenant: a, tokens_per_minute: 1e4}]}\n"), "INFERRAIL_RATE_LIMITS__TENANTS=[{tenant: b}]")
	f.Add([]byte(base+"routing: {cost_model: {prefill_token_secs: 1e-300}}"), "INFERRAIL_RETRY__MAX_ATTEMPTS=0x10")
	// cost_model: auto, as a scalar and beside the keys, under routing and
	// under a model.
	f.Add([]byte(`models: [{name: m, cost_model: auto}, {name: n, cost_model: {auto: true, prefill_fixed_secs: 0.01}}, {name: o, cost_model: autox}]
replicas: [{id: r, url: 'http://h', models: [m]}]
routing: {cost_model: auto}`), "INFERRAIL_ROUTING__COST_MODEL__AUTO=false")
	// Removed keys, refused with a hint: in the file, in a list entry (with
	// brackets in odd places) and from the environment.
	f.Add([]byte(base+"upstream: {http2: true}\ndiscovery: {dns: [{name: g, url: 'http://s', models: [m], engine: x}]}"),
		"INFERRAIL_UPSTREAM__HTTP2=1")
	f.Add([]byte(`models: [{name: m}]
replicas: [{id: r, url: 'http://h', models: [m], engine: auto, "a[0]]": 1}]`), "INFERRAIL_REPLICAS=[{engine: vllm}]")

	// Scheduling profiles and labels: inline, named, a model's, and from
	// the environment.
	f.Add([]byte(base+"routing:\n  scheduler: "+strings.ReplaceAll(helmDefault, "\n", " ")+"\n  schedulers: {sticky: {apiVersion: llm-d.ai/v1alpha1, kind: EndpointPickerConfig, "+
		"plugins: [{type: prefix-cache-affinity-filter, parameters: {affinityThreshold: 0.5}}, {type: token-load-scorer}]}}\n  split: {sticky: 40, scheduler: 60}\n"), "")
	f.Add([]byte(`models: [{name: m, scheduler: {apiVersion: inference.networking.x-k8s.io/v1alpha1, kind: EndpointPickerConfig, plugins: [{type: label-selector-filter, parameters: {matchLabels: {llm-d.ai/role: decode}}}, {type: nope}]}}]
replicas: [{id: r, url: 'http://h', models: [m], labels: {llm-d.ai/role: decode, zone: a}}]`), "INFERRAIL_ROUTING__SCHEDULER={kind: EndpointPickerConfig}")

	f.Fuzz(func(t *testing.T, doc []byte, env string) {
		c, err := Parse(doc, []string{env})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse accepted an invalid config: %v", err)
		}
		y, err := c.YAML()
		if err != nil {
			t.Fatalf("YAML: %v", err)
		}
		back, err := Parse(y, nil)
		if err != nil {
			t.Fatalf("Parse of YAML output: %v\n%s", err, y)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip differs:\n%s", y)
		}
	})
}
