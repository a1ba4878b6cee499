package stress

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// prefixFamilies are the families an engine without prefix caching, or
// llm-d's inference simulator, leaves off its page.
var prefixFamilies = []string{"vllm:prefix_cache_queries", "vllm:prefix_cache_hits"}

// runPartialPage: one engine's /metrics page lacks the prefix-cache
// families (issue 12, defect 4). The gateway must keep reading its load,
// route on it, and say on /admin/replicas what the page lacks.
func runPartialPage(t *T) error {
	const rate = 200.0
	n := pick(t, 2000, 600)
	partial, err := t.startSims(1, func(o *sim.Options) { o.MetricsOmit = prefixFamilies })
	if err != nil {
		return err
	}
	whole, err := t.startSims(1, nil)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(append(partial, whole...)), func(c *config.Config) {
		c.Models[0].Policy = "cost_model"
	})
	if err != nil {
		return err
	}
	partialID := replicaID(0)
	if _, err := gw.waitReplicas(t.ctx, 10*time.Second, func(rs []replicaView) bool {
		return len(rs) == 2 && rs[0].Engine != nil && rs[1].Engine != nil
	}); err != nil {
		return fmt.Errorf("waiting for the first engine reports (a page without prefix-cache counters must be read): %w", err)
	}

	// Watch the partial replica's engine report while the load runs: its
	// age, and whether the engine's running count reached the gateway.
	maxAge := config.Default().Load.MaxAge
	stop := make(chan struct{})
	var (
		mu          sync.Mutex
		reads       int
		stale       int
		sawRunning  bool
		pollErr     error
		worstAge    time.Duration
		missingRead int
	)
	var wg sync.WaitGroup
	every(&wg, stop, 20*time.Millisecond, func() {
		rs, err := gw.replicas()
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			pollErr = err
			return
		}
		for _, r := range rs {
			if r.ID != partialID {
				continue
			}
			reads++
			if r.Engine == nil {
				missingRead++
				continue
			}
			age := time.Duration(r.Engine.AgeMillis * float64(time.Millisecond))
			worstAge = max(worstAge, age)
			if age > maxAge {
				stale++
			}
			if r.Engine.Running > 0 {
				sawRunning = true
			}
		}
	})
	hc := t.client(gw.Addr, 256)
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("partial", i, 8, i%2 == 0) })
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	if pollErr != nil {
		t.Failf("reading /admin/replicas: %v", pollErr)
	}
	failed, kinds := l.checkAll(nil)
	spread := l.spread()
	rs, err := gw.replicas()
	if err != nil {
		return err
	}
	page, err := gw.get("/metrics")
	if err != nil {
		return err
	}
	series := `inferrail_load_scrapes_total{replica="` + partialID + `",result=`
	unreadable, found := loadgen.PromSum(page, series+`"unreadable"}`)
	ok, _ := loadgen.PromSum(page, series+`"ok"}`)
	t.Checkf(found && ok > 0, "the partial page's scrapes are not on /metrics as read: %.0f ok", ok)
	t.Figf("%d requests at %.0f/s over 2 replicas (served %v), %d errors; the partial page's report read on %d of %d reads, "+
		"oldest %v, running seen %v, %.0f scrapes read and %.0f unreadable", n, rate, spread, failed, reads-missingRead, reads,
		worstAge.Round(time.Millisecond), sawRunning, ok, unreadable)
	t.Checkf(failed == 0, "%d of %d requests failed: %v", failed, n, kinds)
	t.Checkf(spread[partialID] > 0, "the replica with the partial page got no request: %v", spread)
	t.Checkf(missingRead == 0 && stale == 0, "the partial page's report was missing on %d and older than load.max_age (%v) on %d of %d reads",
		missingRead, maxAge, stale, reads)
	t.Checkf(sawRunning, "the engine's running count never reached the gateway from the partial page")
	t.Checkf(unreadable == 0, "%0.f scrapes of the partial page counted as unreadable", unreadable)
	for _, r := range rs {
		codes := map[string]string{}
		for _, w := range r.Warnings {
			codes[w.Code] = w.Message
		}
		t.Figf("%s: warnings %v", r.ID, codes)
		if r.ID == partialID {
			msg := codes["metrics_partial"]
			t.Checkf(msg != "" && strings.Contains(msg, "prefix_cache"), "%s: no metrics_partial warning naming the prefix-cache families: %v", r.ID, codes)
			t.Checkf(codes["metrics_unreadable"] == "", "%s: a page that has running, waiting and KV usage warned unreadable: %v", r.ID, codes)
			continue
		}
		t.Checkf(len(codes) == 0, "%s: a whole page warned: %v", r.ID, codes)
	}
	return nil
}
