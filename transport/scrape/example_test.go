package scrape_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/transport/scrape"
)

// A replica actor owns one Loop: it starts it on its own goroutine, gets
// every outcome as a message, and on stop cancels and joins it.
func ExampleLoop() {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "vllm:num_requests_running{engine=\"0\"} 3.0\nvllm:num_requests_waiting{engine=\"0\"} 1.0\n"+
			"vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\nvllm:prefix_cache_queries_total{engine=\"0\"} 100.0\n"+
			"vllm:prefix_cache_hits_total{engine=\"0\"} 40.0\n")
	}))
	defer engine.Close()
	scraper := scrape.New(scrape.Options{}) // one for the whole gateway
	defer scraper.Close()

	// The actor's mailbox, in this example a channel.
	type loadReported struct {
		report load.Report
		at     time.Time
	}
	mailbox := make(chan any, 1)
	loop := &scrape.Loop{
		Scraper: scraper, URL: engine.URL,
		Interval: 100 * time.Millisecond, Timeout: 100 * time.Millisecond,
		Report: func(r load.Report, at time.Time, err error) {
			var msg any = loadReported{r, at}
			if err != nil {
				msg = err
			}
			select { // never block the loop
			case mailbox <- msg:
			default:
			}
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { loop.Run(ctx) })

	for m := range mailbox { // the actor's Receive
		msg, ok := m.(loadReported)
		if !ok {
			continue // a failed scrape: counted, and logged once
		}
		fmt.Println(msg.report.Engine, msg.report.Running, msg.report.Waiting, msg.report.KVUsage)
		break
	}

	cancel()  // stop
	wg.Wait() // join
	// Output: vllm 3 1 0.5
}
