package kvevents

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/inferrail/inferrail/model/kvevent"
)

// ErrStopReplay, returned by a Replay callback, ends the replay early without
// an error.
var ErrStopReplay = errors.New("kvevents: stop replay")

// ErrBadReply reports a replay reply of a shape vLLM never sends.
var ErrBadReply = errors.New("kvevents: malformed replay reply")

// Replay asks the ROUTER at endpoint for every buffered batch with sequence
// number >= start and calls fn for each, in order, until the end marker. It
// accepts both reply shapes: [topic, seq, payload] (vLLM after PR #45177)
// and [seq, payload] (before). ctx bounds the whole exchange: dial, request
// and replies. fn's error other than ErrStopReplay is returned.
//
// Replay owns a DEALER socket for the duration of the call, on the calling
// goroutine.
func Replay(ctx context.Context, endpoint string, start uint64, fn func(seq uint64, payload []byte) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := zmq4.NewDealer(ctx, zmq4.WithDialerRetry(50*time.Millisecond), zmq4.WithDialerMaxRetries(-1))
	defer closeDrain(d)
	if err := d.Dial(endpoint); err != nil {
		return fmt.Errorf("kvevents: replay %s: %w", endpoint, err)
	}
	req := zmq4.NewMsgFrom(nil, binary.BigEndian.AppendUint64(nil, start))
	if err := d.Send(req); err != nil {
		return fmt.Errorf("kvevents: replay %s: request: %w", endpoint, err)
	}
	for {
		msg, err := d.Recv()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fmt.Errorf("kvevents: replay %s: %w", endpoint, err)
		}
		f := msg.Frames
		// After the DEALER strips nothing: [empty, (topic,) seq8, payload].
		if len(f) < 3 || len(f) > 4 || len(f[0]) != 0 {
			return fmt.Errorf("kvevents: replay %s: %d frames: %w", endpoint, len(f), ErrBadReply)
		}
		seq8, payload := f[len(f)-2], f[len(f)-1]
		if len(seq8) != 8 {
			return fmt.Errorf("kvevents: replay %s: seq of %d bytes: %w", endpoint, len(seq8), ErrBadReply)
		}
		if bytes.Equal(seq8, endSeq) {
			return nil
		}
		if err := fn(binary.BigEndian.Uint64(seq8), payload); err != nil {
			if errors.Is(err, ErrStopReplay) {
				return nil
			}
			return err
		}
	}
}

// closeDrain closes a socket and then empties its receive queue. zmq4's
// per-connection reader goroutine blocks, without watching the socket's
// context, on a full receive queue; after Close it holds at most one
// message, and draining lets it see the closed connection and exit. Recv on a
// closed socket picks at random between the done context and a queued
// message, so a long run of empty receives means the queue is empty.
func closeDrain(s zmq4.Socket) {
	_ = s.Close()
	for misses := 0; misses < 64; {
		if msg, err := s.Recv(); err != nil && len(msg.Frames) == 0 {
			misses++
		} else {
			misses = 0
		}
	}
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	// Endpoint is the engine's PUB address, e.g. "tcp://10.0.0.7:5557".
	Endpoint string
	// Bind makes the SUB socket listen on Endpoint instead of dialling it,
	// for engines whose endpoint has no "*" and therefore connect.
	Bind bool
	// Topic is the subscription prefix; "" receives every topic.
	Topic string
	// Engine is the publisher's engine, whose event schema payloads are
	// decoded with (kvevent.Decode); "" is EngineVLLM.
	Engine kvevent.Engine
	// ReplayEndpoint is the engine's replay ROUTER; "" disables replay, and
	// every gap is then reported.
	ReplayEndpoint string
	// CatchUp replays from sequence CatchUpFrom (0: the engine's first)
	// when the first batch arrives, to deliver the history the engine still
	// buffers. Needs ReplayEndpoint. A consumer that knows the engine's
	// state up to some batch, from a peer's snapshot, sets CatchUpFrom to
	// the batch after it; one above the first live batch counts from that
	// batch instead, which the consumer already knows.
	CatchUp     bool
	CatchUpFrom uint64
	// ReplayTimeout bounds one replay exchange. Default 2 s.
	ReplayTimeout time.Duration

	// OnBatch receives every batch, exactly once and in sequence order,
	// live or replayed. OnGap reports batches that could not be recovered.
	// Both run on the subscriber's goroutine and must not block for long:
	// hand the value to an actor. OnGap may be nil.
	OnBatch func(Delivery)
	OnGap   func(Gap)
}

