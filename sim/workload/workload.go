package workload

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/token"
)

// Request is one request of a workload.
type Request struct {
	// At is when it is due, from the start of the run.
	At time.Duration
	// Session names its conversation, sent as x-session-id; "" names none.
	Session string
	// Messages are a chat request's messages; nil for a completion.
	Messages []token.Message
	// Prompt is a completion request's prompt, when Messages is nil.
	Prompt string
	// Tokens is a completion request's prompt as token ids, sent as
	// JSON's "prompt":[…] (Prompt is then ""), as a trace replays them.
	Tokens []uint32
	// Anthropic is an Anthropic Messages request (POST /v1/messages), when
	// Messages is nil: the members of its body but model and stream, as
	// JSON text ("max_tokens":…,"system":…,"messages":[…]), which
	// AppendMessagesBody completes. Session is then its metadata.user_id.
	Anthropic []byte
	// MaxTokens is max_tokens: the simulator generates exactly that many.
	MaxTokens int
	// Class names the part of the workload that made it, such as "W1" or
	// "W6" in mix.
	Class string
}

// Chat reports whether r goes to /v1/chat/completions.
func (r *Request) Chat() bool { return r.Messages != nil }

// IsMessages reports whether r goes to /v1/messages (Anthropic).
func (r *Request) IsMessages() bool { return r.Messages == nil && r.Anthropic != nil }

// AppendMessagesBody appends the /v1/messages body of an Anthropic
// request r for model, streamed when stream is set.
func AppendMessagesBody(dst []byte, model string, r *Request, stream bool) []byte {
	dst = append(dst, `{"model":`...)
	dst = appendString(dst, model)
	dst = append(dst, ',')
	dst = append(dst, r.Anthropic...)
	if stream {
		dst = append(dst, `,"stream":true`...)
	}
	return append(dst, '}')
}

func appendString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// Source yields one run's requests in order of At. It never runs dry: the
// caller decides when to stop. A Source is owned by one goroutine.
type Source interface {
	Next() Request
}

// Workload is a kind of traffic. It is a value: Start makes a fresh Source
// for every run, drawing everything from seed, so a run replays exactly.
type Workload interface {
	// Name is the workload's short name in reports.
	Name() string
	// Validate reports every problem with the workload's parameters.
	Validate() error
	// Start returns the requests of a run at rate requests per second on
	// average.
	Start(seed uint64, rate float64) Source
}

// Drawer is a workload whose requests are independent draws given the run's
// fixed material (such as W1's system prompts), so that Mix can interleave
// it with others on one clock.
type Drawer interface {
	Workload
	// Drawer draws the fixed material from rng, then returns a draw of one
	// request's content (At left zero).
	Drawer(rng *rand.Rand) func() Request
}

// Streams of the PCG generators a run uses, so that the arrival clock and
// the content never depend on each other.
const (
	streamContent  = 0x636f6e74656e7431 // "content1"
	streamArrivals = 0x6172726976616c73 // "arrivals"
)

func newRand(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// Kinds lists the workloads New knows, in report order.
var kinds = []string{"W1", "W2", "W3", "W4", "W5", "W6", "W8", "mix", "hot", KindClaudeCode}

// Kinds returns the names New accepts, in report order.
func Kinds() []string { return append([]string(nil), kinds...) }

// New returns the named workload with the benchmark plan's defaults, as a
// pointer its caller may change (a sweep decodes overrides into it).
func New(kind string) (Workload, error) {
	switch kind {
	case "W1":
		w := W1()
		return &w, nil
	case "W2":
		w := W2()
		return &w, nil
	case "W3":
		w := W3()
		return &w, nil
	case "W4":
		w := W4()
		return &w, nil
	case "W5":
		w := W5()
		return &w, nil
	case "W6":
		w := W6()
		return &w, nil
	case "W8":
		w := W8()
		return &w, nil
	case "mix":
		w := MixW1W6()
		return &w, nil
	case "hot":
		w := Hot()
		return &w, nil
	case KindClaudeCode:
		w := NewClaudeCode()
		return &w, nil
	}
	return nil, fmt.Errorf("unknown workload %q (want one of %s)", kind, strings.Join(kinds, ", "))
}

// Range is an inclusive range of token counts, drawn uniformly. It reads and
// writes as [min, max] in TOML and JSON.
type Range struct{ Min, Max int }

func (r Range) draw(rng *rand.Rand) int {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + rng.IntN(r.Max-r.Min+1)
}

func (r Range) mean() float64 { return float64(r.Min+r.Max) / 2 }

func (r Range) validate(what string, least int) error {
	if r.Min < least || r.Max < r.Min || r.Max > maxRange {
		return fmt.Errorf("%s: range [%d, %d]: want %d <= min <= max <= %d", what, r.Min, r.Max, least, maxRange)
	}
	return nil
}

// maxRange bounds every range of a workload (token counts, turns, steps,
// documents): a million tokens is past any model's context.
const maxRange = 1 << 20

// maxMaterial bounds the tokens of a workload's fixed material (its shared
// system prompts, corpus, tool sets, examples), drawn before the first
// request: a parameter off by a few orders of magnitude is an error, not a
// run that never starts.
const maxMaterial = 1 << 26

// material reports an error when count items of up to each.Max tokens are
// over maxMaterial.
func material(what string, count int, each Range) error {
	if count > 0 && each.Max > 0 && count > maxMaterial/each.Max {
		return fmt.Errorf("%s: %d of up to %d tokens: over the %d tokens a workload's fixed material may hold",
			what, count, each.Max, maxMaterial)
	}
	return nil
}

// MarshalJSON writes [min, max].
func (r Range) MarshalJSON() ([]byte, error) { return json.Marshal([2]int{r.Min, r.Max}) }

// UnmarshalJSON reads [min, max].
func (r *Range) UnmarshalJSON(b []byte) error {
	var v [2]int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.Min, r.Max = v[0], v[1]
	return nil
}

// UnmarshalTOML reads [min, max], or one number for both.
func (r *Range) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		r.Min, r.Max = int(x), int(x)
		return nil
	case []any:
		if len(x) == 2 {
			lo, ok1 := x[0].(int64)
			hi, ok2 := x[1].(int64)
			if ok1 && ok2 {
				r.Min, r.Max = int(lo), int(hi)
				return nil
			}
		}
	}
	return fmt.Errorf("range: want [min, max] of integers, got %v", v)
}

