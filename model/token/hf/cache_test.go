package hf

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// cacheTexts returns a model's golden texts (and for Qwen3 the rendered chat
// goldens), the texts the cache tests encode and concatenate.
func cacheTexts(t testing.TB, model string) []string {
	var texts []string
	for _, c := range readJSONL[textGolden](t, model+"/text_goldens.jsonl") {
		texts = append(texts, c.Text)
	}
	if model == "qwen3" {
		for _, c := range readJSONL[chatGolden](t, "qwen3/goldens.jsonl") {
			texts = append(texts, c.RenderedPrompt)
		}
	}
	return texts
}

// separators are added tokens of each model, put between concatenated
// texts so that pieces recur in new surroundings.
var separators = map[string][]string{
	"qwen3":     {"", "<|im_start|>", "<|im_end|>\n", "<|endoftext|>", "\n<tool_call>\n", "<think>"},
	"mistral7b": {"", "</s>", "<s>", " </s> ", "<unk>"},
	"metaspace": {"", "</s>", "<s>", " </s> ", "<unk>"},
}

// randomConcat joins 1 to 6 of texts with random separators.
func randomConcat(rng *rand.Rand, texts, seps []string) string {
	var b strings.Builder
	for n := 1 + rng.IntN(6); n > 0; n-- {
		b.WriteString(seps[rng.IntN(len(seps))])
		b.WriteString(texts[rng.IntN(len(texts))])
	}
	return b.String()
}

// metaspaceTokenizer is the Mistral vocabulary with the pre-tokenizer newer
// Llama and Mistral tokenizer.json files ship instead of the Prepend
// normalizer: Metaspace with prepend_scheme "first", where a piece's ids
// depend on whether it starts the text.
func metaspaceTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(readFile(t, "testdata/mistral7b/tokenizer.json"), &doc); err != nil {
		t.Fatal(err)
	}
	doc["normalizer"] = nil
	doc["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func cacheTokenizer(t testing.TB, model string) *Tokenizer {
	if model == "metaspace" {
		return metaspaceTokenizer(t)
	}
	return load(t, model)
}

// TestCacheExact: EncodeCached gives Encode's ids for every golden and for
// random concatenations of them joined by added tokens, with caches of
// every size from one that evicts on nearly every store to one that keeps
// everything, and with and without the post-processor's special tokens.
func TestCacheExact(t *testing.T) {
	for _, model := range []string{"qwen3", "mistral7b", "metaspace"} {
		t.Run(model, func(t *testing.T) {
			tok := cacheTokenizer(t, model)
			texts := cacheTexts(t, cacheModel(model))
			rng := rand.New(rand.NewPCG(7, 11))
			var inputs []string
			for _, s := range texts {
				inputs = append(inputs, s, s) // the second one hits
			}
			for range 600 {
				inputs = append(inputs, randomConcat(rng, texts, separators[model]))
			}
			for _, size := range []int{1, 40, 500, 1 << 20} {
				c := tok.NewCache(size)
				var got, want []uint32
				for i, s := range inputs {
					addSpecial := i%3 == 0
					got = c.Encode(got[:0], s, addSpecial)
					want = tok.Encode(want[:0], s, addSpecial)
					if !slices.Equal(got, want) {
						t.Fatalf("cache of %d tokens, %q (addSpecial %v):\n%s", size, s, addSpecial, diffIDs(tok, got, want))
					}
					if st := c.Stats(); st.Tokens > size {
						t.Fatalf("cache of %d tokens holds %d", size, st.Tokens)
					}
				}
				st := c.Stats()
				t.Logf("cache of %d tokens: %+v", size, st)
				if size == 1<<20 && st.Hits == 0 {
					t.Fatal("a cache that keeps everything never hit")
				}
			}
		})
	}
}

func cacheModel(model string) string {
	if model == "metaspace" {
		return "mistral7b"
	}
	return model
}

// TestCacheFirst: the same piece at the start of a text and after an added
// token has different ids under prepend_scheme "first", and the cache keeps
// them apart.
func TestCacheFirst(t *testing.T) {
	tok := metaspaceTokenizer(t)
	piece := "Hello world, this piece is long enough to be cached."
	head := tok.Encode(nil, piece, false)
	mid := tok.Encode(nil, "</s>"+piece, false)[1:]
	if slices.Equal(head, mid) {
		t.Fatalf("prepend_scheme first made no difference: %v", head)
	}
	c := tok.NewCache(1000)
	for _, s := range []string{piece, "</s>" + piece, piece + "</s>" + piece, "</s>" + piece + "</s>" + piece} {
		if got, want := c.Encode(nil, s, false), tok.Encode(nil, s, false); !slices.Equal(got, want) {
			t.Fatalf("%q:\n%s", s, diffIDs(tok, got, want))
		}
	}
	if st := c.Stats(); st.Pieces != 2 || st.Hits != 4 {
		t.Fatalf("stats %+v, want 2 pieces (first and not) and 4 hits", st)
	}
}

