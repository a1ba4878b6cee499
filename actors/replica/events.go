package replica

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/kvevent"
)

// EventSource subscribes to an engine's KV event stream es: its PUB
// socket, its replay socket ("" for none), whether the gateway listens for
// an engine that connects, and the engine's event schema. onBatch gets
// every batch in order, with its sequence number; onGap reports batches
// that were lost, restart set when the engine started over with an empty
// cache. Both run on the subscription's own goroutine, never after Close
// returns, and must not block. transport/kvevents implements it over
// ZeroMQ; tests use fakes.
type EventSource interface {
	Subscribe(es EventStream, onBatch func(seq uint64, b *kvevent.Batch), onGap func(restart bool)) (io.Closer, error)
}

// EventStream is where a replica's engine publishes its KV events
// (replicas[].kv_events, kv_events_replay, kv_events_bind and engine_type).
// The zero value means none.
type EventStream = kvevent.Stream

// EventCounts count what a replica's KV events did to its shadow index,
// for the inferrail_kv_events_* series. Shared by pointer across the
// replica's snapshots; safe for concurrent use.
type EventCounts struct {
	Batches atomic.Uint64 // batches applied
	// Blocks by what became of them (estimate.EventStats).
	Stored, Removed, Unmapped, Unknown atomic.Uint64
	Gaps                               atomic.Uint64 // lost batches reported, restarts included

	// The exact mode (mode.go): fallbacks by reason, returns to exact
	// after one, and the last batch's sequence number and arrival (Unix
	// ns; 0 before the first).
	fallbackSilence, fallbackGap, resyncs atomic.Uint64
	lastSeq                               atomic.Uint64
	lastAt                                atomic.Int64
}

// eventsRun is one incarnation's subscription goroutine, like probeRun.
type eventsRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the goroutine has closed its subscription
}

// eventsLoop holds one subscription to the engine's stream until ctx ends.
// Subscribing and closing are I/O (a listen, a join that may wait out a
// replay), so they run here and not in Receive. A subscription that cannot
// start (an address in use, say) is tried again after
// eventsRetryMin, doubling to eventsRetryMax; the actor hears of the first
// failure and of the success after failures, and with eventsQuiet once a
// subscription has lasted quiet.
//
// after, when not nil, is the previous subscription's done: a replica that
// subscribes again binds the same endpoint, so it waits until the old
// socket is closed rather than fail with the address in use and retry.
func eventsLoop(ctx context.Context, run *eventsRun, after <-chan struct{}, send actor.SenderContext, self *actor.PID,
	src EventSource, es EventStream, quiet time.Duration) {
	defer close(run.done)
	if after != nil {
		select {
		case <-after:
		case <-ctx.Done():
			return
		}
	}
	wait := eventsRetryMin
	failed := false
	for {
		c, err := src.Subscribe(es,
			func(seq uint64, b *kvevent.Batch) { send.Send(self, &eventsBatch{run: run, seq: seq, batch: b}) },
			func(restart bool) { send.Send(self, &eventsGap{run: run, restart: restart}) })
		if err == nil {
			if failed {
				send.Send(self, &eventsFailed{run: run})
			}
			t := time.NewTimer(quiet)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
				send.Send(self, &eventsQuiet{run: run})
				<-ctx.Done()
			}
			_ = c.Close()
			return
		}
		if !failed {
			failed = true
			send.Send(self, &eventsFailed{run: run, err: err})
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, eventsRetryMax)
	}
}

// How long a failed subscription waits before it is tried again.
const (
	eventsRetryMin = time.Second
	eventsRetryMax = 30 * time.Second
)

// startEvents subscribes this incarnation to the engine's KV events, when
// the replica has a stream and the fleet an EventSource. Its mirror starts
// empty, as the index does.
func (a *replicaActor) startEvents(ctx actor.Context) {
	if a.cfg.Events == nil || a.stream.Endpoint == "" || len(a.models) == 0 {
		return
	}
	a.mirror = estimate.NewEvents(a.models[0], a.cfg.EventChecks[a.models[0]])
	a.subscribe(ctx)
}

// subscribe starts a subscription to a.stream, catching up from
// a.stream.From, that feeds the mirror as it is.
func (a *replicaActor) subscribe(ctx actor.Context) {
	ectx, cancel := context.WithCancel(context.Background())
	run := &eventsRun{cancel: cancel, done: make(chan struct{})}
	var after <-chan struct{}
	if a.lastEvents != nil {
		after = a.lastEvents.done
	}
	a.events, a.lastEvents, a.subscribed = run, run, false
	send, self := actor.SenderContext(ctx.ActorSystem().Root), ctx.Self()
	src, es, quiet := a.cfg.Events, a.stream, a.cfg.EventsQuiet
	a.cfg.Goroutines.Go(func() { eventsLoop(ectx, run, after, send, self, src, es, quiet) })
}

