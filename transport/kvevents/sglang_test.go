package kvevents

import (
	"reflect"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
)

// sglangBatch is batch i as SGLang's radix cache reports a page: one hash
// (from 2^63 up, a negative int64 on the wire), salted, and the node's
// eviction.
func sglangBatch(i int) *kvevent.Batch {
	salt := "tenant"
	h := uint64(i)<<1 | 1<<63
	return &kvevent.Batch{TS: float64(i), Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: []uint64{h}, TokenIDs: []uint32{uint32(i), 1}, BlockSize: 2, Medium: "GPU", CacheSalt: &salt},
		&kvevent.BlockRemoved{BlockHashes: []uint64{h, h + 1}, Medium: "GPU"},
	}}
}

// An SGLang publisher's history reaches an SGLang subscriber through its
// replay socket (which answers without the topic frame), first and in
// order, decoded with SGLang's schema: the salt of BlockStoredWithMetadata
// and the hashes past 2^63 survive.
func TestSGLangCatchUpDecodes(t *testing.T) {
	const early = 3
	p := sglangHistory(t, early)
	s := newSink()
	s.subscribe(t, kvevent.Stream{Endpoint: p.Endpoint(), Replay: p.ReplayEndpoint(), Engine: kvevent.EngineSGLang})
	stop := probe(p)
	defer stop()
	for i := range early {
		d := s.next(t)
		want := withRank(sglangBatch(i), 0)
		if d.Seq != uint64(i) || !reflect.DeepEqual(d.Batch, want) {
			t.Fatalf("delivery %d, seq %d:\n got %+v\nwant %+v", i, d.Seq, d.Batch, want)
		}
	}
}

// Read with vLLM's schema, the same history is undecodable: every batch of
// it is lost, which is why a replica names its engine_type.
func TestSGLangNeedsItsSchema(t *testing.T) {
	const early = 3
	p := sglangHistory(t, early)
	s := newSink()
	scfg := s.config(p.Endpoint())
	scfg.ReplayEndpoint, scfg.CatchUp = p.ReplayEndpoint(), true
	sub := newSubscriber(t, scfg)
	stop := probe(p)
	defer stop()
	for range early {
		if g := s.nextGap(t); g.Restart || g.To != g.From+1 {
			t.Fatalf("gap %+v, want one undecodable batch", g)
		}
	}
	if st := sub.Stats(); st.DecodeErrors != early {
		t.Fatalf("stats %+v", st)
	}
}

// sglangHistory is an SGLang publisher, with replay, that has published
// sglangBatch 0 to n-1 before anyone subscribed.
func sglangHistory(t *testing.T, n int) *Publisher {
	t.Helper()
	cfg := testConfig()
	cfg.ReplayEndpoint = "tcp://127.0.0.1:0"
	p := newPublisher(t, cfg, Options{Bind: true, Engine: kvevent.EngineSGLang})
	for i := range n {
		p.Publish(sglangBatch(i))
	}
	replayAll(t, p.ReplayEndpoint(), 0, n) // all buffered
	return p
}

// probe publishes empty batches every 5 ms, which either schema reads,
// until the returned stop is called: a subscription that is joining gets
// its first live batch, and with it its catch-up replay.
func probe(p *Publisher) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				p.Publish(&kvevent.Batch{TS: -1})
			}
		}
	}()
	return func() { close(quit); <-done }
}

// SGLang with a snapshot endpoint appends its publisher's epoch to the
// topic. A new epoch is a new publisher, and so an engine (or DP replica)
// restarted with an empty cache, even when its sequence number did not go
// backwards; barrier messages under the same epoch are not.
func TestSGLangEpochRestart(t *testing.T) {
	e := newFakeEngine(t, nil)
	s := newSink()
	newSubscriber(t, s.config(e.endpoint))
	e.waitSubscribed(t)
	a := "kv@\x00sgl-kv-epoch=aaaa"
	e.sendTopic(t, a, 0, payloadOf(0))
	e.sendTopic(t, a+"\x00sgl-kv-snapshot=b1", 1, payloadOf(1)) // a snapshot barrier: same epoch
	e.sendTopic(t, a, 2, payloadOf(2))
	for seq := range uint64(3) {
		if d := s.next(t); d.Seq != seq {
			t.Fatalf("delivery seq %d, want %d", d.Seq, seq)
		}
	}
	select {
	case g := <-s.gaps:
		t.Fatalf("gap %+v under one epoch", g)
	default:
	}
	e.sendTopic(t, "kv@\x00sgl-kv-epoch=bbbb", 3, payloadOf(3))
	if g := s.nextGap(t); !g.Restart || g.From != 3 || g.To != 3 {
		t.Fatalf("gap %+v, want a restart at 3", g)
	}
	if d := s.next(t); d.Seq != 3 {
		t.Fatalf("delivery seq %d after the new epoch", d.Seq)
	}
}

// While a publisher withholds its batches they still take sequence numbers
// and enter the replay buffer, so a subscriber with a replay endpoint gets
// every one of them, replayed, once sending resumes.
func TestWithhold(t *testing.T) {
	cfg := testConfig()
	cfg.ReplayEndpoint = "tcp://127.0.0.1:0"
	p := newPublisher(t, cfg, Options{Bind: true})
	s := newSink()
	scfg := s.config(p.Endpoint())
	scfg.ReplayEndpoint = p.ReplayEndpoint()
	newSubscriber(t, scfg)
	first := join(t, p, s)
	p.Withhold(true)
	for i := range 4 {
		p.Publish(testBatch(i))
	}
	replayAll(t, p.ReplayEndpoint(), first, 4) // numbered and buffered
	select {
	case d := <-s.batches:
		t.Fatalf("batch %d delivered while withheld", d.Seq)
	case <-time.After(50 * time.Millisecond):
	}
	p.Withhold(false)
	p.Publish(testBatch(4))
	for i := range 5 {
		d := s.next(t)
		// The replay the live batch sets off may bring it too.
		if d.Seq != first+uint64(i) || d.Batch.TS != float64(i) || i < 4 && !d.Replayed {
			t.Fatalf("delivery %d: seq %d TS %v replayed %v", i, d.Seq, d.Batch.TS, d.Replayed)
		}
	}
	if st := p.Stats(); st.Withheld != 4 {
		t.Fatalf("stats %+v: want 4 withheld", st)
	}
}
