package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// shadowPage is GET /admin/shadow.
type shadowPage struct {
	Caveat string `json:"caveat"`
	Models []struct {
		Model   string `json:"model"`
		Dropped uint64 `json:"dropped"`
		Shadows []struct {
			Policy    string  `json:"policy"`
			Decisions int64   `json:"decisions"`
			Agreement float64 `json:"agreement"`
			Faster    float64 `json:"faster"`
			Slower    float64 `json:"slower"`
			MeanGain  float64 `json:"mean_estimated_gain_seconds"`
		} `json:"shadows"`
	} `json:"models"`
}

func getBody(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// least_request routes with cost_model in shadow: every request routed is
// replayed by the shadow, and /admin/shadow and /metrics report it.
func TestShadowEndToEnd(t *testing.T) {
	sims, opts := zeroLatencySims(t, 3)
	cfg := gatewayConfig(sims, opts)
	cfg.Routing.DefaultPolicy = "least_request"
	cfg.Routing.Shadow = []string{"cost_model"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, admin := startGateway(t, cfg)

	// 8 documents asked about 6 times each, one request at a time: a
	// repeat finds its document cached where least_request may not go.
	const docs, asks = 8, 6
	n := 0
	for ask := range asks {
		for doc := range docs {
			body := `{"model":"sim","max_tokens":2,"prompt":"` + strings.Repeat(fmt.Sprintf("document %d says ", doc), 150) +
				fmt.Sprintf("question %d", ask) + `"}`
			resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("request %d: %d %s", n, resp.StatusCode, b)
			}
			if p := resp.Header.Get("X-Inferrail-Policy"); p != "least_request" {
				t.Fatalf("routed by %q", p)
			}
			if resp.Header.Get("X-Inferrail-Cached-Tokens") == "" {
				t.Fatalf("request %d not priced: the shadow's broadcast is off", n)
			}
			n++
		}
	}

	var page shadowPage
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, b := getBody(t, "http://"+admin+"/admin/shadow")
		if code != 200 {
			t.Fatalf("/admin/shadow: %d %s", code, b)
		}
		page = shadowPage{}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatalf("/admin/shadow: %v %s", err, b)
		}
		if len(page.Models) == 1 && len(page.Models[0].Shadows) == 1 && page.Models[0].Shadows[0].Decisions == int64(n) {
			t.Logf("/admin/shadow after %d requests:\n%s", n, b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/admin/shadow does not count %d decisions within 5s: %s", n, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
	pm, s := page.Models[0], page.Models[0].Shadows[0]
	if pm.Model != opts.Model || s.Policy != "cost_model" || pm.Dropped != 0 || page.Caveat == "" {
		t.Fatalf("/admin/shadow: %+v", page)
	}
	if s.Agreement < 0 || s.Agreement > 1 || s.Faster+s.Slower > 1-s.Agreement+1e-9 {
		t.Fatalf("shares out of range: %+v", s)
	}
	if s.Agreement == 1 || s.Faster == 0 || s.MeanGain <= 0 {
		t.Fatalf("least_request never sent a repeat away from its cached replica, or cost_model was not priced faster: %+v", s)
	}

	_, page2 := getBody(t, "http://"+admin+"/metrics")
	metricsPage := string(page2)
	l := `{model="` + opts.Model + `",policy="cost_model"`
	for _, want := range []string{
		`inferrail_shadow_decisions_total` + l + `,agreed="true"} `,
		`inferrail_shadow_decisions_total` + l + `,agreed="false"} `,
		`inferrail_shadow_faster_total` + l + `} `,
		`inferrail_shadow_slower_total` + l + `} `,
		`inferrail_shadow_estimated_ttft_seconds_total` + l + `,pick="active"} `,
		`inferrail_shadow_estimated_ttft_seconds_total` + l + `,pick="shadow"} `,
		`inferrail_shadow_dropped_total{model="` + opts.Model + `"} 0`,
	} {
		if !strings.Contains(metricsPage, want) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
