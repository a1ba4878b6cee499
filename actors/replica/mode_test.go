package replica

import (
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/model/prefix"
)

// exactRig is a replica actor with a KV event stream, a clock the test
// moves and a prompt of four blocks of 4 tokens.
type exactRig struct {
	t   *testing.T
	h   *harness
	hd  *Handle
	pid *actor.PID
	sub *fakeSub
	clk *clock
	q   estimate.Query
	// toks are the prompt's tokens; engine its blocks' engine hashes.
	toks   []uint32
	engine []uint64
}

const rigBS = 4

func newExactRig(t *testing.T, cfg Config) *exactRig {
	r := &exactRig{t: t, h: newHarness(t), clk: newClock()}
	src := &fakeEvents{subs: make(chan *fakeSub, 1)}
	r.hd = NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	r.hd.SetEvents(EventStream{Endpoint: "tcp://10.0.0.1:5557", Replay: "tcp://10.0.0.1:5558"})
	cfg.Health, cfg.Events, cfg.Now = testHealth(), src, r.clk.Now
	r.pid = r.h.spawn(r.hd, cfg)
	r.sub = src.next(t)
	r.toks = make([]uint32, 4*rigBS+1)
	for i := range r.toks {
		r.toks[i] = uint32(100 + i)
	}
	var hs prefix.Hasher
	r.q = estimate.Query{Blocks: hs.Chain(nil, prefix.Root("m", "", ""), r.toks, rigBS), PromptTokens: len(r.toks), BlockSize: rigBS}
	r.engine = []uint64{0xa1, 0xa2, 0xa3, 0xa4}
	return r
}

// predict is the replica's prediction for the prompt, in blocks.
func (r *exactRig) predict() int {
	r.t.Helper()
	g := NewGather(r.q, 1)
	r.h.send(r.pid, &Estimate{Gather: g, Slot: 0})
	r.h.sync(r.t, r.pid)
	rep, ok := g.Reply(0)
	if !ok {
		r.t.Fatal("no estimate")
	}
	return rep.CachedTokens / rigBS
}

// route assigns the prompt's first n blocks to the replica, as a decision.
func (r *exactRig) route(n int) *Attempt {
	at := &Attempt{Blocks: r.q.Blocks[:n], Seq: r.hd.Shadow().Next()}
	r.h.send(r.pid, &Assign{Attempt: at})
	r.h.sync(r.t, r.pid)
	return at
}

func (r *exactRig) done(at *Attempt) {
	r.h.send(r.pid, &RequestDone{Outcome: OutcomeOK, Attempt: at})
	r.h.sync(r.t, r.pid)
}

// stored has the engine store the prompt's blocks [from, to) in batch seq.
func (r *exactRig) stored(seq uint64, from, to int) {
	e := &kvevent.BlockStored{BlockHashes: r.engine[from:to], TokenIDs: r.toks[from*rigBS : to*rigBS], BlockSize: rigBS, Medium: "GPU"}
	if from > 0 {
		p := r.engine[from-1]
		e.ParentBlockHash = &p
	}
	r.sub.onSeq(seq, &kvevent.Batch{Events: []kvevent.Event{e}})
	r.h.sync(r.t, r.pid)
}

// empty delivers an empty batch seq (a step with no cache change).
func (r *exactRig) empty(seq uint64) {
	r.sub.onSeq(seq, &kvevent.Batch{})
	r.h.sync(r.t, r.pid)
}

func (r *exactRig) mode() IndexMode { return r.hd.Snapshot().IndexMode }

// A replica turns exact with its engine's first batch. In exact mode a
// decision's blocks are predicted at once; those the engine's event then
// confirms stay, and those it never stores go when the TTL runs out.
func TestSpeculativeEntries(t *testing.T) {
	r := newExactRig(t, Config{SpeculativeTTL: 2 * time.Second})
	if r.mode() != IndexApproximate {
		t.Fatalf("mode %s before any batch", r.mode())
	}
	r.empty(0)
	if r.mode() != IndexExact {
		t.Fatalf("mode %s after the engine's first batch", r.mode())
	}
	r.route(4)
	if got := r.predict(); got != 4 {
		t.Fatalf("a decision just made is predicted %d blocks, want 4", got)
	}
	if n := r.hd.Shadow().Speculative(); n != 4 {
		t.Fatalf("%d speculative blocks published, want 4", n)
	}
	r.clk.Advance(500 * time.Millisecond)
	r.stored(1, 0, 2) // the engine computed the first two
	r.clk.Advance(1600 * time.Millisecond)
	if got := r.predict(); got != 2 {
		t.Fatalf("past the TTL: predicted %d blocks, want the 2 the engine confirmed", got)
	}
	if n := r.hd.Shadow().Speculative(); n != 0 {
		t.Fatalf("%d speculative blocks left", n)
	}
}

