package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/inferrail/inferrail/model/token"
)

// maxLead bounds how long before zero sessions start (see sessions).
const maxLead = 10 * time.Minute

// Conversations is multi-turn chat (W2): each conversation resends its
// history with every question, names itself in x-session-id, and its user
// thinks between an answer and the next question. Conversations are
// generated, or replayed from a ShareGPT file (Load): then the user turns
// are the file's, and each answer is the simulator's own, as long in tokens
// as the file's answer (within OutputTokens).
//
// Requests are open loop like every workload's: a question is due Think
// after the previous one was due, whatever became of its answer.
type Conversations struct {
	Label string `toml:"label" json:"label"`
	// Turns is how many questions a generated conversation asks.
	Turns Range `toml:"turns" json:"turns"`
	// SystemPrompts is how many shared system prompts conversations open
	// with (0 for none), SystemTokens their length.
	SystemPrompts int   `toml:"system_prompts" json:"system_prompts"`
	SystemTokens  Range `toml:"system_tokens" json:"system_tokens"`
	// UserTokens is a generated question's length; OutputTokens an
	// answer's (max_tokens), which also bounds a replayed one.
	UserTokens   Range    `toml:"user_tokens" json:"user_tokens"`
	OutputTokens Range    `toml:"output_tokens" json:"output_tokens"`
	Think        DurRange `toml:"think" json:"think"`
	// MaxContext ends a conversation whose next prompt and answer would
	// pass it, in tokens. 0 takes 16,384.
	MaxContext int `toml:"max_context" json:"max_context"`
	// ShareGPT is a ShareGPT-format JSON file to replay ("" generates);
	// ShareGPTDigest is its SHA-256, set by Load.
	ShareGPT       string   `toml:"sharegpt" json:"sharegpt,omitempty"`
	ShareGPTDigest string   `toml:"-" json:"sharegpt_sha256,omitempty"`
	Arrivals       Arrivals `toml:"arrivals" json:"arrivals"`

	dialogues []dialogue
}

// dialogue is one replayed conversation.
type dialogue struct {
	system string
	turns  []exchange
}

type exchange struct {
	user   string
	answer int // tokens
}

// W2 is the plan's W2: generated conversations of 2 to 8 questions of 50 to
// 400 tokens, answered in 50 to 400, with 10 to 20 s of thinking.
func W2() Conversations {
	return Conversations{Label: "W2", Turns: Range{2, 8}, UserTokens: Range{50, 400},
		OutputTokens: Range{50, 400}, Think: DurRange{10 * time.Second, 20 * time.Second}}
}

// Name returns Label, "W2" when empty.
func (c *Conversations) Name() string { return orDefault(c.Label, "W2") }

// Validate reports every problem with c.
func (c *Conversations) Validate() error {
	n := c.Name()
	var errs []error
	if c.ShareGPT == "" {
		errs = append(errs, c.Turns.validate(n+": turns", 1), c.UserTokens.validate(n+": user_tokens", 1))
	} else if c.dialogues == nil {
		errs = append(errs, fmt.Errorf("%s: sharegpt %s: not loaded", n, c.ShareGPT))
	}
	if c.SystemPrompts < 0 {
		errs = append(errs, fmt.Errorf("%s: system_prompts %d: want at least 0", n, c.SystemPrompts))
	} else if c.SystemPrompts > 0 {
		errs = append(errs, c.SystemTokens.validate(n+": system_tokens", 1),
			material(n+": system_prompts", c.SystemPrompts, c.SystemTokens))
	}
	if c.MaxContext < 0 {
		errs = append(errs, fmt.Errorf("%s: max_context %d: want at least 0", n, c.MaxContext))
	}
	errs = append(errs,
		c.OutputTokens.validate(n+": output_tokens", 1),
		c.Think.validate(n+": think"),
		prefixed(n, c.Arrivals.Validate()))
	return errors.Join(errs...)
}

// shareGPTFile is the ShareGPT format: a list of conversations, each a list
// of messages from "human" or "gpt" (also "user", "assistant", "chatgpt",
// "bard"; "system" opens one).
type shareGPTFile []struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

// Load reads the ShareGPT file, when one is set. Each question is paired
// with the answer after it; a question without one, and conversations
// without a pair, are left out. Text that is not valid UTF-8 is repaired,
// so it reaches the engine as JSON carries it.
func (c *Conversations) Load() error { return c.LoadFrom("") }

