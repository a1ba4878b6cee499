package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/inferrail/inferrail/model/openai"
)

// ErrInvalid wraps every reason a body is not a request vLLM accepts; the
// engine answers those with a 400 of its own.
var ErrInvalid = errors.New("responses: invalid request")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// Request is a validated Responses request: the fields that shape the
// prompt, route it or tie it to a stored response. Input items and tools
// are kept as raw JSON objects; ToChat reads them.
type Request struct {
	Model  string
	Stream bool
	// Store is the request's store (true unless the body says false);
	// vLLM honours it only when started with
	// VLLM_ENABLE_RESPONSES_API_STORE=1 and silently drops it otherwise.
	Store bool
	// Background: the request runs in the background (background true);
	// vLLM answers at once with the queued response, which GET
	// /v1/responses/{id} polls and cancel stops.
	Background bool
	// MaxOutputTokens is max_output_tokens, 0 when absent or null.
	MaxOutputTokens int64
	Instructions    string
	Input           Input
	// PreviousResponseID names the stored response this one continues;
	// "" when absent or null.
	PreviousResponseID string
	Tools              []json.RawMessage // objects
	CacheSalt          string
	User               string
	// ReasoningEffort is reasoning.effort, "" when reasoning or its
	// effort is absent or null; Reasoning is the reasoning object as it
	// came (nil when absent or null), which vLLM echoes in its answer.
	ReasoningEffort string
	Reasoning       json.RawMessage
	// ChatTemplateKwargs is chat_template_kwargs, an object; nil when
	// absent or null.
	ChatTemplateKwargs json.RawMessage
}

// ReasoningEfforts are the values of reasoning.effort vLLM's
// ResponsesRequest accepts (openai.types.shared.ReasoningEffort).
var ReasoningEfforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

// Input is the request's input: a string, or a list of item objects.
type Input struct {
	IsText bool
	Text   string
	Items  []json.RawMessage
}

// Parse reads a /v1/responses body and validates it as vLLM's
// ResponsesRequest does, as far as the prompt and the routing depend on
// it. Errors wrap ErrInvalid.
func Parse(body []byte) (*Request, error) {
	var top map[string]json.RawMessage
	if err := object(body, &top); err != nil {
		return nil, invalid("the body is not a JSON object")
	}
	r := &Request{Store: true}
	var err error
	if r.Model, err = str(top, "model"); err != nil {
		return nil, err
	}
	if r.Instructions, err = str(top, "instructions"); err != nil {
		return nil, err
	}
	if r.PreviousResponseID, err = str(top, "previous_response_id"); err != nil {
		return nil, err
	}
	if r.User, err = str(top, "user"); err != nil {
		return nil, err
	}
	if r.CacheSalt, err = str(top, "cache_salt"); err != nil {
		return nil, err
	}
	if raw, ok := top["cache_salt"]; ok && !isNull(raw) && r.CacheSalt == "" {
		return nil, invalid("cache_salt: Parameter 'cache_salt' must be a non-empty string if provided.")
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"stream", &r.Stream}, {"store", &r.Store}} {
		if raw, ok := top[f.key]; ok && !isNull(raw) {
			if json.Unmarshal(raw, f.dst) != nil {
				return nil, invalid("%s: Input should be a valid boolean", f.key)
			}
		}
	}
	if raw, ok := top["max_output_tokens"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &r.MaxOutputTokens) != nil || bytes.ContainsAny(raw, ".eE") {
			return nil, invalid("max_output_tokens: Input should be a valid integer")
		}
	}
	if raw, ok := top["prompt"]; ok && !isNull(raw) {
		return nil, invalid("prompt: prompt template is not supported")
	}
	if raw, ok := top["background"]; ok && !isNull(raw) {
		var bg bool
		if json.Unmarshal(raw, &bg) != nil {
			return nil, invalid("background: Input should be a valid boolean")
		}
		if bg && !r.Store {
			return nil, invalid("background can only be used when `store` is true")
		}
		r.Background = bg
	}
	if err := r.readReasoning(top); err != nil {
		return nil, err
	}
	if raw, ok := top["chat_template_kwargs"]; ok && !isNull(raw) {
		var m map[string]json.RawMessage
		if object(raw, &m) != nil {
			return nil, invalid("chat_template_kwargs: Input should be a valid dictionary")
		}
		r.ChatTemplateKwargs = bytes.TrimSpace(raw)
	}
	raw, ok := top["input"]
	if !ok || isNull(raw) {
		return nil, invalid("input: Field required")
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		if json.Unmarshal(raw, &r.Input.Text) != nil {
			return nil, invalid("input: Input should be a valid string")
		}
		r.Input.IsText = true
	} else {
		if json.Unmarshal(raw, &r.Input.Items) != nil {
			return nil, invalid("input: Input should be a valid string or list")
		}
		for i, it := range r.Input.Items {
			if err := checkItem(it, i); err != nil {
				return nil, err
			}
		}
	}
	if raw, ok := top["tools"]; ok && !isNull(raw) {
		if json.Unmarshal(raw, &r.Tools) != nil {
			return nil, invalid("tools: Input should be a valid list")
		}
		for i, t := range r.Tools {
			var m map[string]json.RawMessage
			if object(t, &m) != nil {
				return nil, invalid("tools.%d: Input should be a valid dictionary", i)
			}
			typ, err := str(m, "type")
			if err != nil || typ == "" {
				return nil, invalid("tools.%d.type: Field required", i)
			}
			if typ == "function" {
				if name, err := str(m, "name"); err != nil || name == "" {
					return nil, invalid("tools.%d.name: Field required", i)
				}
			}
		}
	}
	return r, nil
}

