package stress

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/sim"
)

// manyStreams is a burst of concurrent streams and what became of them.
type manyStreams struct {
	results []streamResult
	wall    time.Duration
}

// runManyStreams opens n streams of tokens tokens each at once (every
// goroutine waits on one start signal), stream i to addrs[i mod len], and
// waits for all of them.
func runManyStreams(ctx context.Context, addrs []string, tag string, n, tokens int) *manyStreams {
	m := &manyStreams{results: make([]streamResult, n)}
	deadline := time.Now().Add(90 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			m.results[i] = stream(ctx, addrs[i%len(addrs)], specN(tag, i, tokens, true), deadline)
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	m.wall = time.Since(t0)
	return m
}

// errors counts the failed streams and their first distinct texts.
func (m *manyStreams) errors() (int, map[string]int) {
	n, kinds := 0, map[string]int{}
	for _, r := range m.results {
		if r.err != nil {
			n++
			addKind(kinds, r.err.Error())
		}
	}
	return n, kinds
}

// spread counts streams by the replica that served them.
func (m *manyStreams) spread() map[string]int {
	out := map[string]int{}
	for _, r := range m.results {
		if r.err == nil {
			out[r.replica]++
		}
	}
	return out
}

func (m *manyStreams) took() loadgen.Summary {
	ds := make([]time.Duration, 0, len(m.results))
	for _, r := range m.results {
		if r.err == nil {
			ds = append(ds, r.took)
		}
	}
	return loadgen.Summarize(ds)
}

// streamSims are simulators with the default latency model and room for
// every stream at once: a --max-num-seqs of 1,024 where vLLM's default 256
// would queue two thirds of them.
func streamSims(t *T, n int) ([]*sim.Server, error) {
	return t.startSims(n, func(o *sim.Options) { o.Engine.MaxNumSeqs = 1024 })
}

func runStreams(t *T) error {
	n, tokens := 2000, 16
	sims, err := streamSims(t, 3)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), nil)
	if err != nil {
		return err
	}
	// The same burst straight to the simulators first: how long their
	// latency model alone takes to serve it.
	var direct []string
	for _, s := range sims {
		direct = append(direct, s.Addr())
	}
	d := runManyStreams(t.ctx, direct, "streams-direct", n, tokens)
	dfailed, dkinds := d.errors()
	t.Checkf(dfailed == 0, "%d of %d streams straight to the simulators failed: %v", dfailed, n, dkinds)

	m := runManyStreams(t.ctx, []string{gw.Addr}, "streams", n, tokens)
	failed, kinds := m.errors()
	took := m.took()
	t.Figf("%d/%d streams of %d tokens complete in %.2f s (each %.2f s p50, %.2f s max; straight to the simulators %.2f s), %d errors",
		n-failed, n, tokens, m.wall.Seconds(), took.P50S, took.MaxS, d.wall.Seconds(), failed)
	t.Checkf(failed == 0, "%d of %d streams failed: %v", failed, n, kinds)
	spread := m.spread()
	t.Figf("spread %s", formatSpread(spread, gw.n))
	even := float64(n) / float64(gw.n)
	for i := range gw.n {
		got := spread[replicaID(i)]
		t.Checkf(float64(got) >= 0.85*even && float64(got) <= 1.15*even,
			"%s served %d streams, want %.0f ± 15%%", replicaID(i), got, even)
	}
	return nil
}

// formatSpread renders per-replica counts in replica order: "667/667/666".
func formatSpread(spread map[string]int, n int) string {
	parts := make([]string, n)
	for i := range n {
		parts[i] = fmt.Sprint(spread[replicaID(i)])
	}
	var other []string
	for id, c := range spread {
		if !strings.HasPrefix(id, "sim-") {
			other = append(other, fmt.Sprintf("%q %d", id, c))
		}
	}
	sort.Strings(other)
	s := strings.Join(parts, "/")
	if len(other) > 0 {
		s += " (and " + strings.Join(other, ", ") + ")"
	}
	return s
}

