package frontend

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/auth"
	"github.com/inferrail/inferrail/transport/decisionlog"
	"github.com/inferrail/inferrail/transport/tracing"
)

// Client keys of the auth tests: key restricted to model, open to every
// model. engineKey is the simulators' --api-key.
const (
	restrictedKey = "sk-frontend-restricted-0123456789abcdef"
	openKey       = "sk-frontend-open-0123456789abcdef012345"
	engineKey     = "engine-secret-0123456789abcdef01234567"
)

var testSecrets = []string{restrictedKey, openKey, engineKey}

// authGW is a gateway with API keys, a decision log and traces, in front
// of simulators serving model and "other".
type authGW struct {
	*gw
	set   *metrics.Set
	dlog  string
	spans *tracetest.InMemoryExporter
}

func startAuth(t *testing.T, simEdit func(*sim.Options), cfgEdit func(*config.Config)) *authGW {
	t.Helper()
	a := &authGW{set: metrics.NewSet(), dlog: filepath.Join(t.TempDir(), "decisions.jsonl"),
		spans: tracetest.NewInMemoryExporter()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(a.spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	so := sim.DefaultOptions()
	so.Engine.Latency.Zero = true
	so.ServedModelNames = []string{model, "other"}
	if simEdit != nil {
		simEdit(&so)
	}
	sims, err := sim.StartN(1, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sims[0].Close() })
	dl, err := decisionlog.Open(a.dlog, 1, metrics.NewSet())
	if err != nil {
		t.Fatal(err)
	}
	a.gw = startOpts(t, []string{sims[0].URL()}, func(c *config.Config) {
		c.Models = append(c.Models, config.NewModel("other"))
		c.Replicas[0].Models = []string{model, "other"}
		c.Logging.LogPrompts = true
		c.Auth.APIKeys.Keys = []config.APIKey{
			{ID: "restricted", Tenant: "team-r", SHA256: config.HashKey(restrictedKey), Models: []string{"sim"}},
			{ID: "open", SHA256: config.HashKey(openKey)},
		}
		if cfgEdit != nil {
			cfgEdit(c)
		}
	}, func(o *Options) {
		g, err := auth.New(o.Config, auth.Options{Metrics: a.set})
		if err != nil {
			t.Fatal(err)
		}
		o.Auth, o.DecisionLog, o.Tracer = g, dl, tracing.New(tp)
		o.Metrics = nil
	})
	t.Cleanup(func() { dl.Close() })
	a.sims = sims
	a.fe.met.Include(a.set)
	waitFor(t, "replica healthy", 5*time.Second, func() bool { return a.fl.Replicas()[0].Healthy })
	return a
}

// do sends one request with the header lines given, "Name: value" each,
// repeated names kept.
func (a *authGW) do(method, path, body string, lines ...string) (*http.Response, string) {
	a.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, a.url(path), rd)
	if err != nil {
		a.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, ": ")
		// Set the name as written: Go would canonicalize it.
		req.Header[k] = append(req.Header[k], v)
	}
	resp, err := client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// noSecrets scans the gateway's log, metrics, decision log and spans for a
// key.
func (a *authGW) noSecrets(t *testing.T) {
	t.Helper()
	var m bytes.Buffer
	a.fe.met.WritePrometheus(&m)
	dl, _ := os.ReadFile(a.dlog)
	spans, _ := json.Marshal(a.spans.GetSpans().Snapshots())
	for _, s := range testSecrets {
		for name, text := range map[string]string{"log": a.logs.String(), "metrics": m.String(), "decision log": string(dl), "spans": string(spans)} {
			if strings.Contains(text, s) || strings.Contains(text, config.HashKey(s)) {
				t.Errorf("a key shows in the %s", name)
			}
		}
	}
}

