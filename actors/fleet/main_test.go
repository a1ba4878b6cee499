package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/config"
)

// TestMain fails the package when a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitFor polls cond every millisecond until it holds, failing the test if
// it does not within 5s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// clock is a controllable clock for ejection times.
type clock struct{ ns atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// fakeProber answers probes from per-URL state set by the test: healthy
// unless marked down. It records each probed URL on a buffered channel
// (dropping records when full, so a prober never blocks on it).
type fakeProber struct {
	mu    sync.Mutex
	down  map[string]bool
	cards map[string][]byte
	calls chan string
}

func newFakeProber() *fakeProber {
	return &fakeProber{down: make(map[string]bool), calls: make(chan string, 4096)}
}

var errRefused = errors.New("connection refused")

func (p *fakeProber) Probe(ctx context.Context, url string, cards bool) (map[string][]byte, error) {
	select {
	case p.calls <- url:
	default:
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down[url] {
		return nil, errRefused
	}
	if cards && p.cards != nil {
		return p.cards, nil
	}
	return nil, nil
}

func (p *fakeProber) setDown(url string, down bool) {
	p.mu.Lock()
	p.down[url] = down
	p.mu.Unlock()
}

// fakeResolver answers lookups from state set by the test and records every
// lookup on a buffered channel.
type fakeResolver struct {
	mu    sync.Mutex
	addrs []string
	err   error
	calls chan string
}

func newFakeResolver(addrs ...string) *fakeResolver {
	return &fakeResolver{addrs: addrs, calls: make(chan string, 4096)}
}

func (r *fakeResolver) LookupHost(ctx context.Context, host string) ([]string, error) {
	select {
	case r.calls <- host:
	default:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return append([]string(nil), r.addrs...), nil
}

func (r *fakeResolver) set(err error, addrs ...string) {
	r.mu.Lock()
	r.addrs, r.err = addrs, err
	r.mu.Unlock()
}

// lookups waits for n more lookups.
func (r *fakeResolver) lookups(t testing.TB, n int) {
	t.Helper()
	for range n {
		select {
		case <-r.calls:
		case <-time.After(5 * time.Second):
			t.Fatal("no DNS lookup within 5s")
		}
	}
}

// testConfig returns a valid config with one model "m" (alias "sim") and n
// static replicas r0..r(n-1) serving it, edited by edit.
func testConfig(n int, edit func(*config.Config)) *config.Config {
	c := config.Default()
	c.Models = []config.Model{{Name: "m", Aliases: []string{"sim"}, BlockSize: 16}}
	for i := range n {
		c.Replicas = append(c.Replicas, config.Replica{
			ID: fmt.Sprint("r", i), URL: fmt.Sprintf("http://10.0.0.%d:8000", i+1),
			Models: []string{"m"}, MaxConcurrency: 1024,
		})
	}
	c.Routing.Seed = 1
	c.Health.Interval = time.Hour // probes matter only where a test says so
	c.Health.Timeout = time.Second
	if edit != nil {
		edit(c)
	}
	return c
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// start starts a fleet, stopped at cleanup.
func start(t testing.TB, cfg *config.Config, opts Options) *Fleet {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f, err := Start(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// pick picks with a 5s deadline and fails the test on error.
func pick(t testing.TB, f *Fleet, exclude ...string) Decision {
	t.Helper()
	d, err := f.Pick(PickRequest{Model: "m", Exclude: exclude, Deadline: time.Now().Add(5 * time.Second)})
	if err != nil {
		t.Fatalf("pick: %v", err)
	}
	return d
}

// settle waits until every replica actor has processed what was sent to it
// before (the RequestDone messages of Done).
func settle(t testing.TB, f *Fleet) {
	t.Helper()
	for _, m := range f.view.Load().order {
		if err := f.sys.Root.RequestFuture(m.pid, &actor.Touch{}, 5*time.Second).Wait(); err != nil {
			t.Fatalf("settle: %v", err)
		}
	}
}

// others returns every replica id of f but id.
func others(f *Fleet, id string) []string {
	var out []string
	for _, s := range f.Replicas() {
		if s.ID != id {
			out = append(out, s.ID)
		}
	}
	return out
}
