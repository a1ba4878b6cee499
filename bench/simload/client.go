package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// loadClient sends workload requests to one simulator and checks every
// answer. It is safe for concurrent use.
type loadClient struct {
	http  *http.Client
	base  string
	model string
}

// newLoadClient returns a client that keeps up to conns connections open to
// base and never queues a request behind another: MaxConnsPerHost is 0
// (unlimited) and as many idle connections are kept, so 2,000 concurrent
// streams get 2,000 connections.
func newLoadClient(base, model string, conns int) *loadClient {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     0,
		IdleConnTimeout:     20 * time.Second, // under the simulator's 30s
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	return &loadClient{http: &http.Client{Transport: tr}, base: base, model: model}
}

func (c *loadClient) close() { c.http.CloseIdleConnections() }

// outcome is what one request measured.
type outcome struct {
	TTFT    time.Duration // streams: until the first content chunk
	Latency time.Duration // until the body was read to its end
	Tokens  int           // generated tokens, checked
	Err     error
}

// do sends r and checks the answer: status 200, exactly r.MaxTokens tokens
// by every count the response offers, finish_reason "length".
func (c *loadClient) do(ctx context.Context, r loadgen.Spec) (o outcome) {
	body := loadgen.AppendBody(make([]byte, 0, 256), c.model, r)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+r.Path(), bytes.NewReader(body))
	if err != nil {
		o.Err = err
		return o
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		o.Err = err
		return o
	}
	defer resp.Body.Close()
	o.Err = loadgen.Check(resp, r, func() { o.TTFT = time.Since(start) })
	o.Latency = time.Since(start)
	if o.Err == nil {
		o.Tokens = r.MaxTokens
	}
	return o
}

// metricsPage fetches the simulator's /metrics page.
func (c *loadClient) metricsPage(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: status %d", resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// metric returns the sum of one metric's series on the simulator's page.
func (c *loadClient) metric(ctx context.Context, name string) (float64, error) {
	page, err := c.metricsPage(ctx)
	if err != nil {
		return 0, err
	}
	v, ok := loadgen.PromSum(page, name)
	if !ok {
		return 0, fmt.Errorf("/metrics has no %s", name)
	}
	return v, nil
}

// runStats gathers the outcomes of one load run. It is safe for concurrent use.
type runStats struct {
	mu       sync.Mutex
	ok       int
	errs     int
	tokens   int64
	ttft     []time.Duration
	latency  []time.Duration
	errTexts map[string]int // error text → count, the first few kinds only
}

func (s *runStats) record(o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.Err != nil {
		s.errs++
		if s.errTexts == nil {
			s.errTexts = map[string]int{}
		}
		msg := o.Err.Error()
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if _, seen := s.errTexts[msg]; seen || len(s.errTexts) < 10 {
			s.errTexts[msg]++
		}
		return
	}
	s.ok++
	s.tokens += int64(o.Tokens)
	s.latency = append(s.latency, o.Latency)
	if o.TTFT > 0 {
		s.ttft = append(s.ttft, o.TTFT)
	}
}

// errorList renders the (at most ten) kinds of error seen, with their counts.
func (s *runStats) errorList() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for msg, n := range s.errTexts {
		out = append(out, fmt.Sprintf("%d× %s", n, msg))
	}
	return out
}

// burst sends every spec at once, one goroutine each, released together,
// and waits for all of them.
func (c *loadClient) burst(ctx context.Context, specs []loadgen.Spec, st *runStats) {
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for _, r := range specs {
		wg.Go(func() {
			<-gate
			st.record(c.do(ctx, r))
		})
	}
	close(gate)
	wg.Wait()
}

// pool sends n requests, spec(i) for i in [0, n), from conc workers, and
// waits for them. It stops early when ctx ends.
func (c *loadClient) pool(ctx context.Context, n, conc int, spec func(i int) loadgen.Spec, st *runStats) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				st.record(c.do(ctx, spec(i)))
			}
		})
	}
	wg.Wait()
}

// promptFor is a short distinct prompt, so requests neither share a cache
// prefix beyond the chat template nor get the same answer.
func promptFor(tag string, i int) string {
	var b strings.Builder
	b.WriteString(tag)
	b.WriteString(" request ")
	b.WriteString(strconv.Itoa(i))
	b.WriteString(": tell me about the weather")
	return b.String()
}