// readReasoning reads reasoning (openai's Reasoning: an object whose
// effort is one of ReasoningEfforts or null).
func (r *Request) readReasoning(top map[string]json.RawMessage) error {
	raw, ok := top["reasoning"]
	if !ok || isNull(raw) {
		return nil
	}
	var m map[string]json.RawMessage
	if object(raw, &m) != nil {
		return invalid("reasoning: Input should be a valid dictionary or instance of Reasoning")
	}
	effort, err := str(m, "effort")
	if err != nil {
		return invalid("reasoning.effort: Input should be %s", effortList())
	}
	if effort != "" && !slices.Contains(ReasoningEfforts, effort) {
		return invalid("reasoning.effort: Input should be %s", effortList())
	}
	r.ReasoningEffort, r.Reasoning = effort, bytes.TrimSpace(raw)
	return nil
}

// effortList is ReasoningEfforts as pydantic lists a Literal's values.
func effortList() string {
	var b strings.Builder
	for i, e := range ReasoningEfforts {
		switch {
		case i == len(ReasoningEfforts)-1:
			b.WriteString(" or ")
		case i > 0:
			b.WriteString(", ")
		}
		b.WriteString("'" + e + "'")
	}
	return b.String()
}

// checkItem validates one input item as far as its conversion reads it.
func checkItem(raw json.RawMessage, i int) error {
	var m map[string]json.RawMessage
	if object(raw, &m) != nil {
		return invalid("input.%d: Input should be a valid dictionary", i)
	}
	typ, err := str(m, "type")
	if err != nil {
		return invalid("input.%d.type: Input should be a valid string", i)
	}
	switch typ {
	case "function_call":
		// ResponseFunctionToolCall: arguments, call_id and name are required.
		for _, k := range []string{"arguments", "call_id", "name"} {
			if _, ok := m[k]; !ok {
				return invalid("input.%d.%s: Field required", i, k)
			}
			if _, err := str(m, k); err != nil {
				return invalid("input.%d.%s: Input should be a valid string", i, k)
			}
		}
	case "function_call_output":
		if _, ok := m["call_id"]; !ok {
			return invalid("input.%d.call_id: Field required", i)
		}
		if _, ok := m["output"]; !ok {
			return invalid("input.%d.output: Field required", i)
		}
	case "", "message":
		role, err := str(m, "role")
		if err != nil || role == "" {
			return invalid("input.%d.role: Field required", i)
		}
		switch role {
		case "user", "assistant", "system", "developer":
		default:
			return invalid("input.%d.role: Input should be 'user', 'assistant', 'system' or 'developer'", i)
		}
		c, ok := m["content"]
		if !ok {
			return invalid("input.%d.content: Field required", i)
		}
		if c = bytes.TrimSpace(c); len(c) == 0 || c[0] != '"' && c[0] != '[' {
			return invalid("input.%d.content: Input should be a valid string or list", i)
		}
	}
	return nil
}

// object decodes a JSON object into m; anything else is an error.
func object(b []byte, m *map[string]json.RawMessage) error {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("not an object")
	}
	return json.Unmarshal(b, m)
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// str reads an optional string member: "" when absent or null.
func str(m map[string]json.RawMessage, key string) (string, error) {
	raw, ok := m[key]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", invalid("%s: Input should be a valid string", key)
	}
	return s, nil
}

// NotFound is vLLM's answer for a response id its store does not hold
// (OpenAIServingResponses._make_not_found_error), for previous_response_id
// and for GET and cancel alike.
func NotFound(id string) *openai.Error {
	return &openai.Error{Status: 404, Type: "invalid_request_error", Param: "response_id",
		Message: "Response with id '" + id + "' not found."}
}
