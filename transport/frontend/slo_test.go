package frontend

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/policy/policytest"
)

// startAdmitter is a gateway over one simulator whose model is routed by
// policytest.Admitter (a TTFT under a second refused), its config edited
// by cfgEdit.
func startAdmitter(t *testing.T, cfgEdit func(*config.Config)) *gw {
	sims, urls := startSims(t, 1, nil)
	g := startFleet(t, urls, cfgEdit, nil, func(o *fleet.Options) {
		o.ArmPolicy = func(*config.Config, *config.Model, string) (policy.Policy, error) {
			return policytest.Admitter{TTFT: time.Second}, nil
		}
	})
	g.sims = sims
	return g
}

// slo is the model's SLO counts by result.
func (g *gw) slo() map[string]uint64 {
	n := g.fe.met.Model(model).SLOCounts()
	out := map[string]uint64{}
	for i, res := range flow.SLOResults {
		if n[i] > 0 {
			out[res] = n[i]
		}
	}
	return out
}

// finished is how many requests the first simulator finished.
func (g *gw) finished() (n int64) {
	for _, k := range g.engineStats(0).FinishedByReason {
		n += k
	}
	return n
}

func sameCounts(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A request refused for its SLO gets llm-d's answer, 500 "request cannot
// be admitted" without a dropped reason, in its API's shape, at once even
// with flow control on; it is counted not_admitted.
func TestNotAdmitted(t *testing.T) {
	for _, flowOn := range []bool{false, true} {
		g := startAdmitter(t, func(c *config.Config) { c.FlowControl.Enabled = flowOn })
		for _, h := range []string{flow.HeaderSLOTTFT, flow.HeaderSLOTTFTAlias} {
			resp, body := g.post("/v1/chat/completions", chat("hi", 4, false), h, "250")
			var e struct {
				Error struct{ Message, Type string }
			}
			if resp.StatusCode != 500 || json.Unmarshal([]byte(body), &e) != nil ||
				!strings.Contains(e.Error.Message, "cannot be admitted") {
				t.Fatalf("flow %v, %s: %d %s; want a 500 that cannot be admitted", flowOn, h, resp.StatusCode, body)
			}
			if d := resp.Header.Get(flow.HeaderDropped); d != "" || resp.Header.Get("Retry-After") != "" {
				t.Errorf("flow %v: dropped reason %q, Retry-After %q; llm-d sets neither", flowOn, d, resp.Header.Get("Retry-After"))
			}
		}
		resp, body := g.post("/v1/messages", `{"model":"sim","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`,
			flow.HeaderSLOTTFT, "100")
		if resp.StatusCode != 500 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "cannot be admitted") {
			t.Fatalf("flow %v, Messages: %d %s; want Anthropic's error shape", flowOn, resp.StatusCode, body)
		}
		// A TTFT it can meet, and none, are routed.
		if resp, body := g.post("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTTFT, "5000"); resp.StatusCode != 200 {
			t.Fatalf("flow %v: an objective of 5 s: %d %s", flowOn, resp.StatusCode, body)
		}
		if resp, body := g.post("/v1/chat/completions", chat("hi", 4, false)); resp.StatusCode != 200 {
			t.Fatalf("flow %v: no objective: %d %s", flowOn, resp.StatusCode, body)
		}
		if got, want := g.slo(), map[string]uint64{flow.SLONotAdmitted: 3, flow.SLOMet: 1}; !sameCounts(got, want) {
			t.Errorf("flow %v: counted %v, want %v", flowOn, got, want)
		}
		if n := g.finished(); n != 2 {
			t.Errorf("flow %v: the engine finished %d requests, want the 2 admitted", flowOn, n)
		}
	}
}

