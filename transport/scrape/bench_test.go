package scrape_test

import (
	"context"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/load"
	"github.com/inferrail/inferrail/transport/scrape"
)

// Sink keeps benchmark results alive.
var Sink load.Report

// BenchmarkScrape scrapes the simulator's vLLM page (49 KB) from a loopback
// engine over a kept-alive connection: request, page and parse, the
// engine's side included.
func BenchmarkScrape(b *testing.B) {
	e := startEngine(b, serve(simPage(b)))
	s := newScraper(b, scrape.Options{})
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := s.Scrape(ctx, e.URL)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		Sink = r
	}
}
