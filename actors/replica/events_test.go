package replica

import (
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/model/prefix"
)

// fakeEvents is an EventSource whose subscriptions the test drives: each
// Subscribe hands its callbacks over on subs.
type fakeEvents struct {
	subs chan *fakeSub

	mu  sync.Mutex
	err error // returned by Subscribe when set
}

func (f *fakeEvents) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

type fakeSub struct {
	endpoint, replay string
	bind             bool
	onBatch          func(*kvevent.Batch)
	onGap            func(restart bool)

	mu     sync.Mutex
	closed bool
}

func (f *fakeEvents) Subscribe(endpoint, replay string, bind bool, onBatch func(*kvevent.Batch), onGap func(bool)) (io.Closer, error) {
	f.mu.Lock()
	err := f.err
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := &fakeSub{endpoint: endpoint, replay: replay, bind: bind, onBatch: onBatch, onGap: onGap}
	f.subs <- s
	return s, nil
}

func (s *fakeSub) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *fakeSub) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

func (f *fakeEvents) next(t testing.TB) *fakeSub {
	t.Helper()
	select {
	case s := <-f.subs:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no subscription within 5s")
		return nil
	}
}

// TestEventsDrivePrediction feeds an actor its engine's events: a stored
// prompt is predicted cached, an evicted one no longer is, a restart of the
// engine clears the index, and a lost batch is counted without clearing.
func TestEventsDrivePrediction(t *testing.T) {
	h := newHarness(t)
	src := &fakeEvents{subs: make(chan *fakeSub, 4)}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetEvents(EventStream{Endpoint: "tcp://10.0.0.1:5557", Replay: "tcp://10.0.0.1:5558"})
	pid := h.spawn(hd, Config{Health: testHealth(), Events: src})
	sub := src.next(t)
	if sub.endpoint != "tcp://10.0.0.1:5557" || sub.replay != "tcp://10.0.0.1:5558" || sub.bind {
		t.Fatalf("subscribed to %q replay %q bind %v", sub.endpoint, sub.replay, sub.bind)
	}

	// A prompt of four blocks of 4 tokens and one more token, hashed as the
	// gateway hashes a prompt for model m.
	const bs = 4
	tokens := make([]uint32, 4*bs+1)
	for i := range tokens {
		tokens[i] = uint32(100 + i)
	}
	var hs prefix.Hasher
	q := estimate.Query{Blocks: hs.Chain(nil, prefix.Root("m", "", ""), tokens, bs), PromptTokens: len(tokens), BlockSize: bs}
	predict := func() int {
		g := NewGather(q, 1)
		h.send(pid, &Estimate{Gather: g, Slot: 0})
		h.sync(t, pid)
		r, ok := g.Reply(0)
		if !ok {
			t.Fatal("no estimate")
		}
		return r.CachedTokens
	}
	if got := predict(); got != 0 {
		t.Fatalf("predicted %d cached tokens before any event", got)
	}

	// The engine stores the four blocks under hashes of its own, in two
	// runs, the second naming the first as its parent.
	engine := []uint64{0xa1, 0xa2, 0xa3, 0xa4}
	parent := engine[1]
	sub.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: engine[:2], TokenIDs: tokens[:2*bs], BlockSize: bs, Medium: "GPU"},
	}})
	sub.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: engine[2:], ParentBlockHash: &parent, TokenIDs: tokens[2*bs : 4*bs], BlockSize: bs, Medium: "GPU"},
	}})
	if got := predict(); got != 4*bs {
		t.Fatalf("after the engine stored the prompt, predicted %d cached tokens, want %d", got, 4*bs)
	}
	if blocks, _, _ := hd.Shadow().Index(); blocks != 4 {
		t.Fatalf("published index holds %d blocks, want 4", blocks)
	}

	// It evicts the last two, children first.
	sub.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockRemoved{BlockHashes: []uint64{engine[3], engine[2]}, Medium: "GPU"},
	}})
	if got := predict(); got != 2*bs {
		t.Fatalf("after the engine evicted two blocks, predicted %d cached tokens, want %d", got, 2*bs)
	}

	// A lost batch is counted; the index stays.
	sub.onGap(false)
	if got := predict(); got != 2*bs {
		t.Fatalf("a lost batch changed the prediction to %d", got)
	}

	// The engine restarted: nothing is cached any more.
	sub.onGap(true)
	if got := predict(); got != 0 {
		t.Fatalf("after the engine restarted, predicted %d cached tokens, want 0", got)
	}
	s := hd.Snapshot()
	c := s.EventCounts
	if c.Batches.Load() != 3 || c.Stored.Load() != 4 || c.Removed.Load() != 2 || c.Gaps.Load() != 2 {
		t.Fatalf("counted %d batches, %d stored, %d removed, %d gaps; want 3, 4, 2, 2",
			c.Batches.Load(), c.Stored.Load(), c.Removed.Load(), c.Gaps.Load())
	}
	if s.EngineRestarts != 1 || s.Shadow.Resets() != 1 {
		t.Fatalf("engine restarts %d, index resets %d; want 1 and 1", s.EngineRestarts, s.Shadow.Resets())
	}

	// After the restart the engine's hashes mean nothing: storing the
	// second run again, whose parent was lost with the restart, maps to
	// nothing.
	sub.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: engine[2:], ParentBlockHash: &parent, TokenIDs: tokens[2*bs : 4*bs], BlockSize: bs, Medium: "GPU"},
	}})
	if got := predict(); got != 0 {
		t.Fatalf("a run whose parent the restart took predicted %d cached tokens", got)
	}
	if got := c.Unmapped.Load(); got != 2 {
		t.Fatalf("%d unmapped blocks counted, want 2", got)
	}

	// A restarted actor subscribes again and drops what the old
	// subscription still delivers.
	h.send(pid, &crash{})
	sub2 := src.next(t)
	waitFor(t, "old subscription closed", sub.isClosed)
	sub.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: engine[:2], TokenIDs: tokens[:2*bs], BlockSize: bs, Medium: "GPU"},
	}})
	if got := predict(); got != 0 {
		t.Fatalf("a stopped subscription's batch predicted %d cached tokens", got)
	}
	sub2.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: engine[:2], TokenIDs: tokens[:2*bs], BlockSize: bs, Medium: "GPU"},
	}})
	if got := predict(); got != 2*bs {
		t.Fatalf("the new subscription's batch predicted %d cached tokens, want %d", got, 2*bs)
	}

	if err := h.sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "subscription closed with the actor", sub2.isClosed)
}

