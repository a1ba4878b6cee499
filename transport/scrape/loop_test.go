package scrape_test

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/transport/scrape"
)

// outcome is one call of a Loop's Report.
type outcome struct {
	r   load.Report
	at  time.Time
	err error
}

// TestLoopFreshness runs the scrape loops of 64 healthy engines and of 20
// hostile ones (pages of 50 MB, endless, dribbled or garbage, heads that
// never come, no accept, closed at once) for 5 s, as a gateway of 84 replicas
// would at load.scrape_interval 100 ms and load.scrape_timeout 100 ms. A
// report's age, as a reader would see it, is the time since its scrape
// began; just before the next report replaces it, it is oldest. It never
// passes 150 ms (plus any stall the machine imposed on the whole process,
// see stallMeter), no healthy scrape fails and no hostile one succeeds.
// Under the race detector only the outcomes are checked.
func TestLoopFreshness(t *testing.T) {
	const (
		interval = 100 * time.Millisecond
		maxAge   = 150 * time.Millisecond
		run      = 5 * time.Second
	)
	s := newScraper(t, scrape.Options{MaxPageBytes: hostileLimit()})
	page := simPage(t)
	type track struct {
		last           time.Time // when the scrape of the report in use began
		ages           []time.Duration
		reports, fails int
		firstErr       error
	}
	healthy := make([]track, 64)
	hostileURLs := hostile(t)
	hostileResults := make([]map[string]int, len(hostileURLs))

	stalls := startStallMeter()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range healthy {
		tr := &healthy[i]
		l := &scrape.Loop{Scraper: s, URL: startEngine(t, serve(page)).URL, Interval: interval, Timeout: timeout,
			Report: func(r load.Report, at time.Time, err error) {
				now := time.Now()
				if err != nil || r != simReport {
					tr.fails++
					if tr.firstErr == nil {
						tr.firstErr = err
					}
					return
				}
				if !tr.last.IsZero() {
					tr.ages = append(tr.ages, now.Sub(tr.last))
				}
				tr.last = at
				tr.reports++
			}}
		wg.Go(func() { l.Run(ctx) })
	}
	for i, url := range hostileURLs {
		res := map[string]int{}
		hostileResults[i] = res
		l := &scrape.Loop{Scraper: s, URL: url, Interval: interval, Timeout: timeout,
			Report: func(_ load.Report, _ time.Time, err error) { res[scrape.Result(err)]++ }}
		wg.Go(func() { l.Run(ctx) })
	}
	time.Sleep(run)
	stop := time.Now()
	cancel()
	wg.Wait()
	stall := stalls.Stop()

	// A process the machine stalls for a scrape timeout sees healthy
	// scrapes time out too: then only the outcomes that do not depend on
	// time are judged.
	judgeTime := hops*stall < timeout
	var ages []time.Duration
	for i := range healthy {
		tr := &healthy[i]
		if judgeTime && (tr.reports == 0 || !raceEnabled && (tr.fails > 0 || tr.reports < int(run/interval)*9/10)) {
			t.Errorf("engine %d: %d reports, %d failed scrapes (first: %v)", i, tr.reports, tr.fails, tr.firstErr)
		}
		if tr.reports == 0 {
			continue
		}
		ages = append(ages, tr.ages...)
		ages = append(ages, stop.Sub(tr.last))
	}
	if len(ages) == 0 {
		t.Fatalf("no healthy report at all; the process stalled up to %v", stall)
	}
	slices.Sort(ages)
	oldest := ages[len(ages)-1]
	t.Logf("64 healthy replicas beside 20 hostile ones for %v: %d report ages, median %v, p99 %v, oldest %v; longest stall of the process %v",
		run, len(ages), ages[len(ages)/2], ages[len(ages)*99/100], oldest, stall)
	t.Logf("hostile results: %v", hostileResults)
	// Under the race detector a healthy scrape costs seven times the CPU
	// (580 µs against 80 µs): the timing says nothing of the product there,
	// only the outcomes are checked. Otherwise the bound is maxAge, plus
	// what the machine took from the process (see stallMeter); on a quiet
	// machine about 150 to 160 ms.
	if limit := maxAge + hops*stall; oldest >= limit && !raceEnabled && judgeTime {
		t.Errorf("a report reached %v old, want under %v (%v, and the process stalled up to %v)", oldest, limit, maxAge, stall)
	}
	for i, res := range hostileResults {
		if res["ok"] > 0 {
			t.Errorf("hostile engine %d read as healthy: %v", i, res)
		}
	}
}

