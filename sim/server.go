package sim

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/zeebo/xxh3"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/transport/certs"
	"github.com/inferrail/inferrail/transport/conncheck"
)

// Server is a running simulator. Tests start several in process on ephemeral
// loopback ports and break them on purpose: Kill stops one as a crash would
// (connections reset, new ones refused), Restart brings up a fresh engine on
// the same port, and SetFault makes it close, hang, delay or fail requests.
type Server struct {
	opts Options
	addr string // fixed at the first listen, so Restart keeps the port
	// eventsPub and eventsReplay are the KV event endpoints the first life
	// bound, which Restart binds again.
	eventsPub, eventsReplay string

	mu   sync.Mutex // guards inst, closed and, after the first start, the event endpoints
	inst *instance
	// closed is set by Close; Restart refuses afterwards.
	closed bool

	fault   atomic.Pointer[Fault]
	faultMu sync.Mutex
	// faultChanged is closed and replaced on every SetFault, waking hung requests.
	faultChanged atomic.Pointer[chan struct{}]
}

// Start validates opts, builds an engine and serves it. With Port 0 it picks
// a free loopback port; URL tells which.
func Start(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if _, err := engine.New(opts.Engine); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, addr: net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port))}
	ch := make(chan struct{})
	s.faultChanged.Store(&ch)
	inst, err := s.startInstance()
	if err != nil {
		return nil, err
	}
	s.inst = inst
	s.addr = inst.ln.Addr().String()
	return s, nil
}

// StartN starts n simulators with opts on free ports. On error it closes the
// ones already started.
func StartN(n int, opts Options) ([]*Server, error) {
	opts.Port = 0
	out := make([]*Server, 0, n)
	for i := 0; i < n; i++ {
		s, err := Start(opts)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Addr is the host:port the simulator listens on.
func (s *Server) Addr() string { return s.addr }

// URL is the simulator's base URL, such as http://127.0.0.1:8000, or
// https://… when it serves TLS.
func (s *Server) URL() string {
	if s.opts.SSLCertFile != "" {
		return "https://" + s.addr
	}
	return "http://" + s.addr
}

// Options returns the options the simulator runs with.
func (s *Server) Options() Options { return s.opts }

// SetFault changes how the simulator answers from now on. Requests already
// hanging are released when the fault changes.
func (s *Server) SetFault(f Fault) {
	s.faultMu.Lock()
	defer s.faultMu.Unlock()
	if f.Kind == FaultNone {
		s.fault.Store(nil)
	} else {
		s.fault.Store(&f)
	}
	ch := make(chan struct{})
	old := s.faultChanged.Swap(&ch)
	close(*old)
}

// Kill stops the simulator as a crash would: the listener closes, open
// connections are reset and the engine's state is lost. Restart brings it back.
func (s *Server) Kill() {
	s.mu.Lock()
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst != nil {
		inst.stop()
	}
}

// Restart starts a fresh engine on the same address after Kill. The new engine
// has an empty cache and zeroed counters, as a restarted vLLM does.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("sim: restart after close")
	}
	if s.inst != nil {
		return nil
	}
	inst, err := s.startInstance()
	if err != nil {
		return err
	}
	s.inst = inst
	return nil
}

// Alive reports whether the simulator is serving (not killed or closed).
func (s *Server) Alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inst != nil
}

// Close stops the simulator for good.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	inst := s.inst
	s.inst = nil
	s.mu.Unlock()
	if inst != nil {
		inst.stop()
	}
	return nil
}

// instance is one life of the simulator, from start to Kill.
type instance struct {
	s       *Server
	opts    *Options
	eng     *engine.Engine
	drv     *driver
	ln      *trackingListener
	srv     *fasthttp.Server
	stats   *engineStats
	events  *eventSink
	started time.Time
	// root is the hash chain root of requests without a cache_salt.
	root        prefix.Hash
	fingerprint string // system_fingerprint
	reqSeq      atomic.Uint64
	watch       *conncheck.Watcher // clients of requests waiting on the engine
	store       responseStore      // stored Responses API responses
	// stopping is closed when the instance starts to stop.
	stopping chan struct{}
	serving  sync.WaitGroup
}

func (s *Server) startInstance() (*instance, error) {
	eng, err := engine.New(s.opts.Engine)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("sim: listen %s: %w", s.addr, err)
	}
	inst := &instance{
		s:       s,
		opts:    &s.opts,
		eng:     eng,
		drv:     newDriver(eng, s.opts.Engine.Latency.Zero),
		ln:      newTrackingListener(ln),
		started: time.Now(),
		root:    prefix.Root(s.opts.Model, "", ""),
		fingerprint: openai.Fingerprint(s.opts.Version,
			fmt.Sprintf("%08x", xxh3.HashString(fmt.Sprintf("%+v", s.opts.Engine))>>32)),
		stopping: make(chan struct{}),
		watch:    conncheck.NewWatcher(watchEvery),
	}
	inst.stats = newEngineStats(inst)
	inst.drv.onStep = inst.stats.onStep
	if inst.events, err = newEventSink(&s.opts, s.eventsPub, s.eventsReplay); err != nil {
		inst.watch.Close()
		ln.Close()
		return nil, err
	}
	if inst.events != nil {
		inst.drv.onBatch = inst.events.publish
		s.eventsPub, s.eventsReplay = inst.events.pub.Endpoint(), inst.events.pub.ReplayEndpoint()
	}
	inst.srv = &fasthttp.Server{
		Handler:                       inst.handle,
		Name:                          "uvicorn",
		NoDefaultDate:                 false,
		NoDefaultContentType:          true,
		DisableHeaderNamesNormalizing: false,
		ReadTimeout:                   0,
		IdleTimeout:                   30 * time.Second,
		MaxRequestBodySize:            64 << 20,
		StreamRequestBody:             false,
		CloseOnShutdown:               true,
		// Connections a client or test closes on purpose are not news.
		Logger: quietLogger{},
	}
	var serveLn net.Listener = inst.ln
	if s.opts.SSLCertFile != "" {
		pair, err := certs.LoadPair("sim", s.opts.SSLCertFile, s.opts.SSLKeyFile, certs.Options{})
		if err != nil {
			inst.watch.Close()
			ln.Close()
			return nil, err
		}
		serveLn = tls.NewListener(inst.ln, certs.Server(pair, tls.VersionTLS12, nil, false))
	}
	inst.drv.start()
	inst.serving.Add(1)
	go func() {
		defer inst.serving.Done()
		// Serve returns when the listener closes; that is how the instance stops.
		_ = inst.srv.Serve(serveLn)
	}()
	return inst, nil
}

// stop ends the instance: no new connections, every open one reset, the
// engine loop stopped and joined, KV events flushed and closed.
func (inst *instance) stop() {
	close(inst.stopping)
	inst.ln.Close()
	inst.ln.closeAll()
	inst.drv.close()
	inst.serving.Wait()
	// Handlers still running see stopping and return; Shutdown waits for them.
	_ = inst.srv.Shutdown()
	inst.watch.Close()
	if inst.events != nil {
		inst.events.close()
	}
}

// Inspect runs fn on the engine between two steps, for tests that compare
// the engine's state with what its clients saw. It reports false when the
// simulator is not running.
func (s *Server) Inspect(fn func(*engine.Engine)) bool {
	s.mu.Lock()
	inst := s.inst
	s.mu.Unlock()
	return inst != nil && inst.drv.inspect(fn)
}

type quietLogger struct{}

func (quietLogger) Printf(string, ...any) {}
