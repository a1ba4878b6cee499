package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// ErrUnsupported is returned by ToChat for a request whose prompt the
// gateway cannot build as vLLM does: one that continues a stored response
// it was not given (the conversation lives in the engine that stored it),
// an input item of a type vLLM hands to the chat parser unconverted, or a
// tool in a namespace.
var ErrUnsupported = errors.New("responses: a request the gateway cannot convert as vLLM does")

// ErrHistory is the ErrUnsupported of a request with previous_response_id
// given no History.
var ErrHistory = errors.New("responses: previous_response_id: the conversation is stored in the engine")

// History is a stored response, as vLLM's msg_store and response_store
// keep it: the chat messages its request was rendered from, and the text
// of each output_text part of its output messages (reasoning and tool
// call items are skipped, as construct_input_messages skips them).
type History struct {
	Messages []json.RawMessage
	Output   []string
}

// Messages is the chat conversation vLLM renders for r
// (construct_input_messages): the instructions as a system message, then,
// when r continues hist, hist's messages but its system ones and its
// output as assistant messages, then r's input. It is what vLLM stores for
// the response. hist is nil for a request that continues nothing.
func Messages(r *Request, hist *History) ([]json.RawMessage, error) {
	if r.PreviousResponseID != "" && hist == nil {
		return nil, ErrHistory
	}
	var out []json.RawMessage
	if r.Instructions != "" {
		out = append(out, (&message{role: "system", content: quote(r.Instructions)}).encode())
	}
	if hist != nil {
		for _, m := range hist.Messages {
			if role, _ := memberString(m, "role"); role != "system" {
				out = append(out, m)
			}
		}
		for _, text := range hist.Output {
			out = append(out, (&message{role: "assistant", content: quote(text)}).encode())
		}
	}
	if r.Input.IsText {
		return append(out, (&message{role: "user", content: quote(r.Input.Text)}).encode()), nil
	}
	var msgs []*message
	for _, raw := range r.Input.Items {
		var prev *message
		if len(msgs) > 0 && msgs[len(msgs)-1].role == "assistant" {
			prev = msgs[len(msgs)-1]
		}
		m, err := fromItem(raw, prev)
		if err != nil {
			return nil, err
		}
		if m != nil {
			msgs = append(msgs, m)
		}
	}
	for _, m := range msgs {
		out = append(out, m.encode())
	}
	return out, nil
}

// ToChat converts r into the body of the OpenAI chat request vLLM renders
// for it (_make_request): Messages, its function tools as
// ChatCompletionToolsParam.model_dump() gives them to the template, the
// final message continued when the last input item is an unfinished
// message (should_continue_final_message), the chat template's kwargs as
// build_chat_params sets them (templateKwargs), and model, max_tokens,
// stream and cache_salt carried over.
func ToChat(r *Request, hist *History) ([]byte, error) {
	msgs, err := Messages(r, hist)
	if err != nil {
		return nil, err
	}
	tools, err := toolDicts(r.Tools)
	if err != nil {
		return nil, err
	}
	b := append(make([]byte, 0, 256), `{"model":`...)
	b = append(b, quote(r.Model)...)
	b = append(b, `,"messages":[`...)
	b = append(b, join(msgs)...)
	b = append(b, ']')
	if len(tools) > 0 {
		b = append(b, `,"tools":[`...)
		b = append(b, join(tools)...)
		b = append(b, ']')
	}
	if continueFinal(r) {
		b = append(b, `,"add_generation_prompt":false,"continue_final_message":true`...)
	}
	if kw := templateKwargs(r); kw != nil {
		b = append(b, `,"chat_template_kwargs":`...)
		b = append(b, kw...)
	}
	if r.MaxOutputTokens > 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, r.MaxOutputTokens, 10)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if r.CacheSalt != "" {
		b = append(b, `,"cache_salt":`...)
		b = append(b, quote(r.CacheSalt)...)
	}
	return append(b, '}'), nil
}

