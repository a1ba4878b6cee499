package kvevents

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/inferrail/inferrail/model/kvevent"
)

// endSeq marks the end of a replay: −1 as a signed 8-byte big-endian int.
var endSeq = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// closeGrace bounds how long Close waits for a socket owner that is stuck
// writing to a peer that stopped reading (vLLM's SHUTDOWN_TIMEOUT is 1 s).
const closeGrace = time.Second

// Options are a Publisher's settings that vLLM takes from elsewhere than
// --kv-events-config.
type Options struct {
	// DPRank is the data parallel rank. It fills Batch.DPRank when nil and
	// offsets TCP ports as vLLM does (see OffsetEndpoint).
	DPRank int
	// Encoding lays out events: EncodingMap (vLLM ≥ v0.23, the zero value) or
	// EncodingArray (≤ v0.22).
	Encoding kvevent.Encoding
	// Bind binds the PUB endpoint even where vLLM's rule would connect
	// (an address without "*" or "::", such as tcp://127.0.0.1:0).
	Bind bool
	// LegacyReplay answers replays without the topic frame, as vLLM did
	// before PR #45177 and SGLang does: [seq, payload] and the end marker
	// [END, ""].
	LegacyReplay bool
	// Engine is the engine the publisher acts as; "" is EngineVLLM. As
	// EngineSGLang it encodes with EncodingSGLang whatever Encoding says,
	// replays without the topic frame, and binds by SGLang's rule
	// (PublisherBinds).
	Engine kvevent.Engine
}

// PublisherStats are a Publisher's counters since it started.
type PublisherStats struct {
	Published  uint64 // batches handed to the PUB socket (one sequence number each)
	Dropped    uint64 // batches dropped because the queue was full
	Replays    uint64 // replay requests answered
	BadReplays uint64 // replay requests ignored for their shape
	Withheld   uint64 // batches numbered and buffered but not sent (Withhold)
}

// Publisher publishes KV event batches the way vLLM's ZmqEventPublisher does:
// each batch as [topic, seq, payload] on a PUB socket, seq an 8-byte
// big-endian counter from 0, the payload the msgpack batch; the last
// BufferSteps batches are kept for replay on a ROUTER socket.
//
// Publish is safe for concurrent use and never blocks. Behind it, a bounded
// queue feeds one goroutine that owns the PUB socket and numbers, encodes
// and sends batches; another goroutine owns the ROUTER socket. Close stops
// and joins both.
type Publisher struct {
	cfg   Config
	opt   Options
	queue chan *kvevent.Batch

	endpoint       string // as bound (actual port), or as dialed
	replayEndpoint string
	ring           *ring

	closed     atomic.Bool
	withhold   atomic.Bool
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	once       sync.Once
	replaySock zmq4.Socket // touched by Close only when its owner is stuck

	published, dropped, replays, badReplays, withheld atomic.Uint64
}