// DurRange is an inclusive range of durations, drawn uniformly. It reads and
// writes as ["10s", "20s"].
type DurRange struct{ Min, Max time.Duration }

func (r DurRange) draw(rng *rand.Rand) time.Duration {
	if r.Max <= r.Min {
		return r.Min
	}
	return r.Min + time.Duration(rng.Int64N(int64(r.Max-r.Min)+1))
}

func (r DurRange) validate(what string) error {
	if r.Min < 0 || r.Max < r.Min {
		return fmt.Errorf("%s: range [%v, %v]: want 0 <= min <= max", what, r.Min, r.Max)
	}
	return nil
}

// MarshalJSON writes ["10s", "20s"].
func (r DurRange) MarshalJSON() ([]byte, error) {
	return json.Marshal([2]string{r.Min.String(), r.Max.String()})
}

// UnmarshalJSON reads ["10s", "20s"].
func (r *DurRange) UnmarshalJSON(b []byte) error {
	var v [2]string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return r.parse(v[0], v[1])
}

// UnmarshalTOML reads ["10s", "20s"].
func (r *DurRange) UnmarshalTOML(v any) error {
	if x, ok := v.([]any); ok && len(x) == 2 {
		lo, ok1 := x[0].(string)
		hi, ok2 := x[1].(string)
		if ok1 && ok2 {
			return r.parse(lo, hi)
		}
	}
	return fmt.Errorf("duration range: want [\"min\", \"max\"] as durations, got %v", v)
}

func (r *DurRange) parse(lo, hi string) error {
	a, err1 := time.ParseDuration(lo)
	b, err2 := time.ParseDuration(hi)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("duration range: %w", err)
	}
	r.Min, r.Max = a, b
	return nil
}

// letters are the bytes of generated words.
const letters = "abcdefghijklmnopqrstuvwxyz"

// words appends n generated words to b: 1 to 3 lowercase letters each,
// followed by a space, so the simulator's tokenizer reads each as exactly
// one token and the text as exactly n (token.Sim ends a token after a space
// or after 4 bytes).
func words(b *strings.Builder, rng *rand.Rand, n int) {
	b.Grow(4 * n)
	for range n {
		x := rng.Uint64()
		k := 1 + int(x%3)
		x /= 3
		for range k {
			b.WriteByte(letters[x%26])
			x /= 26
		}
		b.WriteByte(' ')
	}
}

// text returns n generated words.
func text(rng *rand.Rand, n int) string {
	var b strings.Builder
	words(&b, rng, n)
	return b.String()
}

// zipf draws 0..n-1 with weight (k+1)^-s; s = 0 is uniform.
type zipf struct{ cum []float64 }

func newZipf(n int, s float64) zipf {
	z := zipf{cum: make([]float64, n)}
	total := 0.0
	for i := range z.cum {
		total += math.Pow(float64(i+1), -s)
		z.cum[i] = total
	}
	return z
}

func (z zipf) draw(rng *rand.Rand) int {
	x := rng.Float64() * z.cum[len(z.cum)-1]
	return min(sort.SearchFloat64s(z.cum, x), len(z.cum)-1)
}
