package extproc

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/transport/extproc/envoytest"
)

// BenchmarkAddedTTFT measures the time to first token the endpoint picker
// adds (GIE #2928: more than 1 s at 220 KB and concurrency 150). Each case
// sends b.N streamed chats of one body size from c workers twice: straight
// to the simulators (round robin), and the way Envoy does it, over ext_proc
// first (the body in 16 KiB chunks, over one gRPC connection as Envoy
// keeps one), then to the endpoint named, with the response relayed
// through the picker. TTFT is from the request's first byte to the first
// body chunk as the client gets it: the engine's, or the picker's relay of
// it. It reports each path's p50 and p99 and their differences (added).
// The Envoy-like client runs on the same cores as the picker and the
// simulators.
func BenchmarkAddedTTFT(b *testing.B) {
	for _, size := range []int{1 << 10, 32 << 10, 220 << 10} {
		for _, c := range []int{1, 50, 150} {
			b.Run("body="+strconv.Itoa(size>>10)+"KiB/c="+strconv.Itoa(c), func(b *testing.B) {
				benchAdded(b, size, c)
			})
		}
	}
}

func benchAdded(b *testing.B, size, c int) {
	// Health checks patient enough for engines busy with 150 long prompts.
	p := startPicker(b, 3, func(c *config.Config) { c.Health.Interval, c.Health.Timeout = 5*time.Second, 5*time.Second })
	tr := &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 60 * time.Second, Transport: tr}
	// Distinct prompts, so that no run is a cache hit the other missed.
	bodies := make([][]byte, 64)
	for i := range bodies {
		pre := strconv.Itoa(i) + " "
		// The configured model's own name: the engine knows no alias.
		bodies[i] = bytes.Replace(chat(pre+strings.Repeat("x", max(size-len(pre)-160, 1)), 2, true),
			[]byte(`"model":"sim"`), []byte(`"model":"`+model+`"`), 1)
	}
	direct := run(b, c, func(i int) time.Duration {
		return ttftDirect(b, hc, p.sims[i%len(p.sims)].URL(), bodies[i%len(bodies)])
	})
	viaEPP := run(b, c, func(i int) time.Duration { return ttftEPP(b, p, hc, bodies[i%len(bodies)]) })
	if b.Failed() {
		return
	}
	d50, d99 := quantile(direct, 0.50), quantile(direct, 0.99)
	e50, e99 := quantile(viaEPP, 0.50), quantile(viaEPP, 0.99)
	b.ReportMetric(ms(d50), "direct-p50-ms")
	b.ReportMetric(ms(d99), "direct-p99-ms")
	b.ReportMetric(ms(e50), "epp-p50-ms")
	b.ReportMetric(ms(e99), "epp-p99-ms")
	b.ReportMetric(ms(e50-d50), "added-p50-ms")
	b.ReportMetric(ms(e99-d99), "added-p99-ms")
	b.ReportMetric(0, "ns/op")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// run sends b.N requests from c workers, request i by send(i), and returns
// their TTFTs.
func run(b *testing.B, c int, send func(i int) time.Duration) []time.Duration {
	out := make([]time.Duration, b.N)
	var wg sync.WaitGroup
	next := make(chan int)
	for range c {
		wg.Go(func() {
			for i := range next {
				out[i] = send(i)
			}
		})
	}
	for i := range b.N {
		next <- i
	}
	close(next)
	wg.Wait()
	return out
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

// Workers report failures with Error: FailNow is the benchmark goroutine's.

// ttftDirect posts body to the engine at url and times its first chunk.
func ttftDirect(b *testing.B, hc *http.Client, url string, body []byte) time.Duration {
	start := time.Now()
	req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil || resp.StatusCode != 200 {
		b.Errorf("%d %v", resp.StatusCode, err)
		return 0
	}
	ttft := time.Since(start)
	io.Copy(io.Discard, resp.Body)
	return ttft
}

// ttftEPP sends body through the picker as Envoy does and times the first
// chunk the picker relays.
func ttftEPP(b *testing.B, p *picker, hc *http.Client, body []byte) time.Duration {
	start := time.Now()
	x, err := envoytest.Start(context.Background(), p.conn)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer x.Close()
	r := post(body, 16<<10)
	routed, err := x.Request(r)
	if err != nil || routed.Immediate != nil {
		b.Errorf("%v %+v", err, routed)
		return 0
	}
	var ttft time.Duration
	status, _, err := x.Forward(context.Background(), hc, r, routed, 0, func(c []byte) {
		if ttft == 0 && len(c) > 0 {
			ttft = time.Since(start)
		}
	})
	if err != nil || status != 200 {
		b.Errorf("%d %v", status, err)
	}
	return ttft
}
