package template

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoChatTemplate means tokenizer_config.json has no chat_template
// (transformers raises "tokenizer.chat_template is not set").
var ErrNoChatTemplate = errors.New("template: tokenizer_config.json has no chat_template")

// specialTokenKeys are transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens"}

// Chat is a model's chat template as transformers' apply_chat_template
// uses it, the path vLLM renders chat requests through. It is immutable and
// safe for concurrent use.
type Chat struct {
	single  *Template            // chat_template as one string
	named   map[string]*Template // chat_template as a list of {name, template}
	errs    map[string]error     // named templates that failed to compile
	special *Dict
	limits  Limits
}

// NewChat reads chat_template and the special tokens from the bytes of a
// tokenizer_config.json. chat_template may be a string or a list of {name,
// template}; the special tokens may be strings or AddedToken objects
// ({"content": ...}), and unset or empty ones are left out, as
// transformers' special_tokens_map does.
func NewChat(tokenizerConfig []byte) (*Chat, error) {
	v, err := ParseJSON(tokenizerConfig)
	if err != nil {
		return nil, fmt.Errorf("template: tokenizer_config.json: %w", err)
	}
	cfg, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("template: tokenizer_config.json is not an object")
	}
	c := &Chat{special: NewDict(len(specialTokenKeys))}
	for _, k := range specialTokenKeys {
		tv, ok := cfg.GetString(k)
		if !ok {
			continue
		}
		if k == "additional_special_tokens" {
			items, _ := tv.(List)
			var toks List
			for _, it := range items {
				if s := tokenContent(it); s != "" {
					toks = append(toks, s)
				}
			}
			if len(toks) > 0 {
				c.special.SetString(k, toks)
			}
			continue
		}
		if s := tokenContent(tv); s != "" {
			c.special.SetString(k, s)
		}
	}
	ct, ok := cfg.GetString("chat_template")
	switch x := ct.(type) {
	case string:
		if c.single, err = Compile(x); err != nil {
			return nil, fmt.Errorf("template: chat_template: %w", err)
		}
	case List:
		c.named, c.errs = map[string]*Template{}, map[string]error{}
		for _, it := range x {
			d, _ := it.(*Dict)
			name, _ := d.GetString("name")
			src, _ := d.GetString("template")
			ns, ok1 := name.(string)
			ss, ok2 := src.(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("template: chat_template list entries need string name and template")
			}
			t, err := Compile(ss)
			if err != nil {
				c.errs[ns] = fmt.Errorf("template: chat_template %q: %w", ns, err)
				continue
			}
			c.named[ns] = t
		}
	default:
		if !ok || x == nil {
			return nil, ErrNoChatTemplate
		}
		return nil, fmt.Errorf("template: chat_template is a %s, want a string or a list", typeName(x))
	}
	return c, nil
}

func tokenContent(v Value) string {
	switch x := v.(type) {
	case string:
		return x
	case *Dict:
		if s, ok := x.GetString("content"); ok {
			if str, ok := s.(string); ok {
				return str
			}
		}
	}
	return ""
}

// WithLimits returns a copy of c that renders under l.
func (c *Chat) WithLimits(l Limits) *Chat {
	n := *c
	n.limits = l
	return &n
}

// SpecialTokens returns the special tokens every render sees, in
// transformers' order (a copy).
func (c *Chat) SpecialTokens() *Dict { return c.special.clone() }

// Template returns the template Apply uses: the only one, or, for a named
// list, "tool_use" when tools are given (even an empty list) and else
// "default", as transformers chooses.
func (c *Chat) Template(hasTools bool) (*Template, error) {
	if c.single != nil {
		return c.single, nil
	}
	pick := func(name string) (*Template, bool, error) {
		if err, ok := c.errs[name]; ok {
			return nil, true, err
		}
		t, ok := c.named[name]
		return t, ok, nil
	}
	if hasTools {
		if t, ok, err := pick("tool_use"); ok {
			return t, err
		}
	}
	if t, ok, err := pick("default"); ok {
		return t, err
	}
	return nil, fmt.Errorf("template: the model has several chat templates and none is named \"default\"")
}

// Apply renders a chat: the context is messages, tools (nil prints as None),
// add_generation_prompt, the special tokens, then kwargs (vLLM's
// chat_template_kwargs, such as enable_thinking), which may override the
// special tokens. now is the clock strftime_now reads. Messages and tools are
// usually built by ParseJSON so that key order and number types match what
// Python sees.
func (c *Chat) Apply(messages, tools Value, addGenerationPrompt bool, kwargs *Dict, now time.Time) (string, error) {
	t, err := c.Template(tools != nil)
	if err != nil {
		return "", err
	}
	ctx := NewDict(4 + c.special.Len() + kwargs.Len())
	ctx.SetString("messages", messages)
	ctx.SetString("tools", tools)
	ctx.SetString("add_generation_prompt", addGenerationPrompt)
	for _, e := range c.special.ents {
		ctx.SetString(e.key.(string), e.val)
	}
	var kws []dictEntry
	if kwargs != nil {
		kws = kwargs.ents
	}
	for _, e := range kws {
		k, ok := e.key.(string)
		if !ok {
			return "", fmt.Errorf("template: chat template kwargs keys must be strings")
		}
		switch k {
		case "messages", "tools", "add_generation_prompt":
			return "", fmt.Errorf("template: chat template kwargs may not set %q", k)
		}
		ctx.SetString(k, e.val)
	}
	return t.Execute(ctx, Options{Now: now, Limits: c.limits})
}