func runScrape(t *T) error {
	n, tokens := 2000, pick(t, 64, 32)
	sims, err := streamSims(t, 3)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), nil)
	if err != nil {
		return err
	}
	// Scrape /metrics every 10 ms until the streams are done; each page must
	// be a 200 whose request counters never go backwards.
	stop := make(chan struct{})
	var sc scrapeTally
	var wg sync.WaitGroup
	wg.Go(func() { sc.run(t.client(gw.AdminAddr, maxScrapes), stop) })
	m := runManyStreams(t.ctx, []string{gw.Addr}, "scrape", n, tokens)
	close(stop)
	wg.Wait()

	failed, kinds := m.errors()
	t.Figf("%d/%d streams of %d tokens complete in %.2f s, %d errors", n-failed, n, tokens, m.wall.Seconds(), failed)
	t.Checkf(failed == 0, "%d of %d streams failed: %v", failed, n, kinds)
	lat := loadgen.Summarize(sc.took)
	rate := float64(sc.ok+sc.failed) / sc.wall.Seconds()
	t.Figf("%d scrapes (%.0f/s), each %.1f ms p50, %.0f ms p99, %.0f ms max; %d failed, %d skipped with 200 in flight, counters backwards %d times",
		sc.ok+sc.failed, rate, lat.P50S*1e3, lat.P99S*1e3, lat.MaxS*1e3, sc.failed, sc.skipped, sc.backwards)
	t.Checkf(sc.failed == 0, "%d scrapes failed: %v", sc.failed, sc.firstErr)
	t.Checkf(sc.backwards == 0, "inferrail_requests_total went backwards %d times", sc.backwards)
	t.Checkf(rate >= 90, "only %.0f scrapes a second, want 100", rate)
	return nil
}

// scrapeTally scrapes a gateway's /metrics every 10 ms, each scrape in a
// goroutine of its own (at most maxScrapes at once) so that a slow page
// does not lower the rate, and checks each page. Owned by the goroutine running run
// until it returns.
type scrapeTally struct {
	ok, failed, skipped, backwards int
	firstErr                       error
	took                           []time.Duration
	wall                           time.Duration
}

// scrape is one scrape's outcome.
type scrape struct {
	start, end time.Time
	total      float64 // inferrail_requests_total
	err        error
}

// maxScrapes bounds the scrapes in flight at once.
const maxScrapes = 200

func (s *scrapeTally) run(hc *fasthttp.HostClient, stop <-chan struct{}) {
	start := time.Now()
	var (
		mu      sync.Mutex
		scrapes []scrape
		wg      sync.WaitGroup
	)
	slots := make(chan struct{}, maxScrapes)
	// Scrape i is due at start + i·10 ms; a late timer catches up rather
	// than skipping, so the rate holds whatever the machine's noise.
	timer := time.NewTimer(0)
	defer timer.Stop()
loop:
	for i := 1; ; i++ {
		select {
		case <-stop:
			break loop
		case <-timer.C:
		}
		timer.Reset(time.Until(start.Add(time.Duration(i) * 10 * time.Millisecond)))
		select {
		case slots <- struct{}{}:
		default:
			s.skipped++
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			sc := scrape{start: time.Now()}
			page, err := getPage(hc, "/metrics")
			sc.end = time.Now()
			if err == nil {
				err = checkPage(page)
			}
			sc.err = err
			sc.total, _ = loadgen.PromSum(page, "inferrail_requests_total")
			mu.Lock()
			scrapes = append(scrapes, sc)
			mu.Unlock()
		})
	}
	wg.Wait()
	s.wall = time.Since(start)
	sort.Slice(scrapes, func(i, j int) bool { return scrapes[i].start.Before(scrapes[j].start) })
	for i, b := range scrapes {
		s.took = append(s.took, b.end.Sub(b.start))
		if b.err != nil {
			s.failed++
			if s.firstErr == nil {
				s.firstErr = b.err
			}
			continue
		}
		s.ok++
		// A page rendered after another was read must not count fewer
		// requests. Overlapping scrapes may render in either order.
		for _, a := range scrapes[:i] {
			if a.err == nil && a.end.Before(b.start) && b.total < a.total {
				s.backwards++
				break
			}
		}
	}
}

// checkPage checks that every line of a Prometheus text page is a comment
// or a sample ending in a number, and that the replica gauges are there.
func checkPage(page []byte) error {
	if !strings.Contains(string(page), "inferrail_replica_in_flight") {
		return fmt.Errorf("page of %d bytes without inferrail_replica_in_flight", len(page))
	}
	for line := range strings.Lines(string(page)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Fields(line)
		if _, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil || len(f) < 2 {
			return fmt.Errorf("line %q is not a sample", line)
		}
	}
	return nil
}
