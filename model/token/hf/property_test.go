package hf

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzEncode: no input panics (invalid UTF-8 included), Count agrees with Encode,
// and on a byte-level tokenizer whose normalizer leaves the text alone, Decode
// gives back the text.
func FuzzEncode(f *testing.F) {
	for _, c := range readJSONL[textGolden](f, "qwen3/text_goldens.jsonl") {
		f.Add(c.Text)
	}
	f.Add("\xff\xfe<|im_start|>\xc3")
	f.Add("<|im_start|>user\n\x80abc<|im_end|>")
	qwen, mistral, synth := load(f, "qwen3"), load(f, "mistral7b"), synthTokenizer(f)
	f.Fuzz(func(t *testing.T, text string) {
		for _, tok := range []*Tokenizer{qwen, mistral, synth} {
			ids := tok.Encode(nil, text, true)
			if n := tok.Count(text, true); n != len(ids) {
				t.Fatalf("Count = %d, len(Encode) = %d", n, len(ids))
			}
			_ = tok.Decode(ids)
			_ = tok.PreTokenize(text)
		}
		if !utf8.ValidString(text) {
			return
		}
		if got := synth.Decode(synth.Encode(nil, text, false)); got != text {
			t.Fatalf("synthetic: Decode(Encode(%q)) = %q", text, got)
		}
		if norm.NFC.IsNormalString(text) {
			if got := qwen.Decode(qwen.Encode(nil, text, false)); got != text {
				t.Fatalf("qwen3: Decode(Encode(%q)) = %q", text, got)
			}
		}
	})
}

// stableCut returns the end of the part of text whose ids cannot change whatever
// follows it: the start of its last pre-token (or added token), moved back over
// pre-tokens that end in whitespace. Those can grow when more whitespace follows:
// cl100k's \s*[\r\n]+ and \s+(?!\S) decide where a whitespace run ends by
// looking at the rest of the run. It handles the tokenizers under test: no
// normalizer change on the text, and no pre-tokenizer or a single Split scanner.
func stableCut(t *testing.T, tok *Tokenizer, text string) int {
	segs := []seg{{0, len(text), -1}}
	if tok.added != nil {
		segs = tok.added.split(nil, text, false)
	}
	if len(segs) == 0 {
		return 0
	}
	last := segs[len(segs)-1]
	if last.tok >= 0 || len(tok.stages) == 0 {
		return last.start
	}
	if len(tok.stages) != 1 || tok.stages[0].kind != stScan {
		t.Fatalf("stableCut: unsupported pre-tokenizer")
	}
	s := text[last.start:last.end]
	var starts []int
	for i := 0; i < len(s); {
		starts = append(starts, i)
		_, i, _ = tok.stages[0].sc.find(s, i)
	}
	k := len(starts) - 1
	for k > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:starts[k]])
		if classOf(r)&clS == 0 {
			break
		}
		k--
	}
	return last.start + starts[k]
}

// TestPrefixProperty: a prefix of a text, cut anywhere outside an added token,
// tokenizes to a prefix of the text's ids once its last pre-token is dropped (and
// any pre-tokens before it that end in whitespace, see stableCut). This is what
// lets the gateway hash the blocks of a conversation's earlier turns.
func TestPrefixProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var texts []string
	for _, c := range readJSONL[textGolden](t, "qwen3/text_goldens.jsonl") {
		texts = append(texts, c.Text)
	}
	for _, c := range readJSONL[chatGolden](t, "qwen3/goldens.jsonl") {
		texts = append(texts, c.RenderedPrompt)
	}
	for _, model := range []string{"qwen3", "mistral7b", "synthetic"} {
		var tok *Tokenizer
		if model == "synthetic" {
			tok = synthTokenizer(t)
		} else {
			tok = load(t, model)
		}
		checked := 0
		for _, text := range texts {
			if !norm.NFC.IsNormalString(text) {
				continue
			}
			full := tok.Encode(nil, text, false)
			var inside []seg // added tokens of the full text
			if tok.added != nil {
				for _, sg := range tok.added.split(nil, text, false) {
					if sg.tok >= 0 {
						inside = append(inside, sg)
					}
				}
			}
			for range 8 {
				k := rng.IntN(len(text) + 1)
				for k > 0 && !utf8.RuneStart(text[k%len(text)]) && k < len(text) {
					k--
				}
				if slices.ContainsFunc(inside, func(sg seg) bool { return k > sg.start && k < sg.end }) {
					continue
				}
				j := stableCut(t, tok, text[:k])
				got := tok.Encode(nil, text[:j], false)
				if len(got) > len(full) || !slices.Equal(got, full[:len(got)]) {
					t.Fatalf("%s: ids of %q (cut %d, last pre-token at %d) are not a prefix of the ids of %q\n%s",
						model, text[:j], k, j, text, diffIDs(tok, got, full[:min(len(full), len(got))]))
				}
				checked++
			}
		}
		t.Logf("%s: %d prefixes checked", model, checked)
	}
}

// TestConcurrent: 16 goroutines share one Tokenizer per model and encode every
// golden; every id must be exact (run with -race).
func TestConcurrent(t *testing.T) {
	type job struct {
		tok  *Tokenizer
		text string
		want []uint32
	}
	var jobs []job
	qwen, mistral := load(t, "qwen3"), load(t, "mistral7b")
	for _, c := range readJSONL[textGolden](t, "qwen3/text_goldens.jsonl") {
		jobs = append(jobs, job{qwen, c.Text, c.TokenIDs})
	}
	for _, c := range readJSONL[chatGolden](t, "qwen3/goldens.jsonl") {
		jobs = append(jobs, job{qwen, c.RenderedPrompt, c.TokenIDs})
	}
	for _, c := range readJSONL[textGolden](t, "mistral7b/text_goldens.jsonl") {
		jobs = append(jobs, job{mistral, c.Text, c.TokenIDs})
	}
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []uint32
			for i := range jobs {
				jb := jobs[(i+w*37)%len(jobs)] // each worker starts elsewhere
				ids = jb.tok.Encode(ids[:0], jb.text, false)
				if !slices.Equal(ids, jb.want) {
					errs <- jb.text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for text := range errs {
		t.Errorf("concurrent encode differs for %q", text)
	}
}