// Without a TTL, a replica in exact mode predicts from the events alone.
func TestNoSpeculation(t *testing.T) {
	r := newExactRig(t, Config{})
	r.empty(0)
	r.route(4)
	if got := r.predict(); got != 0 {
		t.Fatalf("a decision counted %d blocks with speculative_ttl 0", got)
	}
	r.stored(1, 0, 3)
	if got := r.predict(); got != 3 {
		t.Fatalf("after the event: %d blocks, want 3", got)
	}
}

// Events that stop while the engine serves: the replica falls back to the
// approximate index (counted, warned, shown), keeps what decisions put in
// it meanwhile, and is exact again at the first batch once the stream
// resumes without loss: the decisions its events did not confirm are
// speculative again, and the confirmed ones stay.
func TestFallbackOnSilence(t *testing.T) {
	r := newExactRig(t, Config{SpeculativeTTL: 2 * time.Second, MaxSilence: time.Second})
	r.empty(0)
	// A request whose blocks the events do not hold completes: the engine
	// must have stored them, and no batch has come since it was routed.
	at := r.route(4)
	r.clk.Advance(100 * time.Millisecond)
	r.done(at)
	r.clk.Advance(999 * time.Millisecond)
	r.predict()
	if r.mode() != IndexExact {
		t.Fatal("fell back before max_silence")
	}
	r.clk.Advance(time.Millisecond)
	if got := r.predict(); got != 4 || r.mode() != IndexApproximate {
		t.Fatalf("at max_silence: mode %s, predicted %d; want approximate, and the decision kept", r.mode(), got)
	}
	s := r.hd.Snapshot()
	if s.EventCounts.Fallbacks(FallbackSilence) != 1 || !s.Warnings.Active(WarnEventsInterrupted) {
		t.Fatalf("fallbacks %d, warning %v", s.EventCounts.Fallbacks(FallbackSilence), s.Warnings.List())
	}
	// Long after: nothing expired meanwhile.
	r.clk.Advance(time.Minute)
	if got := r.predict(); got != 4 {
		t.Fatalf("approximate mode dropped decisions: %d blocks", got)
	}
	// The stream resumes: the batches missed come, replayed, in order.
	r.stored(1, 0, 3)
	s = r.hd.Snapshot()
	if s.IndexMode != IndexExact || s.EventCounts.Resyncs() != 1 || s.Warnings.Active(WarnEventsInterrupted) {
		t.Fatalf("after resuming: mode %s, %d resyncs, warnings %v", s.IndexMode, s.EventCounts.Resyncs(), s.Warnings.List())
	}
	r.clk.Advance(2 * time.Second)
	if got := r.predict(); got != 3 {
		t.Fatalf("after resuming and a TTL: %d blocks, want the 3 the engine holds", got)
	}
	if seq, _, ok := s.EventCounts.LastBatch(); !ok || seq != 1 {
		t.Fatalf("last batch %d %v", seq, ok)
	}
}

// Quiet is not silence: an engine that needs to store nothing for a
// request (its blocks are held), or whose batch came after the request was
// routed, is not overdue however long it stays quiet.
func TestQuietIsNotSilence(t *testing.T) {
	r := newExactRig(t, Config{SpeculativeTTL: 2 * time.Second, MaxSilence: time.Second})
	r.empty(0)
	r.stored(1, 0, 4)
	r.done(r.route(4)) // a full hit
	at := r.route(3)
	r.stored(2, 0, 1) // some batch after it was routed
	r.done(at)
	r.clk.Advance(time.Hour)
	r.predict()
	if r.mode() != IndexExact {
		t.Fatalf("mode %s after a quiet hour", r.mode())
	}
}

// Batches lost that the replay cannot recover: the replica falls back and
// resets its mapping, and a later batch alone does not make it exact: a
// resync must show the events placing most of a window of stored blocks.
func TestFallbackOnGap(t *testing.T) {
	r := newExactRig(t, Config{SpeculativeTTL: 2 * time.Second})
	r.stored(0, 0, 2)
	r.sub.onGap(false)
	r.h.sync(t, r.pid)
	s := r.hd.Snapshot()
	if s.IndexMode != IndexApproximate || s.EventCounts.Fallbacks(FallbackGap) != 1 {
		t.Fatalf("after a gap: mode %s, %d gap fallbacks", s.IndexMode, s.EventCounts.Fallbacks(FallbackGap))
	}
	if got := r.predict(); got != 2 {
		t.Fatalf("the fallback dropped the index: %d blocks", got)
	}
	// The engine stores a child of blocks the reset mapping forgot: it
	// cannot be placed, and the replica stays approximate.
	r.stored(5, 2, 4)
	if r.mode() != IndexApproximate {
		t.Fatal("exact again after a batch whose blocks could not be placed")
	}
	// Then prompts from the root, enough to fill a window: exact.
	seq := uint64(6)
	for i := 0; i*4 < eventsWindow; i++ {
		toks := make([]uint32, 4*rigBS)
		for j := range toks {
			toks[j] = uint32(1000*i + j)
		}
		ev := &kvevent.BlockStored{BlockHashes: []uint64{uint64(1 << 20 * (i + 1)), uint64(1<<20*(i+1) + 1),
			uint64(1<<20*(i+1) + 2), uint64(1<<20*(i+1) + 3)}, TokenIDs: toks, BlockSize: rigBS, Medium: "GPU"}
		r.sub.onSeq(seq, &kvevent.Batch{Events: []kvevent.Event{ev}})
		seq++
	}
	r.h.sync(t, r.pid)
	if s := r.hd.Snapshot(); s.IndexMode != IndexExact || s.EventCounts.Resyncs() != 1 {
		t.Fatalf("after a window of placed blocks: mode %s, %d resyncs", s.IndexMode, s.EventCounts.Resyncs())
	}
	// The decision-fed blocks from before the loss stay: the reset mapping
	// cannot tell which the engine still holds.
	if got := r.predict(); got != 2 {
		t.Fatalf("after the resync: %d blocks, want the 2 kept", got)
	}
}

