package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// BillingHeader starts the system text block Claude Code adds to every
// request: a per-request attribution hash. vLLM drops such blocks, because
// they "would defeat prefix caching" (inline_system.py _BILLING_HEADER).
const BillingHeader = "x-anthropic-billing-header"

// ErrInvalid wraps every reason a body is not a request vLLM accepts; the
// engine answers those with a 400 of its own.
var ErrInvalid = errors.New("anthropic: invalid request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Request is a validated Messages (or count_tokens) request: the fields
// that shape the prompt and route it. Nested values the conversion copies
// as they came (tool input and input_schema, chat_template_kwargs,
// kv_transfer_params) are kept as raw JSON.
type Request struct {
	Model     string
	Stream    bool
	MaxTokens int64 // 0 for count_tokens
	System    *Content
	Messages  []Message
	Tools     []Tool
	HasTools  bool   // tools was a list (maybe empty), not absent or null
	CacheSalt string // vLLM's extra: salts the block hashes
	// KVTransferParams and ChatTemplateKwargs are vLLM's extras, raw; nil
	// when absent or null.
	KVTransferParams   json.RawMessage
	ChatTemplateKwargs json.RawMessage
	// Thinking is thinking.type ("enabled", "disabled" or "adaptive") and
	// Effort is output_config.effort; "" when absent or null. Only
	// /v1/messages bodies have them.
	Thinking string
	Effort   string
	// KeepBillingHeader is never read from a body: a benchmark sets it to
	// keep Claude Code's billing header blocks in the prompt, to measure a
	// router that hashes the text as it came (cmd/inferrail bench
	// messages). vLLM always drops them; nothing that predicts an engine's
	// cache sets it.
	KeepBillingHeader bool
}

// Efforts are the values of output_config.effort (AnthropicEffort).
var Efforts = []string{"low", "medium", "high", "xhigh", "max"}

// Message is one entry of messages. Role is user, assistant or system;
// Claude Code's ctx and msg roles are read as user.
type Message struct {
	Role    string
	Content Content
}

// Content is a string or a list of blocks.
type Content struct {
	IsText bool
	Text   string
	Blocks []Block
}

// Block is a content block, with the fields vLLM's AnthropicContentBlock
// reads. Pointers are nil for absent or null fields.
type Block struct {
	Type     string
	Text     *string
	Source   json.RawMessage // image: an object; nil when absent or null
	ID       *string
	ToolUse  *string // tool_use_id
	Name     *string
	Input    json.RawMessage // tool_use: an object; nil when absent or null
	Result   *ToolContent    // tool_result content; nil when absent or null
	Thinking *string
}

// ToolContent is a tool_result's content: a string or a list of items
// (dicts; anything else in the list is kept as a skipped item).
type ToolContent struct {
	IsText bool
	Text   string
	Items  []Item
	// Raw is the list as it came, which an assistant's tool_result
	// becomes Python's str() of; nil for a string, or a list made here.
	Raw json.RawMessage
}

// Item is one item of a tool_result's content list.
type Item struct {
	NotObject bool // not a JSON object: vLLM skips it
	Type      string
	Text      *string
	Source    json.RawMessage
	ToolName  *string
	Name      *string
}

// Tool is one entry of tools.
type Tool struct {
	Name         string
	Description  *string
	InputSchema  json.RawMessage // an object, with "type":"object" appended when it had no type
	Strict       json.RawMessage // a bool or nil
	DeferLoading json.RawMessage // a bool or nil
}

// blockTypes are the block types vLLM's AnthropicContentBlock accepts.
var blockTypes = map[string]bool{"text": true, "image": true, "tool_use": true, "tool_result": true,
	"tool_reference": true, "thinking": true, "redacted_thinking": true}

// Parse reads a /v1/messages body (count is false) or a
// /v1/messages/count_tokens body (count is true) and validates it as
// vLLM's pydantic models do, as far as the prompt depends on it. Errors
// wrap ErrInvalid.
func Parse(body []byte, count bool) (*Request, error) {
	var top map[string]json.RawMessage
	if err := strictObject(body, &top); err != nil {
		return nil, invalid("the body is not a JSON object")
	}
	r := &Request{}
	if err := str(top, "model", &r.Model, true); err != nil {
		return nil, err
	}
	if r.Model == "" {
		return nil, invalid("model: Model is required")
	}
	if !count {
		raw, ok := top["max_tokens"]
		if !ok || isNull(raw) {
			return nil, invalid("max_tokens: Field required")
		}
		if err := json.Unmarshal(raw, &r.MaxTokens); err != nil || bytes.ContainsAny(raw, ".eE") {
			return nil, invalid("max_tokens: Input should be a valid integer")
		}
		if r.MaxTokens <= 0 {
			return nil, invalid("max_tokens: max_tokens must be positive")
		}
		if raw, ok := top["stream"]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, &r.Stream); err != nil {
				return nil, invalid("stream: Input should be a valid boolean")
			}
		}
		if err := str(top, "cache_salt", &r.CacheSalt, false); err != nil {
			return nil, err
		}
		if _, ok := top["cache_salt"]; ok && !isNull(top["cache_salt"]) && (len(r.CacheSalt) == 0 || len(r.CacheSalt) > 1024) {
			return nil, invalid("cache_salt: must be 1 to 1024 characters")
		}
		var err error
		if r.KVTransferParams, err = object(top, "kv_transfer_params"); err != nil {
			return nil, err
		}
		if r.Thinking, err = parseThinking(top, r.MaxTokens); err != nil {
			return nil, err
		}
		if r.Effort, err = parseEffort(top); err != nil {
			return nil, err
		}
	}
	var err error
	if r.ChatTemplateKwargs, err = object(top, "chat_template_kwargs"); err != nil {
		return nil, err
	}
	if raw, ok := top["system"]; ok && !isNull(raw) {
		c, err := parseContent(raw, "system")
		if err != nil {
			return nil, err
		}
		r.System = &c
	}
	raw, ok := top["messages"]
	if !ok || isNull(raw) {
		return nil, invalid("messages: Field required")
	}
	var msgs []json.RawMessage
	if json.Unmarshal(raw, &msgs) != nil {
		return nil, invalid("messages: Input should be a valid list")
	}
	for i, m := range msgs {
		msg, err := parseMessage(m, i)
		if err != nil {
			return nil, err
		}
		r.Messages = append(r.Messages, msg)
	}
	if raw, ok := top["tools"]; ok && !isNull(raw) {
		var tools []json.RawMessage
		if json.Unmarshal(raw, &tools) != nil {
			return nil, invalid("tools: Input should be a valid list")
		}
		r.HasTools = true
		for i, t := range tools {
			tool, err := parseTool(t, i)
			if err != nil {
				return nil, err
			}
			r.Tools = append(r.Tools, tool)
		}
	}
	return r, nil
}

