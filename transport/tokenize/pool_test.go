package tokenize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/prompt"
)

func simModel(t testing.TB) *Model {
	t.Helper()
	m, err := Load(config.Model{Name: "inferrail/sim-8b", Tokenizer: Sim, BlockSize: 16}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testModels(t testing.TB) map[string]*Model {
	q := qwen3(t)
	mistral, err := Load(config.Model{Name: "mistral", Tokenizer: mistralDir, BlockSize: 16}, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*Model{q.Name: q, "sim": simModel(t), "mistral": mistral}
}

// chatBody is a chat request of about n characters of user text.
func chatBody(sys string, n int) []byte {
	user := strings.Repeat("The quick brown fox jumps over the lazy dog. ", n/45+1)[:n]
	b, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "system", "content": sys}, {"role": "user", "content": user}}})
	return b
}

func counters(set *metrics.Set) map[string]string {
	var b bytes.Buffer
	set.WritePrometheus(&b)
	out := map[string]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		k, v, ok := strings.Cut(line, " ")
		if !ok || !strings.HasPrefix(k, "inferrail_tokenized_requests_total") {
			continue
		}
		_, r, _ := strings.Cut(k, `result="`)
		r = strings.TrimSuffix(r, `"}`)
		n, _ := strconv.Atoi(out[r])
		m, _ := strconv.Atoi(v)
		out[r] = strconv.Itoa(n + m) // summed over the models
	}
	for k, v := range out {
		if v == "0" {
			delete(out, k)
		}
	}
	return out
}

func samePrompt(a, b prompt.Prompt) bool {
	return a.Text == b.Text && slices.Equal(a.IDs, b.IDs) && slices.Equal(a.Blocks, b.Blocks)
}

// TestPrepareResults: every result, inline and through the workers, and
// every OK prompt is what the model prepares synchronously.
func TestPrepareResults(t *testing.T) {
	models := testModels(t)
	set := metrics.NewSet()
	p := NewPool(models, nil, config.Tokenizer{Workers: 2, MaxWait: 10 * time.Second}, set)
	defer p.Close()
	qwen := qwen3(t).Name
	big := `{"prompt":"` + strings.Repeat("many words ", 200) + `"}`
	image := `{"messages":[{"role":"user","content":[{"type":"text","text":"` + strings.Repeat("x", 2000) + `"},{"type":"image_url","image_url":{"url":"http://x"}}]}]}`
	f := func(model string, kind Kind, body string, want Result) {
		t.Helper()
		got, r := p.Prepare(context.Background(), model, kind, []byte(body))
		if r != want {
			t.Fatalf("%s %.60s: %v, want %v", model, body, r, want)
		}
		if r != OK {
			if got.IDs != nil || got.Blocks != nil {
				t.Fatalf("%v with a prompt", r)
			}
			return
		}
		direct, err := models[model].Prepare(kind, []byte(body), time.Now())
		if err != nil || !samePrompt(got, direct) || len(got.IDs) == 0 {
			t.Fatalf("%s %.60s: prepared differently (%v)", model, body, err)
		}
	}
	f(qwen, Chat, `{"messages":[{"role":"user","content":"hi"}]}`, OK)
	f(qwen, Chat, string(chatBody("You are helpful.", 5000)), OK)
	f(qwen, Completion, `{"prompt":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}`, OK)
	f(qwen, Completion, big, OK)
	f("sim", Chat, string(chatBody("sys", 3000)), OK)
	f("sim", Completion, `{"prompt":"Once upon a time"}`, OK)
	f("unknown", Chat, `{"messages":[]}`, NoTokenizer)
	f(qwen, Chat, image, Unsupported)
	f(qwen, Chat, `{"messages":[{"role":"user","content":"hi"}],"chat_template":"{{ 1 }}"}`, Unsupported)
	f(qwen, Completion, `{"prompt":["a","b"]}`, OK) // a batch: its first prompt
	f("sim", Chat, image, Unsupported)
	f(qwen, Chat, `{"messages":`, Error)
	f(qwen, Chat, `{"messages":[{"role":"user","content":"`+strings.Repeat("y", 2000)+`"}]`, Error)
	f(qwen, Chat, `{"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"messages":1}}`, TemplateError)
	f("mistral", Chat, `{"messages":[{"role":"user","content":"hi"}]}`, TemplateError) // no chat template
	f(qwen, Kind(9), `{}`, Error)
	want := map[string]string{"ok": "7", "unsupported": "3", "invalid": "3", "template": "2"} // "unknown" is no configured model: not counted
	if got := counters(set); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counters %v, want %v", got, want)
	}
	var b bytes.Buffer
	set.WritePrometheus(&b)
	if !strings.Contains(b.String(), `inferrail_tokenize_seconds_count{model="`+qwen+`"} 5`) {
		t.Fatalf("histogram:\n%s", b.String())
	}
}

