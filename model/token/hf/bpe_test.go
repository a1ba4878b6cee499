package hf

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergeStrategies: the quadratic scan (short words), the heap (long words) and
// the bigram cut (whole segments without a pre-tokenizer) give the same merges.
func TestMergeStrategies(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, model := range []string{"qwen3", "mistral7b"} {
		m := load(t, model).model
		var texts []string
		for _, c := range readJSONL[textGolden](t, model+"/text_goldens.jsonl") {
			texts = append(texts, c.Text)
		}
		var ws wordScratch
		for _, text := range texts {
			word := text
			if model == "mistral7b" {
				word = "▁" + replaceSpaces(text)
			} else {
				word = string(appendByteLevel(nil, text))
			}
			init := m.initChars(nil, word)
			if len(init) == 0 {
				continue
			}
			for range 4 {
				// A random window keeps most words short enough for the scan.
				i := rng.IntN(len(init))
				j := i + rng.IntN(len(init)-i) + 1
				syms := slices.Clone(init[i:j])
				heap := m.mergeHeap(slices.Clone(syms), &ws)
				scan := syms
				if len(syms) <= shortWord {
					scan = m.mergeAll(slices.Clone(syms), &ws)
					if !slices.Equal(scan, heap) {
						t.Fatalf("%s: scan %v != heap %v for %v", model, scan, heap, syms)
					}
				}
				if m.bigrams != nil {
					ws.syms = slices.Clone(syms)
					parts := m.mergeParts(nil, &ws)
					if !slices.Equal(parts, heap) {
						t.Fatalf("%s: parts %v != heap %v for %v", model, parts, heap, syms)
					}
				}
			}
		}
	}
}

func replaceSpaces(s string) string {
	out := make([]rune, 0, len(s))
	for _, r := range s {
		if r == ' ' {
			r = '▁'
		}
		out = append(out, r)
	}
	return string(out)
}