// strictObject decodes a JSON object into m; anything else is an error.
func strictObject(b []byte, m *map[string]json.RawMessage) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not an object")
	}
	return json.Unmarshal(b, m)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// str reads a string member; absent or null leaves *dst as it is (an error
// when required).
func str(m map[string]json.RawMessage, key string, dst *string, required bool) error {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		if required {
			return invalid("%s: Field required", key)
		}
		return nil
	}
	if json.Unmarshal(raw, dst) != nil {
		return invalid("%s: Input should be a valid string", key)
	}
	return nil
}

// optStr reads an optional string member into a pointer, nil when absent
// or null.
func optStr(m map[string]json.RawMessage, key, where string) (*string, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, invalid("%s.%s: Input should be a valid string", where, key)
	}
	return &s, nil
}

// object reads an optional object member, raw; nil when absent or null.
func object(m map[string]json.RawMessage, key string) (json.RawMessage, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return nil, nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] != '{' {
		return nil, invalid("%s: Input should be a valid dictionary", key)
	}
	return raw, nil
}

// parseThinking reads thinking (AnthropicThinkingConfig): an object whose
// type picks enabled (budget_tokens at least 1024 and below max_tokens),
// disabled or adaptive; display, where allowed, is one of vLLM's values.
func parseThinking(top map[string]json.RawMessage, maxTokens int64) (string, error) {
	raw, ok := top["thinking"]
	if !ok || isNull(raw) {
		return "", nil
	}
	var m map[string]json.RawMessage
	if strictObject(raw, &m) != nil {
		return "", invalid("thinking: Input should be a valid dictionary")
	}
	var typ string
	if err := str(m, "type", &typ, true); err != nil {
		return "", invalid("thinking.type: Field required")
	}
	switch typ {
	case "enabled":
		b, ok := m["budget_tokens"]
		var budget int64
		if !ok || isNull(b) {
			return "", invalid("thinking.enabled.budget_tokens: Field required")
		}
		if json.Unmarshal(b, &budget) != nil || bytes.ContainsAny(b, ".eE") {
			return "", invalid("thinking.enabled.budget_tokens: Input should be a valid integer")
		}
		if budget < 1024 {
			return "", invalid("thinking.enabled.budget_tokens: Input should be greater than or equal to 1024")
		}
		if budget >= maxTokens {
			return "", invalid("thinking.budget_tokens must be less than max_tokens")
		}
	case "disabled":
		return typ, nil
	case "adaptive":
	default:
		return "", invalid("thinking.type: Input tag %q does not match 'enabled', 'disabled', 'adaptive'", typ)
	}
	var display string
	if err := str(m, "display", &display, false); err != nil {
		return "", invalid("thinking.%s.display: Input should be a valid string", typ)
	}
	switch display {
	case "", "summarized", "omitted", "updates":
	default:
		return "", invalid("thinking.%s.display: Input should be 'summarized', 'omitted' or 'updates'", typ)
	}
	return typ, nil
}