// TestPrepareWithoutTokenizer: a configured model whose tokenizer is not
// loaded (none configured, or failed) still has its token-id completions
// prepared, inline and through the workers, hashed with its configured
// block size; its text and chat bodies answer NoTokenizer.
func TestPrepareWithoutTokenizer(t *testing.T) {
	set := metrics.NewSet()
	statuses := []Status{{Model: "bare", BlockSize: 4}, {Model: "broken", Tokenizer: "/nowhere", Err: errors.New("no")}}
	p := NewPool(map[string]*Model{}, statuses, config.Tokenizer{Workers: 1, MaxWait: 10 * time.Second}, set)
	defer p.Close()
	if p.BlockSize("bare") != 4 || p.BlockSize("broken") != 16 || p.BlockSize("unknown") != 0 || p.Model("bare") != nil {
		t.Fatalf("block sizes %d %d %d", p.BlockSize("bare"), p.BlockSize("broken"), p.BlockSize("unknown"))
	}
	ids := make([]uint32, 600) // over InlineBytes as JSON: prepared by a worker
	for i := range ids {
		ids[i] = uint32(1000 + i)
	}
	body, _ := json.Marshal(map[string]any{"prompt": ids, "cache_salt": "s"})
	if len(body) <= InlineBytes {
		t.Fatalf("body of %d bytes is prepared inline", len(body))
	}
	for _, c := range []struct {
		model string
		ids   []uint32
		bs    int
	}{{"bare", ids, 4}, {"bare", ids[:9], 4}, {"broken", ids, 16}} {
		b, _ := json.Marshal(map[string]any{"prompt": c.ids, "cache_salt": "s"})
		got, r := p.Prepare(context.Background(), c.model, Completion, b)
		var h prefix.Hasher
		want := h.Chain(nil, prefix.Root(c.model, "", "s"), c.ids, c.bs)
		if r != OK || !slices.Equal(got.IDs, c.ids) || !slices.Equal(got.Blocks, want) || len(want) == 0 {
			t.Fatalf("%s, %d ids: %v, %d blocks, want %d", c.model, len(c.ids), r, len(got.Blocks), len(want))
		}
	}
	for kind, body := range map[Kind]string{Completion: `{"prompt":"text"}`, Chat: `{"messages":[{"role":"user","content":"hi"}]}`,
		Messages: `{"messages":[{"role":"user","content":"hi"}]}`, Responses: `{"input":"hi"}`} {
		if _, r := p.Prepare(context.Background(), "bare", kind, []byte(body)); r != NoTokenizer {
			t.Fatalf("kind %d: %v, want NoTokenizer", kind, r)
		}
	}
	if _, r := p.Prepare(context.Background(), "bare", Completion, []byte(`{"prompt":[1,-1]}`)); r != Error {
		t.Fatalf("a negative id: %v", r)
	}
}

// TestTextPromptWithoutTokenizerNeedsNoWorker: a model without a tokenizer
// answers a text completion NoTokenizer from a scan for its prompt, however
// long it is: no parse, and no hand-off to a worker (here the pool is
// closed, and a body sent to a worker would answer QueueFull).
func TestTextPromptWithoutTokenizerNeedsNoWorker(t *testing.T) {
	p := NewPool(map[string]*Model{}, []Status{{Model: "bare", BlockSize: 16}}, config.Tokenizer{Workers: 1, MaxWait: time.Second}, metrics.NewSet())
	p.Close()
	long, _ := json.Marshal(map[string]any{"model": "bare", "prompt": strings.Repeat("word ", InlineBytes), "max_tokens": 1})
	for _, body := range []string{string(long), `{"prompt":"esc\"aped"}`} {
		if _, r := p.Prepare(context.Background(), "bare", Completion, []byte(body)); r != NoTokenizer {
			t.Fatalf("%.40s...: %v, want NoTokenizer", body, r)
		}
	}
	if _, r := p.Prepare(context.Background(), "bare", Completion, []byte(`{"prompt":"unterminated`)); r != Error {
		t.Fatalf("a malformed body: %v, want Error from the parse", r)
	}
}

// TestPrepareQueueFull: with no worker free, a request waits max_wait and
// answers Timeout, and one that finds the queue full answers at once.
func TestPrepareQueueFull(t *testing.T) {
	set := metrics.NewSet()
	const wait = 30 * time.Millisecond
	p := newPool(testModels(t), nil, wait, set, 0, 1) // no workers: nothing is ever taken
	defer p.Close()
	body := chatBody("s", 4000)
	model := qwen3(t).Name
	done := make(chan time.Duration, 1)
	go func() {
		start := time.Now()
		if _, r := p.Prepare(context.Background(), model, Chat, body); r != Timeout {
			t.Errorf("queued: %v, want timeout", r)
		}
		done <- time.Since(start)
	}()
	for len(p.queue) == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if _, r := p.Prepare(context.Background(), model, Chat, body); r != QueueFull {
		t.Fatalf("second: %v, want queue_full", r)
	}
	if d := time.Since(start); d > wait {
		t.Fatalf("queue_full took %v", d)
	}
	if d := <-done; d < wait || d > wait+2*time.Second {
		t.Fatalf("timeout after %v, want about %v", d, wait)
	}
	// A cancelled context ends the wait too.
	<-p.queue
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	p.maxWait = time.Hour
	if _, r := p.Prepare(ctx, model, Chat, body); r != Timeout {
		t.Fatalf("cancelled: %v", r)
	}
	if _, r := p.Prepare(ctx, model, Chat, body); r != Timeout {
		t.Fatalf("already cancelled: %v", r)
	}
	if got := counters(set); got["slow"] != "3" || got["busy"] != "1" {
		t.Fatalf("counters %v", got)
	}
}

