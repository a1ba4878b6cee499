package kvevents

import (
	"testing"

	"github.com/inferrail/inferrail/model/kvevent"
)

// TestSourceCatchesUp: a replica actor subscribing through Source to an
// engine that already published gets the engine's buffered history first,
// through the replay socket, then the live stream.
func TestSourceCatchesUp(t *testing.T) {
	cfg := testConfig()
	cfg.ReplayEndpoint = "tcp://127.0.0.1:0"
	p := newPublisher(t, cfg, Options{Bind: true})
	const early = 3
	for i := range early {
		p.Publish(testBatch(i)) // nobody listens: only the replay buffer keeps them
	}
	s := newSink()
	s.subscribe(t, kvevent.Stream{Endpoint: p.Endpoint(), Replay: p.ReplayEndpoint()})
	// Probe until the subscription joins; its first live batch makes it
	// replay from 0, so the early batches come first.
	stop := probe(p)
	defer stop()
	for i := range early {
		if d := s.next(t); d.Batch.TS != float64(i) || d.Seq != uint64(i) {
			t.Fatalf("delivery %d has TS %v and seq %d, want the early batch %d", i, d.Batch.TS, d.Seq, i)
		}
	}
	select {
	case g := <-s.gaps:
		t.Fatalf("gap %+v", g)
	default:
	}
}

// subscribe subscribes s to st through Source, until the test ends.
func (s *sink) subscribe(t *testing.T, st kvevent.Stream) {
	t.Helper()
	c, err := Source{}.Subscribe(st,
		func(seq uint64, b *kvevent.Batch) { s.batches <- Delivery{Seq: seq, Batch: b} },
		func(restart bool) { s.gaps <- Gap{Restart: restart} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
}
