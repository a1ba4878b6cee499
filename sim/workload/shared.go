package workload

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/inferrail/inferrail/model/token"
)

// Shared is traffic over a few long system prompts: every request is one
// system prompt and a fresh question. With Zipf 0 the prompts are equally
// likely (W1); with Zipf s > 0 prompt k (from 1) has weight k^-s, so a few
// are hot (hot). W8 is W1 arriving in Gamma bursts over a diurnal ramp.
type Shared struct {
	// Label names the workload in reports.
	Label string `toml:"label" json:"label"`
	// Prompts is how many system prompts the run draws.
	Prompts int `toml:"prompts" json:"prompts"`
	// SystemTokens is a system prompt's length, QuestionTokens the
	// question's after it, OutputTokens the answer's (max_tokens).
	SystemTokens   Range `toml:"system_tokens" json:"system_tokens"`
	QuestionTokens Range `toml:"question_tokens" json:"question_tokens"`
	OutputTokens   Range `toml:"output_tokens" json:"output_tokens"`
	// Zipf is the exponent of the prompts' popularity, 0 for uniform.
	Zipf     float64  `toml:"zipf" json:"zipf"`
	Arrivals Arrivals `toml:"arrivals" json:"arrivals"`
}

// W1 is the benchmark plan's W1: 4 system prompts of 2k to 8k tokens shared
// by every user, each request asking a 50 to 500 token question and
// generating 50 to 300 tokens.
func W1() Shared {
	return Shared{
		Label:          "W1",
		Prompts:        4,
		SystemTokens:   Range{2000, 8000},
		QuestionTokens: Range{50, 500},
		OutputTokens:   Range{50, 300},
	}
}

// Hot is the plan's hot workload: W1 over 16 system prompts drawn by Zipf
// weight with exponent 1.1, so the first takes about a third of the traffic.
func Hot() Shared {
	s := W1()
	s.Label, s.Prompts, s.Zipf = "hot", 16, 1.1
	return s
}

// W8 is the plan's W8: W1's shared prompts arriving in Gamma bursts (CV 4)
// over a diurnal ramp.
func W8() Shared {
	s := W1()
	s.Label = "W8"
	s.Arrivals = Arrivals{Process: "gamma", CV: 4, Ramp: "diurnal"}
	return s
}

// Name returns Label, "W1" when empty.
func (s *Shared) Name() string { return orDefault(s.Label, "W1") }

// Validate reports every problem with s.
func (s *Shared) Validate() error {
	n := s.Name()
	var errs []error
	if s.Prompts < 1 {
		errs = append(errs, fmt.Errorf("%s: prompts %d: want at least 1", n, s.Prompts))
	}
	if s.Zipf < 0 || math.IsNaN(s.Zipf) || math.IsInf(s.Zipf, 0) {
		errs = append(errs, fmt.Errorf("%s: zipf %v: want a finite number >= 0", n, s.Zipf))
	}
	errs = append(errs,
		s.SystemTokens.validate(n+": system_tokens", 1),
		material(n+": prompts", s.Prompts, s.SystemTokens),
		s.QuestionTokens.validate(n+": question_tokens", 1),
		s.OutputTokens.validate(n+": output_tokens", 1),
		prefixed(n, s.Arrivals.Validate()))
	return errors.Join(errs...)
}

// Start returns s's requests at rate per second.
func (s *Shared) Start(seed uint64, rate float64) Source {
	return startDrawer(s, s.Arrivals, seed, rate)
}

// Drawer draws the system prompts, then returns a draw of one request.
func (s *Shared) Drawer(rng *rand.Rand) func() Request {
	systems := make([]string, s.Prompts)
	for i := range systems {
		systems[i] = text(rng, s.SystemTokens.draw(rng))
	}
	z := newZipf(s.Prompts, s.Zipf)
	name := s.Name()
	return func() Request {
		sys := systems[z.draw(rng)]
		q := text(rng, s.QuestionTokens.draw(rng))
		return Request{
			Messages:  []token.Message{{Role: "system", Content: sys}, {Role: "user", Content: q}},
			MaxTokens: s.OutputTokens.draw(rng),
			Class:     name,
		}
	}
}

