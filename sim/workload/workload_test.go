package workload

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/token"
)

func take(t testing.TB, w Workload, seed uint64, rate float64, n int) []Request {
	t.Helper()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	src := w.Start(seed, rate)
	out := make([]Request, n)
	for i := range out {
		out[i] = src.Next()
		if i > 0 && out[i].At < out[i-1].At {
			t.Fatalf("%s: request %d due at %v, before %v", w.Name(), i, out[i].At, out[i-1].At)
		}
		if out[i].At < 0 || out[i].MaxTokens < 1 {
			t.Fatalf("%s: request %d: at %v, max_tokens %d", w.Name(), i, out[i].At, out[i].MaxTokens)
		}
	}
	return out
}

func all(t *testing.T) []Workload {
	t.Helper()
	var ws []Workload
	for _, k := range Kinds() {
		w, err := New(k)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	return ws
}

func TestWordsAreOneTokenEach(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 2, 17, 1000, 8000} {
		s := text(rng, n)
		if got := (token.Sim{}).Count(s); got != n {
			t.Fatalf("%d words are %d tokens", n, got)
		}
	}
}

// The encoder's memo gives exactly the simulator's tokens: the chat
// rendered whole, then token.Sim.
func TestEncoderExact(t *testing.T) {
	gpt := W2()
	gpt.ShareGPT = "testdata/sharegpt.json"
	if err := gpt.Load(); err != nil {
		t.Fatal(err)
	}
	ws := append(all(t), &gpt)
	enc := NewEncoder()
	for _, w := range ws {
		for i, r := range take(t, w, 5, 10, 150) {
			if r.IsMessages() {
				// Their path is the simulator's own conversion
				// (bench/harness TestSimulatorAgreesWithWorkloads
				// holds the two together).
				continue
			}
			got := enc.Encode(nil, &r)
			var want []uint32
			if r.Chat() {
				want = token.Sim{}.Encode(nil, token.RenderSimChat(r.Messages, true))
			} else {
				want = token.Sim{}.Encode(nil, r.Prompt)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s request %d: encoder gives %d ids, the simulator's path %d", w.Name(), i, len(got), len(want))
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	for _, w := range all(t) {
		a, b := take(t, w, 7, 5, 200), take(t, w, 7, 5, 200)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s: seed 7 twice gave different requests", w.Name())
		}
		c := take(t, w, 8, 5, 200)
		if reflect.DeepEqual(a[len(a)-1], c[len(c)-1]) {
			t.Fatalf("%s: seeds 7 and 8 gave the same request", w.Name())
		}
	}
}

// Poisson arrivals: gaps with the rate's mean and a coefficient of
// variation of 1, exponentially distributed (Kolmogorov–Smirnov at the 0.1%
// level), and counts per second as dispersed as a Poisson count's.
func TestPoissonStatistics(t *testing.T) {
	const rate, n = 20.0, 20000
	w := tiny()
	reqs := take(t, &w, 11, rate, n)
	gaps := make([]float64, n)
	prev := time.Duration(0)
	for i, r := range reqs {
		gaps[i] = (r.At - prev).Seconds()
		prev = r.At
	}
	mean, cv := meanCV(gaps)
	if math.Abs(mean*rate-1) > 0.03 || math.Abs(cv-1) > 0.03 {
		t.Errorf("gaps: mean %.4fs (want %.4f), cv %.3f (want 1)", mean, 1/rate, cv)
	}
	slices.Sort(gaps)
	d := 0.0
	for i, g := range gaps {
		f := 1 - math.Exp(-rate*g)
		d = max(d, math.Abs(f-float64(i)/n), math.Abs(f-float64(i+1)/n))
	}
	if crit := 1.95 / math.Sqrt(n); d > crit {
		t.Errorf("Kolmogorov–Smirnov D = %.4f against the exponential, above %.4f", d, crit)
	}
	secs := int(reqs[n-1].At / time.Second)
	counts := make([]float64, secs)
	for _, r := range reqs {
		if s := int(r.At / time.Second); s < secs {
			counts[s]++
		}
	}
	m, c := meanCV(counts)
	if dispersion := c * c * m; math.Abs(m-rate) > 0.5 || math.Abs(dispersion-1) > 0.15 {
		t.Errorf("per-second counts: mean %.2f, variance/mean %.3f; want %v and 1", m, dispersion, rate)
	}
}

func TestGammaAndDiurnal(t *testing.T) {
	for _, cv := range []float64{0.5, 2, 4} {
		w := tiny()
		w.Arrivals = Arrivals{Process: "gamma", CV: cv}
		reqs := take(t, &w, 3, 10, 40000)
		gaps := make([]float64, len(reqs))
		prev := time.Duration(0)
		for i, r := range reqs {
			gaps[i] = (r.At - prev).Seconds()
			prev = r.At
		}
		mean, got := meanCV(gaps)
		if math.Abs(mean*10-1) > 0.05+0.03*cv || math.Abs(got/cv-1) > 0.1 {
			t.Errorf("gamma cv %v: mean gap %.4fs, cv %.3f", cv, mean, got)
		}
	}

	// The ramp keeps the mean rate over a period, from a trough of 0.2 to
	// a peak of 1.8 times it.
	w := tiny()
	w.Arrivals = Arrivals{Ramp: "diurnal", Period: 100 * time.Second}
	reqs := take(t, &w, 4, 20, 60000) // 30 periods
	var trough, peak, total int
	for _, r := range reqs {
		if r.At >= 3000*time.Second {
			break
		}
		total++
		switch phase := r.At % (100 * time.Second); {
		case phase < 5*time.Second || phase >= 95*time.Second:
			trough++
		case phase >= 45*time.Second && phase < 55*time.Second:
			peak++
		}
	}
	// Over ±5% of a period around the trough the mean intensity is
	// 1 - 0.8·sin(π/10)/(π/10) ≈ 0.209, around the peak 1.791.
	if got := float64(total) / 3000; math.Abs(got-20) > 0.5 {
		t.Errorf("diurnal: %.2f req/s over 30 periods, want 20", got)
	}
	if got := float64(trough) / (30 * 10 * 20); math.Abs(got-0.209) > 0.03 {
		t.Errorf("diurnal trough at %.3f of the mean, want 0.209", got)
	}
	if got := float64(peak) / (30 * 10 * 20); math.Abs(got-1.791) > 0.06 {
		t.Errorf("diurnal peak at %.3f of the mean, want 1.791", got)
	}
}

// tiny is W6 with one-token prompts and answers, to test arrivals cheaply.
func tiny() Unique {
	w := W6()
	w.PromptTokens, w.OutputTokens = Range{1, 1}, Range{1, 1}
	return w
}

func meanCV(xs []float64) (mean, cv float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	v := 0.0
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	v /= float64(len(xs) - 1)
	return mean, math.Sqrt(v) / mean
}

func TestShapes(t *testing.T) {
	count := func(s string) int { return (token.Sim{}).Count(s) }

	// W1: one of 4 system prompts, equally often.
	w1 := W1()
	systems := map[string]int{}
	for _, r := range take(t, &w1, 1, 10, 2000) {
		sys, q := r.Messages[0].Content, r.Messages[1].Content
		if n := count(sys); n < 2000 || n > 8000 {
			t.Fatalf("W1 system prompt of %d tokens", n)
		}
		if n := count(q); n < 50 || n > 500 || r.MaxTokens < 50 || r.MaxTokens > 300 || r.Class != "W1" {
			t.Fatalf("W1 question of %d tokens, max_tokens %d, class %q", n, r.MaxTokens, r.Class)
		}
		systems[sys]++
	}
	if len(systems) != 4 {
		t.Fatalf("W1 used %d system prompts, want 4", len(systems))
	}
	for _, n := range systems {
		if n < 400 || n > 600 {
			t.Errorf("W1 system prompt drawn %d times of 2000, want about 500", n)
		}
	}

	// hot: the first of 16 prompts has weight 1 / sum k^-1.1, about 0.30.
	hot := Hot()
	byPrompt := map[string]int{}
	for _, r := range take(t, &hot, 1, 10, 6000) {
		byPrompt[r.Messages[0].Content]++
	}
	top := 0
	for _, n := range byPrompt {
		top = max(top, n)
	}
	want := 0.0
	for k := 1; k <= 16; k++ {
		want += math.Pow(float64(k), -1.1)
	}
	if want = 1 / want; len(byPrompt) != 16 || math.Abs(float64(top)/6000-want) > 0.03 {
		t.Errorf("hot: %d prompts, top share %.3f; want 16 and %.3f", len(byPrompt), float64(top)/6000, want)
	}

	// mix: half each, by class.
	mix := MixW1W6()
	classes := map[string]int{}
	for _, r := range take(t, &mix, 1, 10, 4000) {
		classes[r.Class]++
	}
	if len(classes) != 2 || math.Abs(float64(classes["W1"])/4000-0.5) > 0.03 {
		t.Errorf("mix classes %v, want W1 and W6 half each", classes)
	}

	// W6: one user message of 500 to 4,000 tokens, none shared.
	w6 := W6()
	for _, r := range take(t, &w6, 1, 10, 300) {
		if n := count(r.Messages[0].Content); len(r.Messages) != 1 || n < 500 || n > 4000 {
			t.Fatalf("W6 request of %d messages, %d tokens", len(r.Messages), n)
		}
	}

	// W4: 1 to 4 distinct documents after one shared instruction; the most
	// popular document leads about 1/H(2000) ≈ 12% of the draws.
	w4 := W4()
	instr := map[string]bool{}
	docs := map[int]int{}
	for _, r := range take(t, &w4, 1, 10, 2000) {
		instr[r.Messages[0].Content] = true
		n := strings.Count(r.Messages[1].Content, "Document ")
		if n < 1 || n > 4 {
			t.Fatalf("W4 request with %d documents", n)
		}
		docs[n]++
	}
	if len(instr) != 1 || len(docs) != 4 {
		t.Errorf("W4: %d instructions, document counts %v", len(instr), docs)
	}

	// W5: completions after one of 8 example blocks, answered in 1 to 16.
	w5 := W5()
	blocks := map[string]bool{}
	for _, r := range take(t, &w5, 1, 10, 500) {
		if r.Chat() || r.MaxTokens > 16 || !strings.HasSuffix(r.Prompt, "\nA:") {
			t.Fatalf("W5 request %+v", r.MaxTokens)
		}
		blocks[r.Prompt[:strings.LastIndex(r.Prompt, "\n\nQ: ")]] = true
	}
	if len(blocks) != 8 {
		t.Errorf("W5 used %d example blocks, want 8", len(blocks))
	}
}

// Conversations and agent loops resend their history with the simulator's
// own answers, one turn Think apart, and arrive at the rate in a steady
// state from the start.
func TestSessionsResendHistory(t *testing.T) {
	w2, w3 := W2(), W3()
	for _, tc := range []struct {
		w        Workload
		gap      DurRange
		perTurn  int // messages a turn adds
		minTurns int
	}{
		{&w2, w2.Think, 2, 2},
		{&w3, w3.ToolTime, 2, 3},
	} {
		reqs := take(t, tc.w, 3, 6, 3000)
		last := map[string]Request{}
		enc := NewEncoder()
		turns := map[string]int{}
		for _, r := range reqs {
			if r.Session == "" || r.Class != tc.w.Name() {
				t.Fatalf("%s: request without a session or class: %q %q", tc.w.Name(), r.Session, r.Class)
			}
			turns[r.Session]++
			prev, ok := last[r.Session]
			last[r.Session] = r
			if !ok {
				continue
			}
			if gap := r.At - prev.At; gap < tc.gap.Min || gap > tc.gap.Max {
				t.Fatalf("%s: turns %v apart", tc.w.Name(), gap)
			}
			n := len(prev.Messages)
			if len(r.Messages) != n+tc.perTurn || !slices.Equal(r.Messages[:n], prev.Messages) {
				t.Fatalf("%s: a turn does not resend the history", tc.w.Name())
			}
			answer := Answer(enc.Encode(nil, &prev), prev.MaxTokens)
			if m := r.Messages[n]; m.Role != "assistant" || m.Content != answer {
				t.Fatalf("%s: the history holds %q, not the simulator's answer", tc.w.Name(), m.Content[:min(len(m.Content), 40)])
			}
		}
		span := reqs[len(reqs)-1].At.Seconds()
		if got := float64(len(reqs)) / span; math.Abs(got-6) > 0.6 {
			t.Errorf("%s: %.2f req/s, want 6", tc.w.Name(), got)
		}
		first := 0
		for _, r := range reqs {
			if r.At > 60*time.Second {
				break
			}
			first++
		}
		if got := float64(first) / 60; math.Abs(got-6) > 1.2 {
			t.Errorf("%s: %.2f req/s in the first minute, want about 6 (sessions under way at zero)", tc.w.Name(), got)
		}
	}
}

func TestShareGPT(t *testing.T) {
	w := W2()
	w.ShareGPT = "testdata/sharegpt.json"
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "not loaded") {
		t.Fatalf("validate before load: %v", err)
	}
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if len(w.dialogues) != 3 || len(w.ShareGPTDigest) != 64 {
		t.Fatalf("%d dialogues, digest %q; want 3 (a lone question is left out)", len(w.dialogues), w.ShareGPTDigest)
	}
	if d := w.dialogues[1]; d.system != "You are terse." || len(d.turns) != 1 {
		t.Fatalf("second dialogue %+v", d)
	}
	if d := w.dialogues[2]; len(d.turns) != 1 || !strings.Contains(d.turns[0].user, "<|im_end|>") {
		t.Fatalf("third dialogue %+v: want its one answered question", d)
	}
	users := map[string]bool{}
	for _, r := range take(t, &w, 1, 2, 300) {
		users[r.Messages[len(r.Messages)-1].Content] = true
		if r.MaxTokens < w.OutputTokens.Min || r.MaxTokens > w.OutputTokens.Max {
			t.Fatalf("max_tokens %d outside %v", r.MaxTokens, w.OutputTokens)
		}
	}
	if len(users) != 4 {
		t.Errorf("replayed %d distinct questions, want the file's 4", len(users))
	}
	bad := W2()
	bad.ShareGPT = "testdata/missing.json"
	if err := bad.Load(); err == nil {
		t.Error("a missing file loaded")
	}
}

func TestValidateReportsEverything(t *testing.T) {
	w := W1()
	w.Prompts, w.QuestionTokens, w.Arrivals = 0, Range{10, 5}, Arrivals{Process: "gamma", Ramp: "weekly"}
	err := w.Validate()
	for _, want := range []string{"W1: prompts 0", "W1: question_tokens: range [10, 5]", "arrivals.cv 0", `arrivals.ramp "weekly"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
	if _, err := New("W7"); err == nil {
		t.Error("New accepted W7")
	}
}

// FuzzShareGPT loads arbitrary bytes as a ShareGPT file: an error or a
// workload whose requests can be drawn, never a panic or a hang.
func FuzzShareGPT(f *testing.F) {
	if b, err := os.ReadFile("testdata/sharegpt.json"); err == nil {
		f.Add(b)
	}
	f.Add([]byte(`[{"conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"hello"}]}]`))
	f.Add([]byte(`[{"conversations":[{"from":"system","value":""},{"from":"human","value":""}]}]`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "sharegpt.json")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		w := W2()
		w.ShareGPT = path
		if err := w.Load(); err != nil {
			return
		}
		if err := w.Validate(); err != nil {
			return // e.g. no usable dialogue
		}
		src := w.Start(1, 5)
		for range 20 {
			if r := src.Next(); r.MaxTokens < 1 {
				t.Fatalf("request with max_tokens %d", r.MaxTokens)
			}
		}
	})
}

// Workload parameters off by orders of magnitude are errors, and so is a
// ShareGPT "file" that is a device.
func TestBounds(t *testing.T) {
	w := W1()
	w.Prompts = 1_000_000
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "fixed material") {
		t.Errorf("a million 8k-token system prompts: %v", err)
	}
	w = W1()
	w.QuestionTokens = Range{10, 1 << 30}
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "question_tokens") {
		t.Errorf("a billion-token question: %v", err)
	}
	c := W2()
	c.ShareGPT = "/dev/zero"
	if err := c.Load(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("sharegpt /dev/zero: %v", err)
	}
}
