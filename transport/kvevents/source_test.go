package kvevents

import (
	"sync"
	"testing"
	"time"

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
	c, err := Source{}.Subscribe(p.Endpoint(), p.ReplayEndpoint(), false,
		func(b *kvevent.Batch) { s.batches <- Delivery{Batch: b} },
		func(restart bool) { s.gaps <- Gap{Restart: restart} })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// Probe until the subscription joins; its first live batch makes it
	// replay from 0, so the early batches come first.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.Publish(&kvevent.Batch{TS: -1})
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	for i := range early {
		if d := s.next(t); d.Batch.TS != float64(i) {
			t.Fatalf("delivery %d has TS %v, want the early batch %d", i, d.Batch.TS, i)
		}
	}
	select {
	case g := <-s.gaps:
		t.Fatalf("gap %+v", g)
	default:
	}
}