// TestPrepareBounded: 16 goroutines send bodies too long to tokenize within
// max_wait to one worker. No call waits much past max_wait, every answer
// is ok, timeout or queue_full, and every ok prompt is exact (run with
// -race).
func TestPrepareBounded(t *testing.T) {
	models := testModels(t)
	const wait = 20 * time.Millisecond
	p := NewPool(models, nil, config.Tokenizer{Workers: 1, MaxWait: wait}, metrics.NewSet())
	defer p.Close()
	model := qwen3(t).Name
	var bodies [][]byte
	var want []prompt.Prompt
	// The first body is short enough for one worker to finish within
	// max_wait even on a machine whose cores are half stolen, so that the
	// check below that something was prepared cannot fail on speed alone.
	for i, n := range []int{100, 4000, 20000, 100000, 400000, 1500000} {
		b := chatBody(fmt.Sprintf("System prompt %d.", i%2), n)
		w, err := models[model].Prepare(Chat, b, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		bodies, want = append(bodies, b), append(want, w)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[Result]int{}
	for g := range 16 {
		wg.Go(func() {
			for i := range 10 {
				k := (g + i) % len(bodies)
				start := time.Now()
				got, r := p.Prepare(context.Background(), model, Chat, bodies[k])
				if d := time.Since(start); d > wait+time.Second {
					t.Errorf("Prepare took %v with max_wait %v", d, wait)
				}
				switch r {
				case OK:
					if !samePrompt(got, want[k]) {
						t.Errorf("body %d prepared differently", k)
					}
				case Timeout, QueueFull:
				default:
					t.Errorf("result %v", r)
				}
				mu.Lock()
				seen[r]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("results: %v", seen)
	if seen[OK] == 0 {
		t.Error("nothing was prepared")
	}
}

func TestClose(t *testing.T) {
	p := NewPool(testModels(t), nil, config.Tokenizer{Workers: 2}, metrics.NewSet())
	p.Close()
	p.Close()
	model := qwen3(t).Name
	if _, r := p.Prepare(context.Background(), model, Chat, chatBody("s", 3000)); r != QueueFull {
		t.Fatalf("large body after Close: %v", r)
	}
	if _, r := p.Prepare(context.Background(), model, Chat, []byte(`{"messages":[{"role":"user","content":"hi"}]}`)); r != OK {
		t.Fatalf("small body after Close: %v", r)
	}
}

func TestResultString(t *testing.T) {
	for r, want := range []string{"ok", "unavailable", "unsupported", "busy", "slow", "invalid", "template"} {
		if Result(r).String() != want {
			t.Errorf("%d: %s", r, Result(r))
		}
	}
	if Result(42).String() != "Result(42)" {
		t.Error(Result(42).String())
	}
}

// TestCacheMetrics: the piece cache's lookups and contents are on the
// metrics page, per model with a cache, and count what happened.
func TestCacheMetrics(t *testing.T) {
	p := NewPool(testModels(t), nil, config.Tokenizer{Workers: 1, MaxWait: 10 * time.Second}, metrics.NewSet())
	defer p.Close()
	page := func() string {
		var b bytes.Buffer
		p.WriteCacheMetrics(&b)
		return b.String()
	}
	if got := page(); !strings.Contains(got, `inferrail_tokenizer_cache_lookups_total{model="mistral",result="hit"} 0`) ||
		strings.Contains(got, `model="sim"`) {
		t.Fatalf("before any request:\n%s", got)
	}
	body := []byte(`{"prompt":"` + strings.Repeat("A long shared preamble, said again and again. ", 8) + `"}`)
	for range 3 {
		if _, res := p.Prepare(context.Background(), "mistral", Completion, body); res != OK {
			t.Fatalf("prepare: %v", res)
		}
	}
	got := page()
	for _, want := range []string{
		`inferrail_tokenizer_cache_lookups_total{model="mistral",result="hit"} 2`,
		`inferrail_tokenizer_cache_lookups_total{model="mistral",result="miss"} 1`,
		`inferrail_tokenizer_cache_pieces{model="mistral"} 1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in\n%s", want, got)
		}
	}
}