// Unique is traffic that shares nothing (W6): the control, where cache
// affinity must not hurt.
type Unique struct {
	Label        string   `toml:"label" json:"label"`
	PromptTokens Range    `toml:"prompt_tokens" json:"prompt_tokens"`
	OutputTokens Range    `toml:"output_tokens" json:"output_tokens"`
	Arrivals     Arrivals `toml:"arrivals" json:"arrivals"`
}

// W6 is the plan's W6: one user message of 500 to 4,000 tokens, generating
// 50 to 300.
func W6() Unique {
	return Unique{Label: "W6", PromptTokens: Range{500, 4000}, OutputTokens: Range{50, 300}}
}

// Name returns Label, "W6" when empty.
func (u *Unique) Name() string { return orDefault(u.Label, "W6") }

// Validate reports every problem with u.
func (u *Unique) Validate() error {
	n := u.Name()
	return errors.Join(
		u.PromptTokens.validate(n+": prompt_tokens", 1),
		u.OutputTokens.validate(n+": output_tokens", 1),
		prefixed(n, u.Arrivals.Validate()))
}

// Start returns u's requests at rate per second.
func (u *Unique) Start(seed uint64, rate float64) Source {
	return startDrawer(u, u.Arrivals, seed, rate)
}

// Drawer returns a draw of one request.
func (u *Unique) Drawer(rng *rand.Rand) func() Request {
	name := u.Name()
	return func() Request {
		return Request{
			Messages:  []token.Message{{Role: "user", Content: text(rng, u.PromptTokens.draw(rng))}},
			MaxTokens: u.OutputTokens.draw(rng),
			Class:     name,
		}
	}
}

// Mix is W1 and W6 arriving together on one clock, each arrival a W1
// request with probability W1Share, so a policy must weigh the cache one
// kind finds against the prefill the other queues.
type Mix struct {
	Label    string   `toml:"label" json:"label"`
	W1       Shared   `toml:"w1" json:"w1"`
	W6       Unique   `toml:"w6" json:"w6"`
	W1Share  float64  `toml:"w1_share" json:"w1_share"`
	Arrivals Arrivals `toml:"arrivals" json:"arrivals"`
}

// MixW1W6 is the plan's mix: W1 and W6, half each.
func MixW1W6() Mix { return Mix{Label: "mix", W1: W1(), W6: W6(), W1Share: 0.5} }

// Name returns Label, "mix" when empty.
func (m *Mix) Name() string { return orDefault(m.Label, "mix") }

// Validate reports every problem with m and its parts.
func (m *Mix) Validate() error {
	var errs []error
	if !(m.W1Share >= 0 && m.W1Share <= 1) {
		errs = append(errs, fmt.Errorf("%s: w1_share %v: want 0 <= share <= 1", m.Name(), m.W1Share))
	}
	errs = append(errs, prefixed(m.Name(), m.W1.Validate()), prefixed(m.Name(), m.W6.Validate()),
		prefixed(m.Name(), m.Arrivals.Validate()))
	return errors.Join(errs...)
}

// Start returns m's requests at rate per second.
func (m *Mix) Start(seed uint64, rate float64) Source {
	return startDrawer(m, m.Arrivals, seed, rate)
}

// Drawer draws W1's fixed material, then returns a draw from either part.
func (m *Mix) Drawer(rng *rand.Rand) func() Request {
	w1, w6 := m.W1.Drawer(rng), m.W6.Drawer(rng)
	return func() Request {
		if rng.Float64() < m.W1Share {
			return w1()
		}
		return w6()
	}
}