// A subscription whose first batch is not the engine's first missed the
// blocks stored before it: approximate until a resync, with the reason on
// no warning (nothing stopped).
func TestLateSubscriptionIsLossy(t *testing.T) {
	r := newExactRig(t, Config{SpeculativeTTL: 2 * time.Second})
	r.stored(7, 0, 2)
	s := r.hd.Snapshot()
	if s.IndexMode != IndexApproximate || len(s.Warnings.List()) != 0 {
		t.Fatalf("mode %s, warnings %v", s.IndexMode, s.Warnings.List())
	}
}

// The interruption's warning names its cause.
func TestFallbackWarningSaysWhy(t *testing.T) {
	r := newExactRig(t, Config{})
	r.empty(0)
	r.sub.onGap(false)
	r.h.sync(t, r.pid)
	ws := r.hd.Snapshot().Warnings.List()
	if len(ws) != 1 || ws[0].Code != WarnEventsInterrupted || !strings.Contains(ws[0].Message, "(gap)") ||
		!strings.Contains(ws[0].Message, "kv_events_replay") {
		t.Fatalf("warnings %+v", ws)
	}
}

// TestEventsNoTokenizer: a replica whose engine publishes KV events but
// whose model has no tokenizer reports the no_tokenizer mode, not exact,
// with one warning naming the fix, even once the events arrive (issue 32,
// case 1); the first prompt mapped to blocks (token ids) ends both.
func TestEventsNoTokenizer(t *testing.T) {
	var logs logBuffer
	r := newExactRig(t, Config{SpeculativeTTL: 2 * time.Second, NoTokenizer: map[string]bool{"m": true}, Logger: logs.logger()})
	w := r.hd.Snapshot().Warnings
	if r.mode() != IndexNoTokenizer {
		t.Fatalf("mode %s before any batch, want %s", r.mode(), IndexNoTokenizer)
	}
	r.stored(0, 0, 4)
	r.empty(1)
	if r.mode() != IndexNoTokenizer {
		t.Fatalf("mode %s after the engine's batches, want %s", r.mode(), IndexNoTokenizer)
	}
	l := w.List()
	if len(l) != 1 || l[0].Code != WarnEventsNoTokenizer || !strings.Contains(l[0].Message, "models[].tokenizer") {
		t.Fatalf("warnings %+v", l)
	}
	if n := strings.Count(logs.String(), string(WarnEventsNoTokenizer)); n != 1 {
		t.Fatalf("the warning logged %d times, want once:\n%s", n, logs.String())
	}
	// A text prompt the gateway could not map assigns no blocks: still blind.
	r.h.send(r.pid, &Assign{Attempt: &Attempt{Seq: r.hd.Shadow().Next()}})
	r.h.sync(t, r.pid)
	if r.mode() != IndexNoTokenizer {
		t.Fatalf("mode %s after an unmapped prompt", r.mode())
	}
	r.route(4) // a prompt of token ids maps to blocks without a tokenizer
	if r.mode() != IndexExact {
		t.Fatalf("mode %s after a prompt mapped to blocks, want exact", r.mode())
	}
	if w.Active(WarnEventsNoTokenizer) {
		t.Fatal("still warned after a prompt mapped to blocks")
	}
}

// A model with a tokenizer gets neither the mode nor the warning.
func TestEventsWithTokenizerExact(t *testing.T) {
	r := newExactRig(t, Config{NoTokenizer: map[string]bool{"other": true}})
	r.empty(0)
	if r.mode() != IndexExact || r.hd.Snapshot().Warnings.Active(WarnEventsNoTokenizer) {
		t.Fatalf("mode %s, warnings %+v", r.mode(), r.hd.Snapshot().Warnings.List())
	}
}
