package admin

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// GET /admin/ is the page, built in: HTML whose every request goes to
// admin routes this server has, and that loads nothing from elsewhere
// (no src or href, and a Content-Security-Policy allowing only itself).
func TestFleetPage(t *testing.T) {
	s := New(noReplicas{}, telemetry.New(noReplicas{}))
	for _, path := range []string{"/admin/", "/admin"} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(path)
		s.handle(&ctx)
		body := string(ctx.Response.Body())
		if ctx.Response.StatusCode() != 200 || !strings.HasPrefix(string(ctx.Response.Header.ContentType()), "text/html") ||
			!strings.Contains(body, `id="replicas"`) || !strings.Contains(body, `id="explain-body"`) {
			t.Fatalf("%s: %d %s", path, ctx.Response.StatusCode(), ctx.Response.Header.ContentType())
		}
		if csp := string(ctx.Response.Header.Peek("Content-Security-Policy")); !strings.Contains(csp, "default-src 'none'") ||
			!strings.Contains(csp, "connect-src 'self'") {
			t.Fatalf("CSP %q", csp)
		}
	}
	page := string(fleetPage)
	if m := regexp.MustCompile(`(?i)\b(src|href)\s*=|https?://|@import|url\(`).FindString(page); m != "" {
		t.Fatalf("the page refers to something outside it: %q", m)
	}
	// Every route it asks is one this server answers, once turned on.
	c := config.Default()
	full := New(noReplicas{}, telemetry.New(noReplicas{})).WithModels(configs{c}).WithDecisions(decisionlog.Memory()).
		WithExplain(ExplainOptions{Fleet: noModels{}, Timeout: time.Second})
	routes := regexp.MustCompile(`"(/admin/[a-z]+)"`).FindAllStringSubmatch(page, -1)
	if len(routes) < 5 {
		t.Fatalf("the page asks only %v", routes)
	}
	for _, route := range routes {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(route[1])
		if route[1] == explainPrefix {
			ctx.Request.SetRequestURI(explainPrefix + "/v1/chat/completions")
			ctx.Request.Header.SetMethod("POST")
			ctx.Request.SetBodyString(`{"model":"m"}`)
		}
		full.handle(&ctx)
		if ctx.Response.StatusCode() == 404 && !strings.Contains(string(ctx.Response.Body()), "model") {
			t.Errorf("the page asks %s, which answers %d %s", route[1], ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

// GET /admin/models shows each model's split (a profile marked), shadows
// and tokenizer, with the config's generation; GET /admin/decisions the
// last sampled decisions, newest first; neither exists unless turned on.
func TestModelsAndDecisions(t *testing.T) {
	base := New(noReplicas{}, telemetry.New(noReplicas{}))
	for _, p := range []string{"/admin/models", "/admin/decisions"} {
		if code, _ := get(base, p); code != 404 {
			t.Fatalf("%s without its option: %d", p, code)
		}
	}
	c := config.Default()
	m := config.NewModel("m", "alias")
	m.Split = map[string]int{"cost_model": 75, "round_robin": 25}
	m.Shadow = []string{"kv_aware"}
	m.Tokenizer = "builtin:sim"
	m.SLO = config.SLO{TTFT: 2 * time.Second}
	c.Models = []config.Model{m, config.NewModel("n")}
	c.Replicas = []config.Replica{config.NewReplica("r0", "http://127.0.0.1:1", "m", "n")}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	dl := decisionlog.Memory()
	winner := "r0"
	dl.Log(&decisionlog.Record{RequestID: "first", Model: "m", Decision: decisionlog.Decision{Policy: "cost_model", Winner: &winner}})
	dl.Log(&decisionlog.Record{RequestID: "second", Model: "m"})
	met := telemetry.New(noReplicas{})
	for _, res := range []string{flow.SLOMet, flow.SLOMet, flow.SLOMet, flow.SLOTTFTMissed} {
		met.Model("m").SLO(res)
	}
	s := New(noReplicas{}, met).WithModels(configs{c}).WithDecisions(dl)

	code, b := get(s, "/admin/models")
	var models struct {
		Generation uint64      `json:"generation"`
		Models     []modelView `json:"models"`
	}
	if err := json.Unmarshal(b, &models); code != 200 || err != nil || models.Generation != 1 || len(models.Models) != 2 {
		t.Fatalf("%d %v %s", code, err, b)
	}
	got := models.Models[0]
	if got.Name != "m" || len(got.Aliases) != 1 || len(got.Split) != 2 || got.Split[0] != (armView{"cost_model", 75, false}) ||
		got.Split[1] != (armView{"round_robin", 25, false}) || len(got.Shadows) != 1 || got.Tokenizer != "builtin:sim" {
		t.Errorf("model m: %+v", got)
	}
	if n := models.Models[1]; len(n.Split) != 1 || n.Split[0].Policy != c.Routing.DefaultPolicy || n.Split[0].Percent != 100 {
		t.Errorf("model n: %+v", n)
	}
	// The SLO: m's default and attainment, 3 met of 4; n counted none.
	if slo := got.SLO; slo.DefaultTTFT != 2 || slo.DefaultTPOT != 0 || slo.Requests != 4 || slo.Attainment == nil ||
		*slo.Attainment != 0.75 || slo.Results[flow.SLOTTFTMissed] != 1 || len(slo.Results) != len(flow.SLOResults) {
		t.Errorf("model m's SLO: %+v", slo)
	}
	if slo := models.Models[1].SLO; slo.Requests != 0 || slo.Attainment != nil {
		t.Errorf("model n's SLO: %+v", slo)
	}
	if !regexp.MustCompile(`"attainment":\s*null`).Match(b) {
		t.Errorf("no attainment is not null: %s", b)
	}

	code, b = get(s, "/admin/decisions")
	var dec struct {
		Decisions []decisionlog.Record `json:"decisions"`
	}
	if err := json.Unmarshal(b, &dec); code != 200 || err != nil || len(dec.Decisions) != 2 ||
		dec.Decisions[0].RequestID != "second" || *dec.Decisions[1].Winner != "r0" {
		t.Fatalf("%d %v %s", code, err, b)
	}
}