// FewShot is few-shot evaluation (W5): completion prompts made of one of a
// few shared blocks of worked examples and a short question, answered in a
// few tokens.
type FewShot struct {
	Label string `toml:"label" json:"label"`
	// Tasks is how many example blocks the run draws, ExampleTokens a
	// block's length; each block is Shots examples.
	Tasks          int      `toml:"tasks" json:"tasks"`
	Shots          int      `toml:"shots" json:"shots"`
	ExampleTokens  Range    `toml:"example_tokens" json:"example_tokens"`
	QuestionTokens Range    `toml:"question_tokens" json:"question_tokens"`
	OutputTokens   Range    `toml:"output_tokens" json:"output_tokens"`
	Arrivals       Arrivals `toml:"arrivals" json:"arrivals"`
}

// W5 is the plan's W5: 8 evaluation tasks of 5 worked examples, 1,000 to
// 3,000 tokens each, and 20 to 100 token questions answered in 1 to 16.
func W5() FewShot {
	return FewShot{Label: "W5", Tasks: 8, Shots: 5, ExampleTokens: Range{1000, 3000},
		QuestionTokens: Range{20, 100}, OutputTokens: Range{1, 16}}
}

// Name returns Label, "W5" when empty.
func (f *FewShot) Name() string { return orDefault(f.Label, "W5") }

// Validate reports every problem with f.
func (f *FewShot) Validate() error {
	n := f.Name()
	var errs []error
	if f.Tasks < 1 || f.Shots < 1 {
		errs = append(errs, fmt.Errorf("%s: tasks %d, shots %d: want at least 1 each", n, f.Tasks, f.Shots))
	}
	errs = append(errs,
		f.ExampleTokens.validate(n+": example_tokens", max(f.Shots, 1)*4),
		material(n+": tasks", f.Tasks, f.ExampleTokens),
		f.QuestionTokens.validate(n+": question_tokens", 1),
		f.OutputTokens.validate(n+": output_tokens", 1),
		prefixed(n, f.Arrivals.Validate()))
	return errors.Join(errs...)
}

// Start returns f's requests at rate per second.
func (f *FewShot) Start(seed uint64, rate float64) Source {
	return startDrawer(f, f.Arrivals, seed, rate)
}

// Drawer draws the example blocks, then returns a draw of one request.
func (f *FewShot) Drawer(rng *rand.Rand) func() Request {
	blocks := make([]string, f.Tasks)
	for i := range blocks {
		// Each shot is "Q: question\nA: answer\n\n", the question taking
		// three quarters of the shot's words.
		per := max(f.ExampleTokens.draw(rng)/f.Shots-4, 2)
		var b strings.Builder
		for range f.Shots {
			b.WriteString("Q: ")
			words(&b, rng, per*3/4)
			b.WriteString("\nA: ")
			words(&b, rng, per-per*3/4)
			b.WriteString("\n\n")
		}
		blocks[i] = b.String()
	}
	name := f.Name()
	return func() Request {
		var b strings.Builder
		b.WriteString(blocks[rng.IntN(len(blocks))])
		b.WriteString("Q: ")
		words(&b, rng, f.QuestionTokens.draw(rng))
		b.WriteString("\nA:")
		return Request{Prompt: b.String(), MaxTokens: f.OutputTokens.draw(rng), Class: name}
	}
}

// RAG is retrieval-augmented generation (W4): a short shared instruction,
// then 1 to 4 documents drawn by Zipf weight from a corpus, then the
// question.
type RAG struct {
	Label string `toml:"label" json:"label"`
	// Corpus is how many documents there are, DocTokens each one's length.
	Corpus    int   `toml:"corpus" json:"corpus"`
	DocTokens Range `toml:"doc_tokens" json:"doc_tokens"`
	// Docs is how many distinct documents a request carries, drawn with
	// weight rank^-Zipf.
	Docs              Range    `toml:"docs" json:"docs"`
	Zipf              float64  `toml:"zipf" json:"zipf"`
	InstructionTokens Range    `toml:"instruction_tokens" json:"instruction_tokens"`
	QuestionTokens    Range    `toml:"question_tokens" json:"question_tokens"`
	OutputTokens      Range    `toml:"output_tokens" json:"output_tokens"`
	Arrivals          Arrivals `toml:"arrivals" json:"arrivals"`
}

