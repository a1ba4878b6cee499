package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/actors/fleet"
)

var _ fleet.Prober = (*Prober)(nil)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const modelList = `{"object":"list","data":[` +
	`{"id":"Qwen/Qwen3-8B", "object":"model","created":1,"owned_by":"vllm","root":"Qwen/Qwen3-8B","max_model_len":32768,"permission":[{"id":"modelperm-1"}]},` +
	`{"id":"lora-a","object":"model","parent":"Qwen/Qwen3-8B"},` +
	`{"object":"model"}` +
	`]}`

// engine is a fake engine: /health answers status, /v1/models answers
// models with modelsStatus. It counts requests by path.
type engine struct {
	status, modelsStatus atomic.Int32
	models               atomic.Pointer[string]
	health, list         atomic.Int32
	hang                 chan struct{} // when set, /health waits for it or the client
}

func newEngine(t *testing.T) (*engine, *httptest.Server) {
	t.Helper()
	e := &engine{}
	e.setModels(modelList)
	e.status.Store(200)
	e.modelsStatus.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/health", "/base/health":
			e.health.Add(1)
			if e.hang != nil {
				select {
				case <-e.hang:
				case <-r.Context().Done():
					return
				}
			}
			w.WriteHeader(int(e.status.Load()))
		case "/v1/models", "/base/v1/models":
			e.list.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(e.modelsStatus.Load()))
			w.Write([]byte(*e.models.Load()))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return e, srv
}

func (e *engine) setModels(s string) { e.models.Store(&s) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestProbeHealthy(t *testing.T) {
	e, srv := newEngine(t)
	p := NewProber()
	cards, err := p.Probe(ctx(t), srv.URL, false)
	if err != nil || cards != nil {
		t.Fatalf("Probe = %v, %v", cards, err)
	}
	if e.health.Load() != 1 || e.list.Load() != 0 {
		t.Fatalf("requests: %d health, %d list", e.health.Load(), e.list.Load())
	}
}

func TestProbeCards(t *testing.T) {
	_, srv := newEngine(t)
	cards, err := NewProber().Probe(ctx(t), srv.URL+"/", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(cards) != 2 {
		t.Fatalf("cards %q", cards)
	}
	// Raw bytes as the engine sent them, odd spacing included.
	want := `{"id":"Qwen/Qwen3-8B", "object":"model","created":1,"owned_by":"vllm","root":"Qwen/Qwen3-8B","max_model_len":32768,"permission":[{"id":"modelperm-1"}]}`
	if got := string(cards["Qwen/Qwen3-8B"]); got != want {
		t.Fatalf("card\n%s\nwant\n%s", got, want)
	}
	if got := string(cards["lora-a"]); got != `{"id":"lora-a","object":"model","parent":"Qwen/Qwen3-8B"}` {
		t.Fatalf("lora card %s", got)
	}
}

func TestProbeBasePath(t *testing.T) {
	e, srv := newEngine(t)
	if cards, err := NewProber().Probe(ctx(t), srv.URL+"/base", true); err != nil || len(cards) != 2 {
		t.Fatalf("Probe = %v, %v", cards, err)
	}
	if e.health.Load() != 1 || e.list.Load() != 1 {
		t.Fatalf("requests: %d health, %d list", e.health.Load(), e.list.Load())
	}
}

func TestProbeFailures(t *testing.T) {
	e, srv := newEngine(t)
	p := NewProber()
	for _, code := range []int32{503, 500, 404, 204, 302} {
		e.status.Store(code)
		if _, err := p.Probe(ctx(t), srv.URL, true); err == nil || !strings.Contains(err.Error(), "status") {
			t.Fatalf("status %d: err %v", code, err)
		}
	}
	if e.list.Load() != 0 {
		t.Fatal("fetched cards from an unhealthy engine")
	}

	// Nothing listening.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	if _, err := p.Probe(ctx(t), url, false); err == nil {
		t.Fatal("probe of a closed port passed")
	}
	if _, err := p.Probe(ctx(t), "::not a url", false); err == nil {
		t.Fatal("probe of a bad URL passed")
	}
}

func TestProbeTimeout(t *testing.T) {
	e, srv := newEngine(t)
	e.hang = make(chan struct{})
	defer close(e.hang)
	c, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if _, err := NewProber().Probe(c, srv.URL, false); err == nil {
		t.Fatal("a hung engine passed")
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("probe took %v with a 50ms timeout", d)
	}
}

// TestProbeCardsUnavailable: health passes but the model list cannot be
// read: the probe passes without cards, so the caller asks again.
func TestProbeCardsUnavailable(t *testing.T) {
	e, srv := newEngine(t)
	p := NewProber()
	f := func(what string) {
		t.Helper()
		cards, err := p.Probe(ctx(t), srv.URL, true)
		if err != nil || cards != nil {
			t.Fatalf("%s: Probe = %q, %v; want nil, nil", what, cards, err)
		}
	}
	e.modelsStatus.Store(500)
	f("status 500")
	e.modelsStatus.Store(200)
	e.setModels(`{"object":"list","data":[`)
	f("truncated JSON")
	e.setModels(`{"object":"list"}`)
	f("no data")
	e.setModels(`{"object":"list","data":[]}`)
	if cards, err := p.Probe(ctx(t), srv.URL, true); err != nil || cards == nil || len(cards) != 0 {
		t.Fatalf("empty list: Probe = %q, %v; want an empty map", cards, err)
	}
}

func TestParseModels(t *testing.T) {
	f := func(body string, wantIDs ...string) {
		t.Helper()
		got, err := parseModels([]byte(body))
		if wantIDs == nil {
			if err == nil {
				t.Fatalf("parseModels(%s) = %q, want an error", body, got)
			}
			return
		}
		if err != nil || len(got) != len(wantIDs)-1 {
			t.Fatalf("parseModels(%s) = %q, %v", body, got, err)
		}
		for _, id := range wantIDs[1:] {
			if got[id] == nil {
				t.Fatalf("parseModels(%s): no %q in %q", body, id, got)
			}
		}
	}
	f(`{"data":[{"id":"a"},{"id":"b"}]}`, "", "a", "b")
	f(`{"data":[{"id":"a"},{"id":7},"x",{"id":""}]}`, "", "a")
	f(`{"data":[]}`, "")
	f(`{"data":null}`)
	f(`[]`)
	f(`nope`)
}