func (a *replicaActor) stopEvents() {
	if a.events != nil {
		a.events.cancel()
		a.events = nil
	}
}

// eventsApplied applies one batch of the engine's events to the index.
func (a *replicaActor) eventsApplied(m *eventsBatch) {
	if m.run != a.events {
		return // from a subscription that was stopped
	}
	now := a.cfg.Now()
	if !a.subscribed {
		// The subscription's first batch: unless it is the engine's first
		// (or the first after a peer's snapshot, stream.From), the engine
		// stored blocks before it that the mapping never saw.
		a.subscribed = true
		if m.seq > a.stream.From && !a.lossy {
			a.lossy = true
			a.resyncFrom = a.mirror.Stats()
		}
	}
	a.lastBatchAt, a.overdueSince = now, time.Time{}
	a.eventCounts.lastSeq.Store(m.seq)
	a.eventCounts.lastAt.Store(now.UnixNano())
	before := a.mirror.Stats()
	a.mirror.Apply(m.batch, a.est.Index)
	after := a.mirror.Stats()
	c := a.eventCounts
	c.Batches.Add(after.Batches - before.Batches)
	c.Stored.Add(after.Stored - before.Stored)
	c.Removed.Add(after.Removed - before.Removed)
	c.Unmapped.Add(after.Unmapped - before.Unmapped)
	c.Unknown.Add(after.Unknown - before.Unknown)
	if after.Stored != before.Stored || after.Removed != before.Removed || after.Cleared != before.Cleared {
		a.publishShadow(now)
	}
	a.eventsArrived()
	a.eventsChecked(before, after)
	if a.mode != IndexExact && (!a.lossy || a.resynced()) {
		a.enterExact(now)
	}
}

// eventsLost handles batches the subscription could not deliver. An engine
// that restarted has an empty cache, and so gets an empty index. Other
// losses leave the mapping with holes: it is reset, and the replica falls
// back to the approximate index until a resync completes (mode.go).
func (a *replicaActor) eventsLost(m *eventsGap) {
	if m.run != a.events {
		return
	}
	a.eventsArrived()
	a.eventCounts.Gaps.Add(1)
	a.lastBatchAt, a.overdueSince = a.cfg.Now(), time.Time{} // the stream is alive
	if m.restart {
		a.subscribed = true // what follows is the new engine's whole history
		if a.engineRestarted(restartByEvents) {
			a.engineRestarts++
			a.log.Info("engine restarted: its KV event sequence went backwards; its shadow index is cleared")
			a.publish()
		}
		return
	}
	a.lost(FallbackGap, "batches were lost that the replay could not recover (set kv_events_replay, or a larger "+
		"buffer_steps)")
	if !a.gapLogged {
		a.gapLogged = true
		a.log.Warn("KV events lost; the cache prediction follows routing decisions until the events place the " +
			"engine's blocks again (logged once)")
	}
}

// eventsFailed hears that the subscription could not start (err set), and
// later that it did after all (err nil). Meanwhile the index follows
// routing decisions alone.
func (a *replicaActor) eventsFailed(m *eventsFailed) {
	if m.run != a.events {
		return
	}
	if m.err == nil {
		a.log.Info("KV events: subscribed after all", "endpoint", a.stream.Endpoint)
		return
	}
	a.log.Error("KV events: cannot subscribe; the cache prediction comes from routing decisions alone until a retry succeeds",
		"endpoint", a.stream.Endpoint, "err", m.err)
}

// eventsWindow is how many stored blocks each verdict on the unmapped share
// is taken over, and how many must pass without another size or a foreign
// token id before those warnings clear.
const eventsWindow = 64