// parseEffort reads output_config.effort.
func parseEffort(top map[string]json.RawMessage) (string, error) {
	raw, ok := top["output_config"]
	if !ok || isNull(raw) {
		return "", nil
	}
	var m map[string]json.RawMessage
	if strictObject(raw, &m) != nil {
		return "", invalid("output_config: Input should be a valid dictionary")
	}
	var effort string
	if err := str(m, "effort", &effort, false); err != nil {
		return "", invalid("output_config.effort: Input should be a valid string")
	}
	if _, ok := m["effort"]; ok && !isNull(m["effort"]) && !slices.Contains(Efforts, effort) {
		return "", invalid("output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'")
	}
	return effort, nil
}

func parseMessage(raw json.RawMessage, i int) (Message, error) {
	where := fmt.Sprintf("messages.%d", i)
	var m map[string]json.RawMessage
	if strictObject(raw, &m) != nil {
		return Message{}, invalid("%s: Input should be a valid dictionary", where)
	}
	var msg Message
	if err := str(m, "role", &msg.Role, true); err != nil {
		return Message{}, invalid("%s.role: Field required", where)
	}
	switch msg.Role {
	case "user", "assistant", "system":
	case "ctx", "msg":
		// Claude Code's own roles for context and queued messages.
		msg.Role = "user"
	default:
		return Message{}, invalid("%s.role: Input should be 'user', 'assistant' or 'system'", where)
	}
	c, ok := m["content"]
	if !ok || isNull(c) {
		return Message{}, invalid("%s.content: Field required", where)
	}
	var err error
	msg.Content, err = parseContent(c, where+".content")
	return msg, err
}

func parseContent(raw json.RawMessage, where string) (Content, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return Content{}, invalid("%s: Input should be a valid string", where)
		}
		return Content{IsText: true, Text: s}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return Content{}, invalid("%s: Input should be a valid string or list", where)
	}
	c := Content{Blocks: make([]Block, 0, len(list))}
	for j, b := range list {
		blk, err := parseBlock(b, fmt.Sprintf("%s.%d", where, j))
		if err != nil {
			return Content{}, err
		}
		c.Blocks = append(c.Blocks, blk)
	}
	return c, nil
}

func parseBlock(raw json.RawMessage, where string) (Block, error) {
	var m map[string]json.RawMessage
	if strictObject(raw, &m) != nil {
		return Block{}, invalid("%s: Input should be a valid dictionary", where)
	}
	var b Block
	if err := str(m, "type", &b.Type, true); err != nil {
		return Block{}, invalid("%s.type: Field required", where)
	}
	if !blockTypes[b.Type] {
		return Block{}, invalid("%s.type: block type %q is not one vLLM accepts", where, b.Type)
	}
	var err error
	for _, f := range []struct {
		key string
		dst **string
	}{{"text", &b.Text}, {"id", &b.ID}, {"tool_use_id", &b.ToolUse}, {"name", &b.Name}, {"thinking", &b.Thinking}} {
		if *f.dst, err = optStr(m, f.key, where); err != nil {
			return Block{}, err
		}
	}
	if b.Source, err = object(m, "source"); err != nil {
		return Block{}, invalid("%s.source: Input should be a valid dictionary", where)
	}
	if b.Input, err = object(m, "input"); err != nil {
		return Block{}, invalid("%s.input: Input should be a valid dictionary", where)
	}
	if raw, ok := m["content"]; ok && !isNull(raw) {
		tc, err := parseToolContent(raw, where+".content")
		if err != nil {
			return Block{}, err
		}
		b.Result = &tc
	}
	return b, nil
}

