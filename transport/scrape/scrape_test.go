package scrape_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/scrape"
)

// timeout is load.scrape_timeout's default.
const timeout = 100 * time.Millisecond

func scrapeOnce(t testing.TB, s *scrape.Scraper, url string, within time.Duration) (load.Report, time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	t0 := time.Now()
	r, err := s.Scrape(ctx, url)
	return r, time.Since(t0), err
}

func TestScrapeVLLMPage(t *testing.T) {
	var mu sync.Mutex
	var got *http.Request
	page := simPage(t)
	e := startEngine(t, func(e *engine, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = r.Clone(context.Background())
		mu.Unlock()
		serve(page)(e, w, r)
	})
	s := newScraper(t, scrape.Options{})
	for _, base := range []string{e.URL, e.URL + "/"} {
		r, _, err := scrapeOnce(t, s, base, time.Second)
		if err != nil || r != simReport {
			t.Fatalf("%s: got %+v, %v; want %+v", base, r, err, simReport)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got.URL.Path != "/metrics" || got.Method != http.MethodGet {
		t.Errorf("request %s %s, want GET /metrics", got.Method, got.URL.Path)
	}
	if a := got.Header.Get("Accept"); !strings.HasPrefix(a, "text/plain;version=0.0.4") {
		t.Errorf("Accept %q", a)
	}
	if ae := got.Header.Get("Accept-Encoding"); ae != "" {
		t.Errorf("Accept-Encoding %q: the page should come uncompressed", ae)
	}
}

// TestScrapeReusesConnection: scrapes of one replica share one keep-alive
// connection, so scraping every replica ten times a second costs no
// handshakes.
func TestScrapeReusesConnection(t *testing.T) {
	e := startEngine(t, serve(simPage(t)))
	s := newScraper(t, scrape.Options{})
	for range 100 {
		if _, _, err := scrapeOnce(t, s, e.URL, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Errorf("%d connections for 100 scrapes, want 1", n)
	}
}

// TestScrapeSimulator scrapes the real simulator, and sees its restart in
// the prefix cache counters.
func TestScrapeSimulator(t *testing.T) {
	o := sim.DefaultOptions()
	o.Port = 0
	o.Engine.Latency.Zero = true
	srv, err := sim.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s := newScraper(t, scrape.Options{})

	body := `{"model":"inferrail/sim-8b","prompt":"` + strings.Repeat("tell me more about caches ", 20) + `","max_tokens":2}`
	for range 3 {
		resp, err := http.Post(srv.URL()+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("completion: status %d", resp.StatusCode)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	before, _, err := scrapeOnce(t, s, srv.URL(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if before.Engine != load.EngineVLLM || before.PrefixQueries == 0 || before.PrefixHits == 0 ||
		before.KVCapacityBlocks != 4096 || before.BlockSize != 16 {
		t.Fatalf("before the restart: %+v", before)
	}

	srv.Kill()
	if _, _, err := scrapeOnce(t, s, srv.URL(), time.Second); err == nil || scrape.Result(err) != "error" {
		t.Fatalf("scraping a killed engine: %v (%s)", err, scrape.Result(err))
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	after, _, err := scrapeOnce(t, s, srv.URL(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !load.Restarted(before, after) || load.Restarted(after, after) {
		t.Errorf("Restarted(%+v, %+v) = false", before, after)
	}
}

// TestScrapeTooLarge: a page over the limit is an error without being read
// whole, and the engine sees its connection closed. The limit is exact.
func TestScrapeTooLarge(t *testing.T) {
	s := newScraper(t, scrape.Options{})
	noise := noiseLines(64 << 10)
	const fifty = 50 << 20

	for _, announce := range []bool{true, false} {
		log := newWriteLog()
		e := startEngine(t, stream(noise, fifty, announce, log))
		_, took, err := scrapeOnce(t, s, e.URL, 5*time.Second)
		if !errors.Is(err, scrape.ErrTooLarge) || scrape.Result(err) != "too_large" {
			t.Fatalf("announce %v: %v, want ErrTooLarge", announce, err)
		}
		select {
		case <-log.ended:
		case <-time.After(5 * time.Second):
			t.Fatalf("announce %v: the engine never saw the connection close", announce)
		}
		written, werr := log.result()
		if werr == nil || written >= fifty/2 {
			t.Errorf("announce %v: engine wrote %d bytes of %d before %v", announce, written, fifty, werr)
		}
		t.Logf("announce %v: refused in %v; the engine wrote %.1f MiB before: %v", announce, took, float64(written)/(1<<20), werr)
	}

	// Exactly at the limit, and one byte over.
	const limit = 1 << 20
	small := newScraper(t, scrape.Options{MaxPageBytes: limit})
	page := simPage(t)
	pad := func(n int) []byte { // the page, padded with comment lines to n bytes
		b := slices.Clone(page)
		for len(b) < n {
			line := "# " + strings.Repeat("x", min(1000, n-len(b)-3)) + "\n"
			b = append(b, line...)
		}
		return b
	}
	for _, announce := range []bool{true, false} {
		for _, n := range []int{limit, limit + 1} {
			p := pad(n)
			if len(p) != n {
				t.Fatalf("padded to %d, want %d", len(p), n)
			}
			h := serve(p)
			if !announce {
				h = stream(p, int64(n), false, nil) // written in pieces, chunked
			}
			e := startEngine(t, h)
			r, _, err := scrapeOnce(t, small, e.URL, 5*time.Second)
			switch {
			case n == limit && (err != nil || r != simReport):
				t.Errorf("announce %v: page of exactly the limit: %+v, %v", announce, r, err)
			case n > limit && !errors.Is(err, scrape.ErrTooLarge):
				t.Errorf("announce %v: page one byte over: %v", announce, err)
			}
		}
	}
}

// TestScrapeEndless: an endless page that comes fast ends at the limit; one
// that dribbles ends at the timeout, as does a head that never comes.
func TestScrapeEndless(t *testing.T) {
	s := newScraper(t, scrape.Options{})
	fast := startEngine(t, stream(junk(64<<10, 1), 0, false, nil))
	_, took, err := scrapeOnce(t, s, fast.URL, 10*time.Second)
	if !errors.Is(err, scrape.ErrTooLarge) {
		t.Errorf("fast endless page: %v after %v, want ErrTooLarge", err, took)
	}

	slow := map[string]string{
		"dribble":   startEngine(t, dribble(simPage(t), 5*time.Millisecond)).URL,
		"no head":   startEngine(t, hang).URL,
		"no accept": noAccept(t),
	}
	for name, url := range slow {
		stalls := startStallMeter()
		_, took, err := scrapeOnce(t, s, url, timeout)
		stall := stalls.Stop()
		if !errors.Is(err, context.DeadlineExceeded) || scrape.Result(err) != "timeout" {
			t.Errorf("%s: %v, want a timeout", name, err)
		}
		if took < timeout-time.Millisecond || took > timeout+20*time.Millisecond+hops*stall {
			t.Errorf("%s: returned after %v, timeout %v (the process stalled up to %v)", name, took, timeout, stall)
		}
		t.Logf("%s: %v after %v", name, err, took)
	}
}

func TestScrapeGarbage(t *testing.T) {
	s := newScraper(t, scrape.Options{})
	cases := map[string][]byte{
		"random bytes": junk(1<<20, 2),
		"html":         []byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"),
		"empty":        nil,
		"other app":    []byte("# TYPE go_goroutines gauge\ngo_goroutines 12\n"),
		"malformed":    []byte("vllm:num_requests_running{engine=\"0\"} 1\nvllm:num_requests_waiting{engine=\"0\"} lots\n"),
		"renamed":      []byte("vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_ratio 0.5\n"),
	}
	for name, page := range cases {
		e := startEngine(t, serve(page))
		r, _, err := scrapeOnce(t, s, e.URL, time.Second)
		if !errors.Is(err, load.ErrUnreadable) || scrape.Result(err) != "unreadable" || r != (load.Report{}) {
			t.Errorf("%s: %+v, %v; want ErrUnreadable", name, r, err)
		}
	}
}

// TestScrapeWithoutPrefixCounters: the page of an engine without prefix
// caching (running, waiting and KV usage, no vllm:prefix_cache_*) is a load
// report, read in pieces as it arrives, not an unreadable page.
func TestScrapeWithoutPrefixCounters(t *testing.T) {
	page := []byte("# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=\"m\"} 4\n" +
		"vllm:num_requests_waiting{model_name=\"m\"} 2\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.5\n" +
		strings.Repeat("# padding so that the page spans reads\n", 2000) + "vllm:generation_tokens_total 7\n")
	e := startEngine(t, serve(page))
	r, _, err := scrapeOnce(t, newScraper(t, scrape.Options{}), e.URL, time.Second)
	if err != nil || r.Running != 4 || r.Waiting != 2 || r.KVUsage != 0.5 || r.Has(load.FieldPrefix) {
		t.Fatalf("got %+v, %v; want the page's load without prefix counters", r, err)
	}
}

func TestScrapeStatus(t *testing.T) {
	s := newScraper(t, scrape.Options{})
	e := startEngine(t, func(_ *engine, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	})
	_, _, err := scrapeOnce(t, s, e.URL, time.Second)
	if !errors.Is(err, scrape.ErrStatus) || scrape.Result(err) != "status" || !strings.Contains(err.Error(), "503") {
		t.Errorf("got %v, want ErrStatus 503", err)
	}
	redirect := startEngine(t, func(_ *engine, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/metrics", http.StatusFound)
	})
	if _, _, err := scrapeOnce(t, s, redirect.URL, time.Second); !errors.Is(err, scrape.ErrStatus) {
		t.Errorf("redirect: got %v, want ErrStatus (not followed)", err)
	}
	if _, _, err := scrapeOnce(t, s, resets(t), time.Second); scrape.Result(err) != "error" {
		t.Errorf("closed at once: got %v (%s), want error", err, scrape.Result(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Scrape(ctx, e.URL); scrape.Result(err) != "cancelled" {
		t.Errorf("cancelled: got %v (%s)", err, scrape.Result(err))
	}
	if _, err := s.Scrape(context.Background(), "http://[::1"); scrape.Result(err) != "error" {
		t.Errorf("bad URL: got %v", err)
	}
}

// TestScrapeIndependent: scrapes stuck on 20 engines that never answer
// hold nothing another scrape needs. With all 20 waiting (for 10 s), a
// healthy engine is scraped as fast as alone.
func TestScrapeIndependent(t *testing.T) {
	s := newScraper(t, scrape.Options{})
	healthy := startEngine(t, serve(simPage(t)))
	alone := make([]time.Duration, 20)
	for i := range alone {
		_, took, err := scrapeOnce(t, s, healthy.URL, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = took
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 20 {
		url := noAccept(t)
		if i%2 == 0 {
			url = startEngine(t, hang).URL
		}
		wg.Go(func() {
			c, stop := context.WithTimeout(ctx, 10*time.Second)
			defer stop()
			s.Scrape(c, url)
		})
	}
	time.Sleep(50 * time.Millisecond) // let them connect and wait
	stalls := startStallMeter()
	busy := make([]time.Duration, 20)
	for i := range busy {
		_, took, err := scrapeOnce(t, s, healthy.URL, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		busy[i] = took
	}
	stall := stalls.Stop()
	cancel()
	wg.Wait()
	slices.Sort(alone)
	slices.Sort(busy)
	t.Logf("healthy scrape alone: median %v, max %v; beside 20 stuck scrapes: median %v, max %v",
		alone[10], alone[19], busy[10], busy[19])
	// A lock held across the stuck scrapes' I/O would hold this one for
	// their 10 s.
	if busy[19] > time.Second+hops*stall {
		t.Errorf("a healthy scrape took %v beside 20 stuck ones (the process stalled up to %v)", busy[19], stall)
	}
}

// TestScrapeHostile scrapes 20 hostile engines (50 MB pages, endless and
// dribbled pages, heads that never come, garbage, no accept, closed at
// once) every 100 ms, in parallel, for 2 s, beside one healthy engine:
// every healthy scrape succeeds, and within load.scrape_timeout (not
// checked under the race detector, which makes a scrape seven times as
// costly).
func TestScrapeHostile(t *testing.T) {
	s := newScraper(t, scrape.Options{MaxPageBytes: hostileLimit()})
	healthy := startEngine(t, serve(simPage(t)))
	urls := hostile(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]map[string]int, len(urls))
	for i, url := range urls {
		results[i] = map[string]int{}
		wg.Go(func() { // a scrape every 100 ms, as a Loop would
			tick := time.NewTicker(timeout)
			defer tick.Stop()
			for ctx.Err() == nil {
				c, stop := context.WithTimeout(ctx, timeout)
				_, err := s.Scrape(c, url)
				stop()
				if ctx.Err() == nil {
					results[i][scrape.Result(err)]++
				}
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	stalls := startStallMeter()
	var took []time.Duration
	var failed []error
	for ctx.Err() == nil {
		r, d, err := scrapeOnce(t, s, healthy.URL, time.Second)
		if err == nil && r != simReport {
			t.Errorf("healthy scrape: %+v", r)
		}
		if err != nil {
			failed = append(failed, err)
		}
		took = append(took, d)
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	stall := stalls.Stop()
	// Judged only if the machine let the process run (see stallMeter), and
	// not under the race detector, where the hostile scrapes' checked
	// copies starve the healthy one of CPU.
	if len(failed) > 0 && hops*stall < time.Second && !raceEnabled {
		t.Errorf("%d of %d healthy scrapes failed: %v", len(failed), len(took), failed[0])
	}
	if slow := slices.Max(took); slow >= timeout+hops*stall && !raceEnabled {
		t.Errorf("a healthy scrape took %v, timeout %v (the process stalled up to %v)", slow, timeout, stall)
	}
	for i, res := range results {
		if res["ok"] > 0 {
			t.Errorf("hostile engine %d read as healthy: %v", i, res)
		}
	}
	slices.Sort(took)
	t.Logf("%d healthy scrapes beside 20 hostile engines: median %v, p99 %v, max %v; longest stall of the process %v; hostile results %v",
		len(took), took[len(took)/2], took[len(took)*99/100], took[len(took)-1], stall, results)
}

func TestResult(t *testing.T) {
	f := func(err error, want string) {
		t.Helper()
		if got := scrape.Result(err); got != want {
			t.Errorf("Result(%v) = %q, want %q", err, got, want)
		}
	}
	f(nil, "ok")
	f(load.ErrUnreadable, "unreadable")
	f(scrape.ErrTooLarge, "too_large")
	f(scrape.ErrStatus, "status")
	f(context.DeadlineExceeded, "timeout")
	f(context.Canceled, "cancelled")
	f(errors.New("connection reset by peer"), "error")
}