// TestAuthEveryRoute asks every client port route without a key, with a
// wrong one, one off by a byte, the header in odd cases and repeated.
func TestAuthEveryRoute(t *testing.T) {
	a := startAuth(t, nil, nil)
	bodies := map[string]string{
		"/v1/chat/completions": chat("hi", 2, false),
		"/v1/completions":      `{"model":"sim","prompt":"hi","max_tokens":2}`,
		pathMessages:           `{"model":"sim","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`,
		pathCountTokens:        `{"model":"sim","messages":[{"role":"user","content":"hi"}]}`,
		pathResponses:          `{"model":"sim","input":"hi","max_output_tokens":2}`,
		pathTokenize:           `{"model":"sim","prompt":"hi"}`,
		pathDetokenize:         `{"model":"sim","tokens":[1,2]}`,
		pathChatRender:         chat("hi", 2, false),
		pathCompletionRender:   `{"model":"sim","prompt":"hi","max_tokens":2}`,
	}
	for _, p := range poolingPaths {
		bodies[p] = `{"model":"sim","input":"hi"}`
	}
	off := openKey[:len(openKey)-1] + "6"
	refused := [][]string{
		nil,
		{"Authorization: Bearer sk-nope"},
		{"Authorization: Bearer " + off},
		{"Authorization: Bearer " + openKey[1:]},
		{"x-api-key: " + off},
		{"Authorization: Basic " + openKey},
		{"Authorization: Bearer " + openKey, "Authorization: Bearer " + restrictedKey},
		{"authorization: Bearer " + openKey, "X-API-KEY: " + off},
		{"X-Api-Key: " + openKey, "x-api-key: " + restrictedKey},
	}
	accepted := [][]string{
		{"Authorization: Bearer " + openKey},
		{"AUTHORIZATION: bEaReR " + openKey},
		{"x-api-key: " + openKey},
		{"X-API-KEY: " + openKey},
		{"authorization: Bearer " + openKey, "authorization: Bearer " + openKey},
		{"Authorization: Bearer " + openKey, "x-api-key: " + openKey},
	}
	for path, allow := range routes {
		for _, method := range strings.Split(allow, ", ") {
			public := slices.Contains(a.cfg.Auth.PublicPaths, path)
			for _, lines := range refused {
				resp, body := a.do(method, path, bodies[path], lines...)
				if public {
					if resp.StatusCode != 200 {
						t.Errorf("%s %s %q (public): %d %s", method, path, lines, resp.StatusCode, body)
					}
					continue
				}
				if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s %q: %d %s", method, path, lines, resp.StatusCode, body)
					continue
				}
				if method == "HEAD" {
					continue
				}
				if anthropicPath([]byte(path)) {
					// Anthropic's shape, as its API answers a bad key.
					if !strings.HasPrefix(body, `{"type":"error","error":{"type":"authentication_error","message":"`) {
						t.Errorf("%s %s %q: body %s", method, path, lines, body)
					}
					continue
				}
				var e struct {
					Error struct {
						Message string  `json:"message"`
						Type    string  `json:"type"`
						Param   *string `json:"param"`
						Code    string  `json:"code"`
					} `json:"error"`
				}
				if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type != "invalid_request_error" ||
					e.Error.Code != "invalid_api_key" || e.Error.Param != nil || e.Error.Message == "" {
					t.Errorf("%s %s %q: body %s", method, path, lines, body)
				}
				for _, name := range []string{"restricted", "open", "team-r"} {
					if strings.Contains(body, name) {
						t.Errorf("the 401 names key %s: %s", name, body)
					}
				}
			}
			for _, lines := range accepted {
				// The simulator serves only /v1/embeddings of the pooling
				// APIs: the others' 404 is the engine's, past the key check.
				if resp, body := a.do(method, path, bodies[path], lines...); resp.StatusCode != 200 &&
					!(poolingPath([]byte(path)) && resp.StatusCode == 404 && resp.Header.Get(HeaderReplica) != "") {
					t.Errorf("%s %s %q: %d %s", method, path, lines, resp.StatusCode, body)
				}
			}
		}
	}
	a.noSecrets(t)
}

// TestAuthBeforeBody: a request with Expect: 100-continue is refused or let
// on by its key as any other.
func TestAuthBeforeBody(t *testing.T) {
	a := startAuth(t, nil, nil)
	resp, _ := a.do("POST", "/v1/chat/completions", chat("hi", 2, false), "Expect: 100-continue")
	if resp.StatusCode != 401 {
		t.Errorf("Expect without a key: %d", resp.StatusCode)
	}
	resp, _ = a.do("POST", "/v1/chat/completions", chat("hi", 2, false), "Expect: 100-continue", "x-api-key: "+openKey)
	if resp.StatusCode != 200 {
		t.Errorf("Expect with a key: %d", resp.StatusCode)
	}
}

