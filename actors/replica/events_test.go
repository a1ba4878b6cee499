package replica

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// exclusive refuses a subscription while an earlier one is open, as
	// a bound endpoint refuses a second listener; refused counts them.
	exclusive bool
	open      *fakeSub
	refused   int
	slowClose time.Duration // how long a subscription takes to close
}

func (f *fakeEvents) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

type fakeSub struct {
	from             uint64 // EventStream.From
	slowClose        time.Duration
	endpoint, replay string
	bind             bool
	engine           kvevent.Engine
	// onBatch delivers a batch with the next sequence number, onSeq with
	// the one given.
	onBatch func(*kvevent.Batch)
	onSeq   func(seq uint64, b *kvevent.Batch)
	onGap   func(restart bool)

	mu     sync.Mutex
	closed bool
	seq    uint64 // the next sequence number onBatch gives
}

func (f *fakeEvents) Subscribe(es EventStream, onBatch func(uint64, *kvevent.Batch), onGap func(bool)) (io.Closer, error) {
	f.mu.Lock()
	err := f.err
	if f.exclusive && f.open != nil && !f.open.isClosed() {
		f.refused++
		err = errors.New("address already in use")
	}
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s := &fakeSub{from: es.From, slowClose: f.slowClose, endpoint: es.Endpoint, replay: es.Replay, bind: es.Bind, engine: es.Engine, onSeq: onBatch, onGap: onGap}
	s.onBatch = func(b *kvevent.Batch) {
		s.mu.Lock()
		seq := s.seq
		s.seq++
		s.mu.Unlock()
		onBatch(seq, b)
	}
	f.mu.Lock()
	f.open = s
	f.mu.Unlock()
	f.subs <- s
	return s, nil
}

