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

// Subscribe starts a Subscriber on st (listening on its endpoint with
// st.Bind, decoding with st.Engine's schema) that hands each batch, with
// its sequence number, to onBatch and each gap to onGap. Close the returned
// Closer to stop it; no callback runs after Close returns.
func (s Source) Subscribe(st kvevent.Stream, onBatch func(seq uint64, b *kvevent.Batch), onGap func(restart bool)) (io.Closer, error) {
	return NewSubscriber(SubscriberConfig{
		Endpoint:       st.Endpoint,
		Bind:           st.Bind,
		Engine:         st.Engine,
		ReplayEndpoint: st.Replay,
		CatchUp:        st.Replay != "",
		CatchUpFrom:    st.From,
		ReplayTimeout:  s.ReplayTimeout,
		OnBatch:        func(d Delivery) { onBatch(d.Seq, d.Batch) },
		OnGap:          func(g Gap) { onGap(g.Restart) },
	})
}
