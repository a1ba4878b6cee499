package hf

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// Sink keeps benchmark results alive.
var Sink int

// benchCorpus is the text the tokens/s benchmarks encode: every Qwen3 text golden and
// every rendered chat prompt, joined by newlines (scripts/bench-tokenizer.sh times
// the Rust library on the same string).
func benchCorpus(b testing.TB) string {
	var parts []string
	for _, c := range readJSONL[textGolden](b, "qwen3/text_goldens.jsonl") {
		parts = append(parts, c.Text)
	}
	for _, c := range readJSONL[chatGolden](b, "qwen3/goldens.jsonl") {
		parts = append(parts, c.RenderedPrompt)
	}
	return strings.Join(parts, "\n")
}

// chatPrompt8K builds a chat prompt of about 8,000 Qwen3 tokens from the rendered
// golden prompts.
func chatPrompt8K(b testing.TB, tok *Tokenizer) string {
	cases := readJSONL[chatGolden](b, "qwen3/goldens.jsonl")
	var sb strings.Builder
	n := 0
	for i := 0; n < 8000; i++ {
		c := cases[i%len(cases)]
		if n+len(c.TokenIDs) > 8000 && n > 7000 {
			break
		}
		sb.WriteString(c.RenderedPrompt)
		n += len(c.TokenIDs)
	}
	return sb.String()
}

func benchEncode(b *testing.B, tok *Tokenizer, text string) {
	ids := tok.Encode(nil, text, false)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ids = tok.Encode(ids[:0], text, false)
	}
	Sink = len(ids)
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeCorpus is tokens/s on one core over the concatenated goldens. The
// Tokenizer keeps no word cache, so every iteration is cold.
func BenchmarkEncodeCorpus(b *testing.B) {
	tok := load(b, "qwen3")
	benchEncode(b, tok, benchCorpus(b))
}

// BenchmarkEncodeTexts encodes the golden texts one call each.
func BenchmarkEncodeTexts(b *testing.B) {
	tok := load(b, "qwen3")
	cases := readJSONL[textGolden](b, "qwen3/text_goldens.jsonl")
	var ids []uint32
	n, bytes := 0, 0
	for _, c := range cases {
		n += len(c.TokenIDs)
		bytes += len(c.Text)
	}
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cases {
			ids = tok.Encode(ids[:0], c.Text, false)
		}
	}
	Sink = len(ids)
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncodeChat8K is one ~8,000-token chat prompt.
func BenchmarkEncodeChat8K(b *testing.B) {
	tok := load(b, "qwen3")
	benchEncode(b, tok, chatPrompt8K(b, tok))
}

// BenchmarkEncodeMistralCorpus is the same corpus through the SentencePiece-style
// Mistral tokenizer (no pre-tokenizer: each text between added tokens is one word).
func BenchmarkEncodeMistralCorpus(b *testing.B) {
	tok := load(b, "mistral7b")
	benchEncode(b, tok, benchCorpus(b))
}

// BenchmarkSplit compares the hand-written scanner with regexp2 on the Qwen
// pattern (the Split step alone, over the corpus).
func BenchmarkSplit(b *testing.B) {
	text := benchCorpus(b)
	sc, _ := scannerFor(patCL100K)
	re, err := compileRegex(patCL100K)
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name string
		m    matcher
	}{{"scanner", sc}, {"regexp2", re}} {
		b.Run(m.name, func(b *testing.B) {
			var buf []span
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				buf = m.m.appendMatches(buf[:0], text)
			}
			Sink = len(buf)
			b.ReportMetric(float64(len(buf))*float64(b.N)/b.Elapsed().Seconds(), "pieces/s")
		})
	}
}

func BenchmarkLoad(b *testing.B) {
	tj := readFile(b, "testdata/qwen3/tokenizer.json")
	b.ReportAllocs()
	for b.Loop() {
		tok, err := Load(tj, nil)
		if err != nil {
			b.Fatal(err)
		}
		Sink = tok.VocabSize()
	}
}

// TestWriteBenchInputs writes the benchmark inputs to $HF_BENCH_OUT (corpus.txt,
// chat8k.txt) so that scripts/bench-tokenizer.sh times the Rust library on exactly
// the text the Go benchmarks encode.
func TestWriteBenchInputs(t *testing.T) {
	dir := os.Getenv("HF_BENCH_OUT")
	if dir == "" {
		t.Skip("HF_BENCH_OUT not set")
	}
	tok := load(t, "qwen3")
	for name, text := range map[string]string{"corpus.txt": benchCorpus(t), "chat8k.txt": chatPrompt8K(t, tok)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes, %d tokens", name, len(text), tok.Count(text, false))
	}
}

// BenchmarkEncodeShared16 is 16 goroutines (RunParallel on 2 CPUs times 8)
// sharing one Qwen3 Tokenizer, each encoding the rendered chat goldens in
// turn and checking every id against the golden; without a piece cache,
// with one shared cache that holds them all, and with a tiny shared one
// that evicts all the time.
func BenchmarkEncodeShared16(b *testing.B) {
	tok := load(b, "qwen3")
	cases := readJSONL[chatGolden](b, "qwen3/goldens.jsonl")
	tokens := 0
	for _, c := range cases {
		tokens += len(c.TokenIDs)
	}
	for _, v := range []struct {
		name string
		size int
	}{{"nocache", 0}, {"cache", 1 << 20}, {"cache=300", 300}} {
		b.Run(v.name, func(b *testing.B) {
			var c *PieceCache
			if v.size > 0 {
				c = tok.NewCache(v.size)
			}
			goroutines := 16 / runtime.GOMAXPROCS(0)
			b.SetParallelism(max(1, goroutines))
			b.ReportAllocs()
			var next atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				var ids []uint32
				i := int(next.Add(37))
				for pb.Next() {
					g := &cases[i%len(cases)]
					i++
					ids = tok.EncodeCached(ids[:0], g.RenderedPrompt, false, c)
					if !slices.Equal(ids, g.TokenIDs) {
						b.Errorf("%s: ids differ", g.ID)
						return
					}
				}
			})
			b.ReportMetric(float64(tokens)/float64(len(cases))*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
