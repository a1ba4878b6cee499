package frontend

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestLoadReportsFresh: under about 1,000 requests a second through three
// simulators, every reader of the fleet's snapshots sees engine reports
// under 150 ms old (load.scrape_interval is 100 ms).
func TestLoadReportsFresh(t *testing.T) {
	g := start(t, 3, nil, nil)
	waitFor(t, "first reports", 2*time.Second, func() bool {
		for _, s := range g.fl.Replicas() {
			if s.LoadAt.IsZero() {
				return false
			}
		}
		return true
	})
	stop := make(chan struct{})
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	c := &fasthttp.Client{MaxConnsPerHost: 64}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(8 * time.Millisecond) // 8 workers × 125/s ≈ 1,000 req/s
			defer tick.Stop()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				req.SetRequestURI(g.url("/v1/completions"))
				req.Header.SetMethod("POST")
				req.Header.SetContentType("application/json")
				req.SetBodyString(`{"prompt":"hi","max_tokens":1}`)
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					if failed.Add(1) == 1 {
						t.Logf("first failure: %v %d %s", err, resp.StatusCode(), resp.Body())
					}
				}
				sent.Add(1)
			}
		}()
	}
	var oldest time.Duration
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		now := time.Now()
		for _, s := range g.fl.Replicas() {
			oldest = max(oldest, now.Sub(s.LoadAt))
		}
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	c.CloseIdleConnections()
	t.Logf("%d requests in 2 s, %d failed; oldest report seen %v", sent.Load(), failed.Load(), oldest)
	if failed.Load() > 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	if !raceEnabled && oldest > 150*time.Millisecond {
		t.Fatalf("a reader saw a report %v old (bound 150 ms)", oldest)
	}
}
