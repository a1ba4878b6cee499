package replica

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Prober checks one engine: GET {url}/health within ctx and, when cards is
// true, its model cards from GET {url}/v1/models (raw JSON objects of its
// "data" array, keyed by model id). A nil error means the engine passed its
// health check; nil cards with a nil error mean the cards could not be
// fetched this time. transport/health implements it over HTTP; fleet.Prober
// is the same interface.
type Prober interface {
	Probe(ctx context.Context, url string, cards bool) (map[string][]byte, error)
}

// cardsEvery is how many passing probes go by between two fetches of the
// model cards: engines rarely change them, and the listing should not cost
// the engine a request per probe.
const cardsEvery = 10

// probeRun is one incarnation's prober goroutine. Its address tags the
// results it sends, so that a restarted actor drops results from its
// predecessor's prober.
type probeRun struct {
	cancel context.CancelFunc
}

// probeLoop probes url at once and then every interval until ctx ends,
// sending each result to the actor at self. It fetches cards on the first
// passing probe, and again every cardsEvery passing probes.
func probeLoop(ctx context.Context, run *probeRun, send actor.SenderContext, self *actor.PID,
	p Prober, url string, interval, timeout time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	passed, haveCards := 0, false // passing probes since the last cards fetch
	for {
		ask := !haveCards || passed >= cardsEvery
		pctx, cancel := context.WithTimeout(ctx, timeout)
		cards, err := p.Probe(pctx, url, ask)
		cancel()
		if ctx.Err() != nil {
			return
		}
		msg := &probed{run: run, err: err}
		if err == nil {
			if ask && cards != nil {
				msg.cards, haveCards, passed = cards, true, 0
			}
			passed++
		}
		send.Send(self, msg)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
