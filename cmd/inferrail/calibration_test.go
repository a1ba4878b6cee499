package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// TestCalibrationRealTime is routing.cost_model: auto against in-process
// simulators in real time: two engines whose prefill is 0.4 and 0.8 times
// the configured a (and d), sent streamed completions of varied lengths one
// at a time. Each replica's fit, on /admin/replicas and /metrics, comes
// within 25% of its engine's a, and is in effect; turned off by a live
// config change, the configured values price every replica again.
func TestCalibrationRealTime(t *testing.T) {
	factors := []float64{0.4, 0.8}
	cfg := config.Default()
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Routing.DefaultPolicy = "cost_model"
	cfg.Routing.Seed = 1
	cfg.Routing.EstimateDeadline = time.Second
	cfg.Routing.CostModel.Auto = true
	var model string
	for i, f := range factors {
		opts := sim.DefaultOptions()
		opts.Port = 0
		opts.EnablePromptTokensDetails = true
		l := &opts.Engine.Latency
		l.PrefillToken = time.Duration(f * float64(l.PrefillToken))
		l.PrefillPair = 0
		l.PrefillFixed = time.Duration(f * float64(l.PrefillFixed))
		l.DecodeToken = time.Millisecond
		s, err := sim.Start(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		model = opts.Model
		r := config.NewReplica("sim-"+strconv.Itoa(i), s.URL(), opts.Model)
		r.KVCapacityBlocks = opts.Engine.NumBlocks
		cfg.Replicas = append(cfg.Replicas, r)
		if i == 0 {
			m := config.NewModel(opts.Model, "sim")
			m.Tokenizer, m.BlockSize = tokenize.Sim, opts.Engine.BlockSize
			cfg.Models = []config.Model{m}
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := serveConfigFile(t, cfg) // a file behind it, for PATCH /admin/config
	addr, admin := g.addr, g.admin
	client := &http.Client{Timeout: 30 * time.Second}
	rng := rand.New(rand.NewPCG(3, 3))
	send := func(i int) {
		t.Helper()
		var b strings.Builder
		for w := range 30 + rng.IntN(1500) {
			fmt.Fprintf(&b, "r%dw%d ", i, w)
		}
		body, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 2, "stream": true,
			"stream_options": map[string]any{"include_usage": true}, "prompt": b.String()})
		resp, err := client.Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for i := range 300 {
		send(i)
	}
	type replicasPage struct {
		Replicas []struct {
			ID        string `json:"id"`
			CostModel struct {
				Calibrating      bool     `json:"calibrating"`
				InEffect         string   `json:"in_effect"`
				PrefillTokenSecs float64  `json:"prefill_token_secs"`
				PrefillFixedSecs float64  `json:"prefill_fixed_secs"`
				DecodeStepSecs   float64  `json:"decode_step_secs"`
				Samples          int      `json:"samples"`
				RelError         *float64 `json:"rel_error"`
			} `json:"cost_model"`
		} `json:"replicas"`
	}
	var page replicasPage
	getJSON(t, client, "http://"+admin+"/admin/replicas", &page)
	configured := config.Default().Routing.CostModel
	for _, r := range page.Replicas {
		i, _ := strconv.Atoi(strings.TrimPrefix(r.ID, "sim-"))
		want := factors[i] * configured.PrefillTokenSecs
		c := r.CostModel
		relErr := math.NaN()
		if c.RelError != nil {
			relErr = *c.RelError
		}
		t.Logf("%s: a %.4g (truth %.4g), d %.4g (truth %.4g), decode step %.4g, %d samples, error %.3f, %s",
			r.ID, c.PrefillTokenSecs, want, c.PrefillFixedSecs, factors[i]*configured.PrefillFixedSecs, c.DecodeStepSecs,
			c.Samples, relErr, c.InEffect)
		if !c.Calibrating || c.InEffect != "auto" || math.Abs(c.PrefillTokenSecs/want-1) > 0.25 {
			t.Errorf("%s: cost model %+v, want auto in effect with a within 25%% of %.4g", r.ID, c, want)
		}
	}
	resp, err := client.Get("http://" + admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsPage, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, s := range []string{`inferrail_cost_model_fit_prefill_token_seconds{replica="sim-0"}`,
		`inferrail_cost_model_fit_auto{replica="sim-1"} 1`, `inferrail_ttft_estimate_ratio_count{model=`} {
		if !bytes.Contains(metricsPage, []byte(s)) {
			t.Errorf("/metrics lacks %s", s)
		}
	}

	// Off, live: each replica drops its fit at its next request.
	req, _ := http.NewRequest("PATCH", "http://"+admin+"/admin/config",
		strings.NewReader(`{"routing": {"cost_model": {"auto": false}}}`))
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH /admin/config: %d", resp.StatusCode)
	}
	for i := range 20 {
		send(1000 + i)
	}
	page = replicasPage{}
	getJSON(t, client, "http://"+admin+"/admin/replicas", &page)
	for _, r := range page.Replicas {
		if c := r.CostModel; c.Calibrating || c.InEffect != "configured" {
			t.Errorf("%s: cost model %+v after auto was turned off, want configured", r.ID, c)
		}
	}
}