// TestCacheOtherTokenizer: a cache is only used by the tokenizer that made it.
func TestCacheOtherTokenizer(t *testing.T) {
	qwen, mistral := load(t, "qwen3"), load(t, "mistral7b")
	c := mistral.NewCache(1000)
	text := "<|im_start|>user\nA piece of text long enough to be kept by a cache.<|im_end|>"
	if got, want := qwen.EncodeCached(nil, text, false, c), qwen.Encode(nil, text, false); !slices.Equal(got, want) {
		t.Fatal("qwen3 used mistral's cache")
	}
	if st := c.Stats(); st.Pieces != 0 || st.Misses != 0 {
		t.Fatalf("stats %+v, want untouched", st)
	}
	if got, want := qwen.EncodeCached(nil, text, true, nil), qwen.Encode(nil, text, true); !slices.Equal(got, want) {
		t.Fatal("nil cache")
	}
	if got, want := qwen.NewCache(0).Encode(nil, text, true), qwen.Encode(nil, text, true); !slices.Equal(got, want) {
		t.Fatal("zero-sized cache")
	}
}

// TestCacheLRU: the least recently used piece goes first.
func TestCacheLRU(t *testing.T) {
	tok := load(t, "qwen3")
	pieces := make([]string, 4)
	for i := range pieces {
		pieces[i] = fmt.Sprintf("piece number %d, long enough to be worth caching here", i)
	}
	n := tok.Count(pieces[0], false)
	c := tok.NewCache(3 * n)
	for _, p := range pieces[:3] {
		c.Encode(nil, p, false)
	}
	c.Encode(nil, pieces[0], false) // 0 is now the most recent; 1 the least
	c.Encode(nil, pieces[3], false) // evicts 1
	before := c.Stats()
	for _, i := range []int{0, 2, 3} {
		c.Encode(nil, pieces[i], false)
	}
	after := c.Stats()
	if after.Hits-before.Hits != 3 || after.Pieces != 3 || after.Tokens != 3*n {
		t.Fatalf("before %+v after %+v", before, after)
	}
	c.Encode(nil, pieces[1], false)
	if st := c.Stats(); st.Misses != after.Misses+1 {
		t.Fatalf("piece 1 was not evicted: %+v", st)
	}
}

// TestCacheConcurrent: 16 goroutines share one tokenizer and one small cache
// that evicts constantly, and every id is exact (run with -race).
func TestCacheConcurrent(t *testing.T) {
	type job struct {
		c    *PieceCache
		text string
		want []uint32
	}
	var jobs []job
	rng := rand.New(rand.NewPCG(3, 5))
	for _, model := range []string{"qwen3", "mistral7b"} {
		tok := load(t, model)
		c := tok.NewCache(300)
		texts := cacheTexts(t, model)
		for _, s := range texts {
			jobs = append(jobs, job{c, s, tok.Encode(nil, s, false)})
		}
		for range 200 {
			s := randomConcat(rng, texts, separators[model])
			jobs = append(jobs, job{c, s, tok.Encode(nil, s, false)})
		}
	}
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan string, workers)
	for w := range workers {
		wg.Go(func() {
			var ids []uint32
			for i := range jobs {
				jb := jobs[(i*7+w*53)%len(jobs)]
				ids = jb.c.Encode(ids[:0], jb.text, false)
				if !slices.Equal(ids, jb.want) {
					errs <- jb.text
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for text := range errs {
		t.Errorf("concurrent cached encode differs for %q", text)
	}
}

// TestCacheCollision: a stored piece whose 64-bit hash equals another
// text's is never taken for it: the text is compared too.
func TestCacheCollision(t *testing.T) {
	tok := load(t, "qwen3")
	c := tok.NewCache(1000)
	a := "The first piece of text, long enough to be cached by the piece cache."
	b := "Another piece of text entirely, also long enough for the piece cache."
	key := pieceKey{maphash.String(c.seed, a), true}
	c.put(key, b, tok.Encode(nil, b, false)) // b stored under a's key, as a collision would
	if got, want := c.Encode(nil, a, false), tok.Encode(nil, a, false); !slices.Equal(got, want) {
		t.Fatalf("a collision gave another text's ids:\n%s", diffIDs(tok, got, want))
	}
	if st := c.Stats(); st.Hits != 0 || st.Misses != 1 || st.Pieces != 1 {
		t.Fatalf("stats %+v: the colliding piece should be a miss, then replaced", st)
	}
	if got, want := c.Encode(nil, a, false), tok.Encode(nil, a, false); !slices.Equal(got, want) || c.Stats().Hits != 1 {
		t.Fatal("a is not cached after replacing the colliding piece")
	}
}
