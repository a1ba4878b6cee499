package config

import (
	"strings"
	"testing"
)

// TestCostModelAuto: `cost_model: auto` is {auto: true} with the defaults
// under routing and with routing.cost_model's values under a model; the
// map form keeps the keys beside it; another scalar is refused naming the
// key; and a model routed without estimates gets a warning.
func TestCostModelAuto(t *testing.T) {
	c := mustParse(t, `
models:
  - {name: m, cost_model: auto, policy: cost_model}
  - {name: n, cost_model: {auto: true, prefill_fixed_secs: 0.02}, policy: cost_model}
  - {name: o, policy: cost_model}
  - {name: p, cost_model: {prefill_token_secs: 0.0003}, policy: cost_model}
replicas: [{id: r0, url: 'http://127.0.0.1:8001', models: [m]}]
routing:
  cost_model: {auto: false, prefill_token_secs: 0.0002}
`)
	f := func(model string, auto bool, a, d float64) {
		t.Helper()
		m, ok := c.Model(model)
		if !ok {
			t.Fatalf("no model %s", model)
		}
		cm := c.RoutingFor(m).CostModel
		if cm.Auto != auto || cm.PrefillTokenSecs != a || cm.PrefillFixedSecs != d {
			t.Errorf("model %s: cost model %+v, want auto %v, a %v, d %v", model, cm, auto, a, d)
		}
	}
	f("m", true, 0.0002, 0.005)
	f("n", true, 0.0002, 0.02)
	f("o", false, 0.0002, 0.005)
	f("p", false, 0.0003, 0.005)
	if w := c.Warnings(); len(w) != 0 {
		t.Errorf("warnings %q, want none", w)
	}

	c = mustParse(t, base+"routing: {cost_model: auto}\n")
	if cm := c.Routing.CostModel; !cm.Auto || cm.PrefillTokenSecs != Default().Routing.CostModel.PrefillTokenSecs {
		t.Errorf("routing.cost_model: auto gave %+v, want the defaults with auto", cm)
	}
	// base's model is routed by least_request, the default: nothing
	// measures a prefill there.
	if w := c.Warnings(); len(w) != 1 || !strings.Contains(w[0], "models[0].cost_model: auto") {
		t.Errorf("warnings %q, want one on models[0].cost_model", w)
	}

	_, err := Parse([]byte(base+"routing: {cost_model: manual}\n"), nil)
	if got := keys(t, err); len(got) != 1 || got[0] != "routing.cost_model" {
		t.Errorf("cost_model: manual: keys %v, want routing.cost_model", got)
	}
}