// TestAdminRouteOnClientPort: the admin routes do not exist on the client
// port, with a key or without.
func TestAdminRouteOnClientPort(t *testing.T) {
	a := startAuth(t, nil, nil)
	for _, path := range []string{"/metrics", "/admin/config", "/admin/replicas", "/admin/reload", "/admin/shadow", "/admin/explain/v1/chat/completions"} {
		for _, method := range []string{"GET", "POST", "PATCH"} {
			for _, lines := range [][]string{nil, {"Authorization: Bearer " + openKey}} {
				if resp, body := a.do(method, path, "{}", lines...); resp.StatusCode != 404 {
					t.Errorf("%s %s %q: %d %s", method, path, lines, resp.StatusCode, body)
				}
			}
		}
	}
}

// TestModelAccess: a key allowed one model asking for another gets the
// 404 OpenAI gives, whether the other model exists or not, and sees only
// its model listed; identity reaches the metrics, the decision log, the
// request log and the spans, the key nowhere.
func TestModelAccess(t *testing.T) {
	a := startAuth(t, nil, nil)
	r := "Authorization: Bearer " + restrictedKey
	for _, name := range []string{"other", "nope"} {
		resp, body := a.do("POST", "/v1/chat/completions", strings.Replace(chat("hi", 2, false), `"sim"`, `"`+name+`"`, 1), r)
		want := `{"error":{"message":"The model ` + "`" + name + "`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
		if resp.StatusCode != 404 || body != want {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	for _, name := range []string{"sim", model} {
		if resp, body := a.do("POST", "/v1/chat/completions", strings.Replace(chat("hi", 2, false), `"sim"`, `"`+name+`"`, 1), r); resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	// An open key asking for a model nobody serves gets vLLM's answer.
	if resp, body := a.do("POST", "/v1/chat/completions", strings.Replace(chat("hi", 2, false), `"sim"`, `"nope"`, 1), "x-api-key: "+openKey); resp.StatusCode != 404 || !strings.Contains(body, "NotFoundError") {
		t.Errorf("open key, unknown model: %d %s", resp.StatusCode, body)
	}
	list := func(line string) []string {
		_, body := a.do("GET", "/v1/models", "", line)
		var l struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		json.Unmarshal([]byte(body), &l)
		var ids []string
		for _, d := range l.Data {
			ids = append(ids, d.ID)
		}
		return ids
	}
	if got := list(r); !slices.Equal(got, []string{model, "sim"}) {
		t.Errorf("restricted key lists %v", got)
	}
	if got := list("x-api-key: " + openKey); !slices.Equal(got, []string{model, "sim", "other"}) {
		t.Errorf("open key lists %v", got)
	}

	var m bytes.Buffer
	a.fe.met.WritePrometheus(&m)
	for _, want := range []string{`inferrail_tenant_requests_total{tenant="team-r",key="restricted"} 5`,
		`inferrail_request_errors_total{model="",reason="model_not_allowed"} 2`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("no %s in\n%s", want, m.String())
		}
	}
	waitFor(t, "decision log", 5*time.Second, func() bool {
		b, _ := os.ReadFile(a.dlog)
		return bytes.Contains(b, []byte(`"tenant":"team-r","key_id":"restricted"`))
	})
	if !strings.Contains(a.logs.String(), "tenant=team-r key=restricted") {
		t.Errorf("request log: %s", a.logs.String())
	}
	found := false
	for _, s := range a.spans.GetSpans() {
		for _, kv := range s.Attributes {
			if kv.Key == tracing.KeyTenant && kv.Value.AsString() == "team-r" {
				found = true
			}
		}
	}
	if !found {
		t.Error("no span names the tenant")
	}
	a.noSecrets(t)
}

// TestEngineKey: the client's key never reaches the engine; the engine's
// own key does. The simulator runs with --api-key engineKey, and the
// client presents that very string as its gateway key.
func TestEngineKey(t *testing.T) {
	var keyFile string
	mk := func(t *testing.T, withEngineKey bool) *authGW {
		return startAuth(t, func(o *sim.Options) { o.APIKey = engineKey }, func(c *config.Config) {
			c.Auth.APIKeys.Keys = append(c.Auth.APIKeys.Keys, config.APIKey{ID: "same", SHA256: config.HashKey(engineKey)})
			if withEngineKey {
				keyFile = filepath.Join(t.TempDir(), "engine-key")
				os.WriteFile(keyFile, []byte(engineKey+"\n"), 0o600)
				c.Upstream.APIKeyFile = keyFile
			}
		})
	}
	a := mk(t, false)
	if resp, body := a.do("POST", "/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`, "Authorization: Bearer "+engineKey); resp.StatusCode != 401 || body != `{"error":"Unauthorized"}` {
		t.Errorf("without an engine key the engine must refuse: %d %s", resp.StatusCode, body)
	}
	a.noSecrets(t)
	a = mk(t, true)
	if resp, body := a.do("POST", "/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`, "x-api-key: "+openKey); resp.StatusCode != 200 {
		t.Errorf("with the engine key: %d %s", resp.StatusCode, body)
	}
	a.noSecrets(t)
}

// TestEngineUnauthorized: an engine that refuses the gateway's engine key
// raises replica.WarnEngineUnauthorized, logged once, and its next success
// clears it.
func TestEngineUnauthorized(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "engine-key")
	os.WriteFile(keyFile, []byte("not-the-engine-key"), 0o600)
	a := startAuth(t, func(o *sim.Options) { o.APIKey = engineKey }, func(c *config.Config) { c.Upstream.APIKeyFile = keyFile })
	warned := func() bool {
		for _, w := range a.fl.Replicas()[0].Warnings.List() {
			if w.Code == replica.WarnEngineUnauthorized {
				return true
			}
		}
		return false
	}
	for range 2 {
		if resp, _ := a.do("POST", "/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`, "x-api-key: "+openKey); resp.StatusCode != 401 {
			t.Fatalf("with the wrong engine key: %d", resp.StatusCode)
		}
	}
	if !warned() || strings.Count(a.logs.String(), "refuses the gateway's requests") != 1 {
		t.Errorf("warning %v, log:\n%s", warned(), a.logs.String())
	}
	os.WriteFile(keyFile, []byte(engineKey), 0o600)
	a.fe.auth.Reload()
	if resp, _ := a.do("POST", "/v1/completions", `{"model":"sim","prompt":"hi","max_tokens":2}`, "x-api-key: "+openKey); resp.StatusCode != 200 {
		t.Fatalf("with the engine key: %d", resp.StatusCode)
	}
	if warned() {
		t.Error("the warning stays after a success")
	}
	a.noSecrets(t)
}

// TestResponseByIDAccess: a key restricted to some models cannot read or
// cancel a response stored for another model: it gets the same 404 as an
// id nobody holds, while a key allowed that model gets the response.
func TestResponseByIDAccess(t *testing.T) {
	a := startAuth(t, nil, func(c *config.Config) { c.Replicas[0].Models = []string{"other"} })
	open, restricted := "Authorization: Bearer "+openKey, "Authorization: Bearer "+restrictedKey
	resp, body := a.do("POST", "/v1/responses", `{"model":"other","input":"Store this.","max_output_tokens":2}`, open,
		"Content-Type: application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	id := responses.ID([]byte(body))
	if resp, got := a.do("GET", "/v1/responses/"+id, "", open); resp.StatusCode != 200 || got != body {
		t.Errorf("open key: %d %s", resp.StatusCode, got)
	}
	want := `{"error":{"message":"Response with id '` + id + `' not found.","type":"invalid_request_error","param":"response_id","code":404}}`
	for _, path := range []string{"/v1/responses/" + id, "/v1/responses/" + id + "/cancel"} {
		method := "GET"
		if strings.HasSuffix(path, "/cancel") {
			method = "POST"
		}
		if resp, got := a.do(method, path, "", restricted); resp.StatusCode != 404 || got != want {
			t.Errorf("restricted key, %s %s: %d %s", method, path, resp.StatusCode, got)
		}
	}
}
