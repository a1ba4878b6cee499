package prompt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/template"
)

// Sink keeps benchmark results alive.
var Sink Prompt

// benchSystem is a system prompt of about 7,700 Qwen3 tokens: the Qwen3
// text goldens that hold no special tokens, joined by newlines, repeated.
func benchSystem(b testing.TB, p *Preparer) string {
	f, err := os.Open("../token/hf/testdata/qwen3/text_goldens.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	var texts []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var g struct{ Text string }
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			b.Fatal(err)
		}
		if !strings.Contains(g.Text, "<|") && !strings.Contains(g.Text, "<think") && !strings.Contains(g.Text, "<tool") {
			texts = append(texts, g.Text)
		}
	}
	var sb strings.Builder
	for i := 0; p.Tokenizer.Count(sb.String(), false) < 7700; i++ {
		sb.WriteString(texts[i%len(texts)])
		sb.WriteByte('\n')
	}
	return sb.String()
}

// benchBody is a chat body: the system prompt, then a user turn of about
// 300 tokens that starts with a nine-digit question number, which the warm
// benchmark rewrites in place so that every user turn is new.
func benchBody(b testing.TB, p *Preparer) (body []byte, digits int) {
	sys := benchSystem(b, p)
	user := "Question 000000000: " + strings.Repeat("Given the notes above, what should the next step of the rollout be, and why? ", 18)
	body, err := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "system", "content": sys}, {"role": "user", "content": user}}})
	if err != nil {
		b.Fatal(err)
	}
	return body, strings.Index(string(body), "Question 000000000") + len("Question ")
}

func setQuestion(body []byte, at, n int) {
	for i := 8; i >= 0; i-- {
		body[at+i] = byte('0' + n%10)
		n /= 10
	}
}

// BenchmarkPrepareChat8K prepares an ~8,000-token Qwen3 chat (7,700 of them
// a system prompt) end to end: JSON, template, tokens, block hashes.
// nocache has no piece cache; cold starts every iteration with an empty
// one; warm has seen the system prompt, and every iteration asks a new
// question, so only the user turn is tokenized. The sub-benchmarks after
// them time each step of a warm preparation alone.
func BenchmarkPrepareChat8K(b *testing.B) {
	base := qwen3(b)
	body, at := benchBody(b, base)
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	first, err := base.Chat(body, now)
	if err != nil {
		b.Fatal(err)
	}
	tokens := float64(len(first.IDs))
	report := func(b *testing.B) {
		b.ReportMetric(tokens, "tokens")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/prompt")
	}
	b.Run("nocache", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Sink, _ = base.Chat(body, now)
		}
		report(b)
	})
	b.Run("cold", func(b *testing.B) {
		p := *base
		b.ReportAllocs()
		for b.Loop() {
			p.Cache = base.Tokenizer.NewCache(1 << 20)
			Sink, _ = p.Chat(body, now)
		}
		report(b)
	})
	warm := *base
	warm.Cache = base.Tokenizer.NewCache(1 << 20)
	setQuestion(body, at, 999999999)
	if _, err := warm.Chat(body, now); err != nil { // sees the system prompt
		b.Fatal(err)
	}
	b.Run("warm", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n++
			setQuestion(body, at, n)
			Sink, _ = warm.Chat(body, now)
		}
		report(b)
	})
	// The steps of a warm preparation, alone.
	b.Run("step=parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			v, _ := template.ParseJSON(body)
			req := v.(*template.Dict)
			msgs, _ := req.GetString("messages")
			for i, m := range msgs.(template.List) {
				msgs.(template.List)[i], _ = normalizeMessage(m, false)
			}
		}
	})
	v, _ := template.ParseJSON(body)
	msgs, _ := v.(*template.Dict).GetString("messages")
	b.Run("step=render", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Sink.Text, _ = base.Template.Apply(msgs, nil, true, nil, now)
		}
	})
	text, _ := base.Template.Apply(msgs, nil, true, nil, now)
	b.Run("step=encode", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			// A new question each time, as in warm: the user turn misses.
			n++
			t := strings.Replace(text, "Question 999999999", fmt.Sprintf("Question %09d", n), 1)
			Sink.IDs = base.Tokenizer.EncodeCached(Sink.IDs[:0], t, false, warm.Cache)
		}
	})
	b.Run("step=encode-hit", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Sink.IDs = base.Tokenizer.EncodeCached(Sink.IDs[:0], text, false, warm.Cache)
		}
	})
	b.Run("step=hash", func(b *testing.B) {
		var h prefix.Hasher
		dst := make([]prefix.Hash, 0, len(first.IDs)/16)
		root := prefix.Root(base.Model, "", "")
		b.ReportAllocs()
		for b.Loop() {
			dst = h.Chain(dst[:0], root, first.IDs, 16)
		}
		Sink.Blocks = dst
	})
}

// BenchmarkMessagesThinking prepares a Claude-Code-shaped turn (claudeTurn)
// as it comes and with thinking disabled: with the disabled effort
// resolved once (as a loader sets it), and resolved per request, which
// renders the six probe prompts.
func BenchmarkMessagesThinking(b *testing.B) {
	p := qwen3(b)
	body := claudeTurn(3)
	disabled := strings.Replace(body, `"stream":true,`, `"stream":true,"thinking":{"type":"disabled"},`, 1)
	now := time.Unix(1700000000, 0)
	set := *p
	set.DisabledThinkingEffort = set.ResolveDisabledThinkingEffort(now)
	for _, c := range []struct {
		name, body string
		p          *Preparer
	}{{"default", body, p}, {"disabled-set", disabled, &set}, {"disabled-probed", disabled, p}} {
		p, body := c.p, c.body
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				pr, err := p.Messages([]byte(body), false, now)
				if err != nil {
					b.Fatal(err)
				}
				Sink = pr
			}
		})
	}
}
