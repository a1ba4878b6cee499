package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/inferrail/inferrail/model/template"
)

// ErrUnsupported is returned by ToChat for a request whose conversion the
// gateway does not follow exactly: an assistant tool_result whose content
// is a list (vLLM prints it with Python's str()) that the template
// package's JSON reader refuses.
var ErrUnsupported = errors.New("anthropic: a request the gateway cannot convert as vLLM does")

// ToChat converts r into the body of the OpenAI chat request vLLM renders
// for it (AnthropicServingMessages.to_chat_completion_request): the system
// prompt and the leading system messages as one system message, the
// billing header dropped, inline system messages placed by mode, blocks
// turned into content parts, tool calls (arguments as a JSON string, which
// the chat path parses back), reasoning and tool messages, tools as
// vLLM's ChatCompletionToolsParam.model_dump() gives them to the template,
// and model, max_tokens, stream, cache_salt, kv_transfer_params and
// chat_template_kwargs carried over, and reasoning_effort from
// output_config.effort, or "none" when thinking is disabled. now names a
// tool_use that has no id, as vLLM does ("call_<unix seconds>").
func ToChat(r *Request, mode InlineMode, now time.Time) ([]byte, error) {
	return ToChatEffort(r, mode, "none", now)
}

// ToChatEffort is ToChat with disabledEffort as the reasoning_effort a
// disabled thinking becomes: vLLM's --anthropic-disabled-thinking-effort,
// whose "auto" it resolves by rendering the template ("none" where the
// template honours it, else "low"; see prompt.Preparer.Messages).
func ToChatEffort(r *Request, mode InlineMode, disabledEffort string, now time.Time) ([]byte, error) {
	leading, msgs := placeInline(r, mode)
	c := converter{now: now, r: r}
	b := append(make([]byte, 0, 256), `{"model":`...)
	b = appendJSON(b, r.Model)
	b = append(b, `,"messages":[`...)
	c.b = b
	if sys := joinTexts(r.systemText(), leading); sys != "" {
		c.message("system", sys)
	}
	for i := range msgs {
		if err := c.convert(&msgs[i]); err != nil {
			return nil, err
		}
	}
	b = append(c.b, ']')
	if r.MaxTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, r.MaxTokens, 10)
	}
	if r.Stream {
		b = append(b, `,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}`...)
	}
	effort := r.Effort
	if r.Thinking == "disabled" {
		effort = disabledEffort
	}
	if effort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = appendJSON(b, effort)
	}
	if r.HasTools {
		b = append(b, `,"tools":[`...)
		for i, t := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"function","function":{"name":`...)
			b = appendJSON(b, t.Name)
			b = append(b, `,"description":`...)
			b = appendOpt(b, t.Description)
			b = append(b, `,"parameters":`...)
			b = append(b, t.InputSchema...)
			b = append(b, `,"strict":`...)
			b = appendRaw(b, t.Strict)
			b = append(b, `,"defer_loading":`...)
			b = appendRaw(b, t.DeferLoading)
			b = append(b, "}}"...)
		}
		b = append(b, ']')
	}
	if r.CacheSalt != "" {
		b = append(b, `,"cache_salt":`...)
		b = appendJSON(b, r.CacheSalt)
	}
	if r.KVTransferParams != nil {
		b = append(b, `,"kv_transfer_params":`...)
		b = append(b, r.KVTransferParams...)
	}
	if r.ChatTemplateKwargs != nil {
		b = append(b, `,"chat_template_kwargs":`...)
		b = append(b, r.ChatTemplateKwargs...)
	}
	return append(b, '}'), nil
}

// converter writes the messages list.
type converter struct {
	b   []byte
	n   int // messages written
	now time.Time
	r   *Request
}

func (c *converter) open(role string) {
	if c.n > 0 {
		c.b = append(c.b, ',')
	}
	c.n++
	c.b = append(c.b, `{"role":`...)
	c.b = appendJSON(c.b, role)
}

// message writes {"role": role, "content": text}.
func (c *converter) message(role, text string) {
	c.open(role)
	c.b = append(c.b, `,"content":`...)
	c.b = appendJSON(c.b, text)
	c.b = append(c.b, '}')
}

// part is one OpenAI content part: text, or an image's URL.
type part struct {
	image bool
	s     string
}

// convert writes one message as _convert_messages does, with the tool
// messages its tool_result blocks become written first.
func (c *converter) convert(m *Message) error {
	if m.Role == "system" {
		if text := c.r.messageSystemText(m); text != "" {
			c.message("system", text)
		}
		return nil
	}
	if m.Content.IsText {
		c.message(m.Role, m.Content.Text)
		return nil
	}
	var parts []part
	var calls [][]byte
	var reasoning []byte
	hasReasoning := false
	for i := range m.Content.Blocks {
		blk := &m.Content.Blocks[i]
		switch blk.Type {
		case "text":
			if blk.Text != nil && *blk.Text != "" {
				parts = append(parts, part{s: *blk.Text})
			}
		case "image":
			if nonEmptyObject(blk.Source) {
				parts = append(parts, part{image: true, s: imageURL(blk.Source)})
			}
		case "thinking":
			if blk.Thinking != nil {
				reasoning, hasReasoning = append(reasoning, *blk.Thinking...), true
			}
		case "tool_use":
			calls = append(calls, c.toolCall(blk))
		case "tool_result":
			if m.Role == "user" {
				c.toolResult(blk)
				continue
			}
			text := ""
			if r := blk.Result; r != nil {
				switch {
				case r.IsText:
					text = r.Text
				case len(r.Items) > 0:
					// str(block.content): the list of dicts as Python
					// prints it.
					v, err := template.ParseJSON(r.Raw)
					if err != nil {
						return ErrUnsupported
					}
					text = template.Str(v)
				}
			}
			parts = append(parts, part{s: "Tool result: " + text})
		}
	}
	if len(parts) == 0 && m.Role == "user" {
		return nil // a user message of tool results only: no message of its own
	}
	c.open(m.Role)
	if hasReasoning {
		c.b = append(c.b, `,"reasoning":`...)
		c.b = appendJSON(c.b, string(reasoning))
	}
	if len(calls) > 0 {
		c.b = append(c.b, `,"tool_calls":[`...)
		c.b = append(c.b, bytes.Join(calls, []byte(","))...)
		c.b = append(c.b, ']')
	}
	switch {
	case len(parts) == 1 && !parts[0].image:
		c.b = append(c.b, `,"content":`...)
		c.b = appendJSON(c.b, parts[0].s)
	case len(parts) > 0:
		c.b = append(c.b, `,"content":[`...)
		for i, p := range parts {
			if i > 0 {
				c.b = append(c.b, ',')
			}
			c.b = appendPart(c.b, p)
		}
		c.b = append(c.b, ']')
	}
	c.b = append(c.b, '}')
	return nil
}

func appendPart(b []byte, p part) []byte {
	if p.image {
		b = append(b, `{"type":"image_url","image_url":{"url":`...)
		b = appendJSON(b, p.s)
		return append(b, "}}"...)
	}
	b = append(b, `{"type":"text","text":`...)
	b = appendJSON(b, p.s)
	return append(b, '}')
}

// toolCall is a tool_use block as an OpenAI tool call.
func (c *converter) toolCall(blk *Block) []byte {
	id := "call_" + strconv.FormatInt(c.now.Unix(), 10)
	if blk.ID != nil && *blk.ID != "" {
		id = *blk.ID
	}
	name := ""
	if blk.Name != nil {
		name = *blk.Name
	}
	args := []byte("{}")
	if len(blk.Input) > 0 {
		args = blk.Input
	}
	b := append([]byte(`{"id":`), appendJSON(nil, id)...)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = appendJSON(b, name)
	b = append(b, `,"arguments":`...)
	b = appendJSON(b, string(args))
	return append(b, "}}"...)
}

// toolResult writes a user's tool_result block as a tool message, then its
// images as a user message and its tool references as another tool
// message (_convert_user_tool_result).
func (c *converter) toolResult(blk *Block) {
	id := ""
	if blk.ToolUse != nil {
		id = *blk.ToolUse
	}
	text := ""
	var images, refs []string
	if r := blk.Result; r != nil && r.IsText {
		text = r.Text
	} else if r != nil {
		var texts [][]byte
		for _, it := range r.Items {
			if it.NotObject {
				continue
			}
			switch it.Type {
			case "text":
				t := ""
				if it.Text != nil {
					t = *it.Text
				}
				texts = append(texts, []byte(t))
			case "image":
				src := it.Source
				if len(src) == 0 || src[0] != '{' {
					src = []byte("{}")
				}
				if u := imageURL(src); u != "" {
					images = append(images, u)
				}
			case "tool_reference":
				switch {
				case it.ToolName != nil && *it.ToolName != "":
					refs = append(refs, *it.ToolName)
				case it.Name != nil && *it.Name != "":
					refs = append(refs, *it.Name)
				}
			}
		}
		text = string(bytes.Join(texts, []byte("\n")))
	}
	c.open("tool")
	c.b = append(c.b, `,"tool_call_id":`...)
	c.b = appendJSON(c.b, id)
	c.b = append(c.b, `,"content":`...)
	c.b = appendJSON(c.b, text)
	c.b = append(c.b, '}')
	if len(images) > 0 {
		c.open("user")
		c.b = append(c.b, `,"content":[`...)
		for i, u := range images {
			if i > 0 {
				c.b = append(c.b, ',')
			}
			c.b = appendPart(c.b, part{image: true, s: u})
		}
		c.b = append(c.b, "]}"...)
	}
	if len(refs) > 0 {
		c.open("tool")
		c.b = append(c.b, `,"tool_call_id":`...)
		c.b = appendJSON(c.b, id)
		c.b = append(c.b, `,"content":[`...)
		for i, n := range refs {
			if i > 0 {
				c.b = append(c.b, ',')
			}
			c.b = append(c.b, `{"type":"tool_reference","name":`...)
			c.b = appendJSON(c.b, n)
			c.b = append(c.b, '}')
		}
		c.b = append(c.b, "]}"...)
	}
}

// imageURL is an image source as a URL (_convert_image_source_to_url): a
// url source's url, else a base64 data URI.
func imageURL(src json.RawMessage) string {
	var s struct {
		Type      *string `json:"type"`
		URL       *string `json:"url"`
		MediaType *string `json:"media_type"`
		Data      *string `json:"data"`
	}
	_ = json.Unmarshal(src, &s) // fields of other types read as absent
	if s.Type != nil && *s.Type == "url" {
		if s.URL == nil {
			return ""
		}
		return *s.URL
	}
	media, data := "image/jpeg", ""
	if s.MediaType != nil {
		media = *s.MediaType
	}
	if s.Data != nil {
		data = *s.Data
	}
	return "data:" + media + ";base64," + data
}

func appendJSON(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

func appendOpt(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendJSON(b, *s)
}

func appendRaw(b []byte, raw json.RawMessage) []byte {
	if raw == nil {
		return append(b, "null"...)
	}
	return append(b, raw...)
}

// nonEmptyObject reports whether raw is a JSON object with a member: a
// truthy dict.
func nonEmptyObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && len(m) > 0
}