// templateKwargs is the chat_template_kwargs of the chat request vLLM
// renders for r (ResponsesRequest.build_chat_params): the request's own,
// with reasoning_effort set to reasoning.effort and, unless the request's
// kwargs set enable_thinking, enable_thinking set to whether that effort
// is not "none" (so that a template gating thinking on it, Qwen3's or
// Gemma's, renders as the engine does). add_generation_prompt and
// continue_final_message always come from the request's input there
// (ToChat writes them), so the request's kwargs cannot set them. nil
// when there is nothing to pass; the keys are sorted (a template reads
// them by name).
func templateKwargs(r *Request) json.RawMessage {
	if r.ChatTemplateKwargs == nil && r.ReasoningEffort == "" {
		return nil
	}
	kw := map[string]json.RawMessage{}
	if r.ChatTemplateKwargs != nil && json.Unmarshal(r.ChatTemplateKwargs, &kw) != nil {
		kw = map[string]json.RawMessage{} // Parse checked it is an object
	}
	delete(kw, "add_generation_prompt")
	delete(kw, "continue_final_message")
	if e := r.ReasoningEffort; e != "" {
		kw["reasoning_effort"] = quote(e)
		if _, set := kw["enable_thinking"]; !set {
			kw["enable_thinking"] = json.RawMessage(strconv.FormatBool(e != "none"))
		}
	}
	if len(kw) == 0 {
		return nil
	}
	out, err := json.Marshal(kw)
	if err != nil {
		return nil // every value is valid JSON
	}
	return out
}

// continueFinal is should_continue_final_message: the last input item is
// a message (or reasoning) whose status is in_progress or incomplete.
func continueFinal(r *Request) bool {
	if r.Input.IsText || len(r.Input.Items) == 0 {
		return false
	}
	last := r.Input.Items[len(r.Input.Items)-1]
	typ, _ := memberString(last, "type")
	if typ != "" && typ != "message" && typ != "reasoning" {
		return false
	}
	status, _ := memberString(last, "status")
	return status == "in_progress" || status == "incomplete"
}

// message is one chat message being built; nil fields are absent.
type message struct {
	role       string
	content    json.RawMessage
	reasoning  json.RawMessage
	toolCalls  []json.RawMessage
	hasCalls   bool
	toolCallID json.RawMessage
	name       json.RawMessage
}

func (m *message) encode() json.RawMessage {
	b := append(make([]byte, 0, 64), `{"role":`...)
	b = append(b, quote(m.role)...)
	for _, f := range []struct {
		key string
		v   json.RawMessage
	}{{"content", m.content}, {"reasoning", m.reasoning}, {"tool_call_id", m.toolCallID}, {"name", m.name}} {
		if f.v != nil {
			b = append(b, ',')
			b = append(b, quote(f.key)...)
			b = append(b, ':')
			b = append(b, f.v...)
		}
	}
	if m.hasCalls {
		b = append(b, `,"tool_calls":[`...)
		b = append(b, join(m.toolCalls)...)
		b = append(b, ']')
	}
	return append(b, '}')
}

// fromItem is _construct_message_from_response_item for one input item
// (a JSON object, as Parse checked): a new message, or nil when the item
// was merged into prev, the assistant message before it (nil when the
// previous message is not the assistant's).
func fromItem(raw json.RawMessage, prev *message) (*message, error) {
	var m map[string]json.RawMessage
	if object(raw, &m) != nil {
		return nil, invalid("an input item is not an object")
	}
	typ, _ := str(m, "type")
	switch {
	case typ == "function_call":
		if ns, _ := str(m, "namespace"); ns != "" {
			return nil, ErrUnsupported
		}
		name, _ := str(m, "name")
		args, _ := str(m, "arguments")
		call := append([]byte(`{"id":`), orNull(m["call_id"])...)
		call = append(call, `,"function":{"name":`...)
		call = append(call, quote(name)...)
		call = append(call, `,"arguments":`...)
		call = append(call, quote(args)...)
		call = append(call, `},"type":"function"}`...)
		if prev != nil {
			prev.toolCalls, prev.hasCalls = append(prev.toolCalls, call), true
			return nil, nil
		}
		return &message{role: "assistant", toolCalls: []json.RawMessage{call}, hasCalls: true}, nil
	case typ == "function_call_output":
		return &message{role: "tool", content: textParts(orNull(m["output"])), toolCallID: orNull(m["call_id"])}, nil
	case typ == "reasoning":
		text := firstText(m["content"])
		if text == nil {
			text = firstText(m["summary"])
		}
		if text == nil {
			text = quote("")
		}
		if prev != nil && prev.reasoning == nil {
			prev.reasoning = text
			return nil, nil
		}
		return &message{role: "assistant", reasoning: text}, nil
	case typ != "" && typ != "message":
		// vLLM hands any other item to the chat parser as it came.
		return nil, ErrUnsupported
	}
	role, _ := str(m, "role")
	if role == "assistant" {
		text := quote("")
		c := bytes.TrimSpace(m["content"])
		switch {
		case len(c) > 0 && c[0] == '"':
			text = c
		case len(c) > 0 && c[0] == '[':
			if t := firstText(c); t != nil {
				text = t
			}
		}
		if prev != nil && prev.content == nil {
			prev.content = text
			return nil, nil
		}
		return &message{role: "assistant", content: text}, nil
	}
	msg := &message{role: role, content: textParts(m["content"])}
	if n := bytes.TrimSpace(m["name"]); len(n) > 0 && n[0] == '"' {
		msg.name = n
	}
	return msg, nil
}

