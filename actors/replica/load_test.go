package replica

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/load"
)

// scriptScraper answers each scrape with the next scripted result.
type scriptScraper struct {
	results chan scrapeResult
}

type scrapeResult struct {
	r   load.Report
	err error
}

func (s *scriptScraper) Scrape(ctx context.Context, url string) (load.Report, error) {
	select {
	case <-ctx.Done():
		return load.Report{}, ctx.Err()
	case res := <-s.results:
		return res.r, res.err
	}
}

func (s *scriptScraper) next(t testing.TB, r load.Report, err error) {
	t.Helper()
	select {
	case s.results <- scrapeResult{r, err}:
	case <-time.After(5 * time.Second):
		t.Fatal("no scrape within 5s")
	}
}

func TestScrapesPublishLoad(t *testing.T) {
	h := newHarness(t)
	s := &scriptScraper{results: make(chan scrapeResult)}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	h.spawn(hd, Config{Health: testHealth(), Scraper: s,
		Load: config.LoadSignals{ScrapeInterval: time.Millisecond, ScrapeTimeout: time.Second, MaxAge: 250 * time.Millisecond}})
	snap := func() *Snapshot { return hd.Snapshot() }
	if _, ok := snap().FreshLoad(time.Now(), time.Hour); ok {
		t.Fatal("a load report before any scrape")
	}

	s.next(t, load.Report{Engine: load.EngineVLLM, Running: 3, Waiting: 1, KVUsage: 0.5, PrefixQueries: 100, PrefixHits: 40, Fields: load.FieldPrefix}, nil)
	waitFor(t, "report published", func() bool { return snap().Load.Running == 3 })
	if r, ok := snap().FreshLoad(time.Now(), time.Second); !ok || r.Waiting != 1 {
		t.Fatalf("fresh load %+v %v", r, ok)
	}
	if _, ok := snap().FreshLoad(time.Now().Add(time.Second), 250*time.Millisecond); ok {
		t.Fatal("a report older than max_age counted as fresh")
	}

	// Failures keep the last report, mark the engine failing and count.
	s.next(t, load.Report{}, errors.New("connection refused"))
	s.next(t, load.Report{}, load.ErrUnreadable)
	waitFor(t, "failing published", func() bool {
		return snap().LoadFailing && snap().Scrapes.Failed.Load() == 1 && snap().Scrapes.Unreadable.Load() == 1
	})
	if snap().Load.Running != 3 {
		t.Fatal("a failed scrape replaced the last report")
	}

	// Counters going backwards: the engine restarted.
	s.next(t, load.Report{Engine: load.EngineVLLM, Running: 0, PrefixQueries: 5, PrefixHits: 0, Fields: load.FieldPrefix}, nil)
	waitFor(t, "restart seen", func() bool { return snap().EngineRestarts == 1 && !snap().LoadFailing })
	if got := snap().Scrapes.OK.Load(); got != 2 {
		t.Fatalf("%d good scrapes counted, want 2", got)
	}
}

// logLines is a log destination a test can read while the actor writes.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// count returns how many lines hold every one of subs.
func (l *logLines) count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		all := line != ""
		for _, s := range subs {
			all = all && strings.Contains(line, s)
		}
		if all {
			n++
		}
	}
	return n
}