// W4 is the plan's W4: 1 to 4 documents of 200 to 1,000 tokens drawn by
// Zipf weight (exponent 1) from a corpus of 2,000, after a 100 to 200 token
// instruction.
func W4() RAG {
	return RAG{Label: "W4", Corpus: 2000, DocTokens: Range{200, 1000}, Docs: Range{1, 4}, Zipf: 1,
		InstructionTokens: Range{100, 200}, QuestionTokens: Range{20, 100}, OutputTokens: Range{50, 300}}
}

// Name returns Label, "W4" when empty.
func (r *RAG) Name() string { return orDefault(r.Label, "W4") }

// Validate reports every problem with r.
func (r *RAG) Validate() error {
	n := r.Name()
	var errs []error
	if r.Corpus < 1 {
		errs = append(errs, fmt.Errorf("%s: corpus %d: want at least 1", n, r.Corpus))
	}
	if r.Docs.Max > r.Corpus {
		errs = append(errs, fmt.Errorf("%s: docs up to %d from a corpus of %d", n, r.Docs.Max, r.Corpus))
	}
	if r.Zipf < 0 || math.IsNaN(r.Zipf) || math.IsInf(r.Zipf, 0) {
		errs = append(errs, fmt.Errorf("%s: zipf %v: want a finite number >= 0", n, r.Zipf))
	}
	errs = append(errs,
		r.DocTokens.validate(n+": doc_tokens", 1),
		material(n+": corpus", r.Corpus, r.DocTokens),
		r.Docs.validate(n+": docs", 1),
		r.InstructionTokens.validate(n+": instruction_tokens", 1),
		r.QuestionTokens.validate(n+": question_tokens", 1),
		r.OutputTokens.validate(n+": output_tokens", 1),
		prefixed(n, r.Arrivals.Validate()))
	return errors.Join(errs...)
}

// Start returns r's requests at rate per second.
func (r *RAG) Start(seed uint64, rate float64) Source {
	return startDrawer(r, r.Arrivals, seed, rate)
}

// Drawer draws the instruction and the corpus's seed, then returns a draw of
// one request. A document's text is drawn from its own generator on first
// use, so only the documents used are made.
func (r *RAG) Drawer(rng *rand.Rand) func() Request {
	instruction := text(rng, r.InstructionTokens.draw(rng))
	corpusSeed := rng.Uint64()
	docs := make(map[int]string)
	doc := func(i int) string {
		d, ok := docs[i]
		if !ok {
			drng := newRand(corpusSeed, uint64(i))
			d = text(drng, r.DocTokens.draw(drng))
			docs[i] = d
		}
		return d
	}
	z := newZipf(r.Corpus, r.Zipf)
	name := r.Name()
	var picked []int
	return func() Request {
		picked = picked[:0]
		for n := r.Docs.draw(rng); len(picked) < n; {
			k := z.draw(rng)
			if !contains(picked, k) {
				picked = append(picked, k)
			}
		}
		var b strings.Builder
		for _, k := range picked {
			fmt.Fprintf(&b, "Document %d:\n", k)
			b.WriteString(doc(k))
			b.WriteString("\n\n")
		}
		b.WriteString("Question: ")
		words(&b, rng, r.QuestionTokens.draw(rng))
		return Request{
			Messages:  []token.Message{{Role: "system", Content: instruction}, {Role: "user", Content: b.String()}},
			MaxTokens: r.OutputTokens.draw(rng),
			Class:     name,
		}
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// prefixed names the workload in err's messages, unless err is nil or
// already does.
func prefixed(name string, err error) error {
	if err == nil || strings.HasPrefix(err.Error(), name+":") {
		return err
	}
	return fmt.Errorf("%s: %w", name, err)
}

var (
	_ Drawer = (*Shared)(nil)
	_ Drawer = (*Unique)(nil)
	_ Drawer = (*Mix)(nil)
	_ Drawer = (*FewShot)(nil)
	_ Drawer = (*RAG)(nil)
)