// NewPublisher starts a publisher for cfg. With publisher "null" or events
// disabled it returns a Publisher that accepts nothing and owns no sockets
// and no goroutines. A bound endpoint (and the replay endpoint) is bound
// before NewPublisher returns; a connecting one is dialled in the background,
// with reconnects, and batches published meanwhile queue up or are dropped.
func NewPublisher(cfg Config, opt Options) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opt.Engine == kvevent.EngineSGLang {
		opt.Encoding, opt.LegacyReplay = kvevent.EncodingSGLang, true
	}
	p := &Publisher{cfg: cfg, opt: opt}
	if !cfg.active() {
		p.closed.Store(true)
		return p, nil
	}
	switch {
	case opt.Engine != "" && !opt.Engine.Known():
		return nil, fmt.Errorf("kvevents: publisher: unknown engine %q", opt.Engine)
	case opt.Encoding != kvevent.EncodingMap && opt.Encoding != kvevent.EncodingArray && opt.Encoding != kvevent.EncodingSGLang:
		return nil, fmt.Errorf("kvevents: publisher: unknown encoding %d", opt.Encoding)
	}
	ep, err := OffsetEndpoint(cfg.Endpoint, opt.DPRank)
	if err != nil {
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}
	rep, err := OffsetEndpoint(cfg.ReplayEndpoint, opt.DPRank)
	if err != nil {
		return nil, fmt.Errorf("kvevents: publisher: %w", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.queue = make(chan *kvevent.Batch, cfg.MaxQueueSize)
	p.ring = newRing(cfg.BufferSteps)

	dial := !opt.Bind && !PublisherBinds(opt.Engine, ep)
	var pubOpts []zmq4.Option
	if dial {
		// zmq4's reconnect re-dials the socket's endpoint, so it must not be
		// set on a listening socket.
		pubOpts = append(pubOpts, zmq4.WithDialerMaxRetries(-1), zmq4.WithAutomaticReconnect(true))
	}
	pub := zmq4.NewPub(ctx, pubOpts...)
	if cfg.HWM > 0 {
		if err := pub.SetOption(zmq4.OptionHWM, cfg.HWM); err != nil {
			cancel()
			_ = pub.Close()
			return nil, fmt.Errorf("kvevents: publisher: hwm: %w", err)
		}
	}
	p.endpoint = ep
	if !dial {
		if err := pub.Listen(ep); err != nil {
			cancel()
			_ = pub.Close()
			return nil, fmt.Errorf("kvevents: publisher: %w", err)
		}
		p.endpoint = boundEndpoint(ep, pub.Addr())
	}
	var router zmq4.Socket
	if rep != "" {
		router = zmq4.NewRouter(ctx)
		if err := router.Listen(rep); err != nil {
			cancel()
			_ = pub.Close()
			_ = router.Close()
			return nil, fmt.Errorf("kvevents: publisher: replay: %w", err)
		}
		p.replayEndpoint = boundEndpoint(rep, router.Addr())
		p.replaySock = router
	}

	// From here on each socket belongs to its goroutine.
	p.wg.Add(1)
	go p.publishLoop(ctx, pub, dial)
	if router != nil {
		p.wg.Add(1)
		go p.replayLoop(ctx, router)
	}
	return p, nil
}

// boundEndpoint is ep with the port the listener actually got, so that
// "tcp://127.0.0.1:0" becomes dialable. The host stays as configured, as
// vLLM reports it.
func boundEndpoint(ep string, addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !strings.HasPrefix(ep, "tcp://") {
		return ep
	}
	i := strings.LastIndexByte(ep, ':')
	return ep[:i+1] + strconv.Itoa(tcp.Port)
}

// Endpoint is the PUB address: as bound, with the actual port when the
// config asked for port 0, or as dialled. Empty for a null publisher.
func (p *Publisher) Endpoint() string { return p.endpoint }

// ReplayEndpoint is the bound ROUTER address, or "" without replay.
func (p *Publisher) ReplayEndpoint() string { return p.replayEndpoint }

// Publish queues b for publishing and reports whether it was queued. It never
// blocks: when the queue is full the batch is dropped and counted, and after
// Close (or for a null publisher) it is refused. b must not be modified
// afterwards.
func (p *Publisher) Publish(b *kvevent.Batch) bool {
	if p.closed.Load() {
		return false
	}
	select {
	case p.queue <- b:
		return true
	default:
		p.dropped.Add(1)
		return false
	}
}

// Withhold stops (on) or resumes sending batches to subscribers, as a
// network partition between them would: meanwhile each batch still takes
// its sequence number and enters the replay buffer, so a subscriber sees the
// gap when sending resumes and can replay it. For tests of what a consumer
// does when events stop.
func (p *Publisher) Withhold(on bool) { p.withhold.Store(on) }

// Stats returns the publisher's counters.
func (p *Publisher) Stats() PublisherStats {
	return PublisherStats{
		Published:  p.published.Load(),
		Dropped:    p.dropped.Load(),
		Replays:    p.replays.Load(),
		BadReplays: p.badReplays.Load(),
		Withheld:   p.withheld.Load(),
	}
}

// Close stops accepting batches, numbers and sends those already queued (they
// reach the replay buffer, but subscribers may miss them: the sockets close
// at once, like vLLM's close(linger=0)) and waits for the goroutines to
// finish. A replay stuck writing to a client that stopped reading is cut off
// after a second. Close is idempotent and always returns nil.
func (p *Publisher) Close() error {
	p.once.Do(func() {
		p.closed.Store(true)
		if p.cancel == nil {
			return
		}
		p.cancel()
		done := make(chan struct{})
		go func() { p.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(closeGrace):
			// The replay goroutine is blocked writing to a client that
			// stopped reading; closing its socket fails that write.
			if p.replaySock != nil {
				_ = p.replaySock.Close()
			}
			<-done
		}
	})
	return nil
}

func (p *Publisher) publishLoop(ctx context.Context, sock zmq4.Socket, dial bool) {
	defer p.wg.Done()
	defer func() { _ = sock.Close() }()
	if dial {
		// Retries until it connects or ctx ends; zmq4 reconnects afterwards.
		if err := sock.Dial(p.endpoint); err != nil {
			return
		}
	}
	var seq uint64
	topic := []byte(p.cfg.Topic)
	send := func(b *kvevent.Batch) {
		if b.DPRank == nil {
			cp := *b // the caller's batch is immutable
			cp.DPRank = &p.opt.DPRank
			b = &cp
		}
		payload := kvevent.AppendBatch(nil, b, p.opt.Encoding)
		seq8 := binary.BigEndian.AppendUint64(nil, seq)
		// A PUB send only queues (or drops past the HWM); it does not fail
		// for want of subscribers.
		if p.withhold.Load() {
			p.withheld.Add(1)
		} else {
			_ = sock.Send(zmq4.NewMsgFrom(topic, seq8, payload))
		}
		p.ring.add(seq, payload)
		p.published.Add(1)
		seq++
	}
	for {
		select {
		case b := <-p.queue:
			send(b)
		case <-ctx.Done():
			for {
				select {
				case b := <-p.queue:
					send(b)
				default:
					return
				}
			}
		}
	}
}

func (p *Publisher) replayLoop(ctx context.Context, sock zmq4.Socket) {
	defer p.wg.Done()
	defer closeDrain(sock)
	topic := []byte(p.cfg.Topic)
	for {
		msg, err := sock.Recv()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue
		}
		f := msg.Frames
		// vLLM: exactly [identity, empty, start_seq]; a DEALER sends
		// [empty, seq8], a REQ sends [seq8] and its socket adds the empty.
		if len(f) != 3 || len(f[1]) != 0 || len(f[2]) != 8 {
			p.badReplays.Add(1)
			continue
		}
		id, start := f[0], binary.BigEndian.Uint64(f[2])
		p.replays.Add(1)
		for _, e := range p.ring.since(start) {
			if ctx.Err() != nil {
				return
			}
			seq8 := binary.BigEndian.AppendUint64(nil, e.seq)
			var reply zmq4.Msg
			if p.opt.LegacyReplay {
				reply = zmq4.NewMsgFrom(id, nil, seq8, e.payload)
			} else {
				reply = zmq4.NewMsgFrom(id, nil, topic, seq8, e.payload)
			}
			if err := sock.Send(reply); err != nil {
				break
			}
		}
		var end zmq4.Msg
		if p.opt.LegacyReplay {
			end = zmq4.NewMsgFrom(id, nil, endSeq, nil)
		} else {
			end = zmq4.NewMsgFrom(id, nil, nil, endSeq, nil)
		}
		_ = sock.Send(end)
	}
}

// ring keeps the last batches for replay. The publish goroutine adds, the
// replay goroutine reads; every field is guarded by mu.
type ring struct {
	mu      sync.Mutex
	entries []entry
	head    int // index of the oldest entry once full
}

type entry struct {
	seq     uint64
	payload []byte // immutable
}

func newRing(size int) *ring {
	return &ring{entries: make([]entry, 0, size)}
}

func (r *ring) add(seq uint64, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case cap(r.entries) == 0:
	case len(r.entries) < cap(r.entries):
		r.entries = append(r.entries, entry{seq, payload})
	default:
		r.entries[r.head] = entry{seq, payload}
		r.head = (r.head + 1) % len(r.entries)
	}
}

// since returns, oldest first, the entries with seq >= start.
func (r *ring) since(start uint64) []entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []entry
	for i := range r.entries {
		e := r.entries[(r.head+i)%len(r.entries)]
		if e.seq >= start {
			out = append(out, e)
		}
	}
	return out
}