func parseToolContent(raw json.RawMessage, where string) (ToolContent, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return ToolContent{}, invalid("%s: Input should be a valid string", where)
		}
		return ToolContent{IsText: true, Text: s}, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return ToolContent{}, invalid("%s: Input should be a valid string or list", where)
	}
	tc := ToolContent{Items: make([]Item, 0, len(list)), Raw: raw}
	for j, it := range list {
		var m map[string]json.RawMessage
		if strictObject(it, &m) != nil {
			// list[dict[str, Any]]: pydantic refuses anything else.
			return ToolContent{}, invalid("%s.%d: Input should be a valid dictionary", where, j)
		}
		item := Item{}
		w := fmt.Sprintf("%s.%d", where, j)
		if raw, ok := m["type"]; ok {
			// item.get("type"): a non-string type matches no branch.
			_ = json.Unmarshal(raw, &item.Type)
		}
		var err error
		if raw, ok := m["text"]; ok {
			var s string
			if json.Unmarshal(raw, &s) != nil {
				// "\n".join fails on a text that is not a string.
				return ToolContent{}, invalid("%s.text: not a string", w)
			}
			item.Text = &s
		}
		if raw, ok := m["source"]; ok && !isNull(raw) {
			item.Source = bytes.TrimSpace(raw)
		}
		if item.ToolName, err = looseStr(m, "tool_name"); err != nil {
			return ToolContent{}, err
		}
		if item.Name, err = looseStr(m, "name"); err != nil {
			return ToolContent{}, err
		}
		tc.Items = append(tc.Items, item)
	}
	return tc, nil
}

// looseStr reads a member that vLLM uses only when it is a non-empty
// string; anything else is nil.
func looseStr(m map[string]json.RawMessage, key string) (*string, error) {
	raw, ok := m[key]
	if !ok {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return nil, nil
	}
	return &s, nil
}

func parseTool(raw json.RawMessage, i int) (Tool, error) {
	where := fmt.Sprintf("tools.%d", i)
	var m map[string]json.RawMessage
	if strictObject(raw, &m) != nil {
		return Tool{}, invalid("%s: Input should be a valid dictionary", where)
	}
	var t Tool
	if err := str(m, "name", &t.Name, true); err != nil {
		return Tool{}, invalid("%s.name: Field required", where)
	}
	var err error
	if t.Description, err = optStr(m, "description", where); err != nil {
		return Tool{}, err
	}
	schema, ok := m["input_schema"]
	if !ok || isNull(schema) {
		return Tool{}, invalid("%s.input_schema: Field required", where)
	}
	schema = bytes.TrimSpace(schema)
	var fields map[string]json.RawMessage
	if strictObject(schema, &fields) != nil {
		return Tool{}, invalid("%s.input_schema: Input should be a valid dictionary", where)
	}
	t.InputSchema = schema
	if _, ok := fields["type"]; !ok {
		// validate_input_schema: v["type"] = "object", after the other keys.
		t.InputSchema = appendMember(schema, `"type":"object"`)
	}
	for _, f := range []struct {
		key string
		dst *json.RawMessage
	}{{"strict", &t.Strict}, {"defer_loading", &t.DeferLoading}} {
		raw, ok := m[f.key]
		if !ok || isNull(raw) {
			continue
		}
		var b bool
		if json.Unmarshal(raw, &b) != nil {
			return Tool{}, invalid("%s.%s: Input should be a valid boolean", where, f.key)
		}
		*f.dst = json.RawMessage(fmt.Sprint(b))
	}
	return t, nil
}

// appendMember adds a member at the end of a JSON object's text.
func appendMember(obj json.RawMessage, member string) json.RawMessage {
	end := bytes.LastIndexByte(obj, '}')
	inner := bytes.TrimSpace(obj[1:end])
	out := make([]byte, 0, len(obj)+len(member)+1)
	out = append(out, obj[:end]...)
	if len(inner) > 0 {
		out = append(out, ',')
	}
	out = append(out, member...)
	return append(out, '}')
}

// systemText is the text of the top-level system field without Claude
// Code's billing header (system_prompt_text): a string as it is, blocks
// as their non-empty text blocks joined, those that begin with the header
// dropped (unless r.KeepBillingHeader).
func (r *Request) systemText() string {
	c := r.System
	if c == nil {
		return ""
	}
	if c.IsText {
		return c.Text
	}
	return r.blocksText(c.Blocks)
}

// billing reports whether text is a billing header that r drops.
func (r *Request) billing(text string) bool {
	return !r.KeepBillingHeader && strings.HasPrefix(text, BillingHeader)
}

func (r *Request) blocksText(blocks []Block) string {
	var b strings.Builder
	for _, blk := range blocks {
		if blk.Type == "text" && blk.Text != nil && *blk.Text != "" && !r.billing(*blk.Text) {
			b.WriteString(*blk.Text)
		}
	}
	return b.String()
}

// messageSystemText is the text of an inline system message without the
// billing header (system_text): a string that begins with it counts as
// empty.
func (r *Request) messageSystemText(m *Message) string {
	if m.Content.IsText {
		if r.billing(m.Content.Text) {
			return ""
		}
		return m.Content.Text
	}
	return r.blocksText(m.Content.Blocks)
}