// Delivery is one decoded batch. Nothing else references its Batch, which
// is immutable from then on: it can be sent to an actor as is.
type Delivery struct {
	Seq      uint64
	Batch    *kvevent.Batch
	Replayed bool // came through the replay socket, not the live stream
}

// Gap says that batches From up to, not including, To were lost: not
// received, not replayable (or no replay endpoint), or undecodable. A
// consumer mirroring the engine's cache must rebuild it. Restart says the
// engine's sequence went backwards, i.e. it restarted with an empty cache;
// delivery resumes at To.
type Gap struct {
	From, To uint64
	Restart  bool
}

// SubscriberStats are a Subscriber's counters since it started.
type SubscriberStats struct {
	Received     uint64 // well-formed live messages read
	Delivered    uint64 // batches passed to OnBatch (live and replayed)
	Replayed     uint64 // of those, how many came from replays
	Duplicates   uint64 // live batches already delivered by a replay
	Gaps         uint64 // gaps reported
	Restarts     uint64 // of those, restarts
	Malformed    uint64 // messages not shaped [topic, seq8, payload]
	DecodeErrors uint64 // payloads that did not decode
	ReplayErrors uint64 // replay exchanges that failed
}

// Subscriber reads an engine's KV event stream: a SUB socket, owned by one
// goroutine that decodes batches, detects sequence gaps, repairs them through
// the replay endpoint when it can and calls the handlers. Its methods are
// safe for concurrent use.
type Subscriber struct {
	cfg    SubscriberConfig
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	addr   string

	// Owned by the run goroutine.
	started        bool
	next, liveNext uint64
	epoch          []byte // the publisher's epoch, from SGLang's topic; nil when it sends none

	received, delivered, replayed, duplicates, gaps, restarts,
	malformed, decodeErrors, replayErrors atomic.Uint64
}

// NewSubscriber starts a subscriber. With Bind it listens before returning;
// otherwise it dials in the background, retrying until the publisher is up.
func NewSubscriber(cfg SubscriberConfig) (*Subscriber, error) {
	if err := checkEndpoint(cfg.Endpoint); err != nil {
		return nil, fmt.Errorf("kvevents: subscriber: endpoint: %w", err)
	}
	if cfg.ReplayEndpoint != "" {
		if err := checkEndpoint(cfg.ReplayEndpoint); err != nil {
			return nil, fmt.Errorf("kvevents: subscriber: replay endpoint: %w", err)
		}
	}
	if cfg.OnBatch == nil {
		return nil, errors.New("kvevents: subscriber: OnBatch is nil")
	}
	if cfg.ReplayTimeout <= 0 {
		cfg.ReplayTimeout = 2 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Subscriber{cfg: cfg, cancel: cancel, addr: cfg.Endpoint}
	var opts []zmq4.Option
	if !cfg.Bind {
		opts = append(opts, zmq4.WithDialerRetry(100*time.Millisecond),
			zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(true))
	}
	sub := zmq4.NewSub(ctx, opts...)
	// Subscribe before connecting: zmq4 sends stored subscriptions on every
	// new connection.
	if err := sub.SetOption(zmq4.OptionSubscribe, cfg.Topic); err != nil {
		cancel()
		_ = sub.Close()
		return nil, fmt.Errorf("kvevents: subscriber: subscribe: %w", err)
	}
	if cfg.Bind {
		if err := sub.Listen(cfg.Endpoint); err != nil {
			cancel()
			_ = sub.Close()
			return nil, fmt.Errorf("kvevents: subscriber: %w", err)
		}
		s.addr = boundEndpoint(cfg.Endpoint, sub.Addr())
	}
	s.wg.Add(1)
	go s.run(ctx, sub)
	return s, nil
}

// Endpoint is the SUB socket's address: the dialled endpoint, or with Bind
// the bound one with its actual port.
func (s *Subscriber) Endpoint() string { return s.addr }

// Close stops the subscriber and waits for its goroutine; no handler runs
// after it returns. It is idempotent.
func (s *Subscriber) Close() error {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
	})
	return nil
}

// Stats returns the subscriber's counters.
func (s *Subscriber) Stats() SubscriberStats {
	return SubscriberStats{
		Received: s.received.Load(), Delivered: s.delivered.Load(), Replayed: s.replayed.Load(),
		Duplicates: s.duplicates.Load(), Gaps: s.gaps.Load(), Restarts: s.restarts.Load(),
		Malformed: s.malformed.Load(), DecodeErrors: s.decodeErrors.Load(), ReplayErrors: s.replayErrors.Load(),
	}
}

