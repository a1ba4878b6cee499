package extproc

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/extproc/envoytest"
	"github.com/inferrail/inferrail/transport/frontend"
	"github.com/inferrail/inferrail/transport/health"
	"github.com/inferrail/inferrail/transport/scrape"
	"github.com/inferrail/inferrail/transport/telemetry"
)

// TestMain fails the package on leaked goroutines.
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

// picker is an endpoint picker in front of in-process simulators, reached
// over real gRPC on loopback, for one test.
type picker struct {
	t    testing.TB
	sims []*sim.Server
	eps  []string // the simulators' endpoints, replica ri at eps[i]
	cfg  *config.Config
	fl   *fleet.Fleet
	met  *telemetry.Registry
	srv  *Server
	conn *grpc.ClientConn
	logs *logBuffer // the picker's log, at info level and above
}

// logBuffer is a log destination safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// simTokenizer prepares prompts as the simulator tokenizes them
// (builtin:sim), so the engine's usage agrees with the picker's count.
type simTokenizer struct{}

func (simTokenizer) Prepare(model string, chat bool, body []byte, now time.Time) (frontend.Prompt, bool) {
	p := prompt.Preparer{Model: model, Sim: true, BlockSize: 16}
	var pr prompt.Prompt
	var err error
	if chat {
		pr, err = p.Chat(body, now)
	} else {
		pr, err = p.Completion(body)
	}
	if err != nil {
		return frontend.Prompt{}, false
	}
	return frontend.Prompt{Tokens: len(pr.IDs), Blocks: pr.Blocks, BlockSize: 16}, true
}

// startPicker runs n zero-latency simulators and a picker (its config
// edited by cfgEdit) in front of them, torn down when the test ends; it
// returns once every replica is healthy.
func startPicker(t testing.TB, n int, cfgEdit func(*config.Config)) *picker {
	t.Helper()
	return startFleet(t, n, cfgEdit, nil)
}

// startFleet is startPicker with the fleet's options edited by fleetEdit.
func startFleet(t testing.TB, n int, cfgEdit func(*config.Config), fleetEdit func(*fleet.Options)) *picker {
	t.Helper()
	so := sim.DefaultOptions()
	so.Engine.Latency.Zero = true
	so.Engine.MaxModelLen = 65536 // room for a 220 KB prompt
	sims, err := sim.StartN(n, so)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range sims {
			s.Close()
		}
	})
	p := &picker{t: t, sims: sims, logs: &logBuffer{}}
	cfg := config.Default()
	cfg.Models = []config.Model{config.NewModel(model, "sim")}
	cfg.Health.Interval = 100 * time.Millisecond
	cfg.Health.Timeout = 100 * time.Millisecond
	cfg.Routing.Seed = 1
	cfg.Routing.EstimateDeadline = time.Second // a replica that missed it would be priced without its cache
	for i, s := range sims {
		cfg.Replicas = append(cfg.Replicas, config.NewReplica("r"+strconv.Itoa(i), s.URL(), model))
		p.eps = append(p.eps, Endpoint(s.URL()))
	}
	if cfgEdit != nil {
		cfgEdit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p.cfg = cfg
	scraper := scrape.New(scrape.Options{})
	t.Cleanup(scraper.Close)
	log := slog.New(slog.NewTextHandler(p.logs, nil))
	fo := fleet.Options{Prober: health.NewProber(), Scraper: scraper, Resolver: net.DefaultResolver, Logger: log}
	if fleetEdit != nil {
		fleetEdit(&fo)
	}
	p.fl, err = fleet.Start(cfg, fo)
	if err != nil {
		t.Fatal(err)
	}
	p.met = telemetry.New(p.fl)
	p.srv = New(Options{Config: cfg, Fleet: p.fl, Logger: log, Metrics: p.met, Tokenizer: simTokenizer{}})
	gs := grpc.NewServer()
	p.srv.Register(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(ln) }()
	p.conn, err = grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.conn.Close()
		p.srv.Shutdown()
		gs.Stop()
		<-served
		p.fl.Stop()
	})
	waitFor(t, "every replica healthy", 5*time.Second, func() bool {
		for _, s := range p.fl.Replicas() {
			if !s.Healthy {
				return false
			}
		}
		return true
	})
	return p
}

// exchange opens one Process stream, closed when the test ends.
func (p *picker) exchange() *envoytest.Exchange {
	p.t.Helper()
	x, err := envoytest.Start(context.Background(), p.conn)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(x.Close)
	return x
}

// route runs the request phase of r on a new stream.
func (p *picker) route(r envoytest.Request) (*envoytest.Exchange, *envoytest.Routed) {
	p.t.Helper()
	x := p.exchange()
	routed, err := x.Request(r)
	if err != nil {
		p.t.Fatal(err)
	}
	return x, routed
}

// replica is the id of the replica at endpoint ep.
func (p *picker) replica(ep string) string {
	for i, e := range p.eps {
		if e == ep {
			return "r" + strconv.Itoa(i)
		}
	}
	p.t.Fatalf("no replica at %s", ep)
	return ""
}

func (p *picker) inFlight(id string) int {
	s, ok := p.fl.Snapshot(id)
	if !ok {
		p.t.Fatalf("no replica %s", id)
	}
	return s.Counters.InFlight()
}

func (p *picker) pending(id string) int {
	s, _ := p.fl.Snapshot(id)
	return s.Counters.Pending()
}

// forward plays Envoy's forwarding of a routed request to its
// endpoints[fallback], and returns the status and the body as relayed.
func (p *picker) forward(x *envoytest.Exchange, r envoytest.Request, routed *envoytest.Routed, fallback int) (int, map[string]string, string) {
	p.t.Helper()
	var body strings.Builder
	status, hdr, err := x.Forward(context.Background(), client(), r, routed, fallback, func(b []byte) { body.Write(b) })
	if err != nil {
		p.t.Fatal(err)
	}
	return status, hdr, body.String()
}

// client is a plain HTTP client without connection reuse, so that tests
// leave no idle connections behind.
func client() *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
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

func chat(content string, maxTokens int, stream bool) []byte {
	s := `{"model":"sim","messages":[{"role":"user","content":` + strconv.Quote(content) + `}],"max_tokens":` + strconv.Itoa(maxTokens)
	if stream {
		s += `,"stream":true,"stream_options":{"include_usage":true}`
	}
	return []byte(s + "}")
}

func post(body []byte, chunk int) envoytest.Request {
	return envoytest.Request{Method: "POST", Path: "/v1/chat/completions", Body: body, ChunkSize: chunk,
		Headers: map[string]string{"content-type": "application/json"}}
}
