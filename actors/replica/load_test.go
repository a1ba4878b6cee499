package replica

import (
	"context"
	"errors"
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
