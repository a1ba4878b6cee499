package stress

import (
	"fmt"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
)

func runWide(t *T) error {
	const replicas, rate = 64, 2000.0
	total := pick(t, 10*time.Second, 4*time.Second)
	n := int(rate * total.Seconds())
	sims, err := t.startSims(replicas, zeroLatency)
	if err != nil {
		return err
	}
	gw, err := t.startGateway(simURLs(sims), nil)
	if err != nil {
		return err
	}
	maxAge := config.Default().Load.MaxAge
	// Every replica reports before the load starts.
	if _, err := gw.waitReplicas(t.ctx, 10*time.Second, func(rs []replicaView) bool {
		for _, r := range rs {
			if r.Engine == nil {
				return false
			}
		}
		return len(rs) == replicas
	}); err != nil {
		return fmt.Errorf("waiting for the first engine reports: %w", err)
	}

	// Read /admin/replicas every 20 ms while the load runs, keeping the
	// oldest report each read shows.
	stop := make(chan struct{})
	var (
		oldest  []time.Duration
		missing int
		pollErr error
	)
	var wg sync.WaitGroup
	every(&wg, stop, 20*time.Millisecond, func() {
		rs, err := gw.replicas()
		if err != nil {
			pollErr = err
			return
		}
		var worst time.Duration
		for _, r := range rs {
			if r.Engine == nil {
				missing++
				continue
			}
			worst = max(worst, time.Duration(r.Engine.AgeMillis*float64(time.Millisecond)))
		}
		oldest = append(oldest, worst)
	})
	hc := t.client(gw.Addr, 512)
	l, err := openLoop(t.ctx, []*fasthttp.HostClient{hc}, rate, n, func(i int) loadgen.Spec { return specN("wide", i, 1, false) })
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	failed, kinds := l.checkAll(nil)
	spread := l.spread()
	age := loadgen.Summarize(oldest)
	stale := 0
	for _, o := range oldest {
		if o > maxAge {
			stale++
		}
	}
	t.Figf("%d requests at %.0f/s (sent at %.0f/s) over %d replicas (%d served some), %d errors; over %d reads of /admin/replicas the oldest report was %.0f ms at worst (p50 %.0f ms, p99 %.0f ms), %d reads over load.max_age (%s)",
		n, rate, l.AchievedRate(), replicas, len(spread), failed, len(oldest), age.MaxS*1e3, age.P50S*1e3, age.P99S*1e3, stale, maxAge)
	t.Checkf(failed == 0, "%d of %d requests failed: %v", failed, n, kinds)
	t.Checkf(pollErr == nil, "/admin/replicas: %v", pollErr)
	t.Checkf(missing == 0, "%d replica reads without an engine report", missing)
	t.Checkf(len(oldest) > 0 && stale == 0, "%d of %d reads showed a report older than load.max_age (%s); oldest %.0f ms",
		stale, len(oldest), maxAge, age.MaxS*1e3)
	return nil
}