// TestEventsSubscribeFails: a stream that cannot be subscribed to leaves
// the replica routing on decisions alone, and is tried again until it can.
func TestEventsSubscribeFails(t *testing.T) {
	h := newHarness(t)
	src := &fakeEvents{subs: make(chan *fakeSub, 1), err: errors.New("address in use")}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetEvents(EventStream{Endpoint: "tcp://127.0.0.1:5557", Bind: true})
	pid := h.spawn(hd, Config{Health: testHealth(), Events: src})
	h.sync(t, pid)
	q := estimate.Query{Blocks: []prefix.Hash{prefix.Root("m", "", "")}, PromptTokens: 9, BlockSize: 4}
	h.send(pid, &Assign{Attempt: &Attempt{Blocks: q.Blocks, Seq: hd.Shadow().Next()}})
	g := NewGather(q, 1)
	h.send(pid, &Estimate{Gather: g, Slot: 0})
	h.sync(t, pid)
	if r, ok := g.Reply(0); !ok || r.CachedTokens != 4 {
		t.Fatalf("estimate %+v %v: decisions no longer recorded", r, ok)
	}
	src.setErr(nil) // the address is free again: the retry, a second later, subscribes
	if sub := src.next(t); sub.endpoint != "tcp://127.0.0.1:5557" || !sub.bind {
		t.Fatalf("retried subscription %+v", sub)
	}
}

// TestOneRestartCountedOnce: an engine restart that the KV event sequence
// reports and the metrics' counters then show too is one restart. The
// second notice does not clear what the new engine stored in between.
func TestOneRestartCountedOnce(t *testing.T) {
	h := newHarness(t)
	src := &fakeEvents{subs: make(chan *fakeSub, 1)}
	sc := &scriptScraper{results: make(chan scrapeResult)}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetEvents(EventStream{Endpoint: "tcp://10.0.0.1:5557"})
	pid := h.spawn(hd, Config{Health: testHealth(), Events: src, Scraper: sc,
		Load: config.LoadSignals{ScrapeInterval: time.Millisecond, ScrapeTimeout: time.Second, MaxAge: time.Second}})
	sub := src.next(t)
	report := func(queries float64) load.Report {
		return load.Report{Engine: load.EngineVLLM, PrefixQueries: queries, PrefixHits: queries / 2, Fields: load.FieldPrefix}
	}
	sc.next(t, report(1000), nil)

	const bs = 4
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	var hs prefix.Hasher
	q := estimate.Query{Blocks: hs.Chain(nil, prefix.Root("m", "", ""), tokens, bs), PromptTokens: len(tokens), BlockSize: bs}
	predict := func() int {
		g := NewGather(q, 1)
		h.send(pid, &Estimate{Gather: g, Slot: 0})
		h.sync(t, pid)
		r, _ := g.Reply(0)
		return r.CachedTokens
	}
	// The engine restarts; its event stream says so first, then the new
	// engine stores the prompt, then a scrape sees the counters reset.
	sub.onGap(true)
	sub.onBatch(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: tokens[:2*bs], BlockSize: bs, Medium: "GPU"},
	}})
	sc.next(t, report(10), nil)
	sc.next(t, report(20), nil) // the actor has taken the one before
	h.sync(t, pid)
	if s := hd.Snapshot(); s.EngineRestarts != 1 || s.Shadow.Resets() != 1 {
		t.Fatalf("one restart noticed twice: %d restarts, %d index resets", s.EngineRestarts, s.Shadow.Resets())
	}
	if got := predict(); got != 2*bs {
		t.Fatalf("the second notice cleared what the new engine stored: predicted %d, want %d", got, 2*bs)
	}
}