// LoadFrom is Load with a relative ShareGPT path taken from dir.
func (c *Conversations) LoadFrom(dir string) error {
	if c.ShareGPT == "" {
		return nil
	}
	name := c.ShareGPT
	if dir != "" && !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	b, err := readShareGPT(name)
	if err != nil {
		return fmt.Errorf("%s: sharegpt: %w", c.Name(), err)
	}
	var f shareGPTFile
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("%s: sharegpt %s: %w", c.Name(), c.ShareGPT, err)
	}
	sum := sha256.Sum256(b)
	c.ShareGPTDigest = hex.EncodeToString(sum[:])
	c.dialogues = c.dialogues[:0]
	for _, conv := range f {
		var d dialogue
		user := ""
		for _, m := range conv.Conversations {
			v := clean(m.Value)
			switch strings.ToLower(m.From) {
			case "system":
				if len(d.turns) == 0 && user == "" {
					d.system = v
				}
			case "human", "user":
				user = v
			case "gpt", "assistant", "chatgpt", "bard":
				if user != "" {
					d.turns = append(d.turns, exchange{user: user, answer: (token.Sim{}).Count(v)})
					user = ""
				}
			}
		}
		if len(d.turns) > 0 {
			c.dialogues = append(c.dialogues, d)
		}
	}
	if len(c.dialogues) == 0 {
		return fmt.Errorf("%s: sharegpt %s: no conversation with a question and an answer", c.Name(), c.ShareGPT)
	}
	return nil
}