// eventsChecked raises or clears the warnings about the engine's stored
// blocks, from the mapping's stats before and after a batch. Another block
// size or a foreign token id is raised at once, since one such block shows
// it; most blocks unmapped for other causes, over a window of eventsWindow
// blocks. A window without the cause clears its warning.
func (a *replicaActor) eventsChecked(before, after estimate.EventStats) {
	now, model, checks := a.cfg.Now(), a.models[0], a.cfg.EventChecks[a.models[0]]
	if after.OtherSize > before.OtherSize {
		flag := "--block-size"
		if a.stream.Engine == kvevent.EngineSGLang {
			flag = "--page-size (SGLang's default, 1, makes every token a block)"
		}
		a.warnings.Raise(a.log, now, WarnEventsBlockSize, fmt.Sprintf(
			"KV events: the engine stores blocks of %d tokens, but models[].block_size of %s is %d, so its blocks "+
				"never match the gateway's and the index learns nothing from them; set block_size to the engine's "+
				"%s", after.OtherBlockSize, model, checks.BlockSize, flag), "endpoint", a.stream.Endpoint)
	}
	if after.Foreign > before.Foreign {
		a.warnings.RaiseNew(a.log, now, WarnEventsForeignTokens, fmt.Sprintf(
			"KV events: the engine stored token id %d, outside the %d ids of model %s's tokenizer: the engine "+
				"tokenizes with another tokenizer, so its blocks never match the gateway's; set models[].tokenizer "+
				"to the engine's", after.ForeignID, checks.VocabSize, model), "endpoint", a.stream.Endpoint)
	}
	w := a.window
	blocks := after.Blocks - w.Blocks
	if blocks < eventsWindow {
		return
	}
	a.window = after
	if after.OtherSize == w.OtherSize {
		a.warnings.Clear(a.log, WarnEventsBlockSize)
	}
	if after.Foreign == w.Foreign {
		a.warnings.Clear(a.log, WarnEventsForeignTokens)
	}
	// Blocks of another size or with foreign token ids have warnings of
	// their own.
	unmapped := (after.Unmapped - w.Unmapped) - (after.OtherSize - w.OtherSize) - (after.Foreign - w.Foreign)
	if 2*unmapped <= blocks {
		a.warnings.Clear(a.log, WarnEventsUnmapped)
		return
	}
	a.warnings.RaiseNew(a.log, now, WarnEventsUnmapped, fmt.Sprintf(
		"KV events: %d of the last %d blocks the engine stored could not be placed in the index, which learns "+
			"little from its events; likely causes: parents the gateway never saw stored (stored before it "+
			"subscribed, or lost: set kv_events_replay), extra keys in the block hashes (LoRA adapters, "+
			"cache_salt, images), or token ids that do not fill the blocks", unmapped, blocks),
		"endpoint", a.stream.Endpoint)
}

// eventsArrived notes that the subscription delivers.
func (a *replicaActor) eventsArrived() {
	if !a.eventsSeen {
		a.eventsSeen = true
		a.warnings.Clear(a.log, WarnEventsSilent)
	}
}

func (a *replicaActor) eventsQuietFor(m *eventsQuiet) {
	if m.run != a.events {
		return
	}
	a.quietDue = true
	if !a.eventsSeen && a.served == 0 {
		a.log.Debug("KV events: nothing received yet, nor expected: the engine has completed no request",
			"endpoint", a.stream.Endpoint, "for", a.cfg.EventsQuiet)
	}
	a.checkSilent()
}

// checkSilent raises WarnEventsSilent for a subscription that has delivered
// nothing for EventsQuiet while the engine completed requests, which store
// blocks an engine with events publishes. The likely cause is a stream
// whose ends cannot meet (issue 17): vLLM's PUB socket binds only when its
// endpoint has "*" or "::" (or is ipc:// or inproc://) and connects
// otherwise, so exactly one side must bind.
func (a *replicaActor) checkSilent() {
	if a.eventsSeen || a.served == 0 || a.warnings.Active(WarnEventsSilent) {
		return
	}
	side := "the gateway connects to it (kv_events_bind false), so the engine must bind: give it an endpoint " +
		`with "*" (tcp://*:PORT)`
	if a.stream.Bind {
		side = "the gateway binds it (kv_events_bind true), so the engine must connect: give it this host's " +
			`address (tcp://HOST:PORT), without "*"`
	}
	rule, enable := `vLLM's publisher binds when its endpoint has "*" or "::" and connects otherwise`, "enable_kv_cache_events"
	if a.stream.Engine == kvevent.EngineSGLang {
		rule, enable = `SGLang's publisher binds when its endpoint has "*", "::" or 0.0.0.0 and connects otherwise`,
			`"publisher": "zmq" in --kv-events-config and engine_type sglang here`
	}
	a.warnings.Raise(a.log, a.cfg.Now(), WarnEventsSilent, fmt.Sprintf(
		"KV events: nothing received from %s in %s of subscription while the engine completed %d requests; "+
			"check kv_events_bind: %s, and here %s; also check that the engine runs with prefix caching and %s",
		a.stream.Endpoint, a.cfg.EventsQuiet, a.served, rule, side, enable), "endpoint", a.stream.Endpoint)
}