func (s *Subscriber) run(ctx context.Context, sub zmq4.Socket) {
	defer s.wg.Done()
	defer closeDrain(sub)
	if !s.cfg.Bind {
		if err := sub.Dial(s.cfg.Endpoint); err != nil {
			return // ctx ended while dialling
		}
	}
	for {
		msg, err := sub.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue // a connection failed; zmq4 reconnects
		}
		f := msg.Frames
		if len(f) != 3 || len(f[1]) != 8 {
			s.malformed.Add(1)
			continue
		}
		s.received.Add(1)
		s.live(ctx, binary.BigEndian.Uint64(f[1]), f[2], topicEpoch(f[0]))
	}
}

// epochMarker starts the publisher's epoch in SGLang's live topic: with a
// snapshot_endpoint, SGLang's ZmqEventPublisher sends topic +
// "\x00sgl-kv-epoch=" + epoch, a token new with each publisher (and a
// snapshot barrier appends "\x00sgl-kv-snapshot=" + id after it). A
// subscription to the plain topic still matches, as SUB filters by prefix.
var epochMarker = []byte("\x00sgl-kv-epoch=")

// topicEpoch returns the epoch in an SGLang live topic, or nil.
func topicEpoch(topic []byte) []byte {
	i := bytes.Index(topic, epochMarker)
	if i < 0 {
		return nil
	}
	e := topic[i+len(epochMarker):]
	if j := bytes.IndexByte(e, 0); j >= 0 {
		e = e[:j]
	}
	return e
}

// live handles one batch from the stream. next is the next sequence number
// to deliver; liveNext the next one expected on the stream, which runs
// behind next after a replay delivered batches the stream has not caught up
// with yet. epoch is the publisher's epoch when its topic carries one.
func (s *Subscriber) live(ctx context.Context, seq uint64, payload, epoch []byte) {
	newEpoch := epoch != nil && s.epoch != nil && !bytes.Equal(epoch, s.epoch)
	if epoch != nil && !bytes.Equal(epoch, s.epoch) {
		s.epoch = bytes.Clone(epoch)
	}
	if s.started && (seq < s.liveNext || newEpoch) {
		// The publisher's counter went backwards, or its epoch changed: a
		// new engine process (or DP replica), with a new cache.
		s.gap(Gap{From: s.next, To: seq, Restart: true})
		s.next = seq
	}
	s.liveNext = seq + 1
	if !s.started {
		s.started = true
		s.next = seq
		if s.cfg.CatchUp && s.cfg.ReplayEndpoint != "" {
			s.next = min(s.cfg.CatchUpFrom, seq)
		}
	}
	if seq > s.next && s.cfg.ReplayEndpoint != "" {
		s.replay(ctx)
		if ctx.Err() != nil {
			return // closing: report nothing the replay left undone
		}
	}
	if seq < s.next {
		s.duplicates.Add(1)
		return
	}
	if seq > s.next {
		s.gap(Gap{From: s.next, To: seq})
		s.next = seq
	}
	s.deliver(seq, payload, false)
}

// replay fetches what the engine buffered from s.next on and delivers it in
// order, stopping at the first hole in the buffer.
func (s *Subscriber) replay(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.ReplayTimeout)
	defer cancel()
	err := Replay(rctx, s.cfg.ReplayEndpoint, s.next, func(rseq uint64, payload []byte) error {
		switch {
		case rseq < s.next:
			return nil
		case rseq > s.next:
			return ErrStopReplay // the buffer no longer holds s.next
		}
		s.deliver(rseq, payload, true)
		return nil
	})
	if err != nil {
		s.replayErrors.Add(1)
	}
}

// deliver decodes and hands over batch seq == s.next; an undecodable one is
// reported as a gap of one.
func (s *Subscriber) deliver(seq uint64, payload []byte, replayed bool) {
	s.next = seq + 1
	b, err := kvevent.Decode(payload, s.cfg.Engine)
	if err != nil {
		s.decodeErrors.Add(1)
		s.gap(Gap{From: seq, To: seq + 1})
		return
	}
	s.delivered.Add(1)
	if replayed {
		s.replayed.Add(1)
	}
	s.cfg.OnBatch(Delivery{Seq: seq, Batch: b, Replayed: replayed})
}

func (s *Subscriber) gap(g Gap) {
	s.gaps.Add(1)
	if g.Restart {
		s.restarts.Add(1)
	}
	if s.cfg.OnGap != nil {
		s.cfg.OnGap(g)
	}
}
