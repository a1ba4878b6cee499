package sim

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/transport/kvevents"
)

// eventSink publishes each step's KV events as one batch, as vLLM's
// scheduler does after update_from_output (and SGLang's after each batch).
type eventSink struct {
	pub    *kvevents.Publisher
	rank   int
	sglang bool // publish SGLang's shape of the events (asSGLang)
	// accepted counts the batches the publisher took, each numbered in
	// turn from 0 (LastEventSeq).
	accepted atomic.Uint64
}

// newEventSink starts a publisher for --kv-events-config, or returns nil
// when events are off.
//
// pub and replay, when set, are the endpoints a previous life of the same
// simulator bound: a restarted engine publishes where it did before, as
// one started with the same --kv-events-config would.
func newEventSink(o *Options, pub, replay string) (*eventSink, error) {
	if o.KVEventsConfig == "" {
		return nil, nil
	}
	engine := kvevent.Engine(o.KVEventsFormat)
	cfg, err := kvevents.ParseEngineConfig(engine, o.KVEventsConfig)
	if err != nil {
		return nil, fmt.Errorf("--kv-events-config: %w", err)
	}
	if !cfg.EnableKVCacheEvents || cfg.Publisher == "null" {
		return nil, nil
	}
	if cfg.SnapshotEndpoint != "" {
		return nil, fmt.Errorf("--kv-events-config: snapshot_endpoint: the simulator serves no snapshots")
	}
	if pub != "" {
		cfg.Endpoint = pub
	}
	if replay != "" {
		cfg.ReplayEndpoint = replay
	}
	enc := kvevent.EncodingMap
	if o.KVEventsEncoding == "array" {
		enc = kvevent.EncodingArray
	}
	p, err := kvevents.NewPublisher(cfg, kvevents.Options{Encoding: enc, Bind: o.KVEventsBind, Engine: engine})
	if err != nil {
		return nil, fmt.Errorf("--kv-events-config: %w", err)
	}
	return &eventSink{pub: p, sglang: engine == kvevent.EngineSGLang}, nil
}

func (e *eventSink) publish(events []kvevent.Event) {
	rank := e.rank
	if e.sglang {
		events = asSGLang(events)
	}
	if e.pub.Publish(&kvevent.Batch{
		TS:     float64(time.Now().UnixNano()) / 1e9,
		Events: events,
		DPRank: &rank,
	}) {
		e.accepted.Add(1)
	}
}

// asSGLang reshapes a step's events as SGLang's radix cache reports the same
// changes (srt/mem_cache/events.py): one BlockStored per page, each naming
// the page before as its parent, and the evictions in a row as one
// BlockRemoved, as SGLang reports a radix node's pages. The cache they
// describe is the same.
func asSGLang(events []kvevent.Event) []kvevent.Event {
	out := make([]kvevent.Event, 0, len(events))
	for _, ev := range events {
		switch e := ev.(type) {
		case *kvevent.BlockStored:
			parent := e.ParentBlockHash
			for i, h := range e.BlockHashes {
				page := &kvevent.BlockStored{BlockHashes: []uint64{h}, ParentBlockHash: parent,
					TokenIDs: e.TokenIDs[i*e.BlockSize : (i+1)*e.BlockSize], BlockSize: e.BlockSize, Medium: e.Medium}
				out = append(out, page)
				parent = &page.BlockHashes[0]
			}
		case *kvevent.BlockRemoved:
			if last, ok := lastRemoved(out); ok && last.Medium == e.Medium {
				last.BlockHashes = append(last.BlockHashes, e.BlockHashes...)
				continue
			}
			out = append(out, &kvevent.BlockRemoved{BlockHashes: append([]uint64(nil), e.BlockHashes...), Medium: e.Medium})
		default:
			out = append(out, ev)
		}
	}
	return out
}

func lastRemoved(evs []kvevent.Event) (*kvevent.BlockRemoved, bool) {
	if len(evs) == 0 {
		return nil, false
	}
	r, ok := evs[len(evs)-1].(*kvevent.BlockRemoved)
	return r, ok
}

// WithholdEvents stops (on) or resumes sending KV events, as a network
// partition between the engine and its subscribers would: the batches still
// take their sequence numbers and enter the replay buffer
// (kvevents.Publisher.Withhold). It reports false when events are off or
// the simulator is not running.
func (s *Server) WithholdEvents(on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil || s.inst.events == nil {
		return false
	}
	s.inst.events.pub.Withhold(on)
	return true
}

func (e *eventSink) close() { e.pub.Close() }

// LastEventSeq is the sequence number of the last batch of KV events the
// engine handed its publisher, which numbers them in turn from 0; false
// before the first, when events are off, or when the simulator is not
// running. A step publishes its batch before it answers any request, so
// once a response is complete, its events are at or below this number: a
// subscriber whose last applied batch has it has seen them all.
func (s *Server) LastEventSeq() (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inst == nil || s.inst.events == nil {
		return 0, false
	}
	n := s.inst.events.accepted.Load()
	return n - 1, n > 0
}

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