// firstText is the text of a list's first element (its "text" member when
// it is an object, else the element itself), as a JSON value; nil when
// the list is absent or empty.
func firstText(raw json.RawMessage) json.RawMessage {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
		return nil
	}
	first := bytes.TrimSpace(list[0])
	if len(first) > 0 && first[0] == '{' {
		var m map[string]json.RawMessage
		if json.Unmarshal(first, &m) != nil {
			return quote("")
		}
		if t, ok := m["text"]; ok {
			return bytes.TrimSpace(t)
		}
		return quote("")
	}
	return first
}

// textParts is content with the Responses text parts (input_text,
// output_text) as the chat API's text parts, which is how vLLM's chat
// parser reads them (MM_PARSER_MAP); other parts are kept as they came.
func textParts(c json.RawMessage) json.RawMessage {
	c = bytes.TrimSpace(c)
	if len(c) == 0 || c[0] != '[' {
		return c
	}
	var parts []json.RawMessage
	if json.Unmarshal(c, &parts) != nil {
		return c
	}
	for i, p := range parts {
		typ, _ := memberString(p, "type")
		if typ != "input_text" && typ != "output_text" {
			continue
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(p, &m) != nil {
			continue
		}
		parts[i] = append(append([]byte(`{"type":"text","text":`), orNull(m["text"])...), '}')
	}
	return append(append([]byte{'['}, join(parts)...), ']')
}

// toolDicts is construct_tool_dicts: every function tool as
// ChatCompletionToolsParam(type="function", function=FunctionDefinition
// of the tool without its type).model_dump(): name, description and
// parameters (null when absent), then the tool's other members in their
// order (vLLM's models keep extra fields). Other tool types (web search,
// MCP, ...) reach no template.
func toolDicts(tools []json.RawMessage) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, t := range tools {
		typ, _ := memberString(t, "type")
		if typ == "namespace" {
			return nil, ErrUnsupported
		}
		if typ != "function" {
			continue
		}
		var m map[string]json.RawMessage
		if object(t, &m) != nil {
			continue
		}
		b := append(make([]byte, 0, 128), `{"type":"function","function":{"name":`...)
		b = append(b, orNull(m["name"])...)
		b = append(b, `,"description":`...)
		b = append(b, orNull(m["description"])...)
		b = append(b, `,"parameters":`...)
		b = append(b, orNull(m["parameters"])...)
		for _, k := range keysInOrder(t) {
			switch k {
			case "type", "name", "description", "parameters":
				continue
			}
			b = append(b, ',')
			b = append(b, quote(k)...)
			b = append(b, ':')
			b = append(b, bytes.TrimSpace(m[k])...)
		}
		out = append(out, append(b, "}}"...))
	}
	return out, nil
}

// keysInOrder is the member names of a JSON object in their order, each
// once (the last value wins, as in Python's json module).
func keysInOrder(obj json.RawMessage) []string {
	d := json.NewDecoder(bytes.NewReader(obj))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return keys
		}
		k, _ := tok.(string)
		var skip json.RawMessage
		if d.Decode(&skip) != nil {
			return keys
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// memberString is an object's string member; false when raw is not an
// object or the member is not a string.
func memberString(raw json.RawMessage, key string) (string, bool) {
	var m map[string]json.RawMessage
	if object(raw, &m) != nil {
		return "", false
	}
	var s string
	if json.Unmarshal(m[key], &s) != nil {
		return "", false
	}
	return s, true
}

func orNull(raw json.RawMessage) json.RawMessage {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

func quote(s string) json.RawMessage {
	q, _ := json.Marshal(s) // a string always marshals
	return q
}

// join writes values as the members of a JSON list, without brackets.
func join(values []json.RawMessage) []byte {
	var b []byte
	for i, v := range values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, v...)
	}
	return b
}
