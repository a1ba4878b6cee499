package scrape_test

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/transport/scrape"
)

// TestMain fails the package when a test leaves a goroutine behind. fasthttp
// keeps a few of its own past a simulator's Shutdown (see sim/server_test.go);
// the simulator is the only fasthttp user here.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

// simPage is the simulator's golden vLLM page (model/load's copy of
// sim/vllmmetrics/testdata/page.golden) and the Report it reads as.
func simPage(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "model", "load", "testdata", "vllm_sim.prom"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var simReport = load.Report{
	Engine: load.EngineVLLM, Ranks: 1, Running: 3, Waiting: 2,
	KVUsage: 0.4375, KVUsageMax: 0.4375, PrefixQueries: 1234567, PrefixHits: 512,
	Preemptions: 1, KVCapacityBlocks: 4096, BlockSize: 16, KVCapacityTokens: 65536,
	Fields: load.FieldPrefix | load.FieldPreemptions | load.FieldCapacity,
}

// newScraper returns a Scraper closed at the end of the test.
func newScraper(t testing.TB, opts scrape.Options) *scrape.Scraper {
	t.Helper()
	s := scrape.New(opts)
	t.Cleanup(s.Close)
	return s
}

// engine is a fake engine: an httptest server that counts the connections
// it accepted and ends its handlers when the test ends.
type engine struct {
	*httptest.Server
	conns atomic.Int64
	done  chan struct{} // closed at cleanup: handlers that wait return
}

func startEngine(t testing.TB, h func(e *engine, w http.ResponseWriter, r *http.Request)) *engine {
	t.Helper()
	e := &engine{done: make(chan struct{})}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(e, w, r) }))
	e.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.Start()
	// Cleanups run last first: close the connections (writers fail), end
	// the waiting handlers, then Close, which waits for every handler.
	t.Cleanup(e.Close)
	t.Cleanup(func() { close(e.done) })
	t.Cleanup(e.CloseClientConnections)
	return e
}

// serve answers every request with page, its length announced.
func serve(page []byte) func(*engine, http.ResponseWriter, *http.Request) {
	return func(_ *engine, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(page)))
		w.Write(page)
	}
}

// writeLog records what a streaming handler managed to send.
type writeLog struct {
	mu      sync.Mutex
	written int64
	err     error // the write error that stopped it: the client closed
	ended   chan struct{}
}

func newWriteLog() *writeLog { return &writeLog{ended: make(chan struct{}, 64)} }

func (l *writeLog) result() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.written, l.err
}

// stream writes chunk over and over (total bytes, or forever when total is
// 0), with Content-Length set when announce is true, until the client goes
// away or the test ends.
func stream(chunk []byte, total int64, announce bool, log *writeLog) func(*engine, http.ResponseWriter, *http.Request) {
	return func(e *engine, w http.ResponseWriter, r *http.Request) {
		if announce {
			w.Header().Set("Content-Length", strconv.FormatInt(total, 10))
		}
		var n int64
		var err error
		for total == 0 || n < total {
			select {
			case <-e.done:
				return
			default:
			}
			c := chunk
			if total > 0 {
				c = c[:min(int64(len(c)), total-n)]
			}
			var k int
			k, err = w.Write(c)
			n += int64(k)
			if err != nil {
				break
			}
		}
		if log != nil {
			log.mu.Lock()
			log.written, log.err = n, err
			log.mu.Unlock()
			log.ended <- struct{}{}
		}
	}
}

