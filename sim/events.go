package sim

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/transport/kvevents"
)

// eventSink publishes each step's KV events as one batch, as vLLM's
// scheduler does after update_from_output.
type eventSink struct {
	pub  *kvevents.Publisher
	rank int
}

// newEventSink starts a publisher for --kv-events-config, or returns nil
// when events are off.
func newEventSink(o *Options) (*eventSink, error) {
	if o.KVEventsConfig == "" {
		return nil, nil
	}
	cfg, err := kvevents.ParseConfig(o.KVEventsConfig)
	if err != nil {
		return nil, fmt.Errorf("--kv-events-config: %w", err)
	}
	if !cfg.EnableKVCacheEvents || cfg.Publisher == "null" {
		return nil, nil
	}
	enc := kvevent.EncodingMap
	if o.KVEventsEncoding == "array" {
		enc = kvevent.EncodingArray
	}
	pub, err := kvevents.NewPublisher(cfg, kvevents.Options{Encoding: enc, Bind: o.KVEventsBind})
	if err != nil {
		return nil, fmt.Errorf("--kv-events-config: %w", err)
	}
	return &eventSink{pub: pub}, nil
}

func (e *eventSink) publish(events []kvevent.Event) {
	rank := e.rank
	e.pub.Publish(&kvevent.Batch{
		TS:     float64(time.Now().UnixNano()) / 1e9,
		Events: events,
		DPRank: &rank,
	})
}

func (e *eventSink) close() { e.pub.Close() }

// EventEndpoints are the addresses KV events are published and replayed on;
// empty when events are off or the simulator is not running.
func (s *Server) EventEndpoints() (pub, replay string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil || s.inst.events == nil {
		return "", ""
	}
	return s.inst.events.pub.Endpoint(), s.inst.events.pub.ReplayEndpoint()
}
