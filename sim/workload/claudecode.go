package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// ClaudeCode is Claude Code's agent sessions over the Anthropic Messages
// API (kind "claude-code"): each session sends /v1/messages requests of
// Claude Code's shape and grows by a tool call and its result at every
// step, as W3's loops do over chat. A request carries:
//
//   - the system prompt as text blocks, the first of them Claude Code's
//     billing header ("x-anthropic-billing-header: cc_version=…;
//     cc_entrypoint=cli; cch=…;"), whose hashes change with every
//     request, then one of the run's shared system prompts (Claude Code's
//     instructions and tool descriptions);
//   - a tools list and metadata.user_id naming the session, which the
//     gateway takes as the conversation key when there is no
//     x-session-id (Claude Code sends none);
//   - the messages: the task, then per step the model's answer and tool
//     call (a text and a tool_use block), the tool's result (a
//     tool_result block) and now and then an inline role "system"
//     reminder after it.
//
// vLLM drops the billing header and keeps inline system messages in place
// (model/anthropic), so each request renders as an extension of the one
// before; a router hashing the text with the header in sees a new prompt
// every time. The simulator renders only the messages' text (tools and
// tool calls are parsed, not rendered), so the shared system prompt stands
// for the tool descriptions' length.
type ClaudeCode struct {
	Label string `toml:"label" json:"label"`
	// Prompts is how many system prompts the run draws, SystemTokens
	// each one's length.
	Prompts      int   `toml:"prompts" json:"prompts"`
	SystemTokens Range `toml:"system_tokens" json:"system_tokens"`
	TaskTokens   Range `toml:"task_tokens" json:"task_tokens"`
	// Steps is how many requests a session makes; CallTokens is each
	// one's answer (max_tokens), ResultTokens each tool result's length.
	Steps        Range `toml:"steps" json:"steps"`
	CallTokens   Range `toml:"call_tokens" json:"call_tokens"`
	ResultTokens Range `toml:"result_tokens" json:"result_tokens"`
	// Reminders is the share of tool results followed by an inline system
	// reminder, ReminderTokens its length.
	Reminders      float64 `toml:"reminders" json:"reminders"`
	ReminderTokens Range   `toml:"reminder_tokens" json:"reminder_tokens"`
	// ToolTime is from one step's request to the next.
	ToolTime DurRange `toml:"tool_time" json:"tool_time"`
	// MaxContext ends a session whose next prompt and answer would pass
	// it, in tokens. 0 takes 24,576.
	MaxContext int      `toml:"max_context" json:"max_context"`
	Arrivals   Arrivals `toml:"arrivals" json:"arrivals"`
}

// KindClaudeCode is ClaudeCode's kind, as New reads it.
const KindClaudeCode = "claude-code"

// NewClaudeCode is the claude-code workload: sessions of 4 to 14 steps
// over 2 shared system prompts of 3,000 to 5,000 tokens, a 50 to 300
// token task, each step a 20 to 120 token answer and a 50 to 1,000 token
// tool result, a reminder after a third of them, 1 to 4 s apart.
func NewClaudeCode() ClaudeCode {
	return ClaudeCode{Label: KindClaudeCode, Prompts: 2, SystemTokens: Range{3000, 5000}, TaskTokens: Range{50, 300},
		Steps: Range{4, 14}, CallTokens: Range{20, 120}, ResultTokens: Range{50, 1000},
		Reminders: 1.0 / 3, ReminderTokens: Range{10, 60}, ToolTime: DurRange{time.Second, 4 * time.Second}}
}

// Name returns Label, "claude-code" when empty.
func (c *ClaudeCode) Name() string { return orDefault(c.Label, KindClaudeCode) }

// Validate reports every problem with c.
func (c *ClaudeCode) Validate() error {
	n := c.Name()
	var errs []error
	if c.Prompts < 1 {
		errs = append(errs, fmt.Errorf("%s: prompts %d: want at least 1", n, c.Prompts))
	}
	if !(c.Reminders >= 0 && c.Reminders <= 1) {
		errs = append(errs, fmt.Errorf("%s: reminders %v: want a share from 0 to 1", n, c.Reminders))
	}
	if c.MaxContext < 0 {
		errs = append(errs, fmt.Errorf("%s: max_context %d: want at least 0", n, c.MaxContext))
	}
	errs = append(errs,
		c.SystemTokens.validate(n+": system_tokens", 1),
		material(n+": prompts", c.Prompts, c.SystemTokens),
		c.TaskTokens.validate(n+": task_tokens", 1),
		c.Steps.validate(n+": steps", 1),
		c.CallTokens.validate(n+": call_tokens", 1),
		c.ResultTokens.validate(n+": result_tokens", 1),
		c.ReminderTokens.validate(n+": reminder_tokens", 1),
		c.ToolTime.validate(n+": tool_time"),
		prefixed(n, c.Arrivals.Validate()))
	return errors.Join(errs...)
}

func (c *ClaudeCode) maxContext() int {
	if c.MaxContext > 0 {
		return c.MaxContext
	}
	return 24576
}