// The model's default objective applies without headers, a header
// overrides its own measure, and the series carries the model and result.
func TestSLODefault(t *testing.T) {
	g := startAdmitter(t, func(c *config.Config) { c.Models[0].SLO = config.SLO{TTFT: 500 * time.Millisecond} })
	if resp, body := g.post("/v1/chat/completions", chat("hi", 4, false)); resp.StatusCode != 500 {
		t.Fatalf("the default's 500 ms: %d %s; want it refused", resp.StatusCode, body)
	}
	if resp, body := g.post("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTTFT, "60000"); resp.StatusCode != 200 {
		t.Fatalf("a header's 60 s: %d %s", resp.StatusCode, body)
	}
	// A TPOT header keeps the default TTFT, which is refused.
	if resp, body := g.post("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTPOT, "50"); resp.StatusCode != 500 {
		t.Fatalf("a TPOT header alone: %d %s; want the default TTFT refused", resp.StatusCode, body)
	}
	var m bytes.Buffer
	g.fe.met.WritePrometheus(&m)
	for _, want := range []string{
		`inferrail_slo_requests_total{model="inferrail/sim-8b",result="not_admitted"} 2`,
		`inferrail_slo_requests_total{model="inferrail/sim-8b",result="met"} 1`,
		`inferrail_slo_requests_total{model="inferrail/sim-8b",result="ttft_missed"} 0`,
	} {
		if !strings.Contains(m.String(), want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// Served requests are judged on their TTFT and TPOT as the gateway
// measured them.
func TestSLOAttainment(t *testing.T) {
	g := start(t, 1, nil, nil)
	// 1 µs to the first token no engine meets.
	if resp, _ := g.post("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTTFT, "0.001"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	if resp, _ := g.post("/v1/chat/completions", chat("hi", 4, true), flow.HeaderSLOTTFT, "0.001"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// A stream of 16 tokens cannot relay 15 of them within 15 ns; its
	// first token is in time.
	if resp, _ := g.post("/v1/chat/completions", chat("hi", 16, true), flow.HeaderSLOTTFT, "60000", flow.HeaderSLOTPOT, "0.000001"); resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	// Generous objectives are met, streamed or not.
	for _, stream := range []bool{false, true} {
		if resp, _ := g.post("/v1/chat/completions", chat("hi", 16, stream), flow.HeaderSLOTTFT, "60000", flow.HeaderSLOTPOT, "60000"); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
	}
	want := map[string]uint64{flow.SLOTTFTMissed: 2, flow.SLOTPOTMissed: 1, flow.SLOMet: 2}
	waitFor(t, "the counts", 2*time.Second, func() bool { return sameCounts(g.slo(), want) })
	// The response not streamed had its TPOT unjudged: the operator is
	// told once, with the cause.
	if n := strings.Count(g.logs.String(), "TPOT objective could not be judged"); n != 1 ||
		!strings.Contains(g.logs.String(), "was not streamed") {
		t.Errorf("%d warnings:\n%s", n, g.logs.String())
	}
}

// A stream without usage has its TPOT unjudged: the warning names
// usage_for_accuracy.
func TestSLOTPOTWithoutUsage(t *testing.T) {
	g := start(t, 1, nil, nil)
	body := strings.Replace(chat("hi", 8, true), `,"stream_options":{"include_usage":true}`, "", 1)
	for range 2 {
		if resp, _ := g.post("/v1/chat/completions", body, flow.HeaderSLOTPOT, "0.000001"); resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
	}
	waitFor(t, "the counts", 2*time.Second, func() bool { return sameCounts(g.slo(), map[string]uint64{flow.SLOMet: 2}) })
	if n := strings.Count(g.logs.String(), "TPOT objective could not be judged"); n != 1 ||
		!strings.Contains(g.logs.String(), "usage_for_accuracy: inject") {
		t.Errorf("%d warnings:\n%s", n, g.logs.String())
	}
}

// A malformed SLO header is the client's 400, in its API's shape, and
// reaches no engine.
func TestSLOHeaderInvalid(t *testing.T) {
	g := start(t, 1, nil, nil)
	f := func(path, body, header, value, shape string) {
		t.Helper()
		resp, got := g.post(path, body, header, value)
		if resp.StatusCode != 400 || !strings.Contains(got, header) || !strings.Contains(got, shape) {
			t.Errorf("%s with %s: %s: %d %s; want a 400 naming the header", path, header, value, resp.StatusCode, got)
		}
	}
	f("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTTFT, "fast", `{"error":{"message":`)
	f("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTPOT, "-5", `{"error":{"message":`)
	f("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTPOTAlias, "0", `{"error":{"message":`)
	f("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTTFT, "99999999", `{"error":{"message":`)
	f("/v1/messages", `{"model":"sim","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, flow.HeaderSLOTTFT, "1e400",
		`"type":"invalid_request_error"`)
	f("/v1/responses", `{"model":"sim","input":"hi","max_output_tokens":4}`, flow.HeaderSLOTTFTAlias, "nan", `{"error":{"message":`)
	if n := g.finished(); n != 0 {
		t.Errorf("the engine finished %d requests", n)
	}
	if n := len(g.slo()); n != 0 {
		t.Errorf("SLO counted %v", g.slo())
	}
}

// A request with an objective that no replica could take is counted
// refused; one without is not counted.
func TestSLORefused(t *testing.T) {
	g := startWith(t, []string{"http://127.0.0.1:1"}, func(c *config.Config) { c.Retry.MaxAttempts = 1 })
	waitFor(t, "the replica down", 3*time.Second, func() bool { return !g.fl.Replicas()[0].Healthy })
	if resp, body := g.post("/v1/chat/completions", chat("hi", 4, false), flow.HeaderSLOTTFT, "500"); resp.StatusCode != 503 {
		t.Fatalf("no healthy replica: %d %s", resp.StatusCode, body)
	}
	if resp, _ := g.post("/v1/chat/completions", chat("hi", 4, false)); resp.StatusCode != 503 {
		t.Fatal(resp.Status)
	}
	if got, want := g.slo(), map[string]uint64{flow.SLORefused: 1}; !sameCounts(got, want) {
		t.Errorf("counted %v, want %v", got, want)
	}
}