// TestScrapeMissingFamilies: a page with running, waiting and KV usage but
// none of the prefix cache counters (an engine without prefix caching) is
// routed on: the snapshot carries its load, fresh, and the replica warns
// once, naming what is missing, and again only when that changes. A page
// without what routing needs warns the same way; a whole page clears both.
func TestScrapeMissingFamilies(t *testing.T) {
	h := newHarness(t)
	var logs logLines
	s := &scriptScraper{results: make(chan scrapeResult)}
	own := NewCounters(0, 0)
	// The gateway has as many requests in flight as the pages count: the
	// engine is not shared (WarnSharedEngines).
	for range 4 {
		defer own.Acquire().Release()
	}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, own)
	pid := h.spawn(hd, Config{Health: testHealth(), Scraper: s, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Load: config.LoadSignals{ScrapeInterval: time.Millisecond, ScrapeTimeout: time.Second, MaxAge: 250 * time.Millisecond}})
	snap := func() *Snapshot { return hd.Snapshot() }
	// page hands the scrape loop its next page. When it returns, the loop
	// has sent the actor the page before it.
	page := func(p string) {
		t.Helper()
		r, err := load.Parse([]byte(p))
		s.next(t, r, err)
	}
	const gauges = "vllm:num_requests_running{model_name=\"m\"} 3\nvllm:num_requests_waiting{model_name=\"m\"} 1\n"
	const kv = "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25\n"
	const info = "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"1000\"} 1\n"
	const counters = "vllm:prefix_cache_queries_total 100\nvllm:prefix_cache_hits_total 40\nvllm:num_preemptions_total 0\n"

	page(gauges + kv + info)
	waitFor(t, "load published", func() bool { return snap().Load.Running == 3 })
	if snap().LoadFailing {
		t.Fatal("a page with the families routing needs counts as failing")
	}
	if r, ok := snap().FreshLoad(time.Now(), time.Second); !ok || r.KVUsage != 0.25 || r.Waiting != 1 {
		t.Fatalf("fresh load %+v %v: routing would not use it", r, ok)
	}
	page(gauges + kv) // without the capacity too: the message changes
	page(gauges + kv) // the same set: no new line
	page(gauges + kv)
	h.sync(t, pid)
	ws := snap().Warnings.List()
	if len(ws) != 1 || ws[0].Code != WarnMetricsPartial || !strings.Contains(ws[0].Message,
		"lacks vllm:prefix_cache_queries, vllm:prefix_cache_hits, vllm:num_preemptions, vllm:cache_config_info;") {
		t.Fatalf("warnings %+v", ws)
	}

	// Without KV usage the page is unreadable: said once, and again when
	// waiting goes missing too.
	page(gauges)
	page(gauges)
	page("vllm:num_requests_running 1\n")
	page("vllm:num_requests_running 1\n")
	page("vllm:num_requests_running 1\n")
	h.sync(t, pid)
	if !snap().LoadFailing || !snap().Warnings.Active(WarnMetricsUnreadable) || snap().Warnings.Active(WarnMetricsPartial) {
		t.Fatalf("unreadable: failing %v, warnings %+v", snap().LoadFailing, snap().Warnings.List())
	}
	if snap().Load.Running != 3 {
		t.Fatal("an unreadable page replaced the last report")
	}

	// A whole page: both cleared, the load used again.
	page(gauges + kv + info + counters)
	waitFor(t, "warnings cleared", func() bool { return len(snap().Warnings.List()) == 0 && !snap().LoadFailing })
	f := func(want int, subs ...string) {
		t.Helper()
		if n := logs.count(subs...); n != want {
			t.Errorf("%d log lines with %q, want %d:\n%s", n, subs, want, logs.String())
		}
	}
	f(2, "level=WARN", "warning=metrics_partial")
	f(1, "level=WARN", "warning=metrics_partial", "vllm:num_preemptions; routing uses its load")
	f(2, "level=WARN", "warning=metrics_unreadable")
	f(1, "level=WARN", "lacks vllm:kv_cache_usage_perc, which routing needs")
	f(1, "level=WARN", "lacks vllm:num_requests_waiting, vllm:kv_cache_usage_perc, which routing needs")
	f(1, "replica warning cleared", "warning=metrics_unreadable")
}