// claudeTools is the tools list every request carries: Claude Code's
// usual tools, their schemas cut short.
const claudeTools = `[{"name":"Bash","description":"Executes a bash command.","input_schema":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},` +
	`{"name":"Read","description":"Reads a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"}},"required":["file_path"]}},` +
	`{"name":"Edit","description":"Replaces text in a file.","input_schema":{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"}},"required":["file_path","old_string","new_string"]}},` +
	`{"name":"Grep","description":"Searches files.","input_schema":{"type":"object","properties":{"pattern":{"type":"string"}},"required":["pattern"]}}]`

// claudeToolNames are claudeTools' names, and the name of each tool's one
// required string input.
var claudeToolNames = [...][2]string{{"Bash", "command"}, {"Read", "file_path"}, {"Edit", "file_path"}, {"Grep", "pattern"}}

// Start returns c's requests at rate per second: sessions start at rate
// divided by their mean number of steps.
func (c *ClaudeCode) Start(seed uint64, rate float64) Source {
	rng := newRand(seed, streamContent)
	systems := make([]string, c.Prompts)
	for i := range systems {
		systems[i] = text(rng, c.SystemTokens.draw(rng))
	}
	lead := min(time.Duration(max(c.Steps.Max-1, 0))*c.ToolTime.Max, maxLead)
	clk := newClock(newRand(seed, streamArrivals), rate/c.Steps.mean(), c.Arrivals, -lead)
	name := c.Name()
	return newSessions(clk, func(id int) script {
		srng := newRand(mixSeed(seed, id), streamContent)
		s := &agentSession{c: c, rng: srng, class: name, id: id,
			session: sessionID(strings.ToLower(name), seed, id),
			system:  systems[srng.IntN(len(systems))], left: c.Steps.draw(srng)}
		s.messages = append(s.messages, `{"role":"user","content":[{"type":"text","text":`...)
		s.messages = appendString(s.messages, text(srng, c.TaskTokens.draw(srng)))
		s.messages = append(s.messages, "}]}"...)
		return s
	})
}

// agentSession is one claude-code session.
type agentSession struct {
	c              *ClaudeCode
	rng            *rand.Rand
	session, class string
	id             int
	system         string
	messages       []byte // the messages list's members so far, JSON
	step, left     int
	ids            []uint32
}

// billingHeader is Claude Code's attribution block: a version with a
// per-request suffix and a per-request hash (cch).
func billingHeader(rng *rand.Rand) string {
	x := rng.Uint64()
	return fmt.Sprintf("x-anthropic-billing-header: cc_version=2.0.%d.%03x; cc_entrypoint=cli; cch=%05x;",
		50+x%30, x>>8&0xfff, x>>20&0xfffff)
}

func (s *agentSession) turn(enc *Encoder) (Request, time.Duration, bool, bool) {
	out := s.c.CallTokens.draw(s.rng)
	b := append(make([]byte, 0, len(s.messages)+len(s.system)+len(claudeTools)+256), `"max_tokens":`...)
	b = strconv.AppendInt(b, int64(out), 10)
	b = append(b, `,"system":[{"type":"text","text":`...)
	b = appendString(b, billingHeader(s.rng))
	b = append(b, `},{"type":"text","text":`...)
	b = appendString(b, s.system)
	b = append(b, `,"cache_control":{"type":"ephemeral"}}],"tools":`...)
	b = append(b, claudeTools...)
	b = append(b, `,"metadata":{"user_id":`...)
	b = appendString(b, s.session)
	b = append(b, `},"messages":[`...)
	b = append(b, s.messages...)
	b = append(b, ']')
	r := Request{Session: s.session, Anthropic: b, MaxTokens: out, Class: s.class}
	s.ids = enc.Encode(s.ids[:0], &r)
	if len(s.ids)+out > s.c.maxContext() {
		return Request{}, 0, false, false
	}
	s.left--
	s.step++
	tool := claudeToolNames[s.rng.IntN(len(claudeToolNames))]
	id := "toolu_" + strconv.Itoa(s.id) + "_" + strconv.Itoa(s.step)
	m := append(s.messages, `,{"role":"assistant","content":[{"type":"text","text":`...)
	m = appendString(m, Answer(s.ids, out))
	m = append(m, `},{"type":"tool_use","id":"`+id+`","name":"`+tool[0]+`","input":{"`+tool[1]+`":`...)
	m = appendString(m, text(s.rng, 3))
	m = append(m, `}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"`+id+`","content":`...)
	m = appendString(m, text(s.rng, s.c.ResultTokens.draw(s.rng)))
	m = append(m, "}]}"...)
	if s.rng.Float64() < s.c.Reminders {
		m = append(m, `,{"role":"system","content":`...)
		m = appendString(m, "<system-reminder>"+text(s.rng, s.c.ReminderTokens.draw(s.rng))+"</system-reminder>")
		m = append(m, '}')
	}
	s.messages = m
	return r, s.c.ToolTime.draw(s.rng), s.left > 0, true
}

var _ Workload = (*ClaudeCode)(nil)
