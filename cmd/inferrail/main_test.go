package main

import (
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/tokenize"
)

// TestMain fails the package when a test leaves a goroutine behind. fasthttp
// keeps a few of its own past a simulator's Shutdown and a client's last
// request (see sim/server_test.go); they exit on their next tick. zmq4
// never stops a PUB socket's writer (transport/kvevents/main_test.go),
// which simulators publishing KV events leave behind.
//
// With RUN_TEST_BINARY_AS_INFERRAIL=1 the test binary is the inferrail binary
// instead, for tests that need a gateway process they can kill.
func TestMain(m *testing.M) {
	if os.Getenv(asBinary) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/go-zeromq/zmq4.(*pubMWriter).run"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

// asBinary is the environment variable (outside the INFERRAIL_ prefix, which config reads) that makes the test binary run as
// inferrail (TestMain).
const asBinary = "RUN_TEST_BINARY_AS_INFERRAIL"

// zeroLatencySims starts n simulators whose steps take no time, closed
// when the test ends, and returns them with the options they run with.
func zeroLatencySims(t *testing.T, n int) ([]*sim.Server, sim.Options) {
	t.Helper()
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.Engine.Latency.Zero = true
	sims, err := sim.StartN(n, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, s := range sims {
			s.Close()
		}
	})
	return sims, opts
}

// gatewayConfig is a gateway config in front of sims, run with opts:
// loopback ports the kernel picks, the simulators' model with their own
// tokenizer (so predictions can be exact) and one replica per simulator,
// sim-0 to sim-<n-1>, each given a second to answer an estimate.
func gatewayConfig(sims []*sim.Server, opts sim.Options) *config.Config {
	cfg := config.Default()
	cfg.Server.Listen, cfg.Server.AdminListen = "127.0.0.1:0", "127.0.0.1:0"
	// Every replica answers in time: on a loaded test machine the 2 ms
	// default is missed now and then, and a replica that misses it is
	// priced without its cache, which would make predictions here flaky.
	cfg.Routing.EstimateDeadline = time.Second
	m := config.NewModel(opts.Model, "sim")
	m.Tokenizer = tokenize.Sim
	cfg.Models = []config.Model{m}
	for i, s := range sims {
		cfg.Replicas = append(cfg.Replicas, config.NewReplica("sim-"+strconv.Itoa(i), s.URL(), opts.Model))
	}
	return cfg
}

// grows waits until n has grown by more than by from its value now, so that
// a test knows work happened across a change rather than sleeping on it.
func grows(t *testing.T, what string, n *atomic.Int64, by int64) {
	t.Helper()
	start := n.Load()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() <= start+by {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d -> %d in 10s", what, start, n.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
