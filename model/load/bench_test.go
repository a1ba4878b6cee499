package load_test

import (
	"testing"

	"github.com/inferrail/inferrail/model/load"
)

// Sink keeps benchmark results alive.
var Sink load.Report

// BenchmarkParse reads the simulator's vLLM page (49 KB, 481 lines).
func BenchmarkParse(b *testing.B) {
	page := readFixture(b, "vllm_sim.prom")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := load.Parse(page)
		if err != nil {
			b.Fatal(err)
		}
		Sink = r
	}
}

// BenchmarkParserPieces reads the same page as transport/scrape does: in
// 32 KiB reads through one reused Parser.
func BenchmarkParserPieces(b *testing.B) {
	page := readFixture(b, "vllm_sim.prom")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	var p load.Parser
	for b.Loop() {
		p.Reset()
		for rest := page; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			p.Write(rest[:n])
			rest = rest[n:]
		}
		r, err := p.Report()
		if err != nil {
			b.Fatal(err)
		}
		Sink = r
	}
}

// BenchmarkParseSGLang reads the hand-made SGLang page of two DP ranks.
func BenchmarkParseSGLang(b *testing.B) {
	page := readFixture(b, "sglang_dp2.prom")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := load.Parse(page)
		if err != nil {
			b.Fatal(err)
		}
		Sink = r
	}
}
