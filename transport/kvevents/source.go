package kvevents

import (
	"io"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
)

// Source subscribes the gateway's replica actors to their engines' streams
// (actors/replica.EventSource): one Subscriber per replica, with catch-up
// from the replay endpoint when there is one, so that a gateway started
// after its engines still learns what they cache.
type Source struct {
	// ReplayTimeout bounds one replay exchange; 0 takes the Subscriber's
	// default.
	ReplayTimeout time.Duration
}

// Subscribe starts a Subscriber on endpoint (listening on it with bind)
// that hands each batch to onBatch and each gap to onGap. Close the
// returned Closer to stop it; no callback runs after Close returns.
func (s Source) Subscribe(endpoint, replay string, bind bool, onBatch func(*kvevent.Batch), onGap func(restart bool)) (io.Closer, error) {
	return NewSubscriber(SubscriberConfig{
		Endpoint:       endpoint,
		Bind:           bind,
		ReplayEndpoint: replay,
		CatchUp:        replay != "",
		ReplayTimeout:  s.ReplayTimeout,
		OnBatch:        func(d Delivery) { onBatch(d.Batch) },
		OnGap:          func(g Gap) { onGap(g.Restart) },
	})
}