func clean(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

func (c *Conversations) maxContext() int {
	if c.MaxContext > 0 {
		return c.MaxContext
	}
	return 16384
}

// Start returns c's requests at rate per second: conversations start at
// rate divided by their mean number of questions.
func (c *Conversations) Start(seed uint64, rate float64) Source {
	if c.ShareGPT != "" && len(c.dialogues) == 0 {
		panic("BUG: workload: Conversations.Start before Load")
	}
	rng := newRand(seed, streamContent)
	systems := make([]string, c.SystemPrompts)
	for i := range systems {
		systems[i] = text(rng, c.SystemTokens.draw(rng))
	}
	turns, maxTurns := c.Turns.mean(), c.Turns.Max
	if len(c.dialogues) > 0 {
		sum := 0
		maxTurns = 0
		for _, d := range c.dialogues {
			sum += len(d.turns)
			maxTurns = max(maxTurns, len(d.turns))
		}
		turns = float64(sum) / float64(len(c.dialogues))
	}
	lead := min(time.Duration(max(maxTurns-1, 0))*c.Think.Max, maxLead)
	clk := newClock(newRand(seed, streamArrivals), rate/turns, c.Arrivals, -lead)
	name := c.Name()
	return newSessions(clk, func(id int) script {
		srng := newRand(mixSeed(seed, id), streamContent)
		cv := &conversation{c: c, rng: srng, session: sessionID(strings.ToLower(name), seed, id), class: name}
		if len(systems) > 0 {
			cv.history = append(cv.history, token.Message{Role: "system", Content: systems[srng.IntN(len(systems))]})
		}
		if len(c.dialogues) > 0 {
			cv.replay = &c.dialogues[srng.IntN(len(c.dialogues))]
			if cv.replay.system != "" && len(cv.history) == 0 {
				cv.history = append(cv.history, token.Message{Role: "system", Content: cv.replay.system})
			}
			cv.left = len(cv.replay.turns)
		} else {
			cv.left = c.Turns.draw(srng)
		}
		return cv
	})
}

// conversation is one W2 session.
type conversation struct {
	c              *Conversations
	rng            *rand.Rand
	session, class string
	history        []token.Message
	replay         *dialogue
	asked, left    int
	ids            []uint32
}

func (cv *conversation) turn(enc *Encoder) (Request, time.Duration, bool, bool) {
	var q string
	var out int
	if cv.replay != nil {
		x := cv.replay.turns[cv.asked]
		q = x.user
		out = min(max(x.answer, cv.c.OutputTokens.Min), cv.c.OutputTokens.Max)
	} else {
		q = text(cv.rng, cv.c.UserTokens.draw(cv.rng))
		out = cv.c.OutputTokens.draw(cv.rng)
	}
	cv.asked++
	cv.left--
	msgs := append(cv.history, token.Message{Role: "user", Content: q})
	r := Request{Session: cv.session, Messages: msgs[:len(msgs):len(msgs)], MaxTokens: out, Class: cv.class}
	cv.ids = enc.Encode(cv.ids[:0], &r)
	if len(cv.ids)+out > cv.c.maxContext() {
		return Request{}, 0, false, false
	}
	cv.history = append(msgs, token.Message{Role: "assistant", Content: Answer(cv.ids, out)})
	return r, cv.c.Think.draw(cv.rng), cv.left > 0, true
}

// Agent is agent loops (W3): each loop opens with one of a few shared
// blocks of tool definitions and a task, then resends its context grown by
// the model's tool call (its answer) and the tool's result at every step.
type Agent struct {
	Label string `toml:"label" json:"label"`
	// Toolsets is how many tool-definition blocks the run draws,
	// ToolTokens each one's length.
	Toolsets   int   `toml:"toolsets" json:"toolsets"`
	ToolTokens Range `toml:"tool_tokens" json:"tool_tokens"`
	TaskTokens Range `toml:"task_tokens" json:"task_tokens"`
	// Steps is how many requests a loop makes; CallTokens is each one's
	// answer (max_tokens), ResultTokens each tool result's length.
	Steps        Range `toml:"steps" json:"steps"`
	CallTokens   Range `toml:"call_tokens" json:"call_tokens"`
	ResultTokens Range `toml:"result_tokens" json:"result_tokens"`
	// ToolTime is from one step's request to the next.
	ToolTime DurRange `toml:"tool_time" json:"tool_time"`
	Arrivals Arrivals `toml:"arrivals" json:"arrivals"`
}

// W3 is the plan's W3: loops of 3 to 10 steps over 4 shared tool blocks of
// 1,500 to 4,000 tokens, each step a 20 to 100 token call and a 100 to 800
// token result, 2 to 5 s apart.
func W3() Agent {
	return Agent{Label: "W3", Toolsets: 4, ToolTokens: Range{1500, 4000}, TaskTokens: Range{100, 400},
		Steps: Range{3, 10}, CallTokens: Range{20, 100}, ResultTokens: Range{100, 800},
		ToolTime: DurRange{2 * time.Second, 5 * time.Second}}
}

// Name returns Label, "W3" when empty.
func (a *Agent) Name() string { return orDefault(a.Label, "W3") }

// Validate reports every problem with a.
func (a *Agent) Validate() error {
	n := a.Name()
	var errs []error
	if a.Toolsets < 1 {
		errs = append(errs, fmt.Errorf("%s: toolsets %d: want at least 1", n, a.Toolsets))
	}
	errs = append(errs,
		a.ToolTokens.validate(n+": tool_tokens", 1),
		material(n+": toolsets", a.Toolsets, a.ToolTokens),
		a.TaskTokens.validate(n+": task_tokens", 1),
		a.Steps.validate(n+": steps", 1),
		a.CallTokens.validate(n+": call_tokens", 1),
		a.ResultTokens.validate(n+": result_tokens", 1),
		a.ToolTime.validate(n+": tool_time"),
		prefixed(n, a.Arrivals.Validate()))
	return errors.Join(errs...)
}

// Start returns a's requests at rate per second: loops start at rate
// divided by their mean number of steps.
func (a *Agent) Start(seed uint64, rate float64) Source {
	rng := newRand(seed, streamContent)
	tools := make([]string, a.Toolsets)
	for i := range tools {
		tools[i] = text(rng, a.ToolTokens.draw(rng))
	}
	lead := min(time.Duration(max(a.Steps.Max-1, 0))*a.ToolTime.Max, maxLead)
	clk := newClock(newRand(seed, streamArrivals), rate/a.Steps.mean(), a.Arrivals, -lead)
	name := a.Name()
	return newSessions(clk, func(id int) script {
		srng := newRand(mixSeed(seed, id), streamContent)
		return &loop{
			a: a, rng: srng, session: sessionID(strings.ToLower(name), seed, id), class: name,
			history: []token.Message{
				{Role: "system", Content: tools[srng.IntN(len(tools))]},
				{Role: "user", Content: text(srng, a.TaskTokens.draw(srng))},
			},
			left: a.Steps.draw(srng),
		}
	})
}

// loop is one W3 session.
type loop struct {
	a              *Agent
	rng            *rand.Rand
	session, class string
	history        []token.Message
	left           int
	ids            []uint32
}

func (l *loop) turn(enc *Encoder) (Request, time.Duration, bool, bool) {
	out := l.a.CallTokens.draw(l.rng)
	h := l.history
	r := Request{Session: l.session, Messages: h[:len(h):len(h)], MaxTokens: out, Class: l.class}
	l.ids = enc.Encode(l.ids[:0], &r)
	l.left--
	l.history = append(h,
		token.Message{Role: "assistant", Content: Answer(l.ids, out)},
		token.Message{Role: "tool", Content: text(l.rng, l.a.ResultTokens.draw(l.rng))})
	return r, l.a.ToolTime.draw(l.rng), l.left > 0, true
}

var (
	_ Workload = (*Conversations)(nil)
	_ Workload = (*Agent)(nil)
)

// maxShareGPT bounds a ShareGPT file: the usual public dumps are a few
// hundred MB.
const maxShareGPT = 1 << 30

// readShareGPT reads a ShareGPT file of at most maxShareGPT bytes.
func readShareGPT(name string) ([]byte, error) { return ReadFile(name, maxShareGPT) }

// ReadFile reads a file a workload or sweep names: a regular file (not a
// device or a pipe that never ends) of at most limit bytes.
func ReadFile(name string, limit int64) ([]byte, error) {
	f, err := openFile(name, limit)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: over %d bytes", name, limit)
	}
	return b, err
}

// openFile opens a regular file of at most limit bytes.
func openFile(name string, limit int64) (*os.File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", name)
	} else if err == nil && st.Size() > limit {
		err = fmt.Errorf("%s: %d bytes, over %d", name, st.Size(), limit)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