// TestScrapeRecordsInFlight: a snapshot's LoadInFlight is the replica's
// requests in flight when the scrape that read its report began, so that
// flow control can count what the gateway sent since (flow.Endpoint).
func TestScrapeRecordsInFlight(t *testing.T) {
	h := newHarness(t)
	s := &scriptScraper{results: make(chan scrapeResult)}
	counters := NewCounters(0, 0)
	a, b := counters.Acquire(), counters.Acquire()
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, counters)
	h.spawn(hd, Config{Health: testHealth(), Scraper: s,
		Load: config.LoadSignals{ScrapeInterval: time.Millisecond, ScrapeTimeout: time.Second, MaxAge: 250 * time.Millisecond}})
	s.next(t, load.Report{Engine: load.EngineVLLM, Running: 2}, nil)
	waitFor(t, "first report", func() bool { return hd.Snapshot().Load.Running == 2 })
	if got := hd.Snapshot().LoadInFlight; got != 2 {
		t.Fatalf("LoadInFlight %d with 2 leases held since before the scrape", got)
	}
	a.Release()
	// The scrape under way may have begun before the release; the one
	// after it began after.
	s.next(t, load.Report{Engine: load.EngineVLLM, Running: 1}, nil)
	s.next(t, load.Report{Engine: load.EngineVLLM, Running: 3}, nil)
	waitFor(t, "third report", func() bool { return hd.Snapshot().Load.Running == 3 })
	if got := hd.Snapshot().LoadInFlight; got != 1 {
		t.Fatalf("LoadInFlight %d after one of 2 leases was released", got)
	}
	b.Release()
}

// TestSharedEngineWarning: an engine whose pages keep counting more
// requests than the gateway has in flight there serves another router too
// (issue 32, case 4): WarnSharedEngines is raised once, naming the cause
// and the remedies, and the snapshot says so (which turns cost_model's
// cold rendezvous on); a whole window of pages without them clears it.
func TestSharedEngineWarning(t *testing.T) {
	h := newHarness(t)
	var logs logLines
	s := &scriptScraper{results: make(chan scrapeResult)}
	own := NewCounters(0, 0)
	defer own.Acquire().Release() // one request of this gateway's in flight
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, own)
	pid := h.spawn(hd, Config{Health: testHealth(), Scraper: s, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Load: config.LoadSignals{ScrapeInterval: time.Millisecond, ScrapeTimeout: time.Second, MaxAge: 250 * time.Millisecond}})
	page := func(running, waiting float64) {
		t.Helper()
		s.next(t, load.Report{Engine: load.EngineVLLM, Running: running, Waiting: waiting}, nil)
	}
	// As many as this gateway sent, or fewer: not shared.
	for i := range 2 * load.SharedWindow {
		page(float64(i%2), 0)
	}
	h.sync(t, pid)
	if w := hd.Snapshot().Warnings; w.Active(WarnSharedEngines) || hd.Snapshot().SharedEngine {
		t.Fatalf("a lone gateway's engine judged shared: %+v", w.List())
	}
	// One more than sent in one page of five.
	for i := range load.SharedWindow {
		page(1, float64(1-min(i%5, 1)))
	}
	page(1, 0) // the page after: the actor has applied those before
	h.sync(t, pid)
	ws := hd.Snapshot().Warnings.List()
	if len(ws) != 1 || ws[0].Code != WarnSharedEngines || !hd.Snapshot().SharedEngine {
		t.Fatalf("warnings %+v, shared %v", ws, hd.Snapshot().SharedEngine)
	}
	for _, want := range []string{"another router or client", "kv_events", "routing.cold_rendezvous"} {
		if !strings.Contains(ws[0].Message, want) {
			t.Errorf("the message lacks %q: %s", want, ws[0].Message)
		}
	}
	if n := logs.count("level=WARN", "warning=shared_engines"); n != 1 {
		t.Errorf("%d warning lines, want 1:\n%s", n, logs.String())
	}
	for range (load.SharedQuiet + 1) * load.SharedWindow {
		page(1, 0)
	}
	h.sync(t, pid)
	if hd.Snapshot().Warnings.Active(WarnSharedEngines) || hd.Snapshot().SharedEngine {
		t.Fatal("still shared after SharedQuiet windows without another router's requests")
	}
}