func (s *fakeSub) Close() error {
	time.Sleep(s.slowClose)
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
	predict := func() int { return h.predict(t, pid, q) }
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

// eventFixture is a third-party-shaped batch from model/kvevent/testdata
// (scripts/gen-kvevent-llmd-fixtures.py), with what the gateway must make
// of it.
type eventFixture struct {
	Name    string         `json:"name"`
	Engine  kvevent.Engine `json:"engine"`
	Hex     string         `json:"hex"`
	Gateway struct {
		Model     string `json:"model"`
		BlockSize int    `json:"block_size"`
		VocabSize int    `json:"vocab_size"`
	} `json:"gateway"`
	Prompts []struct {
		TokenIDs     []uint32 `json:"token_ids"`
		CachedBlocks int      `json:"cached_blocks"`
	} `json:"prompts"`
	Unmapped uint64 `json:"unmapped"`
	Warning  string `json:"warning"`
}

// TestEventFixtures feeds each batch llm-d's inference simulator would
// publish (legacy arrays with zero parents, maps, block_size unset, token
// ids of another tokenizer, another block size) through the real decoder
// and a replica actor configured as the fixture's gateway, and checks that
// it ends in correct indexing (the gateway's prompts predicted cached) or
// in the named warning, with nothing indexed, and no other event warning.
//
// The sglang_* fixtures (scripts/gen-kvevent-sglang-fixtures.py) do the
// same for SGLang's encoder, decoded with SGLang's schema as a replica with
// engine_type sglang does.
func TestEventFixtures(t *testing.T) {
	llmd, err := filepath.Glob("../../model/kvevent/testdata/llmd_sim_*.json")
	if err != nil || len(llmd) < 5 {
		t.Fatalf("fixtures %v (err %v); run scripts/gen-kvevent-llmd-fixtures.py", llmd, err)
	}
	sgl, err := filepath.Glob("../../model/kvevent/testdata/sglang_*.json")
	if err != nil || len(sgl) < 8 {
		t.Fatalf("fixtures %v (err %v); run scripts/gen-kvevent-sglang-fixtures.py", sgl, err)
	}
	for _, p := range append(llmd, sgl...) {
		var f eventFixture
		data, err := os.ReadFile(p)
		if err == nil {
			err = json.Unmarshal(data, &f)
		}
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if f.Gateway.Model == "" {
			continue // a codec-only fixture
		}
		t.Run(f.Name, func(t *testing.T) {
			raw, err := hex.DecodeString(f.Hex)
			if err != nil {
				t.Fatal(err)
			}
			b, err := kvevent.Decode(raw, f.Engine)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			g := f.Gateway
			h := newHarness(t)
			src := &fakeEvents{subs: make(chan *fakeSub, 1)}
			hd := NewHandle("r0", "http://10.0.0.1:8000", []string{g.Model}, NewCounters(0, 0))
			hd.SetEvents(EventStream{Endpoint: "tcp://10.0.0.1:5557", Engine: f.Engine})
			pid := h.spawn(hd, Config{Health: testHealth(), Events: src,
				EventChecks: map[string]estimate.EventChecks{g.Model: {BlockSize: g.BlockSize, VocabSize: g.VocabSize}}})
			src.next(t).onBatch(b)
			h.sync(t, pid)
			for i, pr := range f.Prompts {
				var hs prefix.Hasher
				q := estimate.Query{Blocks: hs.Chain(nil, prefix.Root(g.Model, "", ""), pr.TokenIDs, g.BlockSize),
					PromptTokens: len(pr.TokenIDs), BlockSize: g.BlockSize}
				gt := NewGather(q, 1)
				h.send(pid, &Estimate{Gather: gt, Slot: 0})
				h.sync(t, pid)
				if r, ok := gt.Reply(0); !ok || r.CachedTokens != pr.CachedBlocks*g.BlockSize {
					t.Errorf("prompt %d: predicted %d cached tokens (%v), want %d", i, r.CachedTokens, ok, pr.CachedBlocks*g.BlockSize)
				}
			}
			s := hd.Snapshot()
			if got := s.EventCounts.Unmapped.Load(); got != f.Unmapped {
				t.Errorf("%d blocks unmapped, want %d", got, f.Unmapped)
			}
			var codes []WarningCode
			for _, w := range s.Warnings.List() {
				codes = append(codes, w.Code)
			}
			if want := []WarningCode{WarningCode(f.Warning)}; f.Warning == "" && len(codes) != 0 ||
				f.Warning != "" && !slices.Equal(codes, want) {
				t.Errorf("warnings %v, want %q", codes, f.Warning)
			}
		})
	}
}

// logBuffer collects an actor's log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// orphans is a run of n stored blocks of bs tokens whose parent the gateway
// never saw: none can be placed.
func orphans(first uint64, n, bs int) *kvevent.BlockStored {
	parent := first - 1
	e := &kvevent.BlockStored{ParentBlockHash: &parent, TokenIDs: make([]uint32, n*bs), BlockSize: bs, Medium: "GPU"}
	for i := range n {
		e.BlockHashes = append(e.BlockHashes, first+uint64(i))
	}
	return e
}

// roots is a run of n blocks of bs tokens starting a chain: all are placed.
func roots(first uint64, n, bs int) *kvevent.BlockStored {
	e := orphans(first, n, bs)
	e.ParentBlockHash = nil
	for i := range e.TokenIDs {
		e.TokenIDs[i] = uint32(first) + uint32(i)
	}
	return e
}

// TestEventWarningsWindows: most blocks unmapped is judged over windows of
// eventsWindow stored blocks, logged once with its likely causes, and
// cleared by a window in which most are placed; another block size is
// raised at its first block and cleared by a window without one.
func TestEventWarningsWindows(t *testing.T) {
	const bs = 4
	h := newHarness(t)
	var logs logBuffer
	src := &fakeEvents{subs: make(chan *fakeSub, 1)}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetEvents(EventStream{Endpoint: "tcp://10.0.0.1:5557"})
	pid := h.spawn(hd, Config{Health: testHealth(), Events: src, Logger: logs.logger(),
		EventChecks: map[string]estimate.EventChecks{"m": {BlockSize: bs, VocabSize: 1 << 20}}})
	sub := src.next(t)
	w := hd.Snapshot().Warnings
	send := func(evs ...kvevent.Event) {
		t.Helper()
		sub.onBatch(&kvevent.Batch{Events: evs})
		h.sync(t, pid)
	}

	// 40 orphans and 20 placed: 60 blocks, short of a window.
	send(orphans(1000, 40, bs), roots(2000, 20, bs))
	if w.Active(WarnEventsUnmapped) {
		t.Fatal("raised before a window of blocks")
	}
	send(orphans(3000, 8, bs)) // 68 blocks, 48 unmapped
	if !w.Active(WarnEventsUnmapped) {
		t.Fatalf("48 of 68 blocks unmapped, not raised: %v", w.List())
	}
	send(orphans(4000, 64, bs))
	if n := strings.Count(logs.String(), "warning=kv_events_unmapped"); n != 1 {
		t.Fatalf("%d log lines for the unmapped warning, want 1:\n%s", n, logs.String())
	}
	if l := logs.String(); !strings.Contains(l, "48 of the last 68 blocks") || !strings.Contains(l, "kv_events_replay") {
		t.Fatalf("the log line gives no numbers or causes:\n%s", l)
	}
	// A window where half or fewer are unmapped clears it.
	send(orphans(5000, 32, bs), roots(6000, 32, bs))
	if w.Active(WarnEventsUnmapped) {
		t.Fatal("32 of 64 blocks unmapped: still raised")
	}

	// Blocks of another size: raised at once, not as unmapped, and
	// cleared by a window of blocks without any.
	send(roots(7000, 2, 2*bs))
	if !w.Active(WarnEventsBlockSize) {
		t.Fatal("blocks of 8 tokens for a block_size of 4: not raised")
	}
	if l := w.List(); len(l) != 1 || !strings.Contains(l[0].Message, "blocks of 8 tokens") ||
		!strings.Contains(l[0].Message, "block_size of m is 4") {
		t.Fatalf("warnings %+v", l)
	}
	send(roots(8000, 64, bs)) // ends the window that held them
	if !w.Active(WarnEventsBlockSize) {
		t.Fatal("cleared by the window that held blocks of another size")
	}
	send(roots(8100, 64, bs))
	if w.Active(WarnEventsBlockSize) || w.Active(WarnEventsUnmapped) {
		t.Fatalf("a window of blocks of the right size: %v", w.List())
	}
	if !strings.Contains(logs.String(), "replica warning cleared") {
		t.Fatalf("no line says the warnings ended:\n%s", logs.String())
	}

	// Token ids past the vocabulary: raised at once, cleared likewise.
	foreign := roots(9000, 1, bs)
	foreign.TokenIDs[1] = 1 << 20
	send(foreign)
	if l := w.List(); len(l) != 1 || l[0].Code != WarnEventsForeignTokens || !strings.Contains(l[0].Message, "token id 1048576") {
		t.Fatalf("warnings %+v", l)
	}
	send(roots(10000, 64, bs))
	send(roots(10100, 64, bs))
	if w.Active(WarnEventsForeignTokens) {
		t.Fatal("a window without foreign token ids: still raised")
	}
}

// TestEventsSilentWarning: a subscription that delivers nothing is not a
// warning while the engine serves nothing, becomes one naming the bind rule
// once the engine completes a request, and ends with the first batch.
func TestEventsSilentWarning(t *testing.T) {
	h := newHarness(t)
	var logs logBuffer
	src := &fakeEvents{subs: make(chan *fakeSub, 1)}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetEvents(EventStream{Endpoint: "tcp://127.0.0.1:5557", Bind: true})
	pid := h.spawn(hd, Config{Health: testHealth(), Events: src, Logger: logs.logger(), EventsQuiet: time.Millisecond})
	sub := src.next(t)
	w := hd.Snapshot().Warnings
	waitFor(t, "quiet noted", func() bool { return strings.Contains(logs.String(), "nor expected") })
	h.sync(t, pid)
	if w.Active(WarnEventsSilent) {
		t.Fatal("raised for an engine that served nothing")
	}
	h.send(pid, &RequestDone{Outcome: OutcomeOK})
	h.sync(t, pid)
	l := w.List()
	if len(l) != 1 || l[0].Code != WarnEventsSilent || !strings.Contains(l[0].Message, "check kv_events_bind") ||
		!strings.Contains(l[0].Message, "the gateway binds it (kv_events_bind true)") {
		t.Fatalf("warnings %+v", l)
	}
	if s := hd.Snapshot(); len(s.Warnings.List()) != 1 {
		t.Fatal("the published snapshot does not carry the warning")
	}
	sub.onBatch(&kvevent.Batch{})
	h.sync(t, pid)
	if w.Active(WarnEventsSilent) {
		t.Fatal("still raised after a batch arrived")
	}
}