// dribble sends a valid page one byte every gap.
func dribble(page []byte, gap time.Duration) func(*engine, http.ResponseWriter, *http.Request) {
	return func(e *engine, w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for _, c := range page {
			if _, err := w.Write([]byte{c}); err != nil || rc.Flush() != nil {
				return
			}
			select {
			case <-e.done:
				return
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
	}
}

// hang never answers: it holds the request until the client or the test
// goes away.
func hang(e *engine, _ http.ResponseWriter, r *http.Request) {
	select {
	case <-e.done:
	case <-r.Context().Done():
	}
}

// noAccept is a listener that never accepts: connections wait in its
// backlog, and requests in its socket buffers.
func noAccept(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String()
}

// resets is an engine that closes every connection as soon as it accepts
// it, as one does that crashes on each request. (A port merely closed
// could be taken by the next server a test starts.)
func resets(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// junk returns n random bytes (a newline every 256 or so).
func junk(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// noiseLines returns about n bytes of a valid-looking page that no Report
// needs, as an engine with runaway label cardinality might serve.
func noiseLines(n int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < n; i++ {
		b.WriteString(`vllm:request_prompt_tokens_bucket{engine="0",le="`)
		b.WriteString(strconv.Itoa(i))
		b.WriteString(`",model_name="m"} 1.0` + "\n")
	}
	return b.Bytes()
}

// stallMeter measures how late the test process gets to run: a goroutine
// that shares nothing with the scrapes sets a 2 ms timer over and over and
// records how long after it fired it ran. On a quiet machine that is a
// millisecond or two. When other work holds the cores (other test binaries,
// other sessions on a shared machine), every goroutine of the process may
// wait as long, and no design of ours could keep a report fresher than
// that: the time bounds allow for it, once per goroutine hand-off of a
// scrape (see hops). A lock or a wait shared between scrapes would not show
// in the meter, so the bounds still catch one.
type stallMeter struct {
	stop  chan struct{}
	done  chan struct{}
	worst time.Duration
}

func startStallMeter() *stallMeter {
	m := &stallMeter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		const period = 2 * time.Millisecond
		t := time.NewTimer(period)
		defer t.Stop()
		for {
			due := time.Now().Add(period)
			t.Reset(period)
			select {
			case <-m.stop:
				return
			case <-t.C:
				m.worst = max(m.worst, time.Since(due))
			}
		}
	}()
	return m
}

// Stop ends the meter and returns the longest stall it saw.
func (m *stallMeter) Stop() time.Duration {
	close(m.stop)
	<-m.done
	return m.worst
}

// hops is how many goroutine hand-offs a scrape over loopback crosses, each
// of which may wait for a core: the request written, read by the server's
// connection goroutine, the page written, read by the client's read loop,
// and handed to the scraping goroutine.
const hops = 4

// hostileLimit is the page limit of the isolation tests: the reference's
// 4 MiB, or 256 KiB under the race detector (see raceEnabled).
func hostileLimit() int64 {
	if raceEnabled {
		return 256 << 10
	}
	return scrape.DefaultMaxPageBytes
}

// hostile starts the 20 hostile engines of the isolation tests and returns
// their URLs: pages of 50 MB announced and not, endless pages, pages sent
// a byte at a time, heads that never come, garbage, and listeners that
// never accept or close at once.
func hostile(t testing.TB) []string {
	t.Helper()
	noise := noiseLines(64 << 10)
	var urls []string
	for i := range 20 {
		switch i % 8 {
		case 0: // 50 MB, announced: refused before its body is read
			urls = append(urls, startEngine(t, stream(noise, 50<<20, true, nil)).URL)
		case 1: // 50 MB, chunked: read up to the limit
			urls = append(urls, startEngine(t, stream(noise, 50<<20, false, nil)).URL)
		case 2: // endless random bytes
			urls = append(urls, startEngine(t, stream(junk(64<<10, uint64(i)), 0, false, nil)).URL)
		case 3: // a valid page, one byte every 5 ms
			urls = append(urls, startEngine(t, dribble(simPage(t), 5*time.Millisecond)).URL)
		case 4: // no head ever
			urls = append(urls, startEngine(t, hang).URL)
		case 5: // 1 MB of garbage
			urls = append(urls, startEngine(t, serve(junk(1<<20, uint64(i)))).URL)
		case 6:
			urls = append(urls, noAccept(t))
		case 7:
			urls = append(urls, resets(t))
		}
	}
	return urls
}
