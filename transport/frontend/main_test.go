package frontend

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/transport/health"
	"github.com/inferrail/inferrail/transport/scrape"
)

// TestMain fails the package on leaked goroutines; see sim's for the
// library goroutines that outlive their servers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

const model = "inferrail/sim-8b"

// gw is a gateway in front of in-process simulators, for one test.
type gw struct {
	t    testing.TB
	sims []*sim.Server
	cfg  *config.Config
	fl   *fleet.Fleet
	fe   *Server
	addr string
	logs *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs n simulators (edited by simEdit) and a gateway (edited by
// cfgEdit) in front of them, torn down when the test ends.
func start(t testing.TB, n int, simEdit func(*sim.Options), cfgEdit func(*config.Config)) *gw {
	t.Helper()
	sims, urls := startSims(t, n, simEdit)
	g := startWith(t, urls, cfgEdit)
	g.sims = sims
	return g
}

// startSims runs n zero-latency simulators (edited by simEdit), closed when
// the test ends, and returns them with their URLs.
func startSims(t testing.TB, n int, simEdit func(*sim.Options)) ([]*sim.Server, []string) {
	t.Helper()
	so := sim.DefaultOptions()
	so.Engine.Latency.Zero = true
	if simEdit != nil {
		simEdit(&so)
	}
	sims, err := sim.StartN(n, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range sims {
			s.Close()
		}
	})
	urls := make([]string, n)
	for i, s := range sims {
		urls[i] = s.URL()
	}
	return sims, urls
}

// testFasthttpBodies starts gateways that leave reading bodies to fasthttp
// (Options.fasthttpBodies), for benchmarks that compare; tests leave it
// false.
var testFasthttpBodies bool

// startWith runs a gateway in front of engines at urls, replicas r0, r1, …
func startWith(t testing.TB, urls []string, cfgEdit func(*config.Config)) *gw {
	t.Helper()
	return startOpts(t, urls, cfgEdit, nil)
}

// startOpts is startWith with the Server's options edited by optsEdit.
func startOpts(t testing.TB, urls []string, cfgEdit func(*config.Config), optsEdit func(*Options)) *gw {
	t.Helper()
	return startFleet(t, urls, cfgEdit, optsEdit, nil)
}

// startFleet is startOpts with the fleet's options edited by fleetEdit.
func startFleet(t testing.TB, urls []string, cfgEdit func(*config.Config), optsEdit func(*Options), fleetEdit func(*fleet.Options)) *gw {
	t.Helper()
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Models = []config.Model{config.NewModel(model, "sim")}
	cfg.Health.Interval = 100 * time.Millisecond
	cfg.Health.Timeout = 100 * time.Millisecond
	cfg.Retry.Backoff = time.Millisecond
	cfg.Routing.Seed = 1
	cfg.Routing.EstimateDeadline = time.Second // a replica that missed it would be priced without its cache
	for i, u := range urls {
		cfg.Replicas = append(cfg.Replicas, config.NewReplica("r"+strconv.Itoa(i), u, model))
	}
	if cfgEdit != nil {
		cfgEdit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	g := &gw{t: t, cfg: cfg, logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(g.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	scraper := scrape.New(scrape.Options{})
	t.Cleanup(scraper.Close)
	fo := fleet.Options{Prober: health.NewProber(), Scraper: scraper, Resolver: net.DefaultResolver, Logger: log}
	if fleetEdit != nil {
		fleetEdit(&fo)
	}
	g.fl, err = fleet.Start(cfg, fo)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Config: cfg, Fleet: g.fl, Logger: log, fasthttpBodies: testFasthttpBodies}
	if optsEdit != nil {
		optsEdit(&opts)
	}
	g.fe = New(opts)
	ln, err := net.Listen("tcp", cfg.Server.Listen)
	if err != nil {
		t.Fatal(err)
	}
	g.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- g.fe.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		g.fe.Shutdown(ctx)
		<-served
		g.fl.Stop()
	})
	return g
}

func (g *gw) url(path string) string { return "http://" + g.addr + path }

// client is a plain HTTP client without connection reuse, so that tests
// leave no idle connections behind.
func client() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

func (g *gw) post(path, body string, hdr ...string) (*http.Response, string) {
	g.t.Helper()
	return g.do("POST", path, body, append([]string{"Content-Type", "application/json"}, hdr...)...)
}

// do sends a request of any method, with headers hdr (name, value, ...).
func (g *gw) do(method, path, body string, hdr ...string) (*http.Response, string) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.url(path), strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := client().Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		g.t.Fatal(err)
	}
	return resp, string(b)
}

func (g *gw) engineStats(i int) engine.Stats {
	var st engine.Stats
	g.sims[i].Inspect(func(e *engine.Engine) { st = e.Stats() })
	return st
}

// waitFor polls cond until it holds or within passes.
func waitFor(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func chat(content string, maxTokens int, stream bool) string {
	s := `{"model":"sim","messages":[{"role":"user","content":` + strconv.Quote(content) + `}],"max_tokens":` + strconv.Itoa(maxTokens)
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return s + "}"
}