// TestLoopCadence: a Loop scrapes at a random point of the first Interval
// and every Interval after that; it reports in order with the time each
// scrape began, and reports failures too.
func TestLoopCadence(t *testing.T) {
	var mu sync.Mutex
	n := 0
	page := simPage(t)
	e := startEngine(t, func(e *engine, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		fail := n%3 == 0
		mu.Unlock()
		if fail {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		serve(page)(e, w, r)
	})
	s := newScraper(t, scrape.Options{})
	got := make(chan outcome, 100)
	l := &scrape.Loop{Scraper: s, URL: e.URL, Interval: 20 * time.Millisecond, Timeout: time.Second,
		Report: func(r load.Report, at time.Time, err error) { got <- outcome{r, at, err} }}
	stalls := startStallMeter()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t0 := time.Now()
	wg.Go(func() { l.Run(ctx) })

	var prev time.Time
	var first time.Duration
	for i := range 9 {
		var o outcome
		select {
		case o = <-got:
		case <-time.After(5 * time.Second):
			t.Fatalf("report %d never came", i)
		}
		wantErr := (i+1)%3 == 0
		if (o.err != nil) != wantErr || (o.err == nil && o.r != simReport) || (wantErr && scrape.Result(o.err) != "status") {
			t.Errorf("report %d: %+v, %v", i, o.r, o.err)
		}
		if i == 0 {
			first = o.at.Sub(t0)
		}
		if i > 0 && o.at.Sub(prev) < 20*time.Millisecond {
			t.Errorf("scrapes %d and %d began %v apart, interval 20ms", i-1, i, o.at.Sub(prev))
		}
		prev = o.at
	}
	cancel()
	wg.Wait()
	if stall := stalls.Stop(); first > 20*time.Millisecond+hops*stall {
		t.Errorf("first scrape began %v after Run, interval 20ms (the process stalled up to %v)", first, stall)
	}
}

// TestLoopStop: cancelling the context stops a Loop at once, even in the
// middle of a scrape that would wait for its whole timeout, and that scrape
// is not reported.
func TestLoopStop(t *testing.T) {
	e := startEngine(t, hang)
	s := newScraper(t, scrape.Options{})
	got := make(chan outcome, 1)
	l := &scrape.Loop{Scraper: s, URL: e.URL, Interval: 100 * time.Millisecond, Timeout: 10 * time.Second,
		Report: func(r load.Report, at time.Time, err error) { got <- outcome{r, at, err} }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Run(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	stalls := startStallMeter()
	t0 := time.Now()
	cancel()
	<-done
	took, stall := time.Since(t0), stalls.Stop()
	t.Logf("stopped %v after the cancel", took)
	if took > 100*time.Millisecond+hops*stall { // the scrape under way would have taken 10 s
		t.Errorf("Run returned %v after the cancel (the process stalled up to %v)", took, stall)
	}
	select {
	case o := <-got:
		t.Errorf("the cut-short scrape was reported: %+v", o)
	default:
	}
}

// TestLoopBackoff: with MaxBackoff set, a replica that keeps failing is
// scraped less and less often, down to once per MaxBackoff, and at the
// usual Interval again from its first success.
func TestLoopBackoff(t *testing.T) {
	var mu sync.Mutex
	healthy := false
	page := simPage(t)
	e := startEngine(t, func(e *engine, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ok := healthy
		mu.Unlock()
		if !ok {
			http.Error(w, "garbage", http.StatusOK)
			return
		}
		serve(page)(e, w, r)
	})
	s := newScraper(t, scrape.Options{})
	got := make(chan outcome, 1000)
	const interval = 10 * time.Millisecond
	l := &scrape.Loop{Scraper: s, URL: e.URL, Interval: interval, Timeout: time.Second, MaxBackoff: 80 * time.Millisecond,
		Report: func(r load.Report, at time.Time, err error) { got <- outcome{r, at, err} }}
	stalls := startStallMeter()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx) })
	defer wg.Wait()
	defer cancel()

	next := func() outcome {
		t.Helper()
		select {
		case o := <-got:
			return o
		case <-time.After(5 * time.Second):
			t.Fatal("no report")
			return outcome{}
		}
	}
	// Failures 1 and 2 keep the interval; then the waits double: 20, 40,
	// 80, 80 ms.
	var ats []time.Time
	for range 8 {
		o := next()
		if scrape.Result(o.err) != "unreadable" {
			t.Fatalf("got %v, want unreadable", o.err)
		}
		ats = append(ats, o.at)
	}
	stall := stalls.Stop()
	for i, want := range []time.Duration{20, 40, 80, 80, 80} {
		gap := ats[i+3].Sub(ats[i+2])
		if want *= time.Millisecond; gap < want || gap > want+20*time.Millisecond+hops*stall {
			t.Errorf("wait %d after %d failures: %v, want %v (the process stalled up to %v)", i, i+3, gap, want, stall)
		}
	}
	mu.Lock()
	healthy = true
	mu.Unlock()
	for next().err != nil { // the scrape under way may still fail
	}
	stalls = startStallMeter()
	a, b := next(), next()
	if stall := stalls.Stop(); a.err != nil || b.err != nil || b.at.Sub(a.at) > interval+20*time.Millisecond+hops*stall {
		t.Errorf("after recovery: %v, %v, %v apart (the process stalled up to %v)", a.err, b.err, b.at.Sub(a.at), stall)
	}
}

func TestLoopBadConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Run with a zero interval did not panic")
		}
	}()
	s := newScraper(t, scrape.Options{})
	(&scrape.Loop{Scraper: s, Timeout: time.Second, Report: func(load.Report, time.Time, error) {}}).Run(context.Background())
}
